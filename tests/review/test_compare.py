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


def _float64_verdict(r, c, atol, rtol, strict):
    """What the comparison decides, computed the plain way: every element in float64."""
    r64, c64 = r.reshape(-1).double(), c.reshape(-1).double()
    bad = ~torch.isclose(c64, r64, rtol=rtol, atol=atol, equal_nan=True)
    strict_bad = ~torch.isclose(c64, r64, rtol=strict[1], atol=strict[0], equal_nan=True)
    diff = (c64 - r64).abs()
    finite = torch.isfinite(diff)
    rel = diff / r64.abs().clamp_min(torch.finfo(torch.float64).tiny)
    return {"bad": int(bad.sum()), "first": bad.nonzero()[:5, 0].tolist(), "strict_bad": int(strict_bad.sum()),
            "nonfinite": bool((bad & ~finite).any()), "abs": float(torch.where(finite, diff, 0.0).max()),
            "rel": float(torch.where(finite & (r64 != 0), rel, 0.0).max())}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_the_float32_pass_decides_no_element_float64_would_decide_otherwise(chunk, dtype):
    # elements placed on both sides of each tolerance by less than float32's rounding, NaN, Inf, zeros and
    # references too small for float32's relative error: every verdict must be float64's, element by element
    gen = torch.Generator().manual_seed(0)
    atol, rtol, strict = 1e-2, 1e-2, (1e-4, 1e-4)
    r = torch.randn(4000, generator=gen, dtype=torch.float64)
    r[::97] = 0.0
    r[5::89] = 1e-38
    r[6::89] = 1e-41  # below float32's normal range (float16 and bfloat16 make it 0)
    tol = atol + rtol * r.abs()
    stol = strict[0] + strict[1] * r.abs()
    step = torch.randint(0, 8, (4000,), generator=gen)
    near = torch.tensor([1 - 1e-6, 1 + 1e-6, 1 - 1e-4, 1.0, 0.5, 2.0, 1 - 1e-9, 1 + 1e-9], dtype=torch.float64)[step]
    which = torch.rand(4000, generator=gen) < 0.5
    c = r + torch.where(which, tol, stol) * near * torch.where(torch.rand(4000, generator=gen) < 0.5, 1.0, -1.0)
    c[7::211], r[9::307], c[11::401] = float("nan"), float("inf"), float("-inf")
    r, c = r.to(dtype), c.to(dtype)
    got = compare._compare_values(r, c, atol, rtol, strict=strict)
    want = _float64_verdict(r, c, atol, rtol, strict)
    assert (got.bad, got.first, got.strict_bad, got.nonfinite) == (want["bad"], want["first"], want["strict_bad"],
                                                                    want["nonfinite"])
    assert got.abs_err == pytest.approx(want["abs"], rel=1e-6)
    assert got.rel_err == pytest.approx(want["rel"], rel=1e-6)
    assert 0 < got.bad < 4000 and 0 < got.strict_bad < 4000


def test_the_relative_error_of_a_tiny_reference_is_float64s(chunk):
    # within the tolerance by atol, so no verdict turns on it; float32 would give its relative error wrongly
    r = torch.tensor([1e-38, 1.0])
    c = torch.tensor([1e-38 + 1e-3, 1.0])
    got = compare._compare_values(r, c, 1e-2, 1e-2)
    assert got.bad == 0
    assert got.rel_err == pytest.approx(float((c.double() - r.double())[0] / r.double()[0]), rel=1e-6)
