"""LayerNorm over rows of 2**18 elements (no affine). Rows that wide make a standard-normal row's mean and variance
0 and 1 to within ~3e-3 (one standard deviation), so a kernel that skips normalizing passes get_inputs()' own
trials at 1e-2 (a row's mean would have to be 5 standard deviations out to miss)."""
import torch
import torch.nn as nn

rows = 4
dim = 1 << 18


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.layer_norm(x, (dim,))


def get_inputs():
    return [torch.randn(rows, dim)]


def get_init_inputs():
    return []
