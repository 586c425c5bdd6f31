"""The `kernelskill` command line."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

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


@app.callback()
def _root() -> None:
    """KernelSkill: review candidate kernels, explain the knowledge base's decisions.

    Start with `kernelskill review PROBLEM.py CANDIDATE.py`; every command has -h.
    """


def _mount_optional() -> None:
    try:
        from kernelskill.memory.cli import memory_app
    except ImportError:  # the memory package is optional until it lands
        return
    app.add_typer(memory_app, name="memory", help="The long-term memory: knowledge base and decision policy.")


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
    trials: int = typer.Option(5, min=1, help="Correctness trials, each on fresh random inputs."),
    atol: float = typer.Option(1e-2, help="Absolute tolerance."),
    rtol: float = typer.Option(1e-2, help="Relative tolerance."),
    warmup: Optional[int] = typer.Option(None, min=0, help="Warm-up calls before timing (default 25 on CUDA, 2 on CPU)."),
    iters: Optional[int] = typer.Option(None, min=1, help="Timed calls (default 100 on CUDA, 10 on CPU)."),
    no_timing: bool = typer.Option(False, "--no-timing", help="Verify only."),
    baseline: Optional[str] = typer.Option(None, help="'compile' also times torch.compile(Model)."),
    allow_torch_ops: bool = typer.Option(False, "--allow-torch-ops", help="Accept candidates whose work is done by PyTorch ops."),
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
    from kernelskill.settings import ReviewSettings, StageTimeouts

    if backend not in (None, "triton", "cuda"):
        raise KernelSkillError(f"--backend must be triton or cuda, not {backend!r}")
    if device not in ("auto", "cuda", "cpu"):
        raise KernelSkillError(f"--device must be cuda, cpu or auto, not {device!r}")
    if baseline not in (None, "compile"):
        raise KernelSkillError(f"--baseline takes only 'compile', not {baseline!r}")
    settings = ReviewSettings(
        device=device, backend=backend, trials=trials, atol=atol, rtol=rtol, warmup=warmup, iters=iters,
        timing=not no_timing, baseline=baseline, allow_torch_ops=allow_torch_ops,
        timeouts=StageTimeouts(compile=compile_timeout, verify=verify_timeout, time=time_timeout),
    )
    from kernelskill.problem import read_problem

    prob = read_problem(problem)
    cand = read_candidate(candidate, backend)
    if not as_json:
        err.print(f"reviewing {candidate} against {problem} ...", style="dim", soft_wrap=True)
    result = run_review(prob, cand, settings, log_dir=log_dir)
    if as_json:
        print(to_json(result))
    else:
        print_review(result)
    raise typer.Exit(int(result.exit_code))


def main() -> None:
    import signal

    # a polite kill runs the same cleanup as Ctrl-C: workers are killed, nothing is left running
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    _mount_optional()
    try:
        app()
    except KernelSkillError as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(int(exc.exit_code))


if __name__ == "__main__":
    main()
