"""The `kernelskill` command line.

Every option that sets a setting defaults to "not given" (None): the settings objects (settings.py,
loop/settings.py, llm/accounting.py Budget) hold the one default and the one range of each, and their Literals are
the choices an option accepts (`choices`). Help texts name the defaults by reading them from there.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape

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
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
)
err = Console(stderr=True)
BUDGET_OPTIONS = {"max_tokens": "--max-tokens-per-task", "max_cost": "--max-cost-per-task"}
TIMEOUT_OPTIONS = {stage: f"--{stage}-timeout" for stage in ("compile", "verify", "time")}

BackendChoice = choices("Backend", Backend)
DeviceChoice = choices("Device", Device)
RulesChoice = choices("Rules", Rules)
BaselineChoice = choices("Baseline", Baseline)
ProfileChoice = choices("Profile", Profile)
AblationChoice = choices("Ablation", Ablation)

RULES_HELP = ("strict (default): also reject try/except fallbacks, global backend switches (cudnn.benchmark, TF32), "
              "no kernel of its own and re-running the reference's operators; kernelbench: the verdict "
              "KernelBench's harness would give, those kept as flags. Real cheats fail under both.")
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
    help="auto (default: cuda when a GPU is visible), cuda or cpu. On cpu, Triton kernels run in Triton's "
    "interpreter.")]
BackendOpt = Annotated[Optional[BackendChoice], typer.Option(help="The kernels' language (default triton).")]
ModelOpt = Annotated[Optional[str], typer.Option(help="provider/name (openai/..., anthropic/...), or "
                                                "replay:TRANSCRIPT (optimize only).")]
BaseUrlOpt = Annotated[Optional[str], typer.Option(help="An OpenAI-compatible server (vLLM, SGLang, Ollama ...); "
                                                   "default: OPENAI_BASE_URL, else the provider's own.")]
SeedsOpt = Annotated[Optional[int], typer.Option(metavar="N", help="Kernels generated independently before the "
                                                 f"rounds (default {_loop_default('seeds')}).")]
RoundsOpt = Annotated[Optional[int], typer.Option(metavar="N", help="Repair or optimization rounds after the seeds "
                                                  f"(default {_loop_default('rounds')}).")]
ProfileOpt = Annotated[Optional[ProfileChoice], typer.Option(help="Profile each base with ncu: auto (default: on a "
                                                             "GPU when ncu is found), on, off.")]
MaxTokensOpt = Annotated[Optional[int], typer.Option(metavar="N", help="Stop the task once this many tokens are "
                                                     "spent (its best kernel is kept).")]
MaxCostOpt = Annotated[Optional[float], typer.Option(metavar="USD", help="Stop the task once this many US dollars "
                                                     "are spent (priced models only).")]
TrialsOpt = Annotated[Optional[int], typer.Option(metavar="N", help="Correctness trials per candidate, each on "
                                                  f"fresh random inputs (default {_review_default('trials')}).")]
ItersOpt = Annotated[Optional[int], typer.Option(metavar="N", help=f"Timed calls per candidate {ITERS_HELP}.")]
WarmupOpt = Annotated[Optional[int], typer.Option(metavar="N", help=f"Warm-up calls before timing {TIMING_HELP}.")]
AllowTorchOpsOpt = Annotated[bool, typer.Option("--allow-torch-ops", help="Accept kernels whose work is done by "
                                                "PyTorch ops.")]
RulesOpt = Annotated[Optional[RulesChoice], typer.Option(metavar="NAME", help=RULES_HELP)]


@app.callback()
def _root() -> None:
    """KernelSkill: optimize a PyTorch program into verified GPU kernels, review candidate kernels, explain the
    knowledge base's decisions.

    Start with `kernelskill optimize PROBLEM.py --model PROVIDER/NAME`; every command has -h.
    """


def _mount_optional() -> None:
    try:
        from kernelskill.memory.cli import memory_app
    except ImportError:  # the memory package is optional until it lands
        return
    app.add_typer(memory_app, name="memory", help="The long-term memory: knowledge base and decision policy.")


def _mount_cache() -> None:
    from kernelskill.bench.corpus import corpus_app
    from kernelskill.review.cache_cli import cache_app

    app.add_typer(cache_app, name="cache", help="The CUDA build cache: what it holds, and pruning it.")
    app.add_typer(corpus_app, name="corpus", help="Published kernels (CUDA-L1, KernelBench solutions) as a corpus "
                  "that --model corpus:DIR serves as seeds.")


@app.command(
    epilog=(
        "Examples:\n\n"
        "  kernelskill review problem.py candidate.py\n\n"
        "  kernelskill review problem.py candidate.py --device cpu --iters 5 --json\n\n"
        "Exit codes: 0 correct (or, for CUDA on CPU, compiled), 1 incorrect, 2 bad input, 3 compile failed, "
        "4 timeout, 5 rejected by an anti-cheating check, 6 worker crashed."
    )
)
def review(
    problem: Path = typer.Argument(..., help="KernelBench problem file (defines Model, get_inputs, get_init_inputs)."),
    candidate: Path = typer.Argument(..., help="Candidate file (defines ModelNew with Model's signatures)."),
    device: DeviceOpt = None,
    backend: Optional[BackendChoice] = typer.Option(None, help="Detected from the candidate when omitted."),
    trials: TrialsOpt = None,
    atol: Optional[float] = typer.Option(None, help=f"Absolute tolerance (default {_review_default('atol')})."),
    rtol: Optional[float] = typer.Option(None, help=f"Relative tolerance (default {_review_default('rtol')})."),
    warmup: WarmupOpt = None,
    iters: ItersOpt = None,
    no_timing: bool = typer.Option(False, "--no-timing", help="Verify only."),
    baseline: Optional[BaselineChoice] = typer.Option(None, help="compile: also time torch.compile(Model)."),
    allow_torch_ops: AllowTorchOpsOpt = False,
    rules: RulesOpt = None,
    compile_timeout: Optional[float] = typer.Option(None, metavar="S", help="Seconds allowed for building the "
                                                    f"candidate (default {default(StageTimeouts, 'compile'):g})."),
    verify_timeout: Optional[float] = typer.Option(None, metavar="S", help="Seconds allowed for all correctness "
                                                   f"trials (default {default(StageTimeouts, 'verify'):g})."),
    time_timeout: Optional[float] = typer.Option(None, metavar="S", help="Seconds allowed for timing (default "
                                                 f"{default(StageTimeouts, 'time'):g})."),
    log_dir: Optional[Path] = typer.Option(None, help="Where to keep the worker's full log (default: a temp folder)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of the summary."),
) -> None:
    """Compile, verify and time a candidate kernel against a problem, in a sandboxed worker process."""
    from kernelskill.candidate import read_candidate
    from kernelskill.folders import writable_folder
    from kernelskill.problem import read_problem
    from kernelskill.review.render import print_review, to_json
    from kernelskill.review.reviewer import review as run_review
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
    if not as_json:
        err.print(f"reviewing {candidate} against {problem} ...", style="dim", soft_wrap=True)
    result = run_review(prob, cand, settings, log_dir=log_dir)
    if as_json:
        print(to_json(result))
    else:
        print_review(result)
    raise typer.Exit(int(result.exit_code))


@app.command(
    epilog=(
        "Examples:\n\n"
        "  kernelskill optimize examples/gelu_chain.py --model replay:examples/gelu_chain.transcript.jsonl\n\n"
        "  kernelskill optimize problem.py --model openai/gpt-4o --seeds 3 --rounds 15\n\n"
        "  kernelskill optimize problem.py --model openai/Qwen/Qwen2.5-Coder-32B-Instruct "
        "--base-url http://127.0.0.1:8000/v1\n\n"
        "  kernelskill optimize problem.py --model anthropic/claude-sonnet-4-20250514 --max-cost-per-task 2\n\n"
        "  kernelskill optimize problem.py --model openai/gpt-4o --out runs/x --resume   (after a crash or Ctrl-C)\n\n"
        "Keys come from OPENAI_API_KEY / ANTHROPIC_API_KEY. Exit codes: 0 a correct kernel was found, 1 none was, "
        "2 bad input, 7 no usable model, 130 interrupted (resume with --resume)."
    )
)
def optimize(
    problem: Path = typer.Argument(..., help="KernelBench problem file (defines Model, get_inputs, get_init_inputs)."),
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    backend: BackendOpt = None,
    device: DeviceOpt = None,
    seeds: SeedsOpt = None,
    rounds: RoundsOpt = None,
    rt: Optional[float] = typer.Option(None, metavar="X", help="A correct kernel becomes the base when speedup/base "
                                       f"> 1 + rt (default {_loop_default('rt')}) ..."),
    at: Optional[float] = typer.Option(None, metavar="X", help=f"... or speedup - base > at (default "
                                       f"{_loop_default('at')})."),
    no_long_term_memory: bool = typer.Option(False, "--no-long-term-memory",
                                             help="Ablation: no decision policy, the Planner chooses freely."),
    no_short_term_memory: bool = typer.Option(False, "--no-short-term-memory",
                                              help="Ablation: no repair chain or optimization memory in prompts."),
    max_repairs: Optional[int] = typer.Option(None, metavar="N", help="Repairs of an optimization's failing kernel "
                                              "before going back to the base (default "
                                              f"{_loop_default('max_repairs')})."),
    profile: ProfileOpt = None,
    max_tokens_per_task: MaxTokensOpt = None,
    max_cost_per_task: MaxCostOpt = None,
    trials: TrialsOpt = None,
    iters: ItersOpt = None,
    warmup: WarmupOpt = None,
    allow_torch_ops: AllowTorchOpsOpt = False,
    rules: RulesOpt = None,
    out: Optional[Path] = typer.Option(None, help="Run folder (default runs/<problem>-<time>)."),
    resume: bool = typer.Option(False, "--resume", help="Continue the interrupted run in --out."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object at the end instead of the summary."),
) -> None:
    """Optimize a problem with the agent team: seeds, then rounds of repair or optimization, every candidate
    compiled, verified and timed by the Reviewer. The best correct kernel ends in DIR/best.py."""
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
    console = Console(stderr=as_json)
    try:
        with LiveDisplay(console) as display:
            summary = run_optimize(request, client=client, on_event=display)
    except KeyboardInterrupt:
        err.print(f"[yellow]interrupted.[/] Continue with: {escape(continue_command(problem, out))}",
                  soft_wrap=True, highlight=False)
        raise typer.Exit(130) from None
    if as_json:
        print(summary.model_dump_json(indent=2, exclude={"history"}))
    else:
        print_summary(summary, console)
    raise typer.Exit(0 if summary.success else 1)


@app.command(
    epilog=(
        "Examples:\n\n"
        "  kernelskill bench --problems ~/KernelBench --level 1 --tasks 1-20 --model openai/gpt-4o --gpus 0,1\n\n"
        "  kernelskill bench --problems my_problems/ --model openai/qwen --base-url http://127.0.0.1:8000/v1 "
        "--ablation no-ltm --out runs/no-ltm\n\n"
        "  kernelskill bench ... --out runs/x --resume   (after a crash or Ctrl-C: finished tasks are skipped)\n\n"
        "  kernelskill bench ... --ray auto   (evaluations on the Ray cluster `ray start --head` started here)\n\n"
        "Then: kernelskill report RUN_DIR. Exit codes: 0 the run finished (whatever the tasks' verdicts), 2 bad "
        "input, 7 no usable model, 130 interrupted."
    )
)
def bench(
    problems: Path = typer.Option(..., help="A KernelBench checkout (its KernelBench/level1..3) or a folder of "
                                  "KernelBench-format files (one level named after the folder)."),
    level: Optional[str] = typer.Option(None, help="Levels to run, e.g. 1,2 (default: all found)."),
    tasks: Optional[str] = typer.Option(None, help="Tasks by their file's numeric prefix, e.g. 1-20,33."),
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    backend: BackendOpt = None,
    device: DeviceOpt = None,
    gpus: Optional[str] = typer.Option(None, help="GPU indices to use, e.g. 0,1 (default: every visible GPU); "
                                       "each GPU evaluates one candidate at a time."),
    parallel: Optional[int] = typer.Option(None, metavar="N", help="Tasks in flight (default: 2 per GPU, so LLM "
                                           "waits overlap evaluations; with --ray, 2 per GPU of the cluster)."),
    ray: Optional[str] = typer.Option(
        None, "--ray", metavar="ADDRESS",  # "\\[ray]": help text is Rich markup, which would eat a bare [ray]
        help="Place evaluations on a Ray cluster, one GPU each (the loop and LLM calls stay here): 'auto' for the "
        "cluster `ray start --head` started on this machine, HOST:PORT for a cluster this machine is a node of "
        "(the address `ray start --head` printed), or ray://HOST:10001 from elsewhere. Needs pip install "
        "'kernelskill\\[ray]' here, and the same kernelskill, torch and triton on every node. Default: this "
        "machine's GPUs."),
    seeds: SeedsOpt = None,
    rounds: RoundsOpt = None,
    ablation: Optional[AblationChoice] = typer.Option(None, metavar="NAME", help="none (default), no-ltm, no-stm "
                                                      "or no-memory: the memories switched off."),
    baseline: Optional[BaselineChoice] = typer.Option(None, help="compile: also time torch.compile(Model) against "
                                                      "each task's best kernel."),
    warm_jobs: Optional[int] = typer.Option(
        None, "--warm-jobs", min=0, metavar="N",
        help="With --baseline compile: compile N tasks' torch.compile(Model) at a time into Inductor's cache before "
        "anything is timed, so the baseline reviews load it instead of compiling while they hold the GPU (default: "
        "half the CPU cores, at most 8; 0: no warm-up)."),
    profile: ProfileOpt = None,
    max_tokens_per_task: MaxTokensOpt = None,
    max_cost_per_task: MaxCostOpt = None,
    trials: TrialsOpt = None,
    iters: ItersOpt = None,
    warmup: WarmupOpt = None,
    rules: Optional[RulesChoice] = typer.Option(None, metavar="NAME",
                                                help=RULES_HELP + " results.json reports success under both."),
    out: Optional[Path] = typer.Option(None, help="Run folder (default runs/bench-<time>)."),
    resume: bool = typer.Option(False, "--resume", help="Continue the run in --out: finished tasks are skipped."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Print every round of every task."),
) -> None:
    """Run the loop over many KernelBench tasks concurrently; results.json holds the paper's metrics."""
    from kernelskill.bench.discover import parse_gpus, parse_indices, parse_levels
    from kernelskill.bench.display import BenchDisplay
    from kernelskill.bench.runner import BenchRequest, refuse_replay, run_bench
    from kernelskill.llm.base import LLMError
    from kernelskill.llm.registry import make_client, no_model_message
    from kernelskill.settings import from_options

    if resume and out is None:
        raise KernelSkillError("--resume needs --out RUN_DIR: the run folder of the run to continue")
    if warm_jobs is not None and baseline != "compile":
        raise KernelSkillError("--warm-jobs sets how many torch.compile warm-ups run at once for --baseline compile; "
                               "add --baseline compile, or leave --warm-jobs out")
    if not model:
        message = no_model_message().replace("kernelskill optimize PROBLEM.py", "kernelskill bench --problems DIR")
        raise LLMError(message)
    refuse_replay(model)
    request = from_options(
        BenchRequest, {}, problems=problems, levels=parse_levels(level), indices=parse_indices(tasks), model=model,
        base_url=base_url, backend=backend, gpus=parse_gpus(gpus), parallel=parallel, ablation=ablation,
        baseline=baseline, warm_jobs=warm_jobs, out=out, resume=resume, ray=ray,
        **_settings(dict(seeds=seeds, rounds=rounds, profile=profile),
                    dict(device=device, trials=trials, iters=iters, warmup=warmup, rules=rules),
                    max_tokens_per_task, max_cost_per_task),
    )
    client = make_client(model, base_url)
    console = Console()
    try:
        with BenchDisplay(console, verbose=verbose) as display:
            results = run_bench(request, client=client, on_event=display)
    except KeyboardInterrupt:
        err.print("[yellow]interrupted[/] after the rounds in flight; continue with the same command plus --out "
                  "RUN_DIR --resume", soft_wrap=True)
        raise typer.Exit(130) from None
    o = results.overall
    mean = "-" if o.speedup_mean is None else f"{o.speedup_mean:.3g}x"
    median = "-" if o.speedup_median is None else f"{o.speedup_median:.3g}x"
    console.print(f"[bold]{o.tasks} tasks: success {o.success:.1%}, mean speedup {mean}, median {median} (tasks with "
                  f"a correct kernel), fast_1 {o.fast_1:.1%}[/]")
    if o.noisy:
        console.print(f"[yellow]{o.noisy} of {o.solved} correct kernels were timed noisily[/]: their speedups are "
                      "marked noisy in results.json (timing_noisy) and the report", soft_wrap=True)
    run_dir = results.run.get("run_dir", "RUN_DIR")
    console.print(f"results: {run_dir}/results.json; report: kernelskill report {run_dir}", style="dim")


@app.command(
    epilog=(
        "Examples:\n\n"
        "  kernelskill report runs/bench-20261129-101500\n\n"
        "  kernelskill report runs/full --compare runs/no-ltm --compare runs/no-stm   (ablation table)"
    )
)
def report(
    run_dir: Path = typer.Argument(..., help="A bench or optimize run folder (holds results.json or summary.json)."),
    compare: list[Path] = typer.Option([], "--compare", help="Another run folder to lay side by side "
                                       "(repeatable)."),
    out: Optional[Path] = typer.Option(None, help="Where to write the report (default: the run folder; give "
                                       "another folder for a run folder you cannot write)."),
) -> None:
    """Write report.html (one self-contained file), summary.md and tasks.csv from a bench or optimize run."""
    from kernelskill.report import report_command

    report_command(run_dir, compare, out=out)


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
