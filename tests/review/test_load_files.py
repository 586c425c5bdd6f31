"""torch's `load` (an extension from files the candidate writes) in a folder named by its sources: the prebuild and
the review, each in a working folder of its own, build and find the same thing (review/cuda/load_files.py)."""

from __future__ import annotations

import shutil

import pytest

SOURCE = """#include <pybind11/pybind11.h>
int add_one(int x) { return x + 1; }
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("add_one", &add_one); }
"""


@pytest.mark.skipif(shutil.which("ninja") is None and shutil.which("c++") is None, reason="needs a C++ compiler")
def test_the_same_sources_written_in_another_folder_are_not_built_again(tmp_path, monkeypatch):
    from kernelskill.review.cuda import inline, load_files

    monkeypatch.setenv("KERNELSKILL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "torch_extensions"))
    load = load_files.stand_in("run")
    built = []
    for where in ("prebuild", "review"):  # two working folders, as a prebuild and its review have
        folder = tmp_path / where
        folder.mkdir()
        (folder / "ks_load_files_test.cpp").write_text(SOURCE)
        (folder / "helper.h").write_text("// a header beside it, copied too\n")
        module = load(name="ks_load_files_test", sources=[str(folder / "ks_load_files_test.cpp")],
                      extra_cflags=["-O1"])
        assert module.add_one(41) == 42
        record = inline.BUILDS[-1]
        so = next(record.so_path.glob("ks_load_files_test*.so"))
        built.append((record.so_path, so.stat().st_mtime_ns))
    (first_folder, first_mtime), (second_folder, second_mtime) = built
    assert first_folder == second_folder and (first_folder / "helper.h").exists()
    assert second_mtime == first_mtime  # ninja found it up to date: not built again


def test_a_call_torch_refuses_is_refused_the_same_way():
    from kernelskill.review.cuda import load_files

    with pytest.raises(TypeError):
        load_files.stand_in("run")(name="x", sources=[], code="__global__ void k() {}")  # CUDA-L1's L1/28 does this
