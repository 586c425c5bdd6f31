"""What a build will do, computed without compiling anything: the translation units, their flags, their cache keys,
the link line and the module name.

The C++ unit is torch's: `<torch/extension.h>`, cpp_sources and the pybind11 bindings torch would generate; a
cpp_sources that only declares functions of plain types is tried first against the bindings' headers alone. The CUDA
unit comes in variants, fastest first: a source that split.py can cut is compiled in two parts (its kernels by nvcc
without torch, its host code by the host compiler against a precompiled header: the core prelude, then what torch's
unit includes, or with <torch/extension.h> for a source that needs it); then (`cuda_variants`) a source that does not
mention torch gets no torch headers; one that uses torch only for the usual host wrapper gets ATen's core headers; a
`#include <torch/extension.h>` in it is narrowed to the `<torch/types.h>` torch prepends anyway. The last variant is
always exactly what torch compiles, and `build` falls back along the list when a variant fails.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field

from kernelskill.review.cuda import nvcc_host, split, toolchain
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


SPLIT_VERSION = "split-5"  # in the split units' keys: a change to how sources are cut builds them again
_SPLIT_DEVICE_LINE = "// the device part of the CUDA source, without torch (kernelskill cuda_build, split)"
_SPLIT_HOST_LINE = "// the host part of the CUDA source, against a precompiled split header (kernelskill cuda_build)"
SPLIT_HOST_HEADERS = {
    # the core prelude (its names mean what torch's do, see above), without its #line
    # and AT_DISPATCH_*, which a launcher of a kernel template most often uses
    "split": "\n".join([nvcc_host.NVCC_HOST_HELPERS, *_CORE_PRELUDE.split("\n")[:-1], "#include <ATen/Dispatch.h>",
                        nvcc_host.PUSH_CONFIGURATION, nvcc_host.NVCC_HOST_TEMPLATES, ""]),
    # what torch's unit includes: for a host part that needs more than the core (a tensor operator, a function)
    "split-types": "\n".join([nvcc_host.NVCC_HOST_HELPERS, "// what torch's CUDA unit includes (kernelskill cuda_build, split)",
                              *_TORCH_PREFIX, nvcc_host.PUSH_CONFIGURATION, nvcc_host.NVCC_HOST_TEMPLATES, ""]),
    # and <torch/extension.h>, for a source that needs it (its own PYBIND11_MODULE, say): the include is the source's
    "split-extension": "\n".join([nvcc_host.NVCC_HOST_HELPERS,
                                  "// what torch's CUDA unit includes, and <torch/extension.h> (kernelskill cuda_build)",
                                  _TORCH_PREFIX[0], "#include <torch/extension.h>", *_TORCH_PREFIX[1:],
                                  nvcc_host.PUSH_CONFIGURATION, nvcc_host.NVCC_HOST_TEMPLATES, ""]),
}
"""What a split source's host part is compiled against, per variant (each precompiled once per flag set): first what
nvcc's implicit headers give host code (nvcc_host.NVCC_HOST_HELPERS), last nvcc's declaration of the launch entry point
the rewritten launches call and the runtime's C++ forms (nvcc_host.NVCC_HOST_TEMPLATES)."""
# The device part is compiled with what torch's headers bring into every unit of the standard C library's limits and
# math (a kernel's FLT_MAX, INT_MAX, uint8_t, expf), forced in by nvcc, so the source's lines keep their numbers
SPLIT_DEVICE_INCLUDES = ("cfloat", "climits", "cstdint", "cmath")


# The C++ unit of most candidates is one declaration a function plus the bindings load_inline writes, yet it compiles
# against all of <torch/extension.h> (the C++ frontend: 8-9 s on the H200 even precompiled, gcc instantiating the
# headers' templates again in every unit). When cpp_sources only declares functions whose parameters and results are
# tensors, plain numbers and vectors or tuples of those, the bindings compile against the headers that define how
# pybind11 converts exactly those types (`BINDINGS_HEADER`: torch's type caster for tensors, pybind11's STL casters;
# <torch/extension.h> reaches the same ones through torch/python.h), precompiled once. Anything else in cpp_sources
# keeps torch's unit.
BINDINGS_HEADER = "\n".join([
    "// the bindings' headers (kernelskill cuda_build): torch's tensor caster, pybind11 with its STL casters",
    "#include <torch/csrc/utils/pybind.h>",
    "#include <pybind11/stl.h>",
    "#include <torch/csrc/Exceptions.h>",
    "namespace torch {",
    "using namespace at;  // NOLINT",
    "}  // namespace torch",
    "",
])
_ELEMENT = r"(?:(?:torch|at)::Tensor|int|int64_t|int32_t|long|long\s+long|unsigned|unsigned\s+int|size_t|float|double|bool)"
_VALUE = rf"(?:{_ELEMENT}|std::vector\s*<\s*{_ELEMENT}\s*>)"
_PARAMETER = rf"(?:const\s+)?{_VALUE}(?:\s+const)?\s*&?\s*(?:[A-Za-z_]\w*)?"
_RESULT = rf"(?:void|{_VALUE}|std::tuple\s*<\s*{_VALUE}(?:\s*,\s*{_VALUE})*\s*>)"
_DECLARATION = re.compile(rf"\s*{_RESULT}\s+[A-Za-z_]\w*\s*\(\s*(?:{_PARAMETER}(?:\s*,\s*{_PARAMETER})*)?\s*\)\s*;")
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def declarations_only(cpp_sources) -> bool:
    """Whether cpp_sources (the include of <torch/extension.h> aside) only declares functions of the types above."""
    text = _EXTENSION_INCLUDE.sub("", _COMMENTS.sub(" ", _normalize(_join(cpp_sources))))
    pos, found = 0, False
    while pos < len(text):
        m = _DECLARATION.match(text, pos)
        if m is None:
            return not text[pos:].strip() and found
        pos, found = m.end(), True
    return found


def split_units(cuda_sources) -> tuple[str, str, tuple[str, ...], tuple[str, ...]] | None:
    """(device text, host text, kernels, templated kernels) of the split variants, or None when the source is not
    cut (`split.split`)."""
    body = _normalize(_join(cuda_sources))
    if not _USES_TORCH.search(body):
        return None
    parts = split.split(body)
    if parts is None:
        return None
    # three lines before the source, as torch's unit has: the candidate's lines keep their numbers in both parts
    return ("\n".join([_SPLIT_DEVICE_LINE, *_TORCH_PREFIX[1:], parts.device]),
            "\n".join([_SPLIT_HOST_LINE, *_TORCH_PREFIX[1:], parts.host]), tuple(parts.kernels),
            tuple(parts.templates))


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
    variant: str  # "exact", "torch-free", "core", "types.h", "split", "split-types", "split-extension"
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
    # the split variants' host part (`split.py`): the host compiler compiles it against `host_header` (one of
    # SPLIT_HOST_HEADERS, precompiled), with the host flags nvcc would give it for `argv`; `text` is then the device
    # part, for nvcc
    host_text: str = ""
    host_header: str = ""
    kernels: tuple[str, ...] = ()  # the split source's kernels, and those of them that are templates (the device
    templates: tuple[str, ...] = ()  # part instantiates what the compiled host part launches)


@dataclass
class BuildPlan:
    """Everything a build will do, computed without compiling anything."""

    name: str
    module_name: str
    key: str
    cpp: Unit  # what torch compiles
    cuda: list[Unit]  # attempts, fastest first; empty without CUDA sources
    link_flags: list[str]
    pch_flags: list[str]  # the C++ unit's flags, without the module name: what the precompiled header must match
    with_cuda: bool
    cpp_units: list[Unit] = field(default_factory=list)  # attempts for the C++ unit, fastest first; ends with `cpp`


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
    cpp_units = [cpp]
    if not no_implicit_headers and functions is not None and declarations_only(cpp_sources):
        text = _normalize(_EXTENSION_INCLUDE.sub("", _join(cpp_sources))) + _bindings(functions,
                                                                                       with_pytorch_error_handling)
        text = "// bindings against the precompiled BINDINGS_HEADER (kernelskill cuda_build)\n" + text
        narrow_define, narrow_patched = define("cpp", text)
        cpp_units.insert(0, Unit("cpp", "bindings", "main.cpp", text, [*toolchain.cxx(), narrow_define, *pch_flags],
                                 digest("cpp", "bindings", toolchain.fingerprint(False), text, BINDINGS_HEADER,
                                        pch_flags, narrow_define, headers),
                                 pch=True, placeholder=narrow_patched))

    cuda: list[Unit] = []
    if has_cuda:
        fingerprint = toolchain.fingerprint(True)
        parts = None if no_implicit_headers else split_units(cuda_sources)
        if parts is not None:
            # the device part as a CUDA unit, the host part as a C++ one (its own PYBIND11_MODULE may use the name)
            patched = name_placeholder and _placeholder_fits("cuda", parts[0]) and _placeholder_fits("cpp", parts[1])
            split_define = f"-DTORCH_EXTENSION_NAME={NAME_PLACEHOLDER if patched else module_name}"
            argv = [*nvcc, split_define, *nvcc_flags]
            # the core prelude's host part only where the core variant would be tried (see _OTHER_TORCH_INCLUDE),
            # <torch/extension.h> only where the source needs it
            # (which the source includes itself: a source that uses it without has torch's compile fail, and so ours)
            needs_extension = _NEEDS_EXTENSION_H.search(_join(cuda_sources))
            offered = ((["split-extension"] if _EXTENSION_INCLUDE.search(_join(cuda_sources)) else [])
                       if needs_extension else ["split"] * any(v == "core" for v, _ in variants) + ["split-types"])
            for variant in offered:
                header = SPLIT_HOST_HEADERS[variant]
                cuda.append(Unit("cuda", variant, "cuda.cu", parts[0], argv,
                                 digest("cuda", SPLIT_VERSION, fingerprint, parts[0], parts[1], header, argv,
                                        SPLIT_DEVICE_INCLUDES,
                                        headers, toolchain.cxx()),
                                 placeholder=patched, host_text=parts[1], host_header=header,
                                 kernels=parts[2], templates=parts[3]))
        for variant, text in variants:
            cuda_define, cuda_patched = define("cuda", text)
            argv = [*nvcc, cuda_define, *nvcc_flags]
            cuda.append(Unit("cuda", variant, "cuda.cu", text, argv, digest("cuda", fingerprint, text, argv, headers),
                             placeholder=cuda_patched))
    # the library's key: everything in it (as its module name), not how its objects were named
    key = digest("so", extension, *(["without-pch"] if no_implicit_headers else []))
    return BuildPlan(name, module_name, key, cpp, cuda, link, pch_flags, with_cuda, cpp_units)
