"""Setting up a run, the one way `optimize` and `bench` both do it.

    with open_run(run_dir, "bench", resume=False, evaluator=ev, backend="triton", review=settings) as run:
        ...  # run.store (opened, its folder held by this process), run.review (the device and backend filled in)
        client = run.client(model, base_url, given=None)
        kb = run.knowledge(loop_settings)

Opening checks that the evaluator's device can run the backend, holds the run folder against a second writer
(store/lock.py), creates or reopens the store, and closes the evaluator at the end when the run owns it. The client
and the knowledge base are asked for once the run's settings are known (a resumed run's are the stored ones).

A resume spends only what the run was started to spend. Before the run is opened, `with_run_settings` fills every
setting the resuming command did not give from the run's stored config (its model, rounds, budgets, review
settings, and for bench its problems and tasks); once it is opened, `resume_stored_run` refuses any given setting
that differs from the run's, except more rounds or a larger budget (MAY_RAISE), which the run's config then keeps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel

from kernelskill.errors import KernelSkillError
from kernelskill.llm.accounting import Budget
from kernelskill.loop.evaluator import Evaluator, check_backend
from kernelskill.loop.settings import LoopSettings
from kernelskill.redact import MASK
from kernelskill.settings import ReviewSettings
from kernelskill.store import RunStore
from kernelskill.store.lock import hold_run_folder
from kernelskill.store.resume import refuse_changes, stored_run
from kernelskill.store.rows import RunRow

if TYPE_CHECKING:
    from kernelskill.llm.base import LLMClient
    from kernelskill.memory import KnowledgeBase

Command = Literal["optimize", "bench"]
R = TypeVar("R", bound=BaseModel)
# a resume may ask for more of these explicitly; every other setting must stay as the run began ("rounds": bench's
# config also keeps the rounds at its top level)
MAY_RAISE = frozenset({"loop.rounds", "rounds", "budget.max_tokens", "budget.max_cost"})


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
def open_run(run_dir: Path, command: Command, *, resume: bool, evaluator: Evaluator,
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


def with_run_settings(request: R, command: Command, read: Mapping[str, Callable[[dict], Any]] | None = None) -> R:
    """The resuming `request` (an OptimizeRequest or a BenchRequest: `out`, `model`, `base_url`, `backend`, `loop`,
    `review`, `budget`) with every setting the command did not give taken from the run's stored config, so
    `kernelskill optimize P --out DIR --resume` and `kernelskill bench --out DIR --resume` continue exactly the run
    that was started. `read` maps the command's own further fields to how each is read from the config (bench: the
    problems folder, levels, tasks, ablation, baseline). Settings the command did give are kept as given, for
    `resume_stored_run` to compare. The config is read while the folder is held, so no other writer changes it."""
    out, asked_model = (request.model_dump(include={"out", "model"}).get(k) for k in ("out", "model"))
    assert out is not None
    with hold_run_folder(out, create=False, command=command):
        model, config = stored_run(out, kind=command)
    given = request.model_fields_set
    fields: dict = {}
    if "backend" not in given and config.get("backend"):
        fields["backend"] = config["backend"]
    if not asked_model:
        fields["model"] = model
    if "base_url" not in given and config.get("base_url"):
        if MASK in config["base_url"]:
            raise KernelSkillError(
                f"the run in {out} reached its model through a URL with credentials, which the run folder does not "
                "keep: add --base-url with the full URL to the resume command")
        fields["base_url"] = config["base_url"]
    for name, read_field in (read or {}).items():
        if name not in given:
            fields[name] = read_field(config)
    for name, model_cls in (("loop", LoopSettings), ("review", ReviewSettings), ("budget", Budget)):
        asked: BaseModel = getattr(request, name)
        stored = {k: v for k, v in (config.get(name) or {}).items() if k in model_cls.model_fields}
        try:
            fields[name] = model_cls.model_validate({**stored, **asked.model_dump(include=asked.model_fields_set)})
        except ValueError as exc:
            raise KernelSkillError(f"the run in {out} holds {name} settings this version cannot read "
                                   f"({exc.__class__.__name__}); start a new run with another --out") from None
    return request.model_copy(update=fields)


def resume_stored_run(store: RunStore, command: Command, requested: dict) -> RunRow:
    """The run to continue in `store`, marked running, once `requested` (the config the resuming command would
    start with, "model" included) is found to ask for nothing the run did not, beyond more rounds or a larger
    budget; those are written to the run's config, so the next resume keeps them."""
    run = store.latest_run()
    if run is None or run.kind != command:
        raise KernelSkillError(f"{store.db_path} holds no {command} run to resume")
    # more rounds continue the same trajectory; anything else would mix two experiments in one folder
    refuse_changes(store.run_dir, {**run.config, "model": run.model}, requested, may_raise=MAY_RAISE)
    store.set_run_status(run.id, "running")
    raised = {k: requested[k] for k in ("loop", "budget", "rounds")
              if k in run.config and k in requested and requested[k] != run.config[k]}
    if raised:
        store.update_run_config(run.id, {**run.config, **raised})
        run = run.model_copy(update={"config": {**run.config, **raised}})
    return run
