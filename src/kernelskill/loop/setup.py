"""Setting up a run, the one way `optimize` and `bench` both do it.

    with open_run(run_dir, "bench", resume=False, evaluator=ev, backend="triton", review=settings) as run:
        ...  # run.store (opened, its folder held by this process), run.review (the device and backend filled in)
        client = run.client(model, base_url, given=None)
        kb = run.knowledge(loop_settings)

Opening checks that the evaluator's device can run the backend, holds the run folder against a second writer
(store/lock.py), creates or reopens the store, and closes the evaluator at the end when the run owns it. The client
and the knowledge base are asked for once the run's settings are known (a resumed run's are the stored ones).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from kernelskill.loop.evaluator import Evaluator, check_backend
from kernelskill.loop.settings import LoopSettings
from kernelskill.settings import ReviewSettings
from kernelskill.store import RunStore
from kernelskill.store.lock import hold_run_folder

if TYPE_CHECKING:
    from kernelskill.llm.base import LLMClient
    from kernelskill.memory import KnowledgeBase


@dataclass
class RunSetup:
    store: RunStore
    evaluator: Evaluator
    review: ReviewSettings  # the requested review settings with the evaluator's device and the run's backend

    def client(self, model: str, base_url: str | None, given: LLMClient | None = None) -> LLMClient:
        """`given` (tests, a scripted server), else the client `model` names."""
        if given is not None:
            return given
        from kernelskill.llm.registry import make_client

        return make_client(model, base_url)

    def knowledge(self, loop: LoopSettings) -> KnowledgeBase | None:
        """The long-term memory, unless the run is an ablation without it."""
        if not loop.long_term_memory:
            return None
        from kernelskill.memory import load_knowledge

        return load_knowledge()


@contextmanager
def open_run(run_dir: Path, command: Literal["optimize", "bench"], *, resume: bool, evaluator: Evaluator,
             backend: str, review: ReviewSettings, owns_evaluator: bool = True) -> Iterator[RunSetup]:
    """The run's store, opened (resume) or created in `run_dir` and held for this process alone."""
    try:
        check_backend(evaluator.device, backend)
        settings = review.model_copy(update={"device": evaluator.device, "backend": backend})
        # one writer per run folder: a second `--resume` of the same folder would redo the same work
        with hold_run_folder(run_dir, create=not resume, command=command), \
                (RunStore.open(run_dir) if resume else RunStore.create(run_dir)) as store:  # fmt: skip
            yield RunSetup(store, evaluator, settings)
    finally:
        if owns_evaluator:  # its spare workers go with it
            evaluator.close()
