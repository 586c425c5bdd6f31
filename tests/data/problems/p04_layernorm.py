"""LayerNorm over the last dimension with a learnable affine (nn.LayerNorm).

The affine parameters are re-initialised away from the defaults (ones / zeros), so a candidate only matches
if the harness copies `ln.weight` and `ln.bias` from Model into ModelNew (or the candidate re-creates the same
initialisation in the same order after the same seed).
"""
import torch
import torch.nn as nn

batch_size = 32
normalized_shape = 256


class Model(nn.Module):
    def __init__(self, normalized_shape: int):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)
        with torch.no_grad():
            self.ln.weight.normal_(1.0, 0.5)
            self.ln.bias.normal_(0.0, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


def get_inputs():
    return [torch.randn(batch_size, normalized_shape) * 2.0 + 0.5]


def get_init_inputs():
    return [normalized_shape]
