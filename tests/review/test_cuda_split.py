"""The split CUDA unit (review/cuda/split.py): a source cut into a torch-free device part for nvcc and a torch host
part for the host compiler. What must hold: only sources whose cut is clear are cut; a launch becomes nvcc's own
launch expression; both parts keep the candidate's line numbers; a split that fails never gives the candidate's
verdict (the unsplit variants follow); keys cover both parts; and real public kernels compile through it."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from kernelskill.review.cuda import build
from kernelskill.review.cuda.plan import SPLIT_HOST_HEADERS, Unit, declarations_only, plan_build, split_units
from kernelskill.review.cuda.nvcc_host import NVCC_HOST_HELPERS
from kernelskill.review.cuda.split import split, why_not
from kernelskill.review.cuda.toolchain import Runner

DATA = Path(__file__).parents[1] / "data"
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")

KERNEL = """#include <torch/extension.h>
#include <cuda_runtime.h>
#define BLOCK 256

__global__ void __launch_bounds__(BLOCK) scale_kernel(const float* __restrict__ x, float* y, float s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fminf(x[i] * s, FLT_MAX);  // FLT_MAX without <cfloat>, as the unit nvcc gets from load_inline
}

torch::Tensor scale(torch::Tensor x, double s) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    scale_kernel<<<(n + BLOCK - 1) / BLOCK, BLOCK, 0, 0>>>(x.data_ptr<float>(), y.data_ptr<float>(), (float)s, n);
    return y;
}
"""


# ------------------------------------------------------------------------------------------------------ the cut itself
def test_a_plain_candidate_is_cut_with_nvccs_launch_expression_and_its_line_numbers():
    parts = split(KERNEL)
    assert parts is not None and parts.kernels == ["scale_kernel"] and parts.launches == 1
    # every line keeps its number in both parts: the compilers' errors point at the candidate's lines
    assert parts.device.count("\n") == parts.host.count("\n") == KERNEL.count("\n")
    device, host = parts.device.splitlines(), parts.host.splitlines()
    assert "torch" not in parts.device and "<<<" not in parts.host
    assert device[4].startswith("__global__ void __launch_bounds__(BLOCK) scale_kernel(")  # line 5, as written
    assert host[4].strip() == "void  scale_kernel(const float* __restrict__ x, float* y, float s, int n);"
    assert host[12].strip() == ("((__cudaPushCallConfiguration((n + BLOCK - 1) / BLOCK, BLOCK, 0, 0)) ? (void)0 : "
                                "scale_kernel(x.data_ptr<float>(), y.data_ptr<float>(), (float)s, n));")
    assert device[0] == host[0] == ""  # <torch/extension.h>: the host part has the precompiled header instead
    assert device[2] == host[2] == "#define BLOCK 256"  # macros, includes, types: in both parts
    assert "torch::empty_like" in host[10] and device[10] == ""


def test_a_c_linkage_kernel_is_declared_with_its_linkage():
    source = KERNEL.replace("__global__ void __launch_bounds__(BLOCK)", 'extern "C" __global__ void')
    parts = split(source)
    assert parts is not None, why_not(source)
    assert parts.host.splitlines()[4].strip() == \
        'extern "C"  void scale_kernel(const float* __restrict__ x, float* y, float s, int n);'


TEMPLATED = KERNEL.replace("__global__ void __launch_bounds__(BLOCK) scale_kernel(const float* __restrict__ x, float* y,"
                            " float s, int n)", "template <typename T, int UNROLL = 4>\n__global__ void scale_kernel("
                            "const T* __restrict__ x, T* y, T s, int n)").replace(
    "    scale_kernel<<<(n + BLOCK - 1) / BLOCK, BLOCK, 0, 0>>>(x.data_ptr<float>(), y.data_ptr<float>(), (float)s, n);",
    "    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), \"scale\", ([&] { scale_kernel<scalar_t><<<n / BLOCK + 1, "
    "min(BLOCK, n)>>>(\n        x.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), (scalar_t)s, n); }));")


def test_a_kernel_template_is_declared_as_one_and_its_launches_keep_their_arguments():
    parts = split(TEMPLATED)
    assert parts is not None and parts.templates == ["scale_kernel"], why_not(TEMPLATED)
    host = parts.host.splitlines()
    assert host[4:6] == ["template <typename T, int UNROLL = 4>",
                         " void scale_kernel(const T* __restrict__ x, T* y, T s, int n);"]
    assert ("((__cudaPushCallConfiguration(n / BLOCK + 1, min(BLOCK, n))) ? (void)0 : scale_kernel<scalar_t>("
            in parts.host)
    assert parts.device.count("\n") == parts.host.count("\n") == TEMPLATED.count("\n")
    assert split(TEMPLATED.replace("scale_kernel<scalar_t><<<", "other<scalar_t><<<")) is None  # not its kernel


def test_a_source_with_its_own_bindings_has_its_host_part_compiled_against_torch_extension_h():
    module = '\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("scale", &scale, "scale"); }\n'
    plan = plan_build("own_module", "", KERNEL + module, arch="9.0")
    assert [u.variant for u in plan.cuda] == ["split-extension", "exact"]
    assert "#include <torch/extension.h>" in plan.cuda[0].host_header
    assert "PYBIND11_MODULE" in plan.cuda[0].host_text and "PYBIND11" not in plan.cuda[0].text
    # without its own include of <torch/extension.h>, torch's compile fails: so is ours, never a split that passes
    plan = plan_build("own_module", "", KERNEL.replace("#include <torch/extension.h>", "") + module, arch="9.0")
    assert [u.variant for u in plan.cuda] == ["exact"]


SYMBOLS = KERNEL.replace("#define BLOCK 256\n", """#define BLOCK 256
__constant__ float bias[4] = {0, 0, 0, 0};
__device__ unsigned int calls;
__constant__ float unused[2], also_unused[2];
""").replace("fminf(x[i] * s, FLT_MAX)", "fminf(x[i] * s + bias[i % 4], FLT_MAX); if (i == 0) atomicAdd(&calls, 1u)"
).replace("    return y;\n", """    float host_bias[4] = {1, 2, 3, 4};
    cudaMemcpyToSymbol(bias, host_bias, sizeof(bias));
    unsigned int zero = 0;
    cudaMemcpyToSymbol(calls, &zero, sizeof(zero));
    cudaFuncSetAttribute(scale_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 0);
    return y;
""")


def test_device_variables_the_host_part_names_reach_it_through_the_device_parts_object():
    """cudaMemcpyToSymbol(bias, ...) in host code takes the address of nvcc's host shadow of `bias`, which only the
    device part's object has (a local symbol): the device part hands it out, the host part binds a reference of the
    variable's own type and name to it, on the declaration's line."""
    parts = split(SYMBOLS)
    assert parts is not None, why_not(SYMBOLS)
    assert parts.device.count("\n") == parts.host.count("\n") == SYMBOLS.count("\n")
    device, host = parts.device.splitlines(), parts.host.splitlines()
    assert device[3] == ("__constant__ float bias[4] = {0, 0, 0, 0}; "
                         "void* kernelskill_symbol_bias() { return (void*)&bias; }")
    assert host[3] == ("namespace kernelskill_symbols { extern float bias [ 4 ]; } void* kernelskill_symbol_bias(); "
                       "static decltype(kernelskill_symbols::bias)& bias = "
                       "*static_cast<decltype(kernelskill_symbols::bias)*>(kernelskill_symbol_bias());")
    assert "extern unsigned int calls;" in host[4] and "return (void*)&calls;" in device[4]
    assert device[5] == "__constant__ float unused[2], also_unused[2];" and host[5] == ""  # not named by host code


REFUSED = {
    "a conditional": ("#ifdef FAST\n#define N 4\n#endif\n", "preprocessor line"),
    "nvcc's macros": ("#define ON_GPU __CUDA_ARCH__\n", "nvcc's own macros"),
    "a raw string": ('const char* s = R"(x)";\n', "raw string"),
    "a namespace": ("namespace k { __global__ void f(float* x) {} }\n", "namespace"),
    "an extern kernel": ("extern __global__ void f(float* x);\n", "static, inline or extern"),
    "an extern block": ('extern "C" { __global__ void f(float* x) { x[0] = 1; } }\n', "extern block"),
    "a static kernel": ("static __global__ void f(float* x) { x[0] = 1; }\n", "static, inline or extern"),
    "a mutable global": ("int counter = 0;\n", "does not place"),
    "torch in device code": ("__device__ float g(at::Half h) { return h; }\n", "device code that uses torch"),
    "a launch of a pointer": ("void (*p)(float*);\nvoid go(torch::Tensor t) { p<<<1, 1>>>(t.data_ptr<float>()); }\n",
                              "other than one of the source's kernels"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_source_whose_cut_is_not_clear_is_not_cut(name):
    snippet, reason = REFUSED[name]
    source = KERNEL + snippet
    assert split(source) is None and reason in why_not(source)
    assert split_units(source) is None
    assert not any(u.host_text for u in plan_build("refused", "", source, arch="9.0").cuda)


def test_the_plan_tries_the_split_first_and_keys_both_parts():
    plan = plan_build("cut", "torch::Tensor scale(torch::Tensor x, double s);", KERNEL, functions=["scale"],
                      arch="9.0")
    assert [u.variant for u in plan.cuda] == ["split", "split-types", "core", "types.h", "exact"]
    first = plan.cuda[0]
    assert first.host_header == SPLIT_HOST_HEADERS["split"] and "__cudaPushCallConfiguration" in first.host_header
    assert plan.cuda[1].host_header == SPLIT_HOST_HEADERS["split-types"]
    assert "#include <torch/types.h>" in plan.cuda[1].host_header
    # a change to the host code alone (same device part) is a new key for both split units
    other = plan_build("cut", "torch::Tensor scale(torch::Tensor x, double s);",
                       KERNEL.replace("auto y = torch::empty_like(x);", "auto y = torch::zeros_like(x);"),
                       functions=["scale"], arch="9.0")
    assert other.cuda[0].text == first.text and other.cuda[0].host_text != first.host_text
    assert other.cuda[0].key != first.key and other.cuda[1].key != plan.cuda[1].key
    assert len({u.key for u in plan.cuda}) == len(plan.cuda)
    # requires_grad rules the core prelude out (see plan._OTHER_TORCH_INCLUDE): only what torch includes
    grad = KERNEL.replace("torch::empty_like(x);", "torch::empty_like(x).set_requires_grad(x.requires_grad());")
    assert [u.variant for u in plan_build("g", "", grad, arch="9.0").cuda] == ["split-types", "types.h", "exact"]


# --------------------------------------------------------------------------------------------------------- fallbacks
def _units(variants) -> list[Unit]:
    tag = uuid.uuid4().hex  # new keys: nothing in the object cache
    return [Unit("cuda", v, "cuda.cu", v, ["nvcc"], f"{tag}-{v}", host_text="host" if v.startswith("split") else "")
            for v in variants]


@pytest.fixture
def fake_compile(monkeypatch, tmp_path):
    from kernelskill.review.cuda.compile import CompiledObject, UnitFailed

    monkeypatch.setenv("KERNELSKILL_CACHE", str(tmp_path / "cache"))
    state = {"tried": [], "failing": {}}

    def compile_unit(unit, directory, **kwargs):
        state["tried"].append(unit.variant)
        if unit.variant in state["failing"]:
            raise UnitFailed(unit, state["failing"][unit.variant], "log")
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "cuda.o").write_bytes(b"object")
        return CompiledObject(directory / "cuda.o", "log", 0.1, False)

    monkeypatch.setattr(build, "compile_unit", compile_unit)
    return state


ALL = ("split", "split-types", "core", "types.h", "exact")
MISSING = "host.cpp:43:14: error: no match for 'operator/' (operand types are 'at::Tensor' and 'at::Tensor')"
SYNTAX = "cuda.cu(8): error: expected a \";\""


@pytest.mark.parametrize("failing, tried", [
    # short of a declaration: against what torch includes; core (the same prelude) is passed over
    ({"split": MISSING}, ["split", "split-types"]),
    ({"split": MISSING, "split-types": MISSING}, ["split", "split-types", "types.h"]),
    # any other error: the other split is passed over, the unsplit variants follow as before, whatever the error
    ({"split": SYNTAX}, ["split", "core"]),
    ({"split": SYNTAX, "core": SYNTAX}, ["split", "core", "exact"]),
])
def test_a_split_that_fails_gives_way_to_the_next_variant(fake_compile, tmp_path, failing, tried):
    fake_compile["failing"] = failing
    unit, obj = build._object_for(_units(ALL), tmp_path / "b", Runner(), None, True)
    assert fake_compile["tried"] == tried and unit.variant == tried[-1]
    assert "cut into a device part and a host part (split) failed" in obj.notes[0]


def test_a_split_never_gives_the_candidates_verdict(fake_compile, tmp_path):
    from kernelskill.review.cuda.compile import UnitFailed

    # even an error that would skip a narrowed unit straight to torch's is no verdict when it is the split's
    fake_compile["failing"] = {"split": SYNTAX, "split-types": SYNTAX, "core": SYNTAX, "exact": SYNTAX}
    with pytest.raises(UnitFailed) as info:
        build._object_for(_units(ALL), tmp_path / "c", Runner(), None, True)
    assert info.value.unit.variant == "exact" and fake_compile["tried"] == ["split", "core", "exact"]


# -------------------------------------------------------------------------------------------------- the C++ bindings
@pytest.mark.parametrize("source, narrowed", [
    ("torch::Tensor scale(torch::Tensor x, double s);", True),
    ("#include <torch/extension.h>\nstd::vector<at::Tensor> f(const torch::Tensor& a, int64_t n, bool b);\n"
     "std::tuple<torch::Tensor, torch::Tensor> g(torch::Tensor x);", True),
    ("torch::Tensor f(std::optional<torch::Tensor> bias);", False),  # a caster the bindings header may not hold
    ("torch::Tensor f(torch::Tensor x) { return x; }", False),  # a definition: compiled as torch does
    ("c10::ScalarType f(torch::Tensor x);", False),
    ("", False),
])
def test_only_plain_declarations_get_the_narrow_bindings_unit(source, narrowed):
    assert declarations_only(source) is narrowed
    plan = plan_build("b", source, KERNEL, functions=["scale"], arch="9.0")
    assert [u.variant for u in plan.cpp_units] == (["bindings", "exact"] if narrowed else ["exact"])


# ------------------------------------------------------------------------------------------- real kernels, compiled
def _strings(path: Path) -> dict[str, str]:
    tree = ast.parse(path.read_text())
    return {target.id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
            for target in node.targets if isinstance(target, ast.Name)}


@pytest.mark.slow
@needs_nvcc
def test_kernelbenchs_example_kernel_compiles_split(monkeypatch, tmp_path):
    """KernelBench's own prompt example (tests/data/public/kernelbench, unchanged) compiles through the split, the
    host part against its precompiled header."""
    monkeypatch.setenv("KERNELSKILL_CACHE", os.environ.get("KERNELSKILL_CACHE") or str(tmp_path / "cache"))
    sources = _strings(DATA / "public/kernelbench/model_new_ex_add.py")
    fresh = f"\n// {uuid.uuid4().hex}\n"  # a new key (nothing from the object cache), the same flags and headers
    built = build.build_inline("elementwise_add", sources["elementwise_add_cpp_source"],
                               sources["elementwise_add_source"] + fresh, functions=["elementwise_add_cuda"],
                               arch="9.0", link=False, verbose=False)
    assert built.cuda_variant == "split", built.notes
    assert "cuda.split-host" in built.steps and "cuda.split-join" in built.steps  # the host part by g++, joined


@pytest.mark.slow
@needs_nvcc
def test_device_variables_named_by_host_code_compile_split_and_leave_no_accessor_undefined(monkeypatch, tmp_path):
    monkeypatch.setenv("KERNELSKILL_CACHE", os.environ.get("KERNELSKILL_CACHE") or str(tmp_path / "cache"))
    unit = plan_build("symbols", "", SYMBOLS + f"// {uuid.uuid4().hex}\n", arch="9.0").cuda[0]
    from kernelskill.review.cuda.compile import compile_unit

    built = compile_unit(unit, tmp_path / "build")
    assert unit.variant == "split" and "split-host" in built.phases
    symbols = subprocess.run(["nm", "-C", str(built.path)], capture_output=True, text=True, check=True).stdout
    assert "T kernelskill_symbol_bias()" in symbols and "T kernelskill_symbol_calls()" in symbols
    assert not [ln for ln in symbols.splitlines() if ln.split()[0] == "U" and "kernelskill_symbol" in ln]


@pytest.mark.slow
@needs_nvcc
def test_a_joined_object_missing_what_the_host_part_calls_gives_way(monkeypatch, tmp_path):
    """The joined object is checked before it is taken: a host part that calls an accessor (or a kernel) the device
    part does not define fails this unit, so the next variant builds, instead of failing the import later."""
    monkeypatch.setenv("KERNELSKILL_CACHE", os.environ.get("KERNELSKILL_CACHE") or str(tmp_path / "cache"))
    unit = plan_build("symbols", "", SYMBOLS + f"// {uuid.uuid4().hex}\n", arch="9.0").cuda[0]
    unit.text = unit.text.replace("void* kernelskill_symbol_calls() { return (void*)&calls; }", "")
    from kernelskill.review.cuda.compile import UnitFailed, compile_unit

    with pytest.raises(UnitFailed) as failed:
        compile_unit(unit, tmp_path / "build")
    assert "does not define: kernelskill_symbol_calls()" in failed.value.output


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not on PATH")
def test_host_code_gets_nvccs_min_and_max(tmp_path):
    """nvcc's implicit headers give host code a global min and max (a launcher's `min(65535, blocks)`); the host
    compiler alone has none. The split's host headers declare the same overloads, with nvcc's results: mixed signed
    and unsigned compare as unsigned, floats as fminf/fmaxf."""
    program = tmp_path / "minmax.cpp"
    program.write_text(NVCC_HOST_HELPERS + """
#include <stdio.h>
int main() {
    long blocks = 100000;
    printf("%d %u %ld %lld %g %g %d\\n", min(65535, 7), min(-1, 1u), max(blocks, 3L), min(-5LL, 2LL),
           max(1.5f, NAN), min(2.0, 1.0f), max(3, -4));
}
""")
    subprocess.run(["g++", "-o", str(tmp_path / "minmax"), str(program)], check=True, capture_output=True)
    out = subprocess.run([str(tmp_path / "minmax")], check=True, capture_output=True, text=True).stdout.split()
    assert out == ["7", "1", "100000", "-5", "1.5", "1", "3"]


@pytest.mark.slow
@needs_nvcc
def test_a_kernel_template_is_instantiated_in_the_device_part_for_what_the_host_part_launches(monkeypatch, tmp_path):
    """The host part, compiled first, names the instances it launches (float and double through AT_DISPATCH); the
    device part instantiates exactly those, with stubs the host part links to. The joined object leaves no kernel
    undefined (the check that sends a split whose stubs stay private to the next variant)."""
    monkeypatch.setenv("KERNELSKILL_CACHE", os.environ.get("KERNELSKILL_CACHE") or str(tmp_path / "cache"))
    unit = plan_build("tmpl", "", TEMPLATED + f"// {uuid.uuid4().hex}\n", arch="9.0").cuda[0]
    from kernelskill.review.cuda.compile import compile_unit

    built = compile_unit(unit, tmp_path / "build")
    assert unit.variant == "split" and "split-host" in built.phases
    device = (tmp_path / "build" / "cuda.cu").read_text()
    assert device.endswith("template __global__ void scale_kernel<double, 4>(double const*, double*, double, int);\n"
                           "template __global__ void scale_kernel<float, 4>(float const*, float*, float, int);\n")
    symbols = subprocess.run(["nm", "-C", str(built.path)], capture_output=True, text=True, check=True).stdout
    assert "W void scale_kernel<float, 4>(float const*, float*, float, int)" in symbols
    assert not [ln for ln in symbols.splitlines() if ln.split()[0] == "U" and "scale_kernel" in ln]
