"""Building candidates' `load_inline` extensions: fast, cached by content, and exactly what torch would build.

torch's `load_inline` prepends `<torch/extension.h>` to the C++ unit and `<torch/types.h>` to the CUDA one, then runs
ninja; a cold build of a trivial kernel spends most of its ~30-60 s parsing PyTorch's headers, three times over in
the CUDA unit (cudafe++, cicc and the host compiler). This package builds the same binary in a fraction of that
(the kernels compiled without torch, the torch code against precompiled headers) and keeps it, so a source built once (by any process) imports in well under a
second. Lowest module first:

    cache      the on-disk cache under $KERNELSKILL_CACHE: layout, locks, objects, pruning (`kernelskill cache`)
    toolchain  which compilers, their versions, torch's flags and ABI, target archs; running compilers cancellably
    nvcc_host  what nvcc's implicit headers give host code (the launch entry point, min/max, the runtime's C++
               forms), for a host part the host compiler compiles alone
    split      a CUDA source cut in two: its kernels for nvcc without any torch header, its torch host code for the
               host compiler against a precompiled header (launches rewritten as nvcc writes them)
    plan       what a build will do, computed without compiling: the units and their variants (fastest first: the
               split ones, then fewer of torch's headers, then exactly torch's), their flags and keys, the module name
    pch        the precompiled headers: <torch/extension.h> for the C++ unit, the bindings' for a C++ unit that only
               declares functions, the split host parts' (one per flag set), built ahead by `prepare_pch` in the
               harness (a runner only reads them)
    compile    one unit to an object: g++ with its header; nvcc's host and device front ends side by side; a split
               unit's device part (nvcc) beside its host part (g++), joined into one object
    build      `build_inline`: objects from the cache or compiled in parallel, linked, the library cached
    inline     the one stand-in for torch's `load_inline`, in three modes: "run" (GPU review: build and import),
               "check" (CPU review: compile only), "build" (prebuild on CPU: fill the cache); every call is
               recorded in `inline.BUILDS`
    load_files the stand-in for torch's `load` (sources the candidate writes to files), in "run" and "build":
               torch's own builder, on copies of the files in a folder named by their contents, so the prebuild's
               build is the review's

Flags mirror `torch.utils.cpp_extension` of the installed torch (include paths, -std, defines, libraries), so the
binary is the one torch would link; whatever this builder fails on outside the candidate's own lines is built with
torch's own function (`inline.torch_fallback`). `scripts/build_bench.py` measures it against plain `load_inline`.
Only `inline` and what imports it import torch at module level; `cache` imports neither torch nor pydantic.
"""

from __future__ import annotations


class CudaCompileError(Exception):
    """The candidate's CUDA or C++ sources do not compile. The message leads with the compiler's errors.

    `in_own_code`: the compiler's errors point at the candidate's own lines (main.cpp, cuda.cu), so torch's
    load_inline, which compiles the same text with the same flags, fails the same way. Any other failure (a link
    error, a flag the compiler refuses, an error inside a header, a library that does not import) may be this
    builder's, and `load_inline` then builds the candidate with torch's own function before giving a verdict.
    """

    def __init__(self, message: str, log: str, in_own_code: bool = False) -> None:
        super().__init__(message)
        self.log = log
        self.in_own_code = in_own_code
