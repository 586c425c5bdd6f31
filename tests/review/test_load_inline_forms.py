"""Reading a load_inline call as torch does (review/cuda/inline.py): no compiler needed.

The builds themselves, one per form, are in test_cuda_build.py.
"""

from __future__ import annotations

import os

import pytest

from kernelskill.review.cuda import plan
from kernelskill.review.cuda.inline import bind, split_flags, torch_signature

CPP = "torch::Tensor f(torch::Tensor x) { return x; }"


def _plan(*args, **kwargs) -> plan.BuildPlan:
    return plan.plan_build(**{k: v for k, v in bind(*args, **kwargs).build_kwargs().items() if k != "verbose"},
                           arch="9.0")


@pytest.mark.parametrize("given,expected", [
    ([""], []), (["  "], []), ([" -O3 "], ["-O3"]), (["-O3 --use_fast_math"], ["-O3", "--use_fast_math"]),
    (["-DX='a b'"], ["-DX=a b"]), ("-O3 -g", ["-O3", "-g"]), (None, []), ((), []),
])
def test_flags_are_split_as_the_shell_in_torchs_ninja_file_would(given, expected):
    assert split_flags(given) == expected


def test_blank_flags_reach_no_compiler_or_linker():
    plan = _plan("x", CPP, functions=["f"], extra_cflags=[""], extra_cuda_cflags=[" "], extra_ldflags=[""])
    assert "" not in plan.cpp.argv and "" not in plan.link_flags and "" not in plan.pch_flags
    assert plan.key == _plan("x", CPP, functions=["f"]).key  # the same build as without them


def test_sources_as_a_string_or_a_list_are_the_same_build():
    one = _plan("x", CPP, "__global__ void k() {}", functions="f")
    two = _plan("x", [CPP], ["__global__ void k() {}"], functions=["f"])
    assert one.key == two.key


@pytest.mark.parametrize("functions", ["f", ["f"], ("f",), {"f": "doc"}])
def test_functions_in_every_form_get_bindings(functions):
    assert 'm.def("f"' in _plan("x", CPP, functions=functions).cpp.text


def test_functions_of_another_type_are_refused_as_torch_refuses_them():
    with pytest.raises(ValueError, match="list or dict"):
        bind("x", CPP, functions=42)


def test_options_that_do_not_change_the_binary_are_accepted():
    call = bind("x", CPP, functions=["f"], build_directory="/tmp/elsewhere", verbose=True, keep_intermediates=False,
                use_pch=True, with_pytorch_error_handling=False, is_python_module=False)
    assert call.build_directory == "/tmp/elsewhere" and call.verbose and not call.is_python_module
    assert call.ignored == {"keep_intermediates": False, "use_pch": True}


def test_include_paths_are_made_absolute_as_torch_does(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    call = bind("x", CPP, extra_include_paths=["inc", " ", str(tmp_path / "abs")])
    assert call.extra_include_paths == [str(tmp_path / "inc"), os.path.abspath(" ".strip()), str(tmp_path / "abs")]


def test_positional_arguments_follow_torchs_own_order():
    params = list(torch_signature().parameters)
    args = ["x", CPP, "__global__ void k() {}"] + [None] * (params.index("functions") - 3) + [["f"]]
    call = bind(*args)
    assert call.functions == ["f"] and call.cuda_sources.startswith("__global__")


def test_a_call_torch_refuses_is_refused_the_same_way():
    with pytest.raises(TypeError):
        bind("x", CPP, no_such_option=True)
    with pytest.raises(TypeError):
        bind(cpp_sources=CPP)  # no name


def test_with_cuda_false_links_no_cuda_runtime():
    plan = _plan("x", CPP, functions=["f"], with_cuda=False)
    assert "-lcudart" not in plan.link_flags and not plan.with_cuda
