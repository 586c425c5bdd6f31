"""Reads the weights its module held at its first call, not the ones it holds now.

CUDA-L1's L3/35, 37, 41 and 42 (LSTM and GRU) capture a CUDA graph on their first call. Every `.to()`/`.cuda()`
re-packs an RNN's weights into a new buffer and frees the old one, which the graph keeps reading: KernelBench's
harness, moving the models before every trial, passes them as long as the caching allocator does not hand the freed
block to another tensor. Here `_apply` puts the weight in a new tensor (what `flatten_parameters` does) and forward
reads the tensor it saw first, which nothing overwrites: right on every trial, wrong once that memory is reused.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.captured = None

    def _apply(self, fn, recurse=True):
        ret = super()._apply(fn, recurse)
        with torch.no_grad():
            self.linear.weight.data = self.linear.weight.data.clone()  # a new buffer, like flatten_parameters
        return ret

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.captured is None:
            self.captured = self.linear.weight.data  # the graph's view of the weights, captured once
        return torch.relu(x @ self.captured.t() + self.linear.bias)
