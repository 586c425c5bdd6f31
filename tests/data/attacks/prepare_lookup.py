"""Attack: the batch's outputs computed while its input file is loaded. ModelNew memoizes outputs by a few input
values (its runner's own timing rotates through a handful of input sets, so its loop sees lookups), and wraps the
runner's `prepare` command (review/worker/judged.py): once the batch's input sets are on the device, it computes
every set's output there, so the batch's timed calls are lookups too. A miss sleeps 20 ms, a stand-in for slower
real work; what `prepare` computes costs no sleep.

On a GPU what the judge excuses of `prepare` beyond the reference's (a quarter of its file transfer plus 5 ms: tens
of ms) is more than most level-1 batches' whole calls, so this went unseen there (docs/h200/trust, session 13).
Caught because the sets `prepare` loads are masked until `calls` gives their key (review/exchange.py): what it
computes there are outputs of noise, memoized under noise, and every call of the batch misses.
"""
import time

import torch
import torch.nn as nn


def _key(x):
    flat = x.reshape(-1)
    return float(flat[0]), float(flat[-1]), tuple(x.shape)


_RUNNER = []


def _compute(x):
    """The right output, whatever the problem: the runner that runs the candidate holds the reference as well."""
    if not _RUNNER:
        import gc

        _RUNNER.append(next(o for o in gc.get_objects() if type(o).__name__ == "Worker" and hasattr(o, "run_reference")))
    return _RUNNER[0].run_reference([x])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        from kernelskill.review.worker import judged

        seen = self.seen = {}
        real = judged.COMMANDS["prepare"]

        def prepare(w, *args, **kwargs):
            info = real(w, *args, **kwargs)
            for inputs in w.batch_sets:
                seen[_key(inputs[0])] = _compute(inputs[0])
            return info

        judged.COMMANDS["prepare"] = prepare

    def forward(self, x):
        key = _key(x)
        if key not in self.seen:
            time.sleep(0.02)
            self.seen[key] = _compute(x)
        return self.seen[key]
