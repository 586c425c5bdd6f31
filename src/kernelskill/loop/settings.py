"""Settings of the loop itself (how many seeds and rounds, the promotion thresholds, the ablation switches)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Profile = Literal["auto", "on", "off"]
Ablation = Literal["none", "no-ltm", "no-stm", "no-memory"]  # which memories an ablation switches off


class LoopSettings(BaseModel):
    """Defaults are the published ones: 3 seeds, 15 rounds, rt = at = 0.3, both memories on."""

    model_config = ConfigDict(extra="forbid")

    seeds: int = Field(3, ge=1, le=32, description="kernels generated independently before the rounds")
    rounds: int = Field(15, ge=0, le=1000, description="repair or optimization rounds after the seeds")
    rt: float = Field(0.3, ge=0, description="promote to base when speedup / base speedup > 1 + rt")
    at: float = Field(0.3, ge=0, description="... or when speedup - base speedup > at")
    long_term_memory: bool = Field(True, description="decision policy over the knowledge base steers the Planner")
    short_term_memory: bool = Field(True, description="repair chain and optimization memory appear in prompts")
    max_repairs: int = Field(
        3, ge=1, description="repairs tried on a kernel born from an optimization before going back to the base; "
        "while no correct kernel exists at all, repairs continue for as long as there are rounds",
    )
    profile: Profile = Field(
        "auto", description="profile each base with ncu and the PyTorch profiler: auto = on a GPU when ncu is found"
    )
    parallel_seeds: bool = Field(True, description="ask for the seeds concurrently (never with a replayed model)")

    def ablated(self, ablation: Ablation) -> LoopSettings:
        """These settings with both memory switches set by `ablation` (bench --ablation; "none": both on)."""
        return self.model_copy(update={
            "long_term_memory": ablation not in ("no-ltm", "no-memory"),
            "short_term_memory": ablation not in ("no-stm", "no-memory"),
        })
