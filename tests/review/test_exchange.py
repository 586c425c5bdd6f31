"""The file format across the trust boundary (review/exchange.py): what a runner writes is read by the judge without
running anything, and a file made to mislead it is an ExchangeError (counted against the candidate), never a crash
of the judge or a value it did not hold."""

from __future__ import annotations

import json
import struct

import pytest
import torch

from kernelskill.review import exchange
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


def test_device_tensors_go_to_the_host_in_chunks_of_one_device_at_a_time(monkeypatch):
    # a batch's commit copied each of thousands of outputs to the host on its own; now consecutive tensors of one
    # device go together, up to CHUNK_BYTES (one larger alone), and a host tensor is never gathered
    from kernelskill.review import exchange

    monkeypatch.setattr(exchange, "CHUNK_BYTES", 64)
    meta = [torch.empty(4, device="meta") for _ in range(5)]  # 16 bytes each
    big = torch.empty(100, device="meta")
    host = torch.zeros(4)
    chunks = exchange._chunks([*meta, big, host, meta[0]])
    assert [len(c) for c in chunks] == [4, 1, 1, 1, 1]
    assert chunks[1][0] is meta[4] and chunks[2][0] is big and chunks[3][0] is host


def test_a_batch_of_mixed_dtypes_reads_back_exactly_whatever_the_alignment(tmp_path):
    path = tmp_path / "batch.bin"
    calls = [[torch.randn(3, dtype=torch.float16), torch.arange(5, dtype=torch.int64), 1.5,
              (torch.tensor([True]), torch.randn(2, 2, dtype=torch.complex64))] for _ in range(4)]
    write_outputs(path, calls)
    got = read_outputs(path, max_bytes=1 << 20, items=[3, 0], max_tensors=100, device=torch.device("cpu"))
    for want, have in zip([calls[3], calls[0]], got):
        assert torch.equal(want[0], have[0]) and torch.equal(want[1], have[1]) and have[2] == 1.5
        assert torch.equal(want[3][0], have[3][0]) and torch.equal(want[3][1], have[3][1])


def test_threads_reading_outputs_at_once_each_get_their_own_bytes(tmp_path, monkeypatch):
    # the judge compares several reviews' outputs at once (several GPUs, or reviews sharing one GPU): with one host
    # buffer for the whole process, one thread's bytes went to the device as another's (honest kernels failed the
    # judge's trials on an H100 with three reviews on one GPU)
    import threading

    monkeypatch.setattr(exchange, "CHUNK_BYTES", 1 << 10)  # many chunks a read: many chances to interleave
    files = []
    for k in range(4):
        path = tmp_path / f"{k}.bin"
        path.write_bytes(bytes([k]) * (1 << 16))
        files.append(path)
    wrong: list[int] = []

    def read(k: int) -> None:
        for _ in range(30):
            with open(files[k], "rb") as f:
                blob = exchange._to_device(f, 0, 1 << 16, "cpu")
            if not bool((blob == k).all()):
                wrong.append(k)

    threads = [threading.Thread(target=read, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not wrong, f"reads given another thread's bytes: {len(wrong)}"


def test_a_masked_batch_file_gives_its_inputs_only_with_the_key(tmp_path):
    # the judge's batch: a runner's `prepare` loads the input file masked and learns the key only with `calls`, so
    # nothing it computes before its timed calls is computed on the inputs
    sets = [[torch.randn(3, 5), torch.arange(7, dtype=torch.int16), 2.0, (torch.tensor([True]),)] for _ in range(6)]
    write_outputs(tmp_path / "inputs.bin", sets, mask=(12345, "cpu"))
    got, buffer, words = exchange.read_batch(tmp_path / "inputs.bin", 4, "cpu")
    assert len(got) == 4 and not torch.equal(got[0][0], sets[0][0]) and got[0][2] == 2.0
    assert all(t.untyped_storage().data_ptr() == buffer.untyped_storage().data_ptr() for t in (got[1][0], got[3][1]))
    exchange.unmask(buffer, 12345, words)
    for want, have in zip(sets, got):
        assert torch.equal(want[0], have[0]) and torch.equal(want[1], have[1]) and torch.equal(want[3][0], have[3][0])
    wrong, buffer, words = exchange.read_batch(tmp_path / "inputs.bin", 4, "cpu")
    exchange.unmask(buffer, 12346, words)
    assert not torch.equal(wrong[0][0], sets[0][0])


def test_the_digests_a_runner_says_are_those_the_judge_reads_back(tmp_path):
    # worker/judged._Kept sums each output's bytes a block at a time on the runner's device; the judge sums the
    # file's, tensor by tensor (exchange.digest): the same number, for calls that keep the first call's form or not
    from kernelskill.review.worker.judged import _Kept

    outs = [(torch.randn(4, 3, dtype=torch.float16), torch.randn(5), torch.tensor(3, dtype=torch.int8))
            for _ in range(6)]
    outs[3] = (torch.randn(2),)  # another form: digested alone
    kept = _Kept(torch, 6)
    for i, out in enumerate(outs):
        kept.add(i, out)
    said = kept.digests()
    write_outputs(tmp_path / "outputs.bin", kept.trees)
    back = read_outputs(tmp_path / "outputs.bin", 1 << 30, list(range(6)), max_tensors=100)
    assert said == [exchange.digest(v) for v in back]
    changed = (back[0][0], back[0][1].clone().index_fill_(0, torch.tensor([2]), 0.5), back[0][2])
    assert exchange.digest(changed) != said[0]


def test_sampled_elements_are_the_files_elements_at_the_positions_asked_for(tmp_path):
    # the judge holds calls it does not compare whole to the reference at positions it draws after the fact: what
    # read_samples gives must be the file's elements there, for every dtype, a 0-d tensor, and numbers between them
    import numpy as np

    calls = [(torch.arange(24, dtype=dtype).reshape(2, 3, 4) * (i + 1), 7, torch.tensor(2.5 * i))
             for i, dtype in enumerate((torch.float32, torch.bfloat16, torch.int64, torch.float16))]
    write_outputs(tmp_path / "b.bin", calls)
    asked: list = []

    def choose(call, k, dtype, shape):
        asked.append((call, k, str(dtype), shape))
        return np.array([0, 5, 23], dtype=np.int64) if shape else np.array([0], dtype=np.int64)

    got = exchange.read_samples(tmp_path / "b.bin", 1 << 20, [3, 1], 64, choose)
    assert asked == [(3, 0, "torch.float16", [2, 3, 4]), (3, 1, "torch.float32", []),
                     (1, 0, "torch.bfloat16", [2, 3, 4]), (1, 1, "torch.float32", [])]
    for (value, shapes), i in zip(got, (3, 1)):
        full = calls[i][0].reshape(-1)
        assert torch.equal(value[0], full[[0, 5, 23]]) and value[0].dtype == full.dtype
        assert value[1] == 7 and torch.equal(value[2], calls[i][2].reshape(1))
        assert shapes == [(str(full.dtype).removeprefix("torch."), [2, 3, 4]), ("float32", [])]


def test_positions_withheld_read_nothing_and_a_bad_header_is_refused_first(tmp_path):
    import numpy as np

    write_outputs(tmp_path / "b.bin", [torch.ones(8), torch.ones(8)])
    (value, shapes), = exchange.read_samples(tmp_path / "b.bin", 1 << 20, [0], 64, lambda *a: None)
    assert value.numel() == 0 and shapes == [("float32", [8])]
    with pytest.raises(ExchangeError):
        exchange.read_samples(tmp_path / "b.bin", 16, [0], 64, lambda *a: np.arange(8))  # more bytes than allowed
    with pytest.raises(ExchangeError):
        exchange.read_samples(tmp_path / "b.bin", 1 << 20, [2], 64, lambda *a: np.arange(8))  # a call not held


def test_sampled_comparison_names_the_call_and_the_element_where_outputs_differ(tmp_path):
    from kernelskill.review.exchange import BATCH_OUTPUTS
    from kernelskill.review.judge_files import compare_samples

    ref, cand = tmp_path / "ref", tmp_path / "cand"
    ref.mkdir(), cand.mkdir()
    good = [torch.arange(60, dtype=torch.float32).reshape(3, 4, 5) + i for i in range(4)]
    write_outputs(ref / BATCH_OUTPUTS, good)
    bad = [t.clone() for t in good]
    bad[2][1, 2, 3] = -1.0
    write_outputs(cand / BATCH_OUTPUTS, bad)
    why, mismatch = compare_samples(ref, cand, [0, 1, 2, 3], 1e-4, 1e-4, 1 << 20, (4, 4), per_tensor=60)
    assert why.startswith("call 3, at 60 sampled positions") and mismatch.first_indices == [[1, 2, 3]], why
    assert mismatch.got == [-1.0] and mismatch.total == 60
    assert why.endswith("(at (1, 2, 3) got -1, expected 35)"), why  # the values, for the user and the agents
    assert compare_samples(ref, cand, [0, 1, 3], 1e-4, 1e-4, 1 << 20, (4, 4), per_tensor=60) == (None, None)
    # a made-up call is caught at a few of its positions; a call whose outputs have another shape, by that
    write_outputs(cand / BATCH_OUTPUTS, [*good[:3], torch.zeros(3, 4, 5)])
    why, _ = compare_samples(ref, cand, [3], 1e-4, 1e-4, 1 << 20, (4, 4), per_tensor=4)
    assert why and why.startswith("call 4, at 4 sampled positions"), why
    write_outputs(cand / BATCH_OUTPUTS, [*good[:3], torch.zeros(3, 20)])
    why, _ = compare_samples(ref, cand, [3], 1e-4, 1e-4, 1 << 20, (4, 4), per_tensor=4)
    assert why == "call 4's outputs are float32 (3, 20), the reference's float32 (3, 4, 5)", why

