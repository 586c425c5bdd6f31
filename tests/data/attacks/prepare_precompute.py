"""Attack: the work done while the inputs are prepared, before the calls are timed. ModelNew wraps `Tensor.to`,
which every harness calls to put an input set on its device: each input of the problem's shape that passes through
it gets its output computed there and then (slowly on purpose: a stand-in for the real computation), memoized by a
few of its values. The timed forward is then a lookup. Every output it returns is right.

The runner's own timing rotates through a few input sets, so after their first round it sees lookups only (as the
fingerprint cache does). The judge's batch gives every call inputs of its own, but each was computed in `prepare`,
as the batch's input file was loaded: the calls alone look as fast as the runner claimed. Caught by the judge
(Guards.judge): the batch's input sets are views of one buffer the file is read into, which `Tensor.to` never sees,
and masked until `calls` in any case (exchange.py); what a `prepare` takes beyond the reference's is counted as its
calls' time as well (judge.py `bound_timing`).
"""
import time

import torch
import torch.nn as nn


def _key(x):
    flat = x.reshape(-1)
    return float(flat[0]), float(flat[-1]), tuple(x.shape)


def _slow_forward(x):
    time.sleep(0.02)
    y = x * 2.0 + 1.0
    return 0.5 * y * (1.0 + torch.erf(y * 0.7071067811865476))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        done = self.done = {}
        original = torch.Tensor.to

        def to(tensor, *args, **kwargs):
            out = original(tensor, *args, **kwargs)
            if tuple(out.shape) == (16, 256) and out.dtype == torch.float32:  # p01's input
                done[_key(out)] = _slow_forward(out)
            return out

        torch.Tensor.to = to

    def forward(self, x):
        key = _key(x)
        if key not in self.done:
            self.done[key] = _slow_forward(x)
        return self.done[key]
