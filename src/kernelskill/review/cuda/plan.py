"""What a build will do, computed without compiling anything: the translation units, their flags, their cache keys,
the link line and the module name.

The C++ unit is torch's: `<torch/extension.h>`, cpp_sources and the pybind11 bindings torch would generate. The CUDA
unit comes in variants, fastest first (`cuda_variants`): a source that does not mention torch gets no torch headers;
one that uses torch only for the usual host wrapper gets ATen's core headers; a `#include <torch/extension.h>` in it
is narrowed to the `<torch/types.h>` torch prepends anyway. The last variant is always exactly what torch compiles,
and `build` falls back along the list when a narrowed unit misses a declaration.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass

from kernelskill.review.cuda import toolchain
from kernelskill.review.cuda.toolchain import digest


def split_flags(value) -> list[str]:
    """Flags as torch's ninja file passes them: each stripped and joined by spaces into a shell command, so a blank
    flag disappears and '-O3 --use_fast_math' is two flags."""
    if value is None:
        return []
    if isinstance(value, str):  # torch would iterate the characters and fail; a string of flags is meant
        value = [value]
    out: list[str] = []
    for flag in value:
        out += shlex.split(str(flag))
    return out


# ----------------------------------------------------------------------------------------------------------- sources
def _join(sources) -> str:
    return "\n".join(sources) if isinstance(sources, (list, tuple)) else (sources or "")


def _bindings(functions, with_pytorch_error_handling: bool = True) -> str:
    """The PYBIND11_MODULE block load_inline generates for `functions` (a name, a list of names, or name -> doc):
    none for None, and an empty block for an empty list, as torch writes it (a source with a module of its own and
    functions=[] then fails here as it fails there)."""
    if functions is None:
        return ""
    if isinstance(functions, str):
        functions = [functions]
    if isinstance(functions, dict):
        items = list(functions.items())
    elif isinstance(functions, (list, tuple)):
        items = [(f, f) for f in functions]
    else:
        raise ValueError(f"Expected 'functions' to be a list or dict, but was {type(functions)}")
    wrap = "torch::wrap_pybind_function({})" if with_pytorch_error_handling else "{}"
    defs = "\n".join(f'  m.def("{name}", {wrap.format(name)}, "{doc}");' for name, doc in items)
    return f"\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{\n{defs}\n}}\n"


_TORCH_PREFIX = ("#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>")
_NO_TORCH_LINE = "// <torch/types.h> left out: this CUDA source does not mention torch (kernelskill cuda_build)"
# Conservative: any mention means the source may need torch's declarations.
_USES_TORCH = re.compile(r"torch|\bat::|namespace\s+at\b|c10|ATen|TORCH_|\bAT_|\bC10_")
_EXTENSION_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*[<\"]torch/extension\.h[>\"][^\n]*$", re.MULTILINE)
# What <torch/extension.h> declares beyond <torch/types.h>: Python bindings and the C++ frontend's namespaces.
_NEEDS_EXTENSION_H = re.compile(
    r"pybind11|PYBIND11|py::|Python\.h|PyObject|THP|torch/python|TORCH_LIBRARY|torch::(nn|optim|data|jit|serialize|"
    r"fft|linalg|special|nested|sparse|cuda|mps|xpu|enumtype|python)\b"
)

# A CUDA source that uses torch only for the usual host wrapper (torch::Tensor, empty/zeros, data_ptr, TORCH_CHECK,
# the dtype constants) compiles against ATen's core headers in a fraction of the time <torch/types.h> takes (it
# pulls in every operator's declaration). Tried first for such sources; a missing declaration falls back as above.
_CORE_PRELUDE = "\n".join([
    "// torch's core headers only (kernelskill cuda_build); a missing declaration recompiles with <torch/types.h>",
    "#include <ATen/core/Tensor.h>",
    *(f"#include <ATen/ops/{op}.h>" for op in ("empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones",
                                               "ones_like", "full", "full_like", "arange")),
    "#include <c10/util/Exception.h>",
    "namespace torch {",
    "using namespace at;  // NOLINT",
    *(f"constexpr auto {alias} = at::{name};" for alias, name in (
        ("kUInt8", "kByte"), ("kInt8", "kChar"), ("kInt16", "kShort"), ("kInt32", "kInt"), ("kInt64", "kLong"),
        ("kFloat16", "kHalf"), ("kFloat32", "kFloat"), ("kFloat64", "kDouble"), ("kBFloat16", "kBFloat16"),
        ("kBool", "kBool"))),
    "}  // namespace torch",
    "#include <cuda.h>",
    "#include <cuda_runtime.h>",
    f"#line {len(_TORCH_PREFIX) + 1}",  # the source's lines keep the numbers torch's unit gives them
])
# Any torch header of its own (other than <torch/extension.h>, narrowed below) rules the core prelude out, and so
# does `requires_grad`: the prelude's torch::zeros & co. are ATen's, which refuse requires_grad=true in their options
# where torch's own factories (variable_factories.h) make a tensor that requires grad. Otherwise the prelude's names
# mean what torch's do, and what it lacks (an operator, a function) fails to compile rather than change meaning.
_OTHER_TORCH_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*[<\"]torch/(?!extension\.h)|requires_grad", re.MULTILINE)


def _normalize(text: str) -> str:
    return text.replace("\r\n", "\n")


def cuda_variants(cuda_sources, no_implicit_headers: bool = False) -> list[tuple[str, str]]:
    """(variant, text) for the CUDA unit, fastest first; the last is exactly what torch's load_inline compiles."""
    body = _normalize(_join(cuda_sources))
    if no_implicit_headers:
        return [("exact", body)]
    exact = "\n".join([*_TORCH_PREFIX, body])
    if not _USES_TORCH.search(body):
        return [("torch-free", "\n".join([_NO_TORCH_LINE, *_TORCH_PREFIX[1:], body])), ("exact", exact)]
    if _NEEDS_EXTENSION_H.search(body):
        return [("exact", exact)]
    narrowed = _EXTENSION_INCLUDE.sub(
        "// #include <torch/extension.h> narrowed to the prelude above (kernelskill cuda_build)", body)
    variants = [] if _OTHER_TORCH_INCLUDE.search(body) else [("core", "\n".join([_CORE_PRELUDE, narrowed]))]
    if narrowed != body:
        variants.append(("types.h", "\n".join([*_TORCH_PREFIX, narrowed])))
    return [*variants, ("exact", exact)]


# ---------------------------------------------------------------------------------------- what the sources include
# Headers of the candidate's own, outside torch and the toolkit (whose versions are in the fingerprint): every file
# under its include folders (extra_include_paths, -I/-isystem in its flags) and, for a header included by absolute
# path, the header-like files of that header's folder. Their contents go into every key, so a candidate that writes
# a new header under the same name gets a new build. Past these limits the build is keyed by a random value: built
# afresh every time, never served to another source.
INCLUDE_LIMIT_FILES = 20_000
INCLUDE_LIMIT_BYTES = 256 << 20
_ABSOLUTE_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*[<\"](/[^>\"\n]+)[>\"]", re.MULTILINE)
_HEADER_SUFFIXES = (".h", ".hh", ".hpp", ".hxx", ".cuh", ".inl", ".inc", ".ipp", ".tcc", ".def")


def _include_dirs(flags: list[str]) -> list[str]:
    """The folders that -I, -isystem, -iquote, -idirafter and nvcc's --include-path add, joined or apart."""
    out, it = [], iter(flags)
    for flag in it:
        for option in ("-I", "-isystem", "-iquote", "-idirafter", "--include-path"):
            if flag == option:
                out.append(next(it, ""))
            elif flag.startswith(option):
                rest = flag[len(option):]
                out.append(rest[1:] if rest.startswith("=") else rest)
    return [os.path.abspath(d) for d in out if d and d != "-"]


def include_state(include_dirs: list[str], texts: list[str]) -> str:
    """The digest of the candidate's own headers (see above); "" when it has none."""
    import hashlib
    import uuid

    trees = sorted(set(include_dirs))
    singles = sorted({m for text in texts for m in _ABSOLUTE_INCLUDE.findall(text)})
    if not trees and not singles:
        return ""
    files: list[str] = []
    for tree in trees:
        for folder, dirs, names in os.walk(tree):
            dirs.sort()
            files += [os.path.join(folder, n) for n in sorted(names)]
            if len(files) > INCLUDE_LIMIT_FILES:
                return "uncacheable:" + uuid.uuid4().hex
    for header in singles:
        folder = os.path.dirname(header)
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            names = []
        files += [header] + [os.path.join(folder, n) for n in names if n.endswith(_HEADER_SUFFIXES)]
    sha, total = hashlib.sha256(), 0
    for path in dict.fromkeys(files):
        sha.update(path.encode() + b"\0")
        try:
            with open(path, "rb") as f:
                data = f.read(INCLUDE_LIMIT_BYTES - total + 1)
        except OSError as exc:  # unreadable or missing: its absence is part of the state
            sha.update(f"<{type(exc).__name__}>".encode())
            continue
        total += len(data)
        if total > INCLUDE_LIMIT_BYTES:
            return "uncacheable:" + uuid.uuid4().hex
        sha.update(hashlib.sha256(data).digest())
    return sha.hexdigest()


# -------------------------------------------------------------------------------------------------------------- plan
NAME_PLACEHOLDER = "ks_" + "Zq" * 8
"""What a unit is compiled with as TORCH_EXTENSION_NAME instead of its module's name. torch passes the name to both
compilers, so every new candidate recompiled its C++ glue (pybind11 against <torch/extension.h>: 10 s and more even
with the precompiled header) although only its kernels changed. The placeholder has the length of every module name
("ks_" and 16 hex digits; its capitals are never among them), so the object compiled under it is the object compiled
under the real name with those bytes changed: `build` writes the name in before it links, and checks that the library
holds no placeholder (were one hidden from the patch, as in compressed LTO sections, it builds with the real name)."""
_NAME_MACRO = re.compile(r"TORCH_EXTENSION_NAME")


def _placeholder_fits(kind: str, text: str) -> bool:
    """Whether a unit may be compiled under the placeholder: never when its text holds the placeholder itself, and a
    CUDA unit only when it does not use the name (device code may hold it where no patch reaches: a compressed
    fatbinary); torch's and the toolkit's headers never use it."""
    return NAME_PLACEHOLDER not in text and (kind == "cpp" or not _NAME_MACRO.search(text))


@dataclass
class Unit:
    """One translation unit: its text, the compiler command without input/output, and the key of its object."""

    kind: str  # "cpp" or "cuda"
    variant: str  # "exact", "torch-free", "core", "types.h"
    filename: str
    text: str
    argv: list[str]
    key: str
    # compiled against the precompiled <torch/extension.h>: the C++ unit that starts with it (not with
    # no_implicit_headers, where torch includes nothing and forcing the header in would build what torch rejects)
    pch: bool = False
    # compiled with TORCH_EXTENSION_NAME=NAME_PLACEHOLDER: its object is the same for every module name, and
    # `build` writes the module's name over the placeholder's bytes before it links (see `NAME_PLACEHOLDER`)
    placeholder: bool = False


@dataclass
class BuildPlan:
    """Everything a build will do, computed without compiling anything."""

    name: str
    module_name: str
    key: str
    cpp: Unit
    cuda: list[Unit]  # attempts, fastest first; empty without CUDA sources
    link_flags: list[str]
    pch_flags: list[str]  # the C++ unit's flags, without the module name: what the precompiled header must match
    with_cuda: bool


def plan_build(name: str, cpp_sources, cuda_sources=None, functions=None, extra_cflags=None, extra_cuda_cflags=None,
               extra_ldflags=None, extra_include_paths=None, with_cuda: bool | None = None,
               with_pytorch_error_handling: bool = True, no_implicit_headers: bool = False,
               arch: str | list[str] | None = None, name_placeholder: bool = True) -> BuildPlan:
    """`name_placeholder=False`: every unit is compiled with the module's own name (what `build` falls back to when
    a library still holds the placeholder). The plan's module name and key are the same either way."""
    # as torch's ninja file reads them: blank flags vanish, "-O3 -lineinfo" is two flags
    extra_cflags, extra_cuda_cflags = split_flags(extra_cflags), split_flags(extra_cuda_cflags)
    extra_ldflags = split_flags(extra_ldflags)
    has_cuda = bool(_join(cuda_sources).strip())
    with_cuda = has_cuda if with_cuda is None else with_cuda
    facts = toolchain.torch_facts()
    includes = ([f"-I{os.path.abspath(p.strip())}" for p in extra_include_paths or []]
                + [a for p in toolchain.system_includes(with_cuda) for a in ("-isystem", p)])
    common = ["-DTORCH_API_INCLUDE_EXTENSION_H", *includes, f"-D_GLIBCXX_USE_CXX11_ABI={facts['cxx11_abi']}",
              *facts["pybind_abi"]]

    cpp_text = _normalize(("" if no_implicit_headers else "#include <torch/extension.h>\n") + _join(cpp_sources)
                          + _bindings(functions, with_pytorch_error_handling))
    pch_flags = [*common, "-fPIC", facts["std"], *extra_cflags]
    nvcc_flags = [*common, *facts["nvcc_flags"], *toolchain.arch_flags(arch, extra_cuda_cflags), "--compiler-options",
                  "-fPIC", *extra_cuda_cflags] if has_cuda else []
    if has_cuda and not any(f.startswith("-std=") for f in nvcc_flags):
        nvcc_flags.append(facts["std"])
    variants = cuda_variants(cuda_sources, no_implicit_headers) if has_cuda else []
    # torch's, Python's and the toolkit's folders are versioned by the fingerprint: not hashed again (LLM candidates
    # often pass torch's include_paths() as extra_include_paths)
    versioned = [*toolchain.system_includes(True), *([toolchain.cuda_home()] if toolchain.cuda_home() else [])]
    headers = include_state([d for d in ([os.path.abspath(p.strip()) for p in extra_include_paths or []]
                                         + _include_dirs(extra_cflags) + _include_dirs(extra_cuda_cflags))
                             if not any(d == r or d.startswith(r.rstrip(os.sep) + os.sep) for r in versioned)],
                            [cpp_text, _join(cuda_sources)])

    link = ["-shared", *extra_ldflags, f"-L{facts['lib']}", "-lc10", *(["-lc10_cuda"] if with_cuda else []),
            "-ltorch_cpu", *(["-ltorch_cuda"] if with_cuda else []), "-ltorch", "-ltorch_python"]
    if with_cuda:
        link += [f"-L{toolchain.cuda_libdir()}", "-lcudart"]

    # The module name derives from everything in the extension, C++ and CUDA alike: a process never imports two
    # libraries under one name (Python hands back the module it already has for a name, so a second candidate
    # with the same C++ glue and new kernels would silently run the first one's code).
    nvcc = [*toolchain.nvcc(), *(["-ccbin", os.environ["CC"]] if os.environ.get("CC") else [])] if has_cuda else []
    extension = digest("module", toolchain.fingerprint(has_cuda), toolchain.cxx(), cpp_text, pch_flags,
                       [t for _, t in variants], nvcc, nvcc_flags, link, with_cuda, headers)
    module_name = "ks_" + extension[:16]
    assert len(module_name) == len(NAME_PLACEHOLDER)

    def define(kind: str, text: str) -> tuple[str, bool]:
        patched = name_placeholder and _placeholder_fits(kind, text)
        return f"-DTORCH_EXTENSION_NAME={NAME_PLACEHOLDER if patched else module_name}", patched

    # (no_implicit_headers: keyed apart from objects an older builder compiled with <torch/extension.h> forced in)
    cpp_define, cpp_patched = define("cpp", cpp_text)
    cpp_key = digest("cpp", toolchain.fingerprint(False), cpp_text, pch_flags, cpp_define, headers,
                     *(["without-pch"] if no_implicit_headers else []))
    cpp = Unit("cpp", "exact", "main.cpp", cpp_text, [*toolchain.cxx(), cpp_define, *pch_flags], cpp_key,
               pch=not no_implicit_headers, placeholder=cpp_patched)

    cuda: list[Unit] = []
    if has_cuda:
        fingerprint = toolchain.fingerprint(True)
        for variant, text in variants:
            cuda_define, cuda_patched = define("cuda", text)
            argv = [*nvcc, cuda_define, *nvcc_flags]
            cuda.append(Unit("cuda", variant, "cuda.cu", text, argv, digest("cuda", fingerprint, text, argv, headers),
                             placeholder=cuda_patched))
    # the library's key: everything in it (as its module name), not how its objects were named
    key = digest("so", extension, *(["without-pch"] if no_implicit_headers else []))
    return BuildPlan(name, module_name, key, cpp, cuda, link, pch_flags, with_cuda)
