"""The `kernelskill` command line.

Every option that sets a setting defaults to "not given" (None): the settings objects (settings.py,
loop/settings.py, llm/accounting.py Budget) hold the one default and the one range of each, and their Literals are
the choices an option accepts (`choices`). Help texts name the defaults by reading them from there.
"""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from kernelskill.cli_help import GroupedCommand, PlainGroup, console, review_progress
from kernelskill.errors import KernelSkillError
from kernelskill.loop.settings import Ablation, LoopSettings, Profile
from kernelskill.settings import (
    ITERS,
    WARMUP,
    Backend,
    Baseline,
    Device,
    ReviewSettings,
    Rules,
    StageTimeouts,
    choices,
    default,
)

app = typer.Typer(
    name="kernelskill",
    help="Turn PyTorch reference programs into faster, verified GPU kernels (CUDA C++ or Triton).",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    cls=PlainGroup,
    rich_markup_mode=None,  # plain help in groups (cli_help.py), as uv and ruff print it
    pretty_exceptions_enable=False,
)
err = console(stderr=True)
# option groups in -h
MODEL, LOOP, BUDGET, REVIEW, RUN, PROBLEMS, PLACE, OUTPUT = ("Model", "Loop", "Budget (per task)", "Review",
                                                             "Run folder", "Problems", "Where evaluations run",
                                                             "Output")
BUDGET_OPTIONS = {"max_tokens": "--max-tokens-per-task", "max_cost": "--max-cost-per-task"}
TIMEOUT_OPTIONS = {stage: f"--{stage}-timeout" for stage in ("compile", "verify", "time")}

BackendChoice = choices("Backend", Backend)
DeviceChoice = choices("Device", Device)
RulesChoice = choices("Rules", Rules)
BaselineChoice = choices("Baseline", Baseline)
ProfileChoice = choices("Profile", Profile)
AblationChoice = choices("Ablation", Ablation)

RULES_HELP = ("strict (default) also rejects try/except fallbacks, backend switches (TF32, cudnn.benchmark), no "
              "kernel of its own and re-running the reference's operators; kernelbench gives KernelBench's verdict "
              "and keeps those as flags. Real cheats fail under both.")
TIMING_HELP = f"(default {WARMUP['cuda']} on CUDA, {WARMUP['cpu']} on CPU)"
ITERS_HELP = f"(default {ITERS['cuda']} on CUDA, {ITERS['cpu']} on CPU)"


def _review_default(field: str):
    return default(ReviewSettings, field)


def _loop_default(field: str):
    return default(LoopSettings, field)


def _settings(loop: dict, review: dict, max_tokens: int | None, max_cost: float | None) -> dict:
    """The loop, review and budget settings of `optimize` and `bench`, each built from the options given."""
    from kernelskill.llm.accounting import Budget
    from kernelskill.settings import from_options

    return {"loop": from_options(LoopSettings, {}, **loop), "review": from_options(ReviewSettings, {}, **review),
            "budget": from_options(Budget, BUDGET_OPTIONS, max_tokens=max_tokens, max_cost=max_cost)}


# options more than one command takes, declared once
DeviceOpt = Annotated[Optional[DeviceChoice], typer.Option(
    rich_help_panel=REVIEW, help="auto (default: cuda when a GPU is visible), cuda or cpu (Triton kernels then run "
    "in Triton's interpreter).")]
BackendOpt = Annotated[Optional[BackendChoice], typer.Option(rich_help_panel=REVIEW,
                                                             help="The kernels' language (default triton).")]
ModelOpt = Annotated[Optional[str], typer.Option(
    metavar="PROVIDER/NAME", rich_help_panel=MODEL,
    help="[required] openai/..., anthropic/..., a replay:TRANSCRIPT or a corpus:DIR. A --resume takes the run's own.")]
BaseUrlOpt = Annotated[Optional[str], typer.Option(
    metavar="URL", rich_help_panel=MODEL, help="An OpenAI-compatible server (vLLM, SGLang, Ollama ...); default: "
    "OPENAI_BASE_URL, else the provider's own.")]
SeedsOpt = Annotated[Optional[int], typer.Option(metavar="N", rich_help_panel=LOOP, help="Kernels generated "
                                                 f"before the rounds (default {_loop_default('seeds')}).")]
RoundsOpt = Annotated[Optional[int], typer.Option(metavar="N", rich_help_panel=LOOP, help="Repair or optimization "
                                                  f"rounds after the seeds (default {_loop_default('rounds')}).")]
ProfileOpt = Annotated[Optional[ProfileChoice], typer.Option(rich_help_panel=LOOP, help="Profile each base with "
                                                             "ncu: auto (default: on a GPU with ncu), on, off.")]
MaxTokensOpt = Annotated[Optional[int], typer.Option(metavar="N", rich_help_panel=BUDGET, help="Stop the task "
                                                     "once this many tokens are spent (its best kernel is kept).")]
MaxCostOpt = Annotated[Optional[float], typer.Option(metavar="USD", rich_help_panel=BUDGET, help="Stop the task "
                                                     "once this many US dollars are spent (priced models only).")]
TrialsOpt = Annotated[Optional[int], typer.Option(metavar="N", rich_help_panel=REVIEW, help="Correctness trials "
                                                  f"per candidate (default {_review_default('trials')}).")]
ItersOpt = Annotated[Optional[int], typer.Option(metavar="N", rich_help_panel=REVIEW,
                                                 help=f"Timed calls per candidate {ITERS_HELP}.")]
WarmupOpt = Annotated[Optional[int], typer.Option(metavar="N", rich_help_panel=REVIEW,
                                                  help=f"Warm-up calls before timing {TIMING_HELP}.")]
AllowTorchOpsOpt = Annotated[bool, typer.Option("--allow-torch-ops", rich_help_panel=REVIEW,
                                                help="Accept kernels whose work is done by PyTorch ops.")]
RulesOpt = Annotated[Optional[RulesChoice], typer.Option(metavar="NAME", rich_help_panel=REVIEW, help=RULES_HELP)]
OutOpt = Annotated[Optional[Path], typer.Option(metavar="DIR", rich_help_panel=RUN,
                                                help="Run folder (default runs/<problem>-<time>).")]


def _version(value: bool) -> None:
    if value:
        from kernelskill import __version__

        print(f"kernelskill {__version__}")
        raise typer.Exit()


@app.callback(epilog=(
    "Start here (no API key needed):\n"
    "  kernelskill optimize examples/gelu_chain.py --rounds 3 --profile off \\\n"
    "      --model replay:examples/gelu_chain.transcript.jsonl\n\n"
    "Check this machine: kernelskill doctor. Every command has -h."))
def _root(
    version: Annotated[bool, typer.Option("--version", "-V", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """Turn PyTorch reference programs into faster, verified GPU kernels (CUDA C++ or Triton) with a team of LLM
    agents, and review, benchmark and report kernels."""


def _mount_optional() -> None:
    try:
        from kernelskill.memory.tools.cli import memory_app
    except ImportError:  # the memory package is optional until it lands
        return
    app.add_typer(memory_app, name="memory", help="The long-term memory: knowledge base and decision policy.")


def _mount_cache() -> None:
    from kernelskill.bench.corpus import corpus_app
    from kernelskill.review.cache_cli import cache_app

    app.add_typer(cache_app, name="cache", help="The CUDA build cache: what it holds, and pruning it.")
    app.add_typer(corpus_app, name="corpus", help="Published kernels as a corpus for --model corpus:DIR.")


@app.command(cls=GroupedCommand, epilog="""\
Examples:
  kernelskill review problem.py candidate.py
  kernelskill review problem.py candidate.py --device cpu --iters 5 --json
  kernelskill review problem.py candidate.py --rules kernelbench

Exit codes: 0 correct (for CUDA on a CPU: compiled), 1 incorrect, 2 bad input,
3 compile failed, 4 timeout, 5 rejected by an anti-cheating check, 6 crashed.""")
def review(
    problem: Path = typer.Argument(..., metavar="PROBLEM", show_default=False,
                                   help="KernelBench problem file (Model, get_inputs, get_init_inputs)."),
    candidate: Path = typer.Argument(..., metavar="CANDIDATE", show_default=False,
                                     help="Candidate file (ModelNew with Model's signatures)."),
    device: DeviceOpt = None,
    backend: Optional[BackendChoice] = typer.Option(None, rich_help_panel=REVIEW,
                                                    help="Detected from the candidate when omitted."),
    trials: TrialsOpt = None,
    atol: Optional[float] = typer.Option(None, metavar="X", rich_help_panel=REVIEW,
                                         help=f"Absolute tolerance (default {_review_default('atol')})."),
    rtol: Optional[float] = typer.Option(None, metavar="X", rich_help_panel=REVIEW,
                                         help=f"Relative tolerance (default {_review_default('rtol')})."),
    warmup: WarmupOpt = None,
    iters: ItersOpt = None,
    no_timing: bool = typer.Option(False, "--no-timing", rich_help_panel=REVIEW, help="Verify only."),
    baseline: Optional[BaselineChoice] = typer.Option(None, rich_help_panel=REVIEW,
                                                      help="compile: also time torch.compile(Model)."),
    allow_torch_ops: AllowTorchOpsOpt = False,
    rules: RulesOpt = None,
    compile_timeout: Optional[float] = typer.Option(None, metavar="S", rich_help_panel="Time limits",
                                                    help="Seconds for building the candidate (default "
                                                    f"{default(StageTimeouts, 'compile'):g})."),
    verify_timeout: Optional[float] = typer.Option(None, metavar="S", rich_help_panel="Time limits",
                                                   help="Seconds for all correctness trials (default "
                                                   f"{default(StageTimeouts, 'verify'):g})."),
    time_timeout: Optional[float] = typer.Option(None, metavar="S", rich_help_panel="Time limits",
                                                 help=f"Seconds for timing (default {default(StageTimeouts, 'time'):g})."),
    log_dir: Optional[Path] = typer.Option(None, metavar="DIR", rich_help_panel=OUTPUT,
                                           help="Keep the worker's full log here (default: a temp folder)."),
    as_json: bool = typer.Option(False, "--json", rich_help_panel=OUTPUT,
                                 help="Print one JSON object instead of the summary."),
) -> None:
    """Compile, verify and time one candidate kernel.

    The candidate runs against the problem in a sandboxed worker process; the verdict, the errors and the timings
    come back as a summary or, with --json, as one JSON object."""
    from kernelskill.candidate import read_candidate
    from kernelskill.folders import writable_folder
    from kernelskill.problem import read_problem
    from kernelskill.settings import from_options

    timeouts = from_options(StageTimeouts, TIMEOUT_OPTIONS, compile=compile_timeout, verify=verify_timeout,
                            time=time_timeout)
    settings = from_options(
        ReviewSettings, {}, device=device, backend=backend, trials=trials, atol=atol, rtol=rtol, warmup=warmup,
        iters=iters, timing=False if no_timing else None, baseline=baseline, allow_torch_ops=allow_torch_ops or None,
        rules=rules, timeouts=timeouts,
    )
    prob = read_problem(problem)
    cand = read_candidate(candidate, settings.backend)
    if log_dir is not None:  # found out before the review, not as an OSError after it
        log_dir = writable_folder(log_dir, "--log-dir")
    # torch comes with these: imported once the options are known to be good, so a mistake is said in a blink
    from kernelskill.review.render import print_review, to_json
    from kernelskill.review.reviewer import review as run_review

    if (settings.backend or cand.backend) == "cuda":  # its runner only reads them (review/caches.py)
        from kernelskill.review.reviewer import prepare_builds

        with review_progress("the precompiled torch headers: built once per machine, torch and compiler",
                             quiet=as_json):
            prepare_builds().join()
    with review_progress(f"reviewing {candidate} against {problem}", quiet=as_json) as progress:
        result = run_review(prob, cand, settings, log_dir=log_dir, **progress.keywords(run_review))
    if as_json:
        print(to_json(result))
    else:
        print_review(result, console())
    raise typer.Exit(int(result.exit_code))


@app.command(cls=GroupedCommand, epilog="""\
Examples:
  kernelskill optimize examples/gelu_chain.py --rounds 3 --profile off \\
      --model replay:examples/gelu_chain.transcript.jsonl
  kernelskill optimize problem.py --model openai/gpt-4o --seeds 3 --rounds 15
  kernelskill optimize problem.py --base-url http://127.0.0.1:8000/v1 \\
      --model openai/Qwen/Qwen2.5-Coder-32B-Instruct
  kernelskill optimize problem.py --model anthropic/claude-sonnet-4-20250514 \\
      --max-cost-per-task 2
  kernelskill optimize problem.py --out runs/x --resume

A resume keeps the run's own settings (model, rounds, budgets); give --rounds or
a budget only to raise it. Keys come from OPENAI_API_KEY / ANTHROPIC_API_KEY.
Exit codes: 0 a correct kernel was found, 1 none was, 2 bad input, 7 no usable
model, 130 interrupted.""")
def optimize(
    problem: Path = typer.Argument(..., metavar="PROBLEM",
                                   help="KernelBench problem file (Model, get_inputs, get_init_inputs)."),
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    seeds: SeedsOpt = None,
    rounds: RoundsOpt = None,
    rt: Optional[float] = typer.Option(None, metavar="X", rich_help_panel=LOOP, help="A correct kernel becomes the "
                                       f"base when speedup/base > 1 + rt (default {_loop_default('rt')}) ..."),
    at: Optional[float] = typer.Option(None, metavar="X", rich_help_panel=LOOP, help="... or speedup - base > at "
                                       f"(default {_loop_default('at')})."),
    max_repairs: Optional[int] = typer.Option(None, metavar="N", rich_help_panel=LOOP, help="Repairs of an "
                                              "optimization's failing kernel before going back to the base "
                                              f"(default {_loop_default('max_repairs')})."),
    profile: ProfileOpt = None,
    no_long_term_memory: bool = typer.Option(False, "--no-long-term-memory", rich_help_panel=LOOP,
                                             help="Ablation: no decision policy, the Planner chooses freely."),
    no_short_term_memory: bool = typer.Option(False, "--no-short-term-memory", rich_help_panel=LOOP,
                                              help="Ablation: no repair chain or optimization memory in prompts."),
    max_tokens_per_task: MaxTokensOpt = None,
    max_cost_per_task: MaxCostOpt = None,
    backend: BackendOpt = None,
    device: DeviceOpt = None,
    trials: TrialsOpt = None,
    iters: ItersOpt = None,
    warmup: WarmupOpt = None,
    rules: RulesOpt = None,
    allow_torch_ops: AllowTorchOpsOpt = False,
    out: OutOpt = None,
    resume: bool = typer.Option(False, "--resume", rich_help_panel=RUN,
                                help="Continue the run in --out with its own settings."),
    as_json: bool = typer.Option(False, "--json", rich_help_panel=RUN,
                                 help="Print one JSON object at the end instead of the summary."),
) -> None:
    """Turn one problem into a faster verified kernel.

    The agent team writes seed kernels, then runs rounds of repair or optimization; the Reviewer compiles,
    verifies and times every candidate. The best correct kernel ends in DIR/best.py."""
    from kernelskill.llm.registry import make_client, no_model_message
    from kernelskill.loop.display import LiveDisplay, print_summary
    from kernelskill.loop.optimize import OptimizeRequest, continue_command, default_run_dir
    from kernelskill.loop.optimize import optimize as run_optimize
    from kernelskill.settings import from_options

    if not model and not resume:  # a resume takes the run's own model
        from kernelskill.llm.base import LLMError

        raise LLMError(no_model_message())
    out = out if out is not None or resume else default_run_dir(problem)  # known now, for the continue command
    request = from_options(
        OptimizeRequest, {}, problem=problem, model=model, base_url=base_url, backend=backend, out=out, resume=resume,
        **_settings(dict(seeds=seeds, rounds=rounds, rt=rt, at=at, max_repairs=max_repairs, profile=profile,
                         long_term_memory=False if no_long_term_memory else None,
                         short_term_memory=False if no_short_term_memory else None),
                    dict(device=device, trials=trials, iters=iters, warmup=warmup, rules=rules,
                         allow_torch_ops=allow_torch_ops or None),
                    max_tokens_per_task, max_cost_per_task),
    )
    # a missing key or a malformed model string fails before any work (a resume's model is read from its run)
    client = make_client(model, base_url) if model else None
    out_console = console(stderr=as_json)
    try:
        with LiveDisplay(out_console) as display:
            summary = run_optimize(request, client=client, on_event=display)
    except KeyboardInterrupt:
        err.print(f"[yellow]interrupted.[/] Continue with: {escape(continue_command(problem, out))}",
                  soft_wrap=True, highlight=False)
        raise typer.Exit(130) from None
    if as_json:
        print(summary.model_dump_json(indent=2, exclude={"history"}))
    else:
        print_summary(summary, out_console)
    raise typer.Exit(0 if summary.success else 1)


@app.command(cls=GroupedCommand, epilog="""\
Examples:
  kernelskill corpus import examples/tour/kernels --names-from examples/tour \\
      --out runs/tour-corpus
  kernelskill bench --problems examples/tour --model corpus:runs/tour-corpus \\
      --seeds 1 --rounds 0 --out runs/tour
  kernelskill bench --problems ~/KernelBench --level 1 --tasks 1-20 \\
      --model openai/gpt-4o --gpus 0,1 --out runs/l1
  kernelskill bench --problems ~/KernelBench --level 1 --model openai/gpt-4o \\
      --ablation no-ltm --out runs/l1-no-ltm
  kernelskill bench --problems ~/KernelBench --model openai/gpt-4o --ray auto
  kernelskill bench --out runs/l1 --resume

Then: kernelskill report RUN_DIR. A resume keeps the run's own settings
(problems, tasks, model, rounds, budgets); give --rounds or a budget only to
raise it (Ctrl-C prints the command). Exit codes: 0 the run finished (whatever
the tasks' verdicts), 2 bad input, 7 no usable model, 130 interrupted.""")
def bench(
    problems: Optional[Path] = typer.Option(None, metavar="DIR", rich_help_panel=PROBLEMS, help="[required] A "
                                            "KernelBench checkout or a folder of KernelBench-format files (one level, "
                                            "named after the folder). A --resume takes the run's own."),
    level: Optional[str] = typer.Option(None, metavar="L", rich_help_panel=PROBLEMS,
                                        help="Levels to run, e.g. 1,2 (default: all found)."),
    tasks: Optional[str] = typer.Option(None, metavar="LIST", rich_help_panel=PROBLEMS,
                                        help="Tasks by their file's numeric prefix, e.g. 1-20,33."),
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    seeds: SeedsOpt = None,
    rounds: RoundsOpt = None,
    ablation: Optional[AblationChoice] = typer.Option(None, metavar="NAME", rich_help_panel=LOOP,
                                                      help="none (default), no-ltm, no-stm or no-memory."),
    profile: ProfileOpt = None,
    max_tokens_per_task: MaxTokensOpt = None,
    max_cost_per_task: MaxCostOpt = None,
    backend: BackendOpt = None,
    device: DeviceOpt = None,
    trials: TrialsOpt = None,
    iters: ItersOpt = None,
    warmup: WarmupOpt = None,
    rules: Optional[RulesChoice] = typer.Option(None, metavar="NAME", rich_help_panel=REVIEW,
                                                help=RULES_HELP + " results.json reports success under both."),
    baseline: Optional[BaselineChoice] = typer.Option(None, rich_help_panel=REVIEW, help="compile: also time "
                                                      "torch.compile(Model) against each task's best kernel."),
    warm_jobs: Optional[int] = typer.Option(
        None, "--warm-jobs", min=0, metavar="N", rich_help_panel=REVIEW,
        help="With --baseline compile: torch.compile warm-ups at once before anything is timed (default: half the "
        "CPU cores, at most 8; 0: none)."),
    gpus: Optional[str] = typer.Option(None, metavar="LIST", rich_help_panel=PLACE, help="GPU indices, e.g. 0,1 "
                                       "(default: every visible GPU)."),
    reviews_per_gpu: Optional[int] = typer.Option(
        None, "--reviews-per-gpu", min=1, max=16, metavar="N", rich_help_panel=PLACE, help="Reviews a GPU holds at "
        "once (default 1): their untimed steps run side by side, each timed step with the GPU alone."),
    parallel: Optional[int] = typer.Option(None, metavar="N", rich_help_panel=PLACE, help="Tasks in flight "
                                           "(default: 2 per review slot, so LLM waits overlap evaluations)."),
    ray: Optional[str] = typer.Option(
        None, "--ray", metavar="ADDRESS", rich_help_panel=PLACE,
        help="Place evaluations on a Ray cluster, one GPU each: auto (the cluster started here), HOST:PORT, or "
        "ray://HOST:10001. Needs kernelskill[ray] and the same packages on every node."),
    out: Optional[Path] = typer.Option(None, metavar="DIR", rich_help_panel=RUN,
                                       help="Run folder (default runs/bench-<time>)."),
    resume: bool = typer.Option(False, "--resume", rich_help_panel=RUN,
                                help="Continue the run in --out with its own settings: finished tasks are skipped."),
    verbose: bool = typer.Option(False, "--verbose", "-v", rich_help_panel=RUN,
                                 help="Print every round of every task."),
) -> None:
    """Run the loop over many KernelBench tasks.

    Tasks run concurrently, each GPU reviewing one candidate at a time (--reviews-per-gpu: more); RUN_DIR/results.json
    holds the paper's metrics (Success, Speedup, Fast_1) and every task's outcome."""
    from kernelskill.bench.discover import parse_gpus, parse_indices, parse_levels
    from kernelskill.bench.display import BenchDisplay, print_summary
    from kernelskill.bench.runner import BenchRequest, continue_command, refuse_replay, resolve, run_bench
    from kernelskill.llm.registry import make_client
    from kernelskill.settings import from_options

    if resume and out is None:
        raise KernelSkillError("--resume needs --out RUN_DIR: the run folder of the run to continue")
    if out is None:  # named now, so that Ctrl-C can print the command that continues this run
        out = Path("runs") / f"bench-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    request = resolve(from_options(
        BenchRequest, {}, problems=problems, levels=parse_levels(level), indices=parse_indices(tasks), model=model,
        base_url=base_url, backend=backend, gpus=parse_gpus(gpus), reviews_per_gpu=reviews_per_gpu, parallel=parallel,
        ablation=ablation,
        baseline=baseline, warm_jobs=warm_jobs, out=out, resume=resume, ray=ray,
        **_settings(dict(seeds=seeds, rounds=rounds, profile=profile),
                    dict(device=device, trials=trials, iters=iters, warmup=warmup, rules=rules),
                    max_tokens_per_task, max_cost_per_task),
    ))  # a resume's settings are the run's own from here on
    assert request.model is not None
    refuse_replay(request.model)
    client = make_client(request.model, request.base_url)  # a missing key fails before any work
    out_console = console()
    try:
        with BenchDisplay(out_console, verbose=verbose) as display:
            results = run_bench(request, client=client, on_event=display)
    except KeyboardInterrupt:
        again = continue_command(out, gpus=request.gpus, reviews_per_gpu=reviews_per_gpu, parallel=parallel, ray=ray,
                                 warm_jobs=warm_jobs, verbose=verbose)
        err.print(f"[yellow]interrupted[/] after the rounds in flight. Continue with: {escape(again)}",
                  soft_wrap=True, highlight=False)
        raise typer.Exit(130) from None
    print_summary(out_console, results)
    run_dir = results.run.get("run_dir", "RUN_DIR")
    out_console.print(f"results: {run_dir}/results.json; report: kernelskill report {run_dir}", style="dim")


@app.command(cls=GroupedCommand, epilog="""\
Examples:
  kernelskill report runs/tour
  kernelskill report runs/gelu_chain-20261203-101500     (an optimize run)
  kernelskill report /mnt/shared/run --out /tmp/report  (a read-only folder)
  kernelskill report runs/full --compare runs/no-ltm --compare runs/no-stm""")
def report(
    run_dir: Path = typer.Argument(..., metavar="RUN_DIR", help="A bench or optimize run folder (holds results.json or summary.json)."),
    compare: list[Path] = typer.Option([], "--compare", metavar="DIR", help="Another run folder to lay side by "
                                       "side (repeatable)."),
    out: Optional[Path] = typer.Option(None, metavar="DIR", help="Where to write the report (default: the run folder; give "
                                       "another folder for a run folder you cannot write)."),
) -> None:
    """Write the HTML report of a bench or optimize run.

    report.html (one self-contained file), summary.md and tasks.csv go into the run folder, or into --out."""
    from kernelskill.report import report_command

    report_command(run_dir, compare, console(), out=out)


@app.command(cls=GroupedCommand, epilog="""\
Examples:
  kernelskill doctor
  kernelskill doctor --json""")
def doctor(
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of the lines."),
) -> None:
    """Check this machine and say what to do about each missing piece.

    GPU and driver, nvcc, ncu and its counter access, Triton, each sandbox layer and the caches. Exits 1 when
    something a command needs is missing."""
    from kernelskill.doctor import exit_code, render, run_checks, to_json

    with review_progress("checking this machine", quiet=as_json):
        checks = run_checks()
    if as_json:
        print(to_json(checks))
    else:
        render(checks, console())
    raise typer.Exit(exit_code(checks))


def main() -> None:
    import signal

    # a polite kill runs the same cleanup as Ctrl-C: workers are killed, nothing is left running
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    _mount_optional()
    _mount_cache()
    try:
        app()
    except KernelSkillError as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        sys.exit(int(exc.exit_code))


if __name__ == "__main__":
    main()
