"""The `kernelskill` command line."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape

from kernelskill.errors import KernelSkillError

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

RULES_HELP = ("strict (default): also reject try/except fallbacks, global backend switches (cudnn.benchmark, TF32), "
              "no kernel of its own and re-running the reference's operators; kernelbench: the verdict "
              "KernelBench's harness would give, those kept as flags. Real cheats fail under both.")


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
    device: str = typer.Option("auto", help="cuda, cpu, or auto (cuda when a GPU is visible)."),
    backend: Optional[str] = typer.Option(None, help="triton or cuda; detected from the candidate when omitted."),
    trials: int = typer.Option(5, metavar="N", min=1, help="Correctness trials, each on fresh random inputs."),
    atol: float = typer.Option(1e-2, help="Absolute tolerance."),
    rtol: float = typer.Option(1e-2, help="Relative tolerance."),
    warmup: Optional[int] = typer.Option(None, metavar="N", min=0, help="Warm-up calls before timing (default 25 on CUDA, 2 on CPU)."),
    iters: Optional[int] = typer.Option(None, metavar="N", min=1, help="Timed calls (default 100 on CUDA, 10 on CPU)."),
    no_timing: bool = typer.Option(False, "--no-timing", help="Verify only."),
    baseline: Optional[str] = typer.Option(None, help="'compile' also times torch.compile(Model)."),
    allow_torch_ops: bool = typer.Option(False, "--allow-torch-ops", help="Accept candidates whose work is done by PyTorch ops."),
    rules: str = typer.Option("strict", help=RULES_HELP),
    compile_timeout: float = typer.Option(600, help="Seconds allowed for building the candidate."),
    verify_timeout: float = typer.Option(300, help="Seconds allowed for all correctness trials."),
    time_timeout: float = typer.Option(600, help="Seconds allowed for timing."),
    log_dir: Optional[Path] = typer.Option(None, help="Where to keep the worker's full log (default: a temp folder)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of the summary."),
) -> None:
    """Compile, verify and time a candidate kernel against a problem, in a sandboxed worker process."""
    from kernelskill.candidate import read_candidate
    from kernelskill.review.render import print_review, to_json
    from kernelskill.review.reviewer import review as run_review
    from kernelskill.settings import ReviewSettings, StageTimeouts, from_options

    if backend not in (None, "triton", "cuda"):
        raise KernelSkillError(f"--backend must be triton or cuda, not {backend!r}")
    if device not in ("auto", "cuda", "cpu"):
        raise KernelSkillError(f"--device must be cuda, cpu or auto, not {device!r}")
    if baseline not in (None, "compile"):
        raise KernelSkillError(f"--baseline takes only 'compile', not {baseline!r}")
    timeouts = from_options(StageTimeouts, {s: f"--{s}-timeout" for s in ("compile", "verify", "time")},
                            compile=compile_timeout, verify=verify_timeout, time=time_timeout)
    settings = from_options(
        ReviewSettings, {}, device=device, backend=backend, trials=trials, atol=atol, rtol=rtol, warmup=warmup,
        iters=iters, timing=not no_timing, baseline=baseline, allow_torch_ops=allow_torch_ops, rules=rules,
        timeouts=timeouts,
    )
    from kernelskill.folders import writable_folder
    from kernelskill.problem import read_problem

    prob = read_problem(problem)
    cand = read_candidate(candidate, backend)
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
    model: Optional[str] = typer.Option(None, help="provider/name (openai/..., anthropic/...), or replay:TRANSCRIPT."),
    base_url: Optional[str] = typer.Option(None, help="An OpenAI-compatible server (vLLM, SGLang, Ollama ...); "
                                           "default: OPENAI_BASE_URL, else the provider's own."),
    backend: str = typer.Option("triton", help="triton or cuda."),
    device: str = typer.Option("auto", help="cuda, cpu, or auto (cuda when a GPU is visible). On cpu, Triton kernels "
                               "run in Triton's interpreter."),
    seeds: int = typer.Option(3, metavar="N", min=1, max=32, help="Kernels generated independently before the rounds."),
    rounds: int = typer.Option(15, metavar="N", min=0, help="Repair or optimization rounds after the seeds."),
    rt: float = typer.Option(0.3, metavar="X", min=0, help="A correct kernel becomes the base when speedup/base > 1 + rt ..."),
    at: float = typer.Option(0.3, metavar="X", min=0, help="... or speedup - base > at."),
    no_long_term_memory: bool = typer.Option(False, "--no-long-term-memory",
                                             help="Ablation: no decision policy, the Planner chooses freely."),
    no_short_term_memory: bool = typer.Option(False, "--no-short-term-memory",
                                              help="Ablation: no repair chain or optimization memory in prompts."),
    max_repairs: int = typer.Option(3, metavar="N", min=1, help="Repairs of an optimization's failing kernel before going back "
                                    "to the base."),
    profile: str = typer.Option("auto", help="Profile each base with ncu: auto (on a GPU when ncu is found), on, off."),
    max_tokens_per_task: Optional[int] = typer.Option(None, metavar="N", min=1, help="Stop the task once this many tokens are "
                                                      "spent (its best kernel is kept)."),
    max_cost_per_task: Optional[float] = typer.Option(None, metavar="USD", min=0.0001, help="Stop the task once this many US "
                                                      "dollars are spent (priced models only)."),
    trials: int = typer.Option(5, metavar="N", min=1, help="Correctness trials per candidate."),
    iters: Optional[int] = typer.Option(None, metavar="N", min=1, help="Timed calls per candidate (default 100 CUDA, 10 CPU)."),
    warmup: Optional[int] = typer.Option(None, metavar="N", min=0, help="Warm-up calls before timing (default 25 CUDA, 2 CPU)."),
    allow_torch_ops: bool = typer.Option(False, "--allow-torch-ops", help="Accept kernels whose work is done by "
                                         "PyTorch ops."),
    rules: str = typer.Option("strict", help=RULES_HELP),
    out: Optional[Path] = typer.Option(None, help="Run folder (default runs/<problem>-<time>)."),
    resume: bool = typer.Option(False, "--resume", help="Continue the interrupted run in --out."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object at the end instead of the summary."),
) -> None:
    """Optimize a problem with the agent team: seeds, then rounds of repair or optimization, every candidate
    compiled, verified and timed by the Reviewer. The best correct kernel ends in DIR/best.py."""
    from kernelskill.llm.accounting import Budget
    from kernelskill.llm.registry import make_client, no_model_message
    from kernelskill.loop.display import LiveDisplay, print_summary
    from kernelskill.loop.optimize import OptimizeRequest
    from kernelskill.loop.optimize import optimize as run_optimize
    from kernelskill.loop.settings import LoopSettings
    from kernelskill.settings import ReviewSettings, from_options

    if device not in ("auto", "cuda", "cpu"):
        raise KernelSkillError(f"--device must be cuda, cpu or auto, not {device!r}")
    if profile not in ("auto", "on", "off"):
        raise KernelSkillError(f"--profile must be auto, on or off, not {profile!r}")
    if not model:
        from kernelskill.llm.base import LLMError

        raise LLMError(no_model_message())
    request = OptimizeRequest(
        problem=problem, model=model, base_url=base_url, backend=backend, out=out, resume=resume,
        loop=from_options(LoopSettings, {}, seeds=seeds, rounds=rounds, rt=rt, at=at,
                          long_term_memory=not no_long_term_memory, short_term_memory=not no_short_term_memory,
                          max_repairs=max_repairs, profile=profile),
        review=from_options(ReviewSettings, {}, device=device, trials=trials, iters=iters, warmup=warmup,
                            allow_torch_ops=allow_torch_ops, rules=rules),
        budget=from_options(Budget, BUDGET_OPTIONS, max_tokens=max_tokens_per_task, max_cost=max_cost_per_task),
    )
    client = make_client(model, base_url)  # a missing key or a malformed model string fails before any work
    console = Console(stderr=as_json)
    try:
        with LiveDisplay(console) as display:
            summary = run_optimize(request, client=client, on_event=display)
    except KeyboardInterrupt:
        where = f" --out {out}" if out else ""
        err.print(f"[yellow]interrupted.[/] Continue with: kernelskill optimize {problem} --model {model}{where} "
                  "--resume"
                  + ("" if out else " (with --out set to the run folder printed above)"), soft_wrap=True)
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
    model: Optional[str] = typer.Option(None, help="provider/name (openai/..., anthropic/...)."),
    base_url: Optional[str] = typer.Option(None, help="An OpenAI-compatible server; default OPENAI_BASE_URL."),
    backend: str = typer.Option("triton", help="triton or cuda."),
    device: str = typer.Option("auto", help="cuda, cpu, or auto."),
    gpus: Optional[str] = typer.Option(None, help="GPU indices to use, e.g. 0,1 (default: every visible GPU); "
                                       "each GPU evaluates one candidate at a time."),
    parallel: Optional[int] = typer.Option(None, metavar="N", min=1, help="Tasks in flight (default: 2 per GPU, so LLM waits "
                                           "overlap evaluations; with --ray, 2 per GPU of the cluster)."),
    ray: Optional[str] = typer.Option(
        None, "--ray", metavar="ADDRESS",  # "\\[ray]": help text is Rich markup, which would eat a bare [ray]
        help="Place evaluations on a Ray cluster, one GPU each (the loop and LLM calls stay here): 'auto' for the "
        "cluster `ray start --head` started on this machine, HOST:PORT for a cluster this machine is a node of "
        "(the address `ray start --head` printed), or ray://HOST:10001 from elsewhere. Needs pip install "
        "'kernelskill\\[ray]' here, and the same kernelskill, torch and triton on every node. Default: this "
        "machine's GPUs."),
    seeds: int = typer.Option(3, metavar="N", min=1, max=32, help="Seed kernels per task."),
    rounds: int = typer.Option(15, metavar="N", min=0, help="Rounds per task."),
    ablation: str = typer.Option("none", help="none, no-ltm, no-stm or no-memory."),
    baseline: Optional[str] = typer.Option(None, help="'compile': also time torch.compile(Model) against each "
                                           "task's best kernel."),
    profile: str = typer.Option("auto", help="Profile bases with ncu: auto, on, off."),
    max_tokens_per_task: Optional[int] = typer.Option(None, metavar="N", min=1, help="Token budget per task."),
    max_cost_per_task: Optional[float] = typer.Option(None, metavar="USD", min=0.0001, help="US dollar budget per task."),
    trials: int = typer.Option(5, metavar="N", min=1, help="Correctness trials per candidate."),
    iters: Optional[int] = typer.Option(None, metavar="N", min=1, help="Timed calls per candidate."),
    warmup: Optional[int] = typer.Option(None, metavar="N", min=0, help="Warm-up calls per candidate."),
    rules: str = typer.Option("strict", help=RULES_HELP + " results.json reports success under both."),
    out: Optional[Path] = typer.Option(None, help="Run folder (default runs/bench-<time>)."),
    resume: bool = typer.Option(False, "--resume", help="Continue the run in --out: finished tasks are skipped."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Print every round of every task."),
) -> None:
    """Run the loop over many KernelBench tasks concurrently; results.json holds the paper's metrics."""
    from kernelskill.bench.discover import parse_gpus, parse_indices, parse_levels
    from kernelskill.bench.display import BenchDisplay
    from kernelskill.bench.runner import BenchRequest, refuse_replay, run_bench
    from kernelskill.llm.accounting import Budget
    from kernelskill.llm.base import LLMError
    from kernelskill.llm.registry import make_client, no_model_message
    from kernelskill.loop.settings import LoopSettings
    from kernelskill.settings import ReviewSettings, from_options

    if ablation not in ("none", "no-ltm", "no-stm", "no-memory"):
        raise KernelSkillError(f"--ablation must be none, no-ltm, no-stm or no-memory, not {ablation!r}")
    if baseline not in (None, "compile"):
        raise KernelSkillError(f"--baseline takes only 'compile', not {baseline!r}")
    if device not in ("auto", "cuda", "cpu"):
        raise KernelSkillError(f"--device must be cuda, cpu or auto, not {device!r}")
    if profile not in ("auto", "on", "off"):
        raise KernelSkillError(f"--profile must be auto, on or off, not {profile!r}")
    if backend not in ("triton", "cuda"):
        raise KernelSkillError(f"--backend must be triton or cuda, not {backend!r}")
    if resume and out is None:
        raise KernelSkillError("--resume needs --out RUN_DIR: the run folder of the run to continue")
    if not model:
        message = no_model_message().replace("kernelskill optimize PROBLEM.py", "kernelskill bench --problems DIR")
        raise LLMError(message)
    refuse_replay(model)
    request = BenchRequest(
        problems=problems, levels=parse_levels(level), indices=parse_indices(tasks), model=model, base_url=base_url,
        backend=backend, gpus=parse_gpus(gpus), parallel=parallel, ablation=ablation, baseline=baseline, out=out,
        resume=resume, ray=ray,
        loop=from_options(LoopSettings, {}, seeds=seeds, rounds=rounds, profile=profile),
        review=from_options(ReviewSettings, {}, device=device, trials=trials, iters=iters, warmup=warmup,
                            rules=rules),
        budget=from_options(Budget, BUDGET_OPTIONS, max_tokens=max_tokens_per_task, max_cost=max_cost_per_task),
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
    console.print(f"[bold]{o.tasks} tasks: success {o.success:.1%}, mean speedup {mean} (tasks with a correct "
                  f"kernel), fast_1 {o.fast_1:.1%}[/]")
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
    run_dir: Path = typer.Argument(..., help="A bench run folder (holds results.json and run.db)."),
    compare: list[Path] = typer.Option([], "--compare", help="Another run folder to lay side by side "
                                       "(repeatable)."),
) -> None:
    """Write RUN_DIR/report.html (one self-contained file), summary.md and tasks.csv from a bench run."""
    from kernelskill.report import report_command

    report_command(run_dir, compare)


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
