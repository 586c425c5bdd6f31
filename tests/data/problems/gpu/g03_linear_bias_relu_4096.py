"""GPU-sized fp32 matmul with bias + ReLU epilogue: relu(x @ W^T + b), x: 2048 x 4096, W: 4096 x 4096.

69 GFLOP in fp32 (PyTorch's default keeps TF32 off for matmuls); estimated ~1.2-1.5 ms on an H200 with cuBLAS.
Set batch_size = 4096 for the full 4096^3 problem (~2.5 ms).
"""
import torch
import torch.nn as nn

batch_size = 2048
in_features = 4096
out_features = 4096


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
