"""The scattered timing protocol: each block of grouped samples holds a random half of the allocator's free blocks
(poisoned, as every free block is), so each side's outputs land somewhere else from block to block."""

from __future__ import annotations

import random

import torch

from kernelskill.review import guards, timing


def fake_cache(monkeypatch, sizes: list[int]) -> None:
    """torch.cuda as the poisoning sees it: a cache whose inactive blocks have `sizes`, on device 0."""
    blocks = [{"size": s, "state": "inactive"} for s in sizes] + [{"size": 4096, "state": "active_allocated"}]
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "memory_snapshot", lambda: [{"device": 0, "blocks": blocks},
                                                                {"device": 1, "blocks": [{"size": 8, "state": "inactive"}]}])


def test_poisoning_with_a_hold_keeps_a_random_half_of_the_blocks_it_filled(monkeypatch):
    sizes = [512 * (i + 1) for i in range(40)]
    fake_cache(monkeypatch, sizes)
    cpu = torch.device("cpu")  # torch.empty on the CPU stands in for the device's blocks

    hold: list = []
    total = guards.poison_free_cuda_memory(cpu, hold, random.Random(7))
    assert total == sum(sizes)  # every inactive block of this device poisoned, none of another device's
    draws = random.Random(7)
    expected = [s for s in sorted(sizes, reverse=True) if draws.random() < 0.5]
    assert [t.numel() for t in hold] == expected and 10 < len(hold) < 30
    assert all(bool((t == 0xFF).all()) for t in hold)

    assert guards.poison_free_cuda_memory(cpu) == sum(sizes)  # without a hold nothing is kept (as before)


def test_only_the_scattered_protocol_scatters_and_only_grouped_loops():
    assert timing.protocol_limits("scattered") == timing.protocol_limits("robust")
    assert timing.scatters("scattered", 11)
    assert not timing.scatters("scattered", 1)  # a call of 50 us or more: outputs may be large, not held
    assert not any(timing.scatters(p, 11) for p in ("robust", "ungrouped", "single"))
