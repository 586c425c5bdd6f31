"""The run store: everything `kernelskill optimize` and `bench` do, recorded in SQLite in the run folder."""

from kernelskill.store.rows import (
    CandidateRow,
    DecisionRow,
    LLMCallRow,
    ProfileRow,
    ReviewRow,
    RoundRow,
    RunRow,
    TaskRow,
)
from kernelskill.store.runstore import DB_NAME, KERNELS_DIR, RunStore, add_stage_seconds, safe_name

__all__ = [
    "add_stage_seconds",
    "DB_NAME",
    "KERNELS_DIR",
    "CandidateRow",
    "DecisionRow",
    "LLMCallRow",
    "ProfileRow",
    "ReviewRow",
    "RoundRow",
    "RunRow",
    "RunStore",
    "TaskRow",
    "safe_name",
]
