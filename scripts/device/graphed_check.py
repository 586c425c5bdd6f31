"""The graphed protocol's Timer on the GPU, in this process: copies of torch's tanh on 16 x 16384 floats timed with
graphs=True and without, the kept outputs checked; prints what was captured and each copy's median, or the
traceback. Session 21 (H100): with graphs the copy timed (and captured) second ran 2.3% slower than the first
(2.646 against 2.586 us), as the candidate side of reviews whose candidate is torch's own op ran 1.5% slower; the
copies here run in both orders (a, b then b, a), so a side's place in the order and its own graph can be told apart.
Then two graphs captured in each order, replayed in blocks whose first place alternates; session 22 (H100): each
graph keeps a level of its own (a 2.650-2.656 us, b 2.598-2.604) whatever its place and capture order.

    python scripts/device/graphed_check.py
"""

import statistics
import traceback

import torch

from kernelskill.review.timing import Timer

sets = [[torch.randn(16, 16384, device="cuda")] for _ in range(3)]
copies = {"a": lambda x: torch.tanh(x), "b": lambda x: torch.tanh(x)}
for graphs, order in ((True, "ab"), (True, "ba"), (True, "ab"), (False, "ab"), (False, "ba")):
    timer = Timer(torch.device("cuda"), prefill=True, graphs=graphs, group_by=order[0])
    try:
        samples, _, kept = timer.run({n: copies[n] for n in order}, sets, 10, 60, keep_last=3)
        ok = all(torch.equal(out, torch.tanh(sets[k][0])) for name in kept for k, out in kept[name])
        print(f"graphs={graphs} order {order}: group {timer.info.group}, graphed {timer.info.graphed}, error "
              f"{timer.info.graph_error}, kept outputs right: {ok}, us "
              + ", ".join(f"{n} {statistics.median(v) * 1e3:.3f}" for n, v in samples.items()))
    except Exception:  # noqa: BLE001 - a diagnostic: the whole traceback is the answer
        traceback.print_exc()

# Capture order against place in the block, without the Timer: both copies captured in one order, then their replays
# timed in blocks of 10 samples (flush, spin, one replay of 11 calls each) with the first place alternating from block
# to block; each copy's median at each place. A slower second capture shows along a row, a slower second place down
# the columns.
from kernelskill.review.graphed import capture_groups  # noqa: E402
from kernelskill.review.timing import L2_FLUSH_BYTES  # noqa: E402

group = 11
buffers = [[t.clone() for t in sets[c % len(sets)]] for c in range(group)]
flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
for captured in ("ab", "ba"):
    try:
        graphed, why = capture_groups({n: copies[n] for n in captured}, buffers, sets, torch.device("cuda"))
        if why:
            print(f"captured {captured}: not captured ({why})")
            continue
        at: dict[tuple[str, int], list[float]] = {(n, p): [] for n in "ab" for p in (0, 1)}
        for block in range(60):
            for place, name in enumerate("ab" if block % 2 == 0 else "ba"):
                for _ in range(10):
                    flush.zero_()
                    torch.cuda._sleep(20000)
                    start.record()
                    graphed[name].replay()
                    end.record()
                    end.synchronize()
                    at[(name, place)].append(start.elapsed_time(end) / group * 1e3)
        print(f"captured {captured}, us a call by place (first, second): "
              + "; ".join(f"{n} {statistics.median(at[(n, 0)]):.3f}, {statistics.median(at[(n, 1)]):.3f}"
                          for n in "ab"))
    except Exception:  # noqa: BLE001 - a diagnostic: the whole traceback is the answer
        traceback.print_exc()
