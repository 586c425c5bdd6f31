"""Right as long as nobody moves the module again; wrong once the harness does, as KernelBench's does before every
trial (`model.cuda()`).

KernelBench L3/39 in CUDA-L1's H100 set does this with nn.GRU: every `.to()`/`.cuda()` re-flattens a GRU's weights
into a new buffer (`flatten_parameters`), and the CUDA graph the candidate captured on its first call keeps reading
the old one, which the caching allocator hands to other tensors. Here `_apply` moves the weight to a new tensor and
overwrites the old one (what reuse of the freed buffer does), and forward reads the tensor it saw first.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.captured = None

    def _apply(self, fn, recurse=True):
        old = self.linear.weight.data
        ret = super()._apply(fn, recurse)
        with torch.no_grad():
            self.linear.weight.data = self.linear.weight.data.clone()  # a new buffer, like flatten_parameters
            old.fill_(float("nan"))  # the old one reused for something else
        return ret

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.captured is None:
            self.captured = self.linear.weight.data  # the graph's view of the weights, captured once
        return torch.relu(x @ self.captured.t() + self.linear.bias)
