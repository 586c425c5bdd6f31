"""The file format across the trust boundary (review/exchange.py): what a runner writes is read by the judge without
running anything, and a file made to mislead it is an ExchangeError (counted against the candidate), never a crash
of the judge or a value it did not hold."""

from __future__ import annotations

import json
import struct

import pytest
import torch

from kernelskill.review.exchange import MAGIC, ExchangeError, read_outputs, write_outputs


def _batch(path, calls=5):
    outputs = [(torch.full((3,), float(i)), i, None) for i in range(calls)]
    write_outputs(path, outputs)
    return outputs


def test_a_batch_file_gives_back_the_calls_asked_for_in_that_order(tmp_path):
    path = tmp_path / "outputs.bin"
    _batch(path)
    got = read_outputs(path, max_bytes=1 << 20, items=[4, 1])
    assert [g[1] for g in got] == [4, 1]
    assert torch.equal(got[0][0], torch.full((3,), 4.0)) and got[0][2] is None


def test_a_call_the_batch_does_not_hold_is_an_exchange_error(tmp_path):
    path = tmp_path / "outputs.bin"
    _batch(path, calls=3)
    with pytest.raises(ExchangeError, match="holds 3 calls"):
        read_outputs(path, max_bytes=1 << 20, items=[3])


def test_a_file_that_is_not_a_list_is_not_a_batch(tmp_path):
    path = tmp_path / "outputs.bin"
    write_outputs(path, torch.zeros(2))
    with pytest.raises(ExchangeError, match="list of calls"):
        read_outputs(path, max_bytes=1 << 20, items=[0])


def _forged(path, entries, tree, data=b""):
    header = json.dumps({"tree": tree, "tensors": entries}).encode()
    path.write_bytes(MAGIC + struct.pack("<Q", len(header)) + header + data)


def test_a_tensor_that_points_past_the_end_of_the_file_is_refused_before_anything_is_read(tmp_path):
    # the entry the judge does not ask for is checked too: a batch cannot hide a bad entry among calls never picked
    path = tmp_path / "outputs.bin"
    entries = [{"dtype": "float32", "shape": [1], "offset": 0, "nbytes": 4},
               {"dtype": "float32", "shape": [1 << 20], "offset": 4, "nbytes": 4 << 20}]
    _forged(path, entries, {"seq": [{"t": 0}, {"t": 1}], "tuple": False}, data=b"\0" * 8)
    with pytest.raises(ExchangeError, match="truncated"):
        read_outputs(path, max_bytes=1 << 30, items=[0])


def test_more_tensors_than_a_batch_may_hold_are_refused(tmp_path):
    path = tmp_path / "outputs.bin"
    write_outputs(path, [torch.zeros(1) for _ in range(10)])
    with pytest.raises(ExchangeError, match="too many tensors"):
        read_outputs(path, max_bytes=1 << 20, items=[0], max_tensors=9)
    assert len(read_outputs(path, max_bytes=1 << 20, items=range(10), max_tensors=10)) == 10
