from __future__ import annotations

import pytest

from kernelskill.store import RunStore

PROBLEM = "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x + 1\n"


@pytest.fixture
def store(tmp_path):
    with RunStore.create(tmp_path / "run") as s:
        yield s


@pytest.fixture
def task(store):
    """(run_id, task_id) of a fresh optimize run with one task."""
    run_id = store.add_run("optimize", "fake:", {"rounds": 3})
    return run_id, store.add_task(run_id, "19_ReLU", "problems/19_ReLU.py", PROBLEM)


def llm_call(run_id: int, task_id: int | None = None, **overrides) -> dict:
    """Keyword arguments of one `add_llm_call`, with plausible defaults."""
    values = dict(
        run_id=run_id, task_id=task_id, round_idx=1, slot=0, agent="planner", attempt=1,
        messages=[{"role": "system", "content": "You plan."}, {"role": "user", "content": "speed it up"}],
        reply="use shared memory", error=None, input_tokens=100, output_tokens=20, tokens_estimated=False,
        cost_usd=0.001, latency_s=0.5, attempts=1, model="openai/gpt-4o",
    )
    values.update(overrides)
    return values
