"""`kernelskill memory ...`: check the knowledge base, explain a decision, browse the methods."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape

from kernelskill.cli_help import GroupedCommand, sub_app
from kernelskill.errors import KernelSkillError
from kernelskill.memory.knowledge import check_coverage
from kernelskill.memory.policy.advise import BACKENDS, advise
from kernelskill.memory.policy.collect import collect_evidence, profile_candidate, with_problem
from kernelskill.memory.policy.load import load_knowledge
from kernelskill.memory.tools.bench import advise_kernel, run_bench
from kernelskill.memory.tools.learn import apply_proposal, learn, load_proposal, write_proposal
from kernelskill.memory.tools.render import (
    decision_json, render_bench, render_decision, render_method, render_methods,
)  # fmt: skip
from kernelskill.profiling.run import ProfileSettings

memory_app = sub_app("memory", "Long-term memory: the expert knowledge base and the decision policy that applies it.")
# option groups in -h
EVIDENCE, PROFILE, FLOOR, BENCH, ADVICE, KNOWLEDGE = ("Captured evidence", "Profile here (a GPU with ncu)",
                                                      "Speed of light", "Decision benchmark", "Advice",
                                                      "Knowledge base")

KnowledgeOpt = Annotated[
    Optional[Path],  # noqa: UP045 - typer reads the annotation at run time, also on Python 3.10
    typer.Option("--knowledge", metavar="DIR", rich_help_panel=KNOWLEDGE, file_okay=False,
                 help="Knowledge-base directory (default: the one shipped)."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of the readable form.")]
FileOpt = Optional[Path]  # noqa: UP045


@contextmanager
def _user_errors() -> Iterator[None]:
    """Print a user-fixable error without a traceback and exit with its code."""
    try:
        yield
    except KernelSkillError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise typer.Exit(code=int(exc.exit_code)) from None


def _console() -> Console:
    # Piped output (files, CI logs) gets a wide page so metric names are not folded; a terminal keeps its width.
    wide = not sys.stdout.isatty() and "COLUMNS" not in os.environ
    return Console(highlight=False, width=160 if wide else None)


@memory_app.command(cls=GroupedCommand, epilog="""\
Examples:
  kernelskill memory validate
  kernelskill memory validate --knowledge ./my_knowledge
  kernelskill memory validate --proposal proposal.yaml

Exit codes: 0 valid, 2 not (every problem is listed with file, key and what is
wrong).""")
def validate(
    knowledge: KnowledgeOpt = None,
    proposal: Annotated[FileOpt, typer.Option(
        metavar="FILE", rich_help_panel=KNOWLEDGE, dir_okay=False,
        help="A proposal of `memory learn`: check the knowledge base with its cases merged in.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Check the knowledge base (schema, cross-references, coverage) and print its counts."""
    with _user_errors():
        if proposal is not None:
            kb = apply_proposal(load_proposal(proposal), knowledge)
        else:
            kb = load_knowledge(knowledge)
        problems = check_coverage(kb)
        counts = kb.counts()
        if as_json:
            print(json.dumps({"valid": not problems, "directory": str(kb.directory), "counts": counts,
                              "problems": problems}, indent=2))  # fmt: skip
        else:
            console = _console()
            console.print(f"knowledge base: {kb.directory}")
            for name, n in counts.items():
                console.print(f"  {name:<18} {n}")
            for p in problems:
                console.print(f"[red]coverage:[/red] {p}")
            if not problems:
                console.print("[green]valid[/green]")
        if problems:
            raise typer.Exit(code=2)


@memory_app.command(cls=GroupedCommand, short_help="Show how the policy turns evidence into the allowed methods.",
                    epilog="""\
Examples:
  kernelskill memory explain --metrics ncu.csv --code candidate.py
  kernelskill memory explain --metrics ncu.csv --run-features profile.json \\
      --json
  kernelskill memory explain --problem problem.py --candidate candidate.py \\
      --profile-dir /tmp/prof
  kernelskill memory explain --problem problem.py --metrics ncu.csv \\
      --code candidate.py --gpu h200
  kernelskill memory explain --bench tests/data/ncu/h200/decision_bench.yaml \\
      --id naive_gemm""")
def explain(
    metrics: Annotated[FileOpt, typer.Option(metavar="FILE", rich_help_panel=EVIDENCE, dir_okay=False,
                                             help="`ncu --csv --page raw` output (e.g. with --set full).")] = None,
    code: Annotated[FileOpt, typer.Option(metavar="FILE", rich_help_panel=EVIDENCE, dir_okay=False,
                                          help="Candidate source for code features.")] = None,
    run_features: Annotated[FileOpt, typer.Option(
        metavar="FILE", rich_help_panel=EVIDENCE, dir_okay=False,
        help="PyTorch-profiler summary JSON: {forwards, forward_time_us, kernels}.")] = None,
    candidate: Annotated[FileOpt, typer.Option(metavar="FILE", rich_help_panel=PROFILE, dir_okay=False,
                                               help="Candidate to profile here (with --problem).")] = None,
    ncu: Annotated[str, typer.Option(metavar="PATH", rich_help_panel=PROFILE,
                                     help="Nsight Compute executable (default ncu).", show_default=False)] = "ncu",
    profile_timeout_s: Annotated[float, typer.Option(
        metavar="S", rich_help_panel=PROFILE, min=1, show_default=False,
        help="Time limit of ncu's run on the candidate (default 300; the plain profiler run gets 120 s).")] = 300.0,
    profile_dir: Annotated[FileOpt, typer.Option(
        metavar="DIR", rich_help_panel=PROFILE, file_okay=False,
        help="Keep the driver, logs, ncu report and CSV of the profile here.")] = None,
    problem: Annotated[FileOpt, typer.Option(
        metavar="FILE", rich_help_panel=FLOOR, dir_okay=False,
        help="Problem file: its FLOPs and bytes give the speed-of-light floor; with --candidate, also profile the "
             "candidate on the GPU.")] = None,
    gpu: Annotated[Optional[str], typer.Option(  # noqa: UP045
        metavar="NAME", rich_help_panel=FLOOR,
        help="GPU for the floor (h200, h100_sxm, h100_pcie, a100_sxm or a device name); default: the ncu "
             "report's.")] = None,
    forward_ms: Annotated[Optional[float], typer.Option(  # noqa: UP045
        metavar="MS", rich_help_panel=FLOOR, min=0.0,
        help="Measured time of one forward of the candidate, ms (default: the profiler's or ncu's).")] = None,
    bench: Annotated[FileOpt, typer.Option(
        metavar="FILE", rich_help_panel=BENCH, dir_okay=False,
        help="A decision-benchmark manifest: explain its kernel --id, on the evidence `memory bench` scores.")] = None,
    kernel_id: Annotated[Optional[str], typer.Option(  # noqa: UP045
        "--id", metavar="NAME", rich_help_panel=BENCH, help="The kernel of --bench to explain.")] = None,
    backend: Annotated[Optional[str], typer.Option(  # noqa: UP045
        metavar="NAME", rich_help_panel=ADVICE,
        help="Advise for this backend (cuda or triton), as the loop does for its task; default: the candidate's "
             "own.")] = None,
    kernel: Annotated[Optional[str], typer.Option(  # noqa: UP045
        metavar="REGEX", rich_help_panel=ADVICE, help="Explain this kernel instead of the hottest.")] = None,
    knowledge: KnowledgeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show how the policy turns evidence into a bottleneck, a case and the allowed methods - the same advice, by
    the same function (kernelskill.memory.advise), that the optimization loop hands its Planner.

    With --problem/--candidate the candidate is profiled here (a GPU, PyTorch and Nsight Compute are needed):
    warm-up forwards, then ncu --set full --clock-control none on one forward, plus a PyTorch-profiler run. When
    ncu is missing, not permitted or times out, the trace says so and the decision rests on what remains.
    With --problem the problem's FLOPs and bytes (counted in a confined child process) give its speed-of-light
    floor, and the headroom tier reads the candidate's distance to it; without it the floor is unknown, never
    assumed."""
    with _user_errors():
        if candidate is not None and problem is None:
            raise KernelSkillError("--candidate needs --problem (profile the candidate against it, then explain)")
        if candidate is not None and (metrics is not None or run_features is not None):
            raise KernelSkillError("give either --problem/--candidate (profile now) or --metrics/--run-features "
                                   "(already captured), not both")  # fmt: skip
        if problem is not None and candidate is None and metrics is None and run_features is None and code is None:
            raise KernelSkillError("--problem alone gives only the floor: add --candidate (profile it) or captured "
                                   "evidence (--metrics, --run-features, --code)")  # fmt: skip
        if backend is not None and backend not in BACKENDS:
            raise KernelSkillError(f"--backend {backend!r}: give one of {', '.join(BACKENDS)}")
        if (bench is None) != (kernel_id is None):
            raise KernelSkillError("--bench and --id go together: the manifest, and the kernel of it to explain")
        kb = load_knowledge(knowledge)
        if bench is not None:
            others = [n for n, v in (("--metrics", metrics), ("--code", code), ("--run-features", run_features),
                                     ("--problem", problem), ("--candidate", candidate), ("--gpu", gpu),
                                     ("--forward-ms", forward_ms), ("--backend", backend), ("--kernel", kernel))
                      if v is not None]  # fmt: skip
            if others:
                raise KernelSkillError(f"--bench takes its evidence from the manifest: drop {', '.join(others)}")
            advice = advise_kernel(bench, kernel_id, kb)  # type: ignore[arg-type]
        else:
            if problem is not None and candidate is not None:
                settings = ProfileSettings(ncu=ncu, ncu_timeout_s=profile_timeout_s, keep_dir=profile_dir)
                evidence = profile_candidate(problem, candidate, kb, settings)
            else:
                evidence = collect_evidence(kb, metrics=metrics, code=code, run_features=run_features)
            if problem is not None:
                evidence = with_problem(evidence, problem, gpu, forward_ms)
            elif gpu is not None or forward_ms is not None:
                raise KernelSkillError("--gpu and --forward-ms set the floor, which needs --problem")
            advice = advise(kb, evidence, backend=backend, kernel=kernel)
        if as_json:
            print(decision_json(advice))
        else:
            render_decision(advice, _console(), kb)


@memory_app.command("methods", cls=GroupedCommand, epilog="""\
Examples:
  kernelskill memory methods
  kernelskill memory methods tensor_cores --json""")
def methods_cmd(
    method_id: Annotated[Optional[str], typer.Argument(  # noqa: UP045
        metavar="METHOD", show_default=False, help="Show this method in full.")] = None,
    knowledge: KnowledgeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List the optimization methods, or show one (intent, preconditions, expected change, cues)."""
    with _user_errors():
        kb = load_knowledge(knowledge)
        if method_id is None:
            if as_json:
                print(json.dumps([m.model_dump(mode="json") for m in kb.methods], indent=2))
            else:
                render_methods(kb.methods, _console())
            return
        method = kb.method(method_id)
        if method is None:
            raise KernelSkillError(f"no method {method_id!r}; `kernelskill memory methods` lists them")
        if as_json:
            print(json.dumps(method.model_dump(mode="json"), indent=2))
        else:
            render_method(method, _console())


@memory_app.command("bench", cls=GroupedCommand, epilog="""\
Examples:
  kernelskill memory bench tests/data/ncu/h200/decision_bench.yaml
  kernelskill memory bench tests/data/ncu/h200/decision_bench.yaml \\
      --min-top1 0.8 --json

Exit codes: 0 scored, 1 top-1 accuracy below --min-top1, 2 bad input.""")
def bench_cmd(
    manifest: Annotated[Path, typer.Argument(metavar="MANIFEST", show_default=False, dir_okay=False,
                                             help="Bench manifest (YAML): kernels, their evidence, expert labels.")],
    min_top1: Annotated[Optional[float], typer.Option(  # noqa: UP045
        metavar="SHARE", min=0.0, max=1.0,
        help="Exit 1 when the top-1 accuracy is below this share, 0 to 1 (for CI).")] = None,
    knowledge: KnowledgeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Score the advice against expert labels: is an expert method allowed, is one ranked first?

    Each kernel is advised on by kernelskill.memory.advise, as the loop advises its Planner."""
    with _user_errors():
        kb = load_knowledge(knowledge)
        report = run_bench(manifest, kb)
        if as_json:
            print(json.dumps(report.model_dump(mode="json"), indent=2))
        else:
            render_bench(report, _console())
        if min_top1 is not None and report.top1_accuracy < min_top1:
            raise typer.Exit(code=1)


@memory_app.command("learn", cls=GroupedCommand, epilog="""\
Examples:
  kernelskill memory learn runs/l1 runs/l2 --out proposal.yaml
  kernelskill memory validate --proposal proposal.yaml""")
def learn_cmd(
    run_dirs: Annotated[list[Path], typer.Argument(metavar="RUN_DIR", show_default=False, file_okay=False,
                                                   help="Folders of finished optimize/bench runs (with run.db).")],
    out: Annotated[Path, typer.Option("--out", metavar="FILE", dir_okay=False, show_default=False,
                                      help="Write the proposal here, as YAML (default proposal.yaml).")] = Path(
        "proposal.yaml"),
    min_tries: Annotated[int, typer.Option(metavar="N", min=1, show_default=False,
                                           help="Tries of a method in a case before its gain re-ranks it "
                                                "(default 2).")] = 2,
    knowledge: KnowledgeOpt = None,
) -> None:
    """Propose re-ranked and new decision-table cases from the measured outcomes of finished runs.

    Each proposed case carries the tries, measured gains and run/task/round provenance behind it; nothing is
    changed in the knowledge base. Check the proposal with `kernelskill memory validate --proposal FILE`."""
    with _user_errors():
        kb = load_knowledge(knowledge)
        proposal = learn(run_dirs, kb, min_tries=min_tries)
        apply_proposal(proposal, knowledge)  # a proposal that would not validate is a bug: fail here
        write_proposal(proposal, out)
        console = _console()
        for pc in proposal.cases:
            console.print(f"{pc.action:<7} {pc.case.id}: {', '.join(pc.case.allowed)}"
                          + (f"  (was {', '.join(pc.was)})" if pc.was else ""))  # fmt: skip
            for line in pc.replayed:
                console.print(f"        [dim]advised again: {escape(line)}[/dim]")
        for note in proposal.notes:
            console.print(f"[yellow]note:[/yellow] {note}")
        console.print(f"{len(proposal.cases)} proposed case(s) from {len(proposal.runs)} run(s) -> {out}")
