"""The run store: everything `kernelskill optimize` and `bench` do, recorded in SQLite in the run folder.

    runstore.py  RunStore: runs, tasks, rounds, candidates, reviews, profiles, decisions, LLM calls, and their totals
    rows.py      one frozen model per table row, as RunStore hands them back
    outcome.py   what a task comes to: RoundRecord, verdict, TaskOutcome, summarize (shared by loop, bench, report)
    db.py        opening run.db (WAL, an intact schema) and the row plumbing; schema.py its migrations
    lock.py      one writer per run folder; resume.py what a --resume may change
"""

from kernelskill.store.db import safe_name
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
from kernelskill.store.runstore import DB_NAME, KERNELS_DIR, RunStore

__all__ = [
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
