import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def forward(self, x):
        n = x.numel()
        i = torch.arange(n, device=x.device)
        buf = torch.stack([x[(i + j * 4099) % n] for j in range(64)], dim=1)
        idx = (torch.arange(64, device=x.device)[None, :] * 7 + i[:, None]) & 63
        w = (torch.arange(64, dtype=x.dtype, device=x.device) + 1)[None, :]
        return (torch.gather(buf, 1, idx) * w).sum(dim=1)


def get_inputs():
    return [torch.randn(1 << 20)]


def get_init_inputs():
    return []
