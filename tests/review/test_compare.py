"""compare_outputs works a chunk at a time (L2/34's 1e9-element output ran the GPU out of memory when compared whole);
the verdict, the errors and the first bad indices must not depend on where the chunks fall."""

import math

import pytest
import torch

from kernelskill.review import compare


@pytest.fixture(params=[3, 1 << 24])
def chunk(request, monkeypatch):
    monkeypatch.setattr(compare, "CHUNK", request.param)
    return request.param


def test_bad_elements_counted_and_located_across_chunks(chunk):
    ref = torch.zeros(4, 5)
    cand = ref.clone()
    cand[0, 4] = 1.0  # flat 4: the second chunk when chunks are 3 long
    cand[3, 0] = -2.0  # flat 15
    cmp = compare.compare_outputs(ref, cand, 1e-2, 1e-2, 0)
    assert not cmp.ok
    assert cmp.mismatch.mismatched == 2 and cmp.mismatch.total == 20
    assert cmp.mismatch.first_indices == [[0, 4], [3, 0]]
    assert cmp.mismatch.got == [1.0, -2.0] and cmp.mismatch.expected == [0.0, 0.0]
    assert cmp.max_abs_error == 2.0


def test_errors_of_a_passing_output_are_the_largest_over_all_chunks(chunk):
    ref = torch.arange(1, 11, dtype=torch.float32)
    cand = ref.clone()
    cand[8] += 1e-3  # the largest error in the last full chunk
    cmp = compare.compare_outputs(ref, cand, 1e-2, 1e-2, 0)
    assert cmp.ok
    assert cmp.max_abs_error == pytest.approx(1e-3, rel=1e-3)
    assert cmp.max_rel_error == pytest.approx(1e-3 / 9, rel=1e-3)


def test_nan_where_the_reference_is_finite_fails_and_matching_nan_passes(chunk):
    ref = torch.tensor([1.0, float("nan"), 3.0, 4.0, 5.0])
    same = ref.clone()
    assert compare.compare_outputs(ref, same, 1e-2, 1e-2, 0).ok
    bad = ref.clone()
    bad[4] = float("nan")
    cmp = compare.compare_outputs(ref, bad, 1e-2, 1e-2, 0)
    assert not cmp.ok and math.isinf(cmp.max_abs_error)
    assert "NaN/Inf" in cmp.mismatch.reason


def test_bool_and_zero_dim_outputs(chunk):
    assert compare.compare_outputs(torch.tensor([True, False, True, True]), torch.tensor([True, False, True, True]),
                                   0, 0, 0).ok
    cmp = compare.compare_outputs(torch.tensor([True, False, True, True]), torch.tensor([True, False, True, False]),
                                  0, 0, 0)
    assert cmp.mismatch.first_indices == [[3]]
    cmp = compare.compare_outputs(torch.tensor(1.0), torch.tensor(2.0), 1e-2, 1e-2, 0)
    assert cmp.mismatch.first_indices == [[]] and cmp.mismatch.got == [2.0]
