"""The fast load_inline builder (review/cuda/), with the real compilers.

All tests share one cache: $KERNELSKILL_CACHE when set (CI sets a fresh one), else a folder shared by the xdist
workers of this run. The C++ extension most tests use has fixed sources, so whichever worker comes first builds it
(and the precompiled header) and the other finds both in the cache: the builder's own locks make that safe. Tests
that need a build nobody has done yet add a unique linker flag, which gives a new library but reuses the compiled
object (compiled under a placeholder for the module's name, see plan.NAME_PLACEHOLDER), so they cost a link, not a
compile.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from kernelskill.review.cuda import CudaCompileError, build, inline
from kernelskill.review.cuda.cache import file_sha
from kernelskill.review.cuda.compile import compile_unit
from kernelskill.review.cuda.pch import pch_dir, prepare_pch
from kernelskill.review.cuda.plan import Unit, cuda_variants, plan_build
from kernelskill.review.cuda.toolchain import arch_flags

pytestmark = pytest.mark.slow

SOURCE = "torch::Tensor scale_add(torch::Tensor x, double s) { return x * s + 1; }"
FUNCTIONS = ["scale_add"]
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
SRC_DIR = str(Path(inline.__file__).resolve().parents[3])


@pytest.fixture(scope="module", autouse=True)
def cache(tmp_path_factory):
    root = os.environ.get("KERNELSKILL_CACHE")
    if not root:
        base = tmp_path_factory.getbasetemp()
        root = str((base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "kernelskill-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KERNELSKILL_CACHE", root)
        mp.setenv("PYTHONPATH", os.pathsep.join(filter(None, [SRC_DIR, os.environ.get("PYTHONPATH")])))
        yield Path(root)


@pytest.fixture(scope="module")
def pch_seconds(cache):
    return prepare_pch(with_cuda=False)


@pytest.fixture(scope="module")
def ext(pch_seconds):
    module = inline.load_inline("ks_test_scale_add", SOURCE, functions=FUNCTIONS)
    return module, inline.BUILDS[-1]


# Tests of the builder's own mechanics (keys, flags, headers, module names) build units of pybind11 alone: with
# <torch/extension.h> a C++ unit spends seconds instantiating the header's templates, even against the precompiled
# header, which would make each of these tests a minute on CI's two cores.
PYBIND_ONLY = "#include <pybind11/pybind11.h>\n"
WITHOUT_TORCH = {"no_implicit_headers": True, "with_pytorch_error_handling": False}


def _unique_ldflags() -> list[str]:
    return [f"-Wl,-rpath,/nonexistent/{uuid.uuid4().hex}"]  # a new library; the compiled object is reused


def _python(script: str, *args: str, timeout: float = 300) -> dict:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(script), *args], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------------------------------------------ C++ only
def test_cpp_extension_builds_imports_and_computes(ext):
    import torch

    module, built = ext
    x = torch.arange(4, dtype=torch.float32)
    assert torch.equal(module.scale_add(x, 2.0), x * 2 + 1)
    assert built.module_name.startswith("ks_") and built.so_path.is_file()
    assert (built.so_path.parent / "build.json").is_file()


def test_precompiled_header_is_built_once_and_used(ext, cache):
    _, built = ext
    assert prepare_pch(with_cuda=False) == 0.0  # already there: nothing built again
    plan = plan_build("x", SOURCE, functions=FUNCTIONS, with_cuda=False)
    assert (pch_dir(plan.pch_flags) / "ks_torch_extension.h.gch").is_file()
    # gcc -H printed "! <pch>.gch": the C++ unit was compiled from the precompiled header, not from the headers
    # (with -Winvalid-pch, a header gcc refused would have been reported in the notes).
    assert built.pch_used is True, built.notes
    assert "pch" not in built.steps  # the build used the header prepare_pch made; it did not make its own


def test_cuda_and_cpp_only_extensions_share_one_precompiled_header(pch_seconds):
    """A CUDA extension's C++ unit has the toolkit's include folder too; <torch/extension.h> reads the same without
    it, so its unit uses the header of C++-only extensions rather than one of its own (a minute to build)."""
    from kernelskill.review.cuda.pch import header_flags_for

    cpp_only = plan_build("x", SOURCE, functions=FUNCTIONS, with_cuda=False)
    with_cuda = plan_build("x", SOURCE, functions=FUNCTIONS, with_cuda=True)
    assert with_cuda.pch_flags != cpp_only.pch_flags
    assert header_flags_for(with_cuda.pch_flags) == cpp_only.pch_flags
    assert prepare_pch(with_cuda=True) == 0.0  # the one pch_seconds built


def test_cache_hit_in_a_fresh_process_takes_under_a_second(ext):
    _, built = ext
    result = _python("""
        import json, sys, time
        import torch
        from kernelskill.review.cuda import inline
        start = time.perf_counter()
        module = inline.load_inline("another_name", sys.argv[1], functions=["scale_add"])
        seconds = time.perf_counter() - start
        value = module.scale_add(torch.ones(2), 3.0).tolist()
        b = inline.BUILDS[-1]
        print(json.dumps({"hit": b.cache_hit, "seconds": seconds, "value": value, "so": str(b.so_path)}))
    """, SOURCE)
    assert result["hit"] is True
    assert result["seconds"] < 1.0
    assert result["value"] == [4.0, 4.0]
    assert result["so"] == str(built.so_path)  # the user's name does not change the binary


def test_key_depends_on_sources_and_flags_but_not_on_the_name(cache):
    base = dict(cpp_sources=SOURCE, functions=FUNCTIONS, with_cuda=False)
    key = plan_build("a", **base).key
    assert plan_build("b", **base).key == key
    assert plan_build("a", **{**base, "cpp_sources": SOURCE + " "}).key != key
    assert plan_build("a", **base, extra_cflags=["-O3"]).key != key
    assert plan_build("a", **base, extra_ldflags=["-lm"]).key != key
    assert plan_build("a", **base, extra_include_paths=[str(cache)]).key != key
    assert plan_build("a", **{**base, "functions": {"scale_add": "doc"}}).key != key
    assert plan_build("a", **base, with_pytorch_error_handling=False).key != key


def test_two_processes_building_the_same_new_source_build_once(ext, tmp_path):
    ldflags = _unique_ldflags()
    script = """
        import json, sys, time
        from pathlib import Path
        import torch
        from kernelskill.review.cuda import inline
        gate = Path(sys.argv[1])
        (gate / ("ready-" + sys.argv[2])).touch()
        while not (gate / "go").exists():
            time.sleep(0.005)
        module = inline.load_inline("race", sys.argv[3], functions=["scale_add"], extra_ldflags=[sys.argv[4]])
        print(json.dumps({"hit": inline.BUILDS[-1].cache_hit, "value": module.scale_add(torch.ones(1), 1.0).item()}))
    """
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(script), str(tmp_path), str(i), SOURCE,
                               ldflags[0]], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(2)]
    deadline = time.time() + 240
    while not all((tmp_path / f"ready-{i}").exists() for i in range(2)):
        assert time.time() < deadline and all(p.poll() is None for p in procs), "workers did not start"
        time.sleep(0.01)
    (tmp_path / "go").touch()
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert sorted(r["hit"] for r in results) == [False, True]  # one built it, the other waited and imported it
    assert [r["value"] for r in results] == [2.0, 2.0]


def test_a_corrupt_or_unfinished_entry_is_rebuilt(ext):
    import torch

    args = dict(name="corrupt", cpp_sources=SOURCE, functions=FUNCTIONS, extra_ldflags=_unique_ldflags())
    first = build.build_inline(**args)
    assert not first.cache_hit
    entry = first.so_path.parent
    assert build.build_inline(**args).cache_hit

    (entry / "build.json").unlink()  # a build that died before its completion marker
    assert not build.build_inline(**args).cache_hit

    first.so_path.write_bytes(b"\x7fELF truncated")  # the library no longer matches its marker
    assert not build.build_inline(**args).cache_hit

    # A library that matches its marker but does not import: load_inline rebuilds it rather than trust it.
    first.so_path.write_bytes(b"not a shared object")
    info = json.loads((entry / "build.json").read_text())
    info["so_sha256"] = file_sha(first.so_path)
    (entry / "build.json").write_text(json.dumps(info))
    module = inline.load_inline(**args)
    assert module.scale_add(torch.ones(1), 2.0).item() == 3.0
    assert not inline.BUILDS[-1].cache_hit
    assert any("did not import" in note for note in inline.BUILDS[-1].notes)


def test_an_object_pruned_between_lookup_and_link_is_compiled_again(ext, monkeypatch):
    """`kernelskill cache prune` in another process may remove a cached object after a build has found it: the
    link then fails for want of the file, which is not the candidate's fault. The build compiles it again."""
    import torch

    args = dict(name="ks_test_scale_add", cpp_sources=SOURCE, functions=FUNCTIONS, extra_ldflags=_unique_ldflags())
    first = build.build_inline(**args)
    shutil.rmtree(first.so_path.parent)  # the library is gone; its object is in the object cache
    real, pruned = build._cached_object, []

    def found_then_pruned(key):
        obj = real(key)
        if obj is not None and not pruned:
            obj.path.unlink()
            pruned.append(key)
        return obj

    monkeypatch.setattr(build, "_cached_object", found_then_pruned)
    module = inline.load_inline(**args)
    assert pruned and module.scale_add(torch.ones(1), 2.0).item() == 3.0
    assert not inline.BUILDS[-1].cache_hit and "cpp" in inline.BUILDS[-1].steps  # compiled again


def test_a_cpp_compile_error_names_the_line(pch_seconds):
    source = "torch::Tensor scale_add(torch::Tensor x, double s) {\n  return x * undeclared_scale;\n}"
    with pytest.raises(CudaCompileError) as info:
        inline.load_inline("broken_cpp", source, functions=FUNCTIONS)
    message = str(info.value)
    assert message.startswith("extension 'broken_cpp': the C++ sources (main.cpp) failed to compile:")
    assert "main.cpp:3:" in message and "undeclared_scale" in message  # line 1 is the prepended #include
    assert "error" in info.value.log


# ---------------------------------------------------------------------------------------------------------------- CUDA
CUDA_PLAIN = r"""
#include <cstdint>
__global__ void gelu_scale_kernel(const float* x, float* y, float s, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) { float v = x[i]; y[i] = 0.5f * v * (1.f + erff(v * 0.70710678f)) * s; }
}
void gelu_scale_launch(const float* x, float* y, float s, int64_t n, cudaStream_t stream) {
    gelu_scale_kernel<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(x, y, s, n);
}
"""
CUDA_TORCH = CUDA_PLAIN + r"""
torch::Tensor gelu_scale(torch::Tensor x, double s) {
    auto y = torch::empty_like(x);
    gelu_scale_launch(x.data_ptr<float>(), y.data_ptr<float>(), (float)s, x.numel(), 0);
    return y;
}
"""


def _headers(unit: Unit, directory: Path) -> str:
    """The headers nvcc reads for this unit (nvcc -M), to see whether torch's are among them."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / unit.filename).write_text(unit.text)
    proc = subprocess.run([*unit.argv, "-M", unit.filename], cwd=directory, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    assert proc.returncode == 0, proc.stdout[-2000:]
    return proc.stdout


@needs_nvcc
def test_cuda_source_without_torch_is_compiled_without_torch_headers(tmp_path):
    plan = plan_build("plain", "void gelu_scale_launch();", CUDA_PLAIN, extra_cuda_cflags=["-O3"], arch="9.0")
    unit = plan.cuda[0]
    assert [u.variant for u in plan.cuda] == ["torch-free", "exact"]
    assert "#include <torch/types.h>" not in unit.text and "#include <cuda_runtime.h>" in unit.text
    assert unit.text.count("\n") == plan.cuda[1].text.count("\n")  # same line numbers as torch's cuda.cu
    assert "torch/types.h" not in _headers(unit, tmp_path / "deps")
    assert "-gencode=arch=compute_90,code=sm_90" in unit.argv and "--expt-relaxed-constexpr" in unit.argv
    obj = compile_unit(unit, tmp_path / "build")  # nvcc's front ends side by side
    symbols = subprocess.run(["nm", "-C", str(obj.path)], stdout=subprocess.PIPE, text=True).stdout
    assert "gelu_scale_launch" in symbols and "gelu_scale_kernel" in symbols
    assert not any("as is" in note for note in obj.notes), obj.notes  # the parallel path ran, not the fallback
    plain = compile_unit(unit, tmp_path / "plain", parallel_nvcc=False)

    def names(path: Path) -> list[str]:
        return sorted(line.split()[-1] for line in
                      subprocess.run(["nm", str(path)], stdout=subprocess.PIPE, text=True).stdout.splitlines())

    assert names(obj.path) == names(plain.path)


def test_cuda_source_using_torch_gets_torch_headers():
    plan = plan_build("torchy", "torch::Tensor gelu_scale(torch::Tensor x, double s);", CUDA_TORCH,
                      functions=["gelu_scale"], arch="sm_90") if shutil.which("nvcc") else None
    variants = cuda_variants(CUDA_TORCH)
    assert [v for v, _ in variants] == ["core", "exact"]  # ATen's core headers first, then what torch compiles
    assert variants[0][1].startswith("// torch's core headers only") and "#include <torch/" not in variants[0][1]
    assert variants[1][1].startswith("#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n")
    if plan is not None:  # after the split units (test_cuda_split.py), the same variants
        assert [u.text for u in plan.cuda if not u.host_text] == [t for _, t in variants]
    # KernelBench style: <torch/extension.h> in the CUDA sources is narrowed to the core prelude, then to the
    # <torch/types.h> torch prepends.
    kernelbench = "#include <torch/extension.h>\n" + CUDA_TORCH
    core, narrowed, exact = cuda_variants(kernelbench)
    assert core[0] == "core" and narrowed[0] == "types.h" and "\n#include <torch/extension.h>" not in narrowed[1]
    assert exact == ("exact", "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n" + kernelbench)
    assert [v for v, _ in cuda_variants(kernelbench + "\nPYBIND11_MODULE(m, m) {}")] == ["exact"]
    # a torch header of its own (not extension.h): nothing narrower than what it asks for
    assert [v for v, _ in cuda_variants("#include <torch/torch.h>\n" + CUDA_TORCH)] == ["exact"]


CUDA_WRAPPER = CUDA_TORCH.replace("    auto y = torch::empty_like(x);", """    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    auto y = torch::empty_like(x);""")


def _candidate_strings(path: Path) -> dict[str, str]:
    """The string constants a candidate file assigns at its top level (its sources), read without running it."""
    tree = ast.parse(path.read_text())
    return {target.id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
            for target in node.targets if isinstance(target, ast.Name)}


@needs_nvcc
def test_a_torch_wrapper_in_cuda_sources_compiles_against_core_headers_only(tmp_path):
    """The common LLM style (torch::Tensor wrapper inside cuda_sources) is built without <torch/types.h>, which pulls
    in every operator's declaration; nvcc -M shows which headers the unit read. The sources and flags are those of
    the suite's CUDA candidate in that style, so its review (test_verdicts.py) and this test compile its units once
    between them: the second finds the split unit's object in the cache, which only a split unit that compiled puts
    there. The core unit, its fallback, reads ATen's core headers and not <torch/types.h>."""
    p01 = _candidate_strings(Path(__file__).parents[1] / "data/candidates/p01_pointwise_gelu_chain/cuda_ok.py")
    built = build.build_inline("wrapper", p01["cpp_source"], p01["cuda_source"], functions=["gelu_chain_cuda"],
                               extra_cuda_cflags=["-O3"], arch="9.0", link=False)
    assert built.cuda_variant == "split", built.notes  # the torch-free device part: no torch header at all
    plan = plan_build("wrapper", "", p01["cuda_source"], extra_cuda_cflags=["-O3"], arch="9.0")
    read = _headers(next(u for u in plan.cuda if u.variant == "core"), tmp_path / "core")  # its first fallback
    assert "ATen/core/Tensor.h" in read and "torch/types.h" not in read and "ATen/Functions.h" not in read


@pytest.mark.all_cuda_checks  # 45 s on 2 cores (nvcc on all of torch's headers)
@needs_nvcc
def test_a_compile_error_in_a_core_unit_keeps_torch_line_numbers(pch_seconds):
    broken = CUDA_WRAPPER.replace("float v = x[i];", "float v = x[i]")
    with pytest.raises(CudaCompileError) as info:
        build.build_inline("broken_wrapper", "", broken, arch="9.0", link=False)
    assert 'cuda.cu(8): error: expected a ";"' in str(info.value)  # as in the unit torch would compile


@pytest.mark.all_cuda_checks  # compiles as torch does, with all of <torch/types.h>: 1-2 minutes on CI
@needs_nvcc
def test_a_core_unit_that_misses_a_declaration_is_compiled_as_torch_does(tmp_path):
    source = CUDA_WRAPPER + "\ntorch::Tensor relu(torch::Tensor x) { return torch::relu(x); }\n"
    built = build.build_inline("needs_relu", "", source, arch="9.0", link=False)
    assert built.cuda_variant == "split-types"  # the host part against what torch's unit includes
    assert any("compiled again" in note for note in built.notes), built.notes


def test_a_narrowed_unit_never_gives_the_candidates_verdict(cache, monkeypatch, tmp_path):
    """Only the unit torch compiles can fail a candidate: a narrowed one that misses a declaration (or an operator)
    gives way to the next variant, one that fails otherwise goes straight to torch's."""
    from kernelskill.review.cuda.compile import CompiledObject, UnitFailed

    def units() -> list[Unit]:  # new keys each time: nothing in the object cache
        tag = uuid.uuid4().hex
        return [Unit("cuda", v, "cuda.cu", v, ["nvcc"], f"{tag}-{v}") for v in ("core", "types.h", "exact")]

    tried: list[str] = []

    def fake_compile(unit, directory, **kwargs):
        tried.append(unit.variant)
        if unit.variant in failing:
            raise UnitFailed(unit, failing[unit.variant], "log")
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "cuda.o").write_bytes(b"object")
        return CompiledObject(directory / "cuda.o", "log", 0.1, False)

    monkeypatch.setattr(build, "compile_unit", fake_compile)
    failing = {"core": 'cuda.cu(43): error: no operator "/" matches these operands'}
    unit, _ = build._object_for(units(), tmp_path / "a", toolchain_runner(), None, True)
    assert (unit.variant, tried) == ("types.h", ["core", "types.h"])
    tried.clear()
    failing = {"core": 'cuda.cu(8): error: expected a ";"', "types.h": "never compiled"}
    unit, obj = build._object_for(units(), tmp_path / "b", toolchain_runner(), None, True)
    assert (unit.variant, tried) == ("exact", ["core", "exact"])
    assert "compiled again as torch compiles it" in obj.notes[0]
    assert "narrowed" in obj.phases  # the failed attempt's seconds: BuiltExtension.steps["cuda.narrowed"]
    tried.clear()
    failing = {"core": "cuda.cu(8): error: x", "exact": "cuda.cu(8): error: x"}
    with pytest.raises(UnitFailed) as info:
        build._object_for(units(), tmp_path / "c", toolchain_runner(), None, True)
    assert info.value.unit.variant == "exact" and tried == ["core", "exact"]


def toolchain_runner():
    from kernelskill.review.cuda.toolchain import Runner

    return Runner()


@pytest.mark.all_cuda_checks  # 44 s on 2 cores (nvcc on all of torch's headers): the suite passed 10 minutes
@needs_nvcc
def test_a_cuda_compile_error_names_the_line(pch_seconds):
    broken = CUDA_PLAIN.replace("float v = x[i];", "float v = x[i]")
    with pytest.raises(CudaCompileError) as info:
        build.build_inline("broken_cuda", "void gelu_scale_launch();", broken, arch="9.0", link=False)
    message = str(info.value)
    assert message.startswith("extension 'broken_cuda': the CUDA sources (cuda.cu, nvcc) failed to compile:")
    assert 'cuda.cu(8): error: expected a ";"' in message  # line 1-3: the prepended includes


@needs_nvcc
def test_the_torch_free_unit_keeps_the_line_numbers_torch_s_unit_gives(tmp_path):
    # What the two nvcc error tests above show through torch's own unit (45 s each, in the extra tier), shown here
    # through the unit compiled first, which stands in torch's prelude with as many lines of its own: a compile
    # error names the line torch's unit would name (line 1-3: the prepended includes)
    from kernelskill.review.cuda.compile import UnitFailed

    broken = CUDA_PLAIN.replace("float v = x[i];", "float v = x[i]")
    plan = plan_build("broken_cuda", "void gelu_scale_launch();", broken, arch="9.0")
    unit = next(u for u in plan.cuda if u.variant == "torch-free")
    with pytest.raises(UnitFailed) as info:
        compile_unit(unit, tmp_path / "unit")
    assert 'cuda.cu(8): error: expected a ";"' in info.value.output, info.value.output[-2000:]


def test_arch_flags():
    assert arch_flags("9.0", []) == ["-gencode=arch=compute_90,code=sm_90"]
    assert arch_flags("sm_90a", []) == ["-gencode=arch=compute_90a,code=sm_90a"]
    assert arch_flags("8.0;9.0+PTX", []) == ["-gencode=arch=compute_80,code=sm_80",
                                             "-gencode=arch=compute_90,code=compute_90",
                                             "-gencode=arch=compute_90,code=sm_90"]
    assert arch_flags("9.0", ["-arch=sm_80"]) == []  # the candidate's own arch wins, as in torch
    with pytest.raises(ValueError, match="unknown CUDA arch"):
        arch_flags("hopper", [])


@pytest.mark.all_cuda_checks  # compiles as torch does, with all of <torch/types.h>: 1-2 minutes on CI
@needs_nvcc
def test_a_narrowed_cuda_unit_that_misses_a_declaration_is_compiled_as_torch_does(tmp_path):
    # No torch mention, so it is first compiled without torch's headers, where std::vector is undeclared.
    source = CUDA_PLAIN + "\nint count(const std::vector<int>& v) { return (int)v.size(); }\n"
    built = build.build_inline("needs_vector", "int count();", source, arch="9.0", link=False)
    assert built.cuda_variant == "exact"
    assert any("compiled again" in note for note in built.notes), built.notes


def test_extensions_that_differ_only_outside_the_cpp_unit_are_distinct_modules():
    """Python hands back the module it already has for a name: two different libraries must never share a name, or
    a warm review worker would run an earlier candidate's code (seen on the H200: a candidate with new kernels and
    the same C++ glue ran the previous candidate's kernels)."""
    import uuid

    tag = uuid.uuid4().hex
    cpp = (PYBIND_ONLY + '#include <cstdint>\nextern "C" char ks_marker_%s;\n'
           'int64_t marker() { return (int64_t)&ks_marker_%s; }' % (tag, tag))
    first = inline.load_inline("m1", cpp, functions=["marker"], extra_ldflags=[f"-Wl,--defsym=ks_marker_{tag}=4096"],
                               **WITHOUT_TORCH)
    second = inline.load_inline("m2", cpp, functions=["marker"], extra_ldflags=[f"-Wl,--defsym=ks_marker_{tag}=8192"],
                                **WITHOUT_TORCH)
    assert first is not second and first.__file__ != second.__file__
    assert first.marker() != second.marker()


# A unit that returns its module's name: the name macro as compiled into a string (no pybind11: a tenth of a second)
NAME_SOURCE = ('#define KS_STR2(x) #x\n#define KS_STR(x) KS_STR2(x)\n'
               'extern "C" const char* ks_module_name() { return KS_STR(TORCH_EXTENSION_NAME); }\n')


def _module_name_in(so_path: Path) -> str:
    import ctypes

    lib = ctypes.CDLL(str(so_path))
    lib.ks_module_name.restype = ctypes.c_char_p
    return lib.ks_module_name().decode()


def test_the_cpp_glue_is_compiled_once_for_every_module_name(tmp_path):
    """torch compiles the module's name into both units; this builder compiles them under a placeholder of the same
    length and writes the name into a copy of the object before linking, so a candidate whose kernels (or flags)
    changed does not compile its C++ glue again. The named object is byte for byte the one compiled with the name."""
    from kernelskill.review.cuda.plan import NAME_PLACEHOLDER

    tag = uuid.uuid4().hex  # a source no build has seen
    source = f"// {tag}\n" + NAME_SOURCE
    first = build.build_inline("named", source, extra_ldflags=_unique_ldflags(), **WITHOUT_TORCH)
    second = build.build_inline("named", source, extra_ldflags=_unique_ldflags(), **WITHOUT_TORCH)
    assert first.module_name != second.module_name
    assert "cpp" in first.steps and "link" in second.steps and not second.steps.get("cpp")  # the same object
    assert any("reused from the object cache" in note for note in second.notes), second.notes
    for built in (first, second):
        assert _module_name_in(built.so_path) == built.module_name
        assert NAME_PLACEHOLDER.encode() not in built.so_path.read_bytes()
        assert NAME_PLACEHOLDER not in built.log and built.module_name in built.log  # the command torch runs

    patched = plan_build("named", source, **WITHOUT_TORCH)
    named = plan_build("named", source, **WITHOUT_TORCH, name_placeholder=False)
    assert (patched.key, patched.module_name) == (named.key, named.module_name) and patched.cpp.key != named.cpp.key
    assert patched.cpp.placeholder and not named.cpp.placeholder
    obj = compile_unit(patched.cpp, tmp_path / "placeholder")
    assert obj.path.read_bytes().count(NAME_PLACEHOLDER.encode()) >= 1
    written = build._name_object(obj.path, tmp_path / "named", patched.module_name)
    assert written.read_bytes() == compile_unit(named.cpp, tmp_path / "real").path.read_bytes()


def test_a_unit_the_name_cannot_be_written_into_is_compiled_with_the_name():
    """LTO objects hold the code in compressed sections the patch does not reach (their link then fails, or the
    library keeps the placeholder): such a build is made again from objects compiled with the module's own name."""
    from kernelskill.review.cuda.plan import NAME_PLACEHOLDER, _placeholder_fits

    built = build.build_inline("lto", f"// {uuid.uuid4().hex}\n" + NAME_SOURCE, extra_cflags=["-flto"],
                               **WITHOUT_TORCH)
    assert _module_name_in(built.so_path) == built.module_name
    assert any("compiled again with it" in note for note in built.notes), built.notes
    # never under the placeholder: a source that holds it, or CUDA code that uses the name (device code may keep it
    # in a compressed fatbinary)
    assert not _placeholder_fits("cpp", f"const char* s = \"{NAME_PLACEHOLDER}\";")
    assert _placeholder_fits("cpp", NAME_SOURCE) and _placeholder_fits("cuda", CUDA_PLAIN)
    assert not _placeholder_fits("cuda", CUDA_PLAIN + NAME_SOURCE)


def test_the_candidates_own_headers_are_in_every_key(tmp_path):
    """A build is never served to a source whose headers changed: a candidate may write a header (under an include
    folder, or included by absolute path) and build again with the same text."""
    inc = tmp_path / "inc"
    (inc / "sub").mkdir(parents=True)
    header = inc / "sub" / "ks_scale.h"
    header.write_text("constexpr int KS_SCALE = 2;\n")
    cpp = '#include "sub/ks_scale.h"\n' + SOURCE

    def keys(**kwargs):
        plan = plan_build("headers", kwargs.pop("cpp", cpp), functions=FUNCTIONS, **kwargs)
        return plan.key, plan.cpp.key, plan.module_name

    by_paths = keys(extra_include_paths=[str(inc)])
    assert keys(extra_include_paths=[str(inc)]) == by_paths  # the same headers: the same build
    by_flag = keys(extra_cflags=[f"-I{inc}"])
    header.write_text("constexpr int KS_SCALE = 3;\n")
    assert all(a != b for a, b in zip(keys(extra_include_paths=[str(inc)]), by_paths))
    assert all(a != b for a, b in zip(keys(extra_cflags=[f"-I{inc}"]), by_flag))
    absolute = f'#include "{header}"\n' + SOURCE
    before = keys(cpp=absolute)
    (inc / "sub" / "ks_other.h").write_text("// a header beside it, which it may include\n")
    assert keys(cpp=absolute) != before
    assert keys(cpp=SOURCE) == keys(cpp=SOURCE)  # no headers of its own: keyed as before


def test_the_bindings_are_torchs_for_every_form_of_functions():
    """torch writes a PYBIND11_MODULE block whenever `functions` is not None, an empty one for []: a source with a
    module of its own and functions=[] fails there, so it must fail here (before, it built here alone)."""
    def text(functions, **kwargs):
        return plan_build("bindings", "int f(int x) { return x; }", functions=functions, **kwargs).cpp.text

    assert "PYBIND11_MODULE" not in text(None)
    assert text([]).endswith("PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n\n}\n")
    assert 'm.def("f", torch::wrap_pybind_function(f), "f");' in text("f")
    assert 'm.def("f", f, "doc");' in text({"f": "doc"}, with_pytorch_error_handling=False)


def test_torchs_and_the_toolkits_include_folders_are_not_hashed_again(monkeypatch, tmp_path):
    # their versions are in the fingerprint already; candidates often pass torch's include_paths() themselves
    from torch.utils import cpp_extension

    from kernelskill.review.cuda import plan as plan_module

    hashed: list[list[str]] = []
    monkeypatch.setattr(plan_module, "include_state", lambda dirs, texts: hashed.append(dirs) or "")
    plan_build("versioned", SOURCE, functions=FUNCTIONS,
               extra_include_paths=[*cpp_extension.include_paths(), str(tmp_path)])
    assert hashed == [[str(tmp_path)]]


def test_a_rewritten_header_builds_again(ext, tmp_path):
    import ctypes

    inc = tmp_path / "inc"
    inc.mkdir()
    # a plain library (no pybind11: a tenth of a second to compile), called through ctypes
    source = '#include "ks_offset.h"\nextern "C" int offset(int x) { return x + KS_OFFSET; }'
    results = []
    for value in (1, 7):
        (inc / "ks_offset.h").write_text(f"constexpr int KS_OFFSET = {value};\n")
        path = inline.load_inline("ks_test_header", source, extra_include_paths=[str(inc)], is_python_module=False,
                                  **WITHOUT_TORCH)
        results.append(ctypes.CDLL(path).offset(0))
    assert results == [1, 7]


def test_without_implicit_headers_the_source_gets_no_torch_header(ext):
    """torch's load_inline with no_implicit_headers includes nothing before cpp_sources; the precompiled
    <torch/extension.h> must not be forced in either, or a source torch rejects would build here."""
    with pytest.raises(CudaCompileError) as info:
        inline.load_inline("ks_test_no_headers", "int rank(torch::Tensor x) { return x.dim(); }", functions=[],
                           no_implicit_headers=True, extra_ldflags=_unique_ldflags())
    # compiled and refused here, as torch refuses it (forced in, the header made it compile, then fail to import)
    assert info.value.in_own_code and "(main.cpp) failed to compile" in str(info.value), info.value
    assert "‘torch’ has not been declared" in str(info.value) or "'torch' has not been declared" in str(info.value)


# ----------------------------------------------------------------------------------- load_inline's argument forms
def test_every_load_inline_argument_form_builds(ext, tmp_path):
    # KernelBench's prompt example passes extra_cflags=[''] / extra_ldflags=['']: torch's ninja file drops blank
    # flags, so must we (the compiler was handed '' as an input file before).
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "ks_forms.h").write_text("constexpr int KS_OFFSET = 2;\n")
    # (pybind11 alone, as WITHOUT_TORCH: with <torch/extension.h> these flags would need a precompiled header of
    # their own, minutes on CI, for no more coverage of how the arguments are read)
    module = inline.load_inline(
        "ks_test_forms",
        [PYBIND_ONLY + '#include "ks_forms.h"', "int offset(int x) { return x + KS_OFFSET + KS_FORM; }"],
        functions={"offset": "x + 5"},
        extra_cflags=["", "   ", " -O2 -DKS_FORM=3 "],
        extra_ldflags=["", *_unique_ldflags()],
        extra_include_paths=[str(inc)],
        build_directory=str(tmp_path / "ignored"),
        verbose=True, with_cuda=False, keep_intermediates=False, use_pch=True, is_python_module=True,
        **WITHOUT_TORCH,
    )
    assert module.offset(0) == 5
    assert module.offset.__doc__.startswith("offset(") or "x + 5" in (module.offset.__doc__ or "")


def test_a_library_that_registers_ops_loads_without_a_python_module(ext):
    import torch

    source = ("torch::Tensor ks_twice(torch::Tensor x) { return x * 2; }\n"
              "TORCH_LIBRARY(ks_forms_ops, m) { m.def(\"twice\", &ks_twice); }")
    path = inline.load_inline("ks_test_ops", source, is_python_module=False, extra_ldflags=[""])
    assert isinstance(path, str) and path.endswith(".so")
    assert torch.ops.ks_forms_ops.twice(torch.ones(3)).tolist() == [2.0, 2.0, 2.0]


def test_torch_builds_what_this_builder_fails_on_outside_the_candidates_code(monkeypatch):
    # Whatever goes wrong in this builder (here: made to fail) must not fail a candidate that torch would build.
    # (pybind11 alone, as WITHOUT_TORCH: torch's own build has no precompiled header, and <torch/extension.h> would
    # take it 20 s of CPU for no more coverage of the fallback)
    def broken(**kwargs):
        raise CudaCompileError("extension: linking failed:\nc++: error: some builder bug", "log", in_own_code=False)

    monkeypatch.setattr(inline, "build_inline", broken)
    source = PYBIND_ONLY + "double scale_add(double x, double s) { return x * s + 1; }"
    module = inline.load_inline("ks_test_fallback", source, functions=FUNCTIONS, extra_cflags=[""], **WITHOUT_TORCH)
    assert module.scale_add(1.0, 2.0) == 3.0
    assert inline.BUILDS[-1].cuda_variant == "torch"
    assert "built by torch's own load_inline" in inline.BUILDS[-1].notes[0]


def test_an_error_in_the_candidates_own_code_is_not_built_twice(monkeypatch):
    def torch_must_not_run(*args, **kwargs):
        raise AssertionError("torch's load_inline was called for an error in the candidate's own lines")

    monkeypatch.setattr(inline, "_torch_load_inline", lambda: torch_must_not_run)
    with pytest.raises(CudaCompileError) as info:  # a unit of its own lines alone: compiled in milliseconds
        inline.load_inline("ks_test_own_error", "int broken( { return 1; }", functions=None,
                           extra_ldflags=_unique_ldflags(), **WITHOUT_TORCH)
    assert info.value.in_own_code and "main.cpp" in str(info.value)


def _prebuild(source: str, tmp_path: Path, **request) -> dict:
    """Run a prebuild worker (no GPU) on `source` against p01; returns its updates."""
    from kernelskill.candidate import parse_candidate
    from kernelskill.problem import read_problem
    from kernelskill.review.reviewer import _request
    from kernelskill.review.sandbox import clean_environment, run_worker
    from kernelskill.settings import ReviewSettings

    problem = read_problem(Path(__file__).parents[1] / "data" / "problems" / "p01_pointwise_gelu_chain.py")
    candidate = parse_candidate(source, tmp_path / "candidate.py")
    settings = ReviewSettings(device="cpu")
    req = _request(problem, candidate, settings, "cpu", "cuda", **{"mode": "build", "arch": "9.0", **request})
    outcome = run_worker(req, settings.timeouts.model_dump(), tmp_path / "prebuild.log",
                         clean_environment({"CUDA_VISIBLE_DEVICES": ""}), reuse=False)
    return outcome.results.model_dump(exclude_unset=True)


def test_a_prebuild_builds_what_modelnew_loads_in_init_and_first_forward_without_running_its_warm_up(ext, tmp_path):
    # Published kernels often call load_inline in __init__ or on their first forward and warm up on full-size
    # inputs; on the CPU of a prebuild that took minutes per candidate (and held every prebuild slot of a bench on
    # the H200). The prebuild constructs and calls ModelNew on PyTorch's meta device: the extensions are built, the
    # warm-up costs nothing.
    source = textwrap.dedent(f'''
        import torch
        import torch.nn as nn
        from torch.utils.cpp_extension import load_inline


        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.ext = load_inline("ks_test_prebuild_init", {SOURCE!r}, functions={FUNCTIONS!r},
                                       extra_ldflags={_unique_ldflags()!r})
                self.lazy = None
                warm = torch.randn(4096, 4096)
                if warm.device.type != "meta":
                    raise RuntimeError("the warm-up ran on real data")

            def forward(self, x):
                if self.lazy is None:
                    self.lazy = load_inline("ks_test_prebuild_forward", {SOURCE!r}, functions={FUNCTIONS!r},
                                            extra_ldflags={_unique_ldflags()!r})
                return self.lazy.scale_add(x, 2.0)
        ''')
    updates = _prebuild(source, tmp_path)
    assert "prebuild_stopped" not in updates, updates.get("prebuild_stopped")
    assert [b["name"] for b in updates["prebuild"]] == ["ks_test_prebuild_init", "ks_test_prebuild_forward"]


def test_a_prebuild_builds_what_modelnew_loads_only_when_it_sees_a_gpu(ext, tmp_path):
    # Most published kernels build under `if torch.cuda.is_available():` and move tensors with `.cuda()` in their
    # constructors (CUDA-L1: 33 of 72 kernels that call load_inline). A prebuild sees no GPU; it answers as the
    # review's process would, so those builds are not left to the GPU's clock.
    source = textwrap.dedent(f'''
        import torch
        import torch.nn as nn
        from torch.utils.cpp_extension import load_inline

        if torch.cuda.is_available() and torch.cuda.get_device_capability() >= (9, 0):
            top = load_inline("ks_test_prebuild_gpu_module", {SOURCE!r}, functions={FUNCTIONS!r},
                              extra_ldflags={_unique_ldflags()!r})


        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.scale = torch.ones(4).cuda()
                self.bias = torch.zeros(4, device="cuda").to("cuda:0")
                torch.cuda.synchronize()
                if torch.cuda.is_available():
                    self.ext = load_inline("ks_test_prebuild_gpu_init", {SOURCE!r}, functions={FUNCTIONS!r},
                                           extra_ldflags={_unique_ldflags()!r})

            def forward(self, x):
                return self.ext.scale_add(x, 2.0)
        ''')
    updates = _prebuild(source, tmp_path, arch="9.0a")  # the H200's arch as its TORCH_CUDA_ARCH_LIST names it
    assert "prebuild_stopped" not in updates, updates.get("prebuild_stopped")
    assert [b["name"] for b in updates["prebuild"]] == ["ks_test_prebuild_gpu_module", "ks_test_prebuild_gpu_init"]


def test_a_prebuild_that_loops_in_modelnew_is_cut_off(tmp_path):
    source = textwrap.dedent('''
        import torch.nn as nn


        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                while True:
                    pass
        ''')
    start = time.monotonic()
    updates = _prebuild(source, tmp_path, prebuild_call_s=2)
    assert "TimeoutError" in updates["prebuild_stopped"] and time.monotonic() - start < 60
