"""Typed results of each review stage.

The same objects are rendered to the terminal, to JSON (`--json`), to the run store and into LLM prompts, so every
consumer sees the same facts. Field names of `ReviewResult` are a public contract (README, "JSON output").
"""

from __future__ import annotations

import statistics
from typing import ClassVar, Literal

from pydantic import BaseModel, Field

from kernelskill.errors import ExitCode

Stage = Literal["load", "compile", "verify", "time"]
ErrorKind = Literal[
    "bad_problem",  # the problem file is malformed (the user's to fix)
    "bad_candidate",  # the candidate file has no ModelNew or cannot be read
    "compile_error",  # syntax error, import error, build error, Triton compilation error
    "runtime_error",  # the candidate raised while running
    "mismatch",  # wrong shape, dtype or values, NaN/Inf
    "rejected",  # an anti-reward-hacking check fired
    "timeout",  # a stage ran past its limit
    "crash",  # the worker died (signal, abort, CUDA error that kills the context)
    "sandbox",  # a sandbox layer could not be put in place (only between a worker and review(), which raises)
]


class CompileResult(BaseModel):
    ok: bool
    backend: str
    duration_s: float = 0.0
    checked_only: bool = False  # True on CPU for CUDA sources: built with nvcc, never run
    first_call_s: float | None = None  # the first forward, which also JIT-compiles Triton kernels
    warnings: list[str] = Field(default_factory=list)
    errors: str | None = None  # trimmed to the lines that matter; the full log is in the log file
    builds: list[dict] = Field(default_factory=list)  # CUDA extensions: cache hit, seconds per step (pch, cpp, cuda, link)


class Mismatch(BaseModel):
    """The first disagreement found between candidate and reference."""

    trial: int
    output_index: int | None = None
    reason: str
    mismatched: int | None = None  # number of elements outside tolerance
    total: int | None = None
    first_indices: list[list[int]] = Field(default_factory=list)
    got: list[float] = Field(default_factory=list)
    expected: list[float] = Field(default_factory=list)
    distribution: str | None = None  # the trial's input distribution (VerifyResult.distributions)


class VerifyResult(BaseModel):
    ok: bool
    trials: int
    passed: int
    atol: float
    rtol: float
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    mismatch: Mismatch | None = None
    distributions: list[str] = Field(default_factory=list)  # the trials' inputs: "normal", "scaled x10", "offset +5"
    skipped_distributions: dict[str, str] = Field(default_factory=dict)  # distribution -> why it was not compared
    # distribution -> the mismatch on it, where it did not decide the verdict (--rules kernelbench: KernelBench's
    # harness tries get_inputs()' own inputs only, so there a miss on other inputs is a flag)
    failed_distributions: dict[str, str] = Field(default_factory=dict)


class Precision(BaseModel):
    """How precisely the candidate computes, beside the configured tolerance (review/precision.py)."""

    compute_dtypes: list[str] = Field(default_factory=list)  # float16, bfloat16, float8, tf32: seen in its code
    # the same, shown by the names of the GPU kernels it launched (cuBLAS/cuDNN/CUTLASS name their math; the profiled
    # verify trial, CUDA only): a TF32 library GEMM behind torch.matmul shows here, not in the code
    kernel_dtypes: list[str] = Field(default_factory=list)
    output_dtypes: list[str] = Field(default_factory=list)  # the reference's floating-point output dtypes
    strict_atol: float = 1e-4
    strict_rtol: float = 1e-4
    strict_tolerance_ok: bool | None = None  # the same trials' outputs within the strict tolerance; None: not verified
    strict_mismatched: int | None = None  # elements outside the strict tolerance, over all trials
    reference_tf32: dict[str, bool | str] = Field(default_factory=dict)  # the TF32 switches the reference ran under
    reduced_precision: bool = False  # fp32 problem, passes only the configured tolerance, computes in less


class TimingStats(BaseModel):
    """All samples of one timed callable, in milliseconds, and their summary.

    Robust figures, so that a few descheduled or disturbed samples do not decide a speedup:
    - `trimmed_mean_ms`: the mean of the samples within median ± TRIM_K · σ̂, where σ̂ = 1.4826 · MAD (the MAD scaled
      to a normal distribution's σ), floored at 1% of the median so a tight, quantized set (event resolution) drops
      nothing. Unlike a fixed top/bottom 10% cut it drops nothing from a clean set and still holds when a loaded
      machine disturbs more than 10% of the samples (the MAD survives up to half of them). `dropped` counts the rest.
    - `rel_mad`: σ̂ / median, a coefficient of variation the outliers do not move; `iqr_ms`: the interquartile range.
    The optional fields default so that results written before they existed still load.
    """

    TRIM_K: ClassVar[float] = 3.0  # 3 σ̂: keeps 99.7% of a normal set, drops the 50x samples of a descheduled host

    samples_ms: list[float]
    mean_ms: float
    median_ms: float
    std_ms: float
    min_ms: float
    max_ms: float
    trimmed_mean_ms: float | None = None
    iqr_ms: float | None = None
    rel_mad: float | None = None
    dropped: int = 0

    @classmethod
    def from_samples(cls, samples: list[float]) -> "TimingStats":
        median = statistics.median(samples)
        sigma = 1.4826 * statistics.median(abs(s - median) for s in samples)
        band = cls.TRIM_K * max(sigma, 0.01 * abs(median))
        kept = [s for s in samples if abs(s - median) <= band]
        q = statistics.quantiles(samples, n=4, method="inclusive") if len(samples) > 1 else [median] * 3
        return cls(
            samples_ms=[round(s, 6) for s in samples],
            mean_ms=statistics.fmean(samples),
            median_ms=median,
            std_ms=statistics.pstdev(samples) if len(samples) > 1 else 0.0,
            min_ms=min(samples),
            max_ms=max(samples),
            trimmed_mean_ms=statistics.fmean(kept),
            iqr_ms=q[2] - q[0],
            rel_mad=sigma / median if median > 0 else 0.0,
            dropped=len(samples) - len(kept),
        )


class CompileWarmup(BaseModel):
    """torch.compile(Model)'s first call: Inductor compiling (or loading from its cache) the reference's graphs.

    Made before the timed loop, so the compile's seconds are never a warm-up call's cost (they would cut every side's
    samples to the minimum). The cache counters say whether an earlier warm-up (`bench --baseline compile` warms all
    tasks first, in parallel, with nothing timed) saved the compile: `fxgraph_cache_hit` graphs loaded, `..._miss`
    compiled here."""

    seconds: float
    # None: this PyTorch keeps no such counters
    fxgraph_cache_hit: int | None = None
    fxgraph_cache_miss: int | None = None
    fxgraph_cache_bypass: int | None = None  # graphs Inductor would not cache
    # the first try's error, when it failed in Inductor's compile subprocess and the kernels were then compiled in
    # the worker's own process (the seconds count both tries)
    in_process_after: str | None = None

    def cache_words(self) -> str:
        """"2 graphs from the cache", "compiled 1 graph", ... for logs and the method text."""
        parts = [f"{n} graph{'s' * (n != 1)} {what}" for n, what in (
            (self.fxgraph_cache_hit, "from the cache"), (self.fxgraph_cache_miss, "compiled"),
            (self.fxgraph_cache_bypass, "not cacheable")) if n]
        words = ", ".join(parts) or "no Inductor graph"
        if self.in_process_after:
            words += "; compiled in the worker's own process after Inductor's compile subprocess failed"
        return words


class TimingResult(BaseModel):
    """How reference and candidate were timed, and the speedups.

    `speedup` stays reference mean / candidate mean, the figure papers publish; `speedup_trimmed` and
    `speedup_median` are the same on trimmed means and medians, which a few slow samples do not move. `noisy` says
    the samples are too spread or too skewed to trust any single figure, and `noisy_reason` why (judge()).
    """

    # Thresholds of judge(). A quiet H200 gives 10-50 µs kernels a relative MAD of a few percent with the L2 flush and
    # rotation; over 15% the device or host was disturbed during the loop. A mean more than 25% away from its median
    # is decided by a tail (the case that reported 7.8x for a median of 1.1x); 25% is beyond the 1.1-1.5x spread
    # of repeated quiet reviews' speedups only where that spread comes from the tail, which is what we want to catch.
    MAX_REL_MAD: ClassVar[float] = 0.15
    MAX_MEAN_SKEW: ClassVar[float] = 0.25
    # The same distance for a loop whose samples replayed CUDA graphs (timing_protocol graphed), over which the loop
    # is timed once more (retime_noise; the `noisy` verdict keeps MAX_MEAN_SKEW). Replayed, 316 of the 318 loops of
    # session 22's table (H100, docs/h200/timing) had their mean within 1% of their median and one within 3%; the
    # last, a candidate's loop with 8 slow samples in 100 (12-93 us against 7.2), was 22% off and its review said
    # 0.81x for a kernel the task's other five reviews put at 0.99-1.00x.
    MAX_REPLAYED_SKEW: ClassVar[float] = 0.05

    clock: Literal["cuda_events", "cpu_perf_counter"]
    method: str  # how it was measured, in words (flush, rotation, sync, interleaving)
    warmup: int
    iters: int
    reference: TimingStats
    candidate: TimingStats
    compiled_reference: TimingStats | None = None  # torch.compile(Model), when asked for
    compile_warmup: CompileWarmup | None = None  # that compile's first call, made before the timed loop
    speedup: float  # reference mean / candidate mean (the paper's figure)
    speedup_median: float  # the same on medians (robust to outliers)
    speedup_vs_compile: float | None = None
    speedup_trimmed: float | None = None  # the same on trimmed means (TimingStats)
    spread: float | None = None  # the larger relative MAD of reference and candidate (0.05: ±5%)
    noisy: bool = False
    noisy_reason: str | None = None
    retimed: bool = False  # the first timed loop was noisy, so it was timed once more (the time stage says which kept)
    group: int = 1  # calls per event pair (small kernels on CUDA); each sample is the group's time / group
    prefill_us: float | None = None  # the spin before each sample's start event (robust protocol on CUDA), at most
    host_us: dict[str, float] | None = None  # per callable: median host µs to enqueue one call
    # per callable: timed samples whose enqueueing outlasted the spin before them (then the GPU waited on the host)
    spin_outrun: dict[str, int] | None = None
    # reference max(launch, GPU) / candidate max(launch, GPU) per call: the speedup of calls made back to back from
    # Python, where the launches can set the pace (prefilled samples time the GPU alone); None without host times
    speedup_host_paced: float | None = None
    # the same against torch.compile(Model): its max(launch, GPU) / the candidate's. A compiled module's per-call host
    # work (Dynamo's guards, Inductor's wrapper) is not in speedup_vs_compile, which times the GPU; it is here.
    speedup_vs_compile_host_paced: float | None = None

    def suspect_speedup(self) -> float:
        """The figure a re-verification threshold is held against: the largest of the mean, median and trimmed-mean
        speedups, so a few slow samples (a loaded machine, or a candidate slow on purpose now and then) cannot pull
        a suspicious kernel under it (CI saw a ~300x candidate's mean at 1.2x)."""
        return max(x for x in (self.speedup, self.speedup_median, self.speedup_trimmed) if x is not None)

    @classmethod
    def noise(cls, stats: dict[str, "TimingStats"]) -> float:
        """How far past its thresholds the noisiest callable is: above 1 is noisy (judge says why)."""
        return max((max((s.rel_mad or 0.0) / cls.MAX_REL_MAD, abs(cls._skew(s)) / cls.MAX_MEAN_SKEW)
                    for s in stats.values()), default=0.0)

    @classmethod
    def retime_noise(cls, stats: dict[str, "TimingStats"], replayed: bool) -> float:
        """noise(), and for a loop whose samples replayed CUDA graphs also the distance of each callable's mean from
        its median against MAX_REPLAYED_SKEW: above 1, the time stage times the loop once more (retime_if_noisy)."""
        score = cls.noise(stats)
        if replayed:
            score = max([score, *(abs(cls._skew(s)) / cls.MAX_REPLAYED_SKEW for s in stats.values())])
        return score

    @staticmethod
    def _skew(s: "TimingStats") -> float:
        return s.mean_ms / s.median_ms - 1 if s.median_ms > 0 else 0.0

    @classmethod
    def judge(cls, stats: dict[str, "TimingStats"]) -> list[str]:
        """Why the samples of these callables (name -> stats) are too noisy to trust; empty when they are not."""
        reasons = []
        for name, s in stats.items():
            if (s.rel_mad or 0.0) > cls.MAX_REL_MAD:
                reasons.append(f"{name} relative MAD {s.rel_mad:.0%} > {cls.MAX_REL_MAD:.0%}")
            skew = cls._skew(s)
            if abs(skew) > cls.MAX_MEAN_SKEW:
                reasons.append(f"{name} mean {skew:+.0%} off its median")
        return reasons

    @classmethod
    def of(cls, ref: "TimingStats", cand: "TimingStats", **fields) -> "TimingResult":
        """The result with every speedup, the spread and the noise verdict worked out from the two stats."""
        reasons = cls.judge({"reference": ref, "candidate": cand})
        return cls(
            reference=ref, candidate=cand, speedup=ref.mean_ms / cand.mean_ms,
            speedup_median=ref.median_ms / cand.median_ms,
            speedup_trimmed=(ref.trimmed_mean_ms or ref.mean_ms) / (cand.trimmed_mean_ms or cand.mean_ms),
            spread=max(ref.rel_mad or 0.0, cand.rel_mad or 0.0), noisy=bool(reasons),
            noisy_reason="; ".join(reasons) or None, **fields,
        )


class KernelUsage(BaseModel):
    """What the candidate actually ran, gathered while verifying."""

    own_kernels: dict[str, int] = Field(default_factory=dict)  # kernel name -> launches (Triton or CUDA)
    candidate_ops: dict[str, int] = Field(default_factory=dict)  # PyTorch compute ops the candidate called
    reference_ops: dict[str, int] = Field(default_factory=dict)  # PyTorch compute ops the reference called
    profiled_kernels: list[str] = Field(default_factory=list)  # GPU kernel names seen by the profiler (CUDA only)


class Check(BaseModel):
    """One anti-reward-hacking check that fired."""

    name: str  # e.g. "static:monkey-patch", "runtime:integrity", "policy:no-custom-kernel"
    detail: str


class PolicyResult(BaseModel):
    """The strict-only rules a candidate breaks, and its verdict under each rule set.

    Both verdicts come from the same run: a candidate is run whenever that is safe, so `correct_kernelbench` says
    what KernelBench's harness would say of it and `correct_strict` what our agents are held to.
    """

    rules: Literal["strict", "kernelbench"]  # the rule set that decided `ReviewResult.correct`
    violations: list[Check] = Field(default_factory=list)  # static:try-fallback, static:backend-flags, policy:...
    correct_strict: bool = False
    correct_kernelbench: bool = False
    weights: Literal["same_seed", "copied_by_name"] | None = None  # how ModelNew's parameters were set when verified


class SpeedOfLight(BaseModel):
    """The problem's floor on the GPU it was timed on (review/roofline.py), and how near the candidate came.

    `sol_ms` is the reference's work (the FLOPs of its matrix products and convolutions, inputs + outputs +
    parameters moved once) at the device's peaks: a kernel that does less work than the reference's algorithm can
    beat it, and is flagged `below_reference_floor`. `hard_floor_ms` only counts writing the outputs that cannot sit
    in L2: a candidate faster than that is rejected (`runtime:impossible-time`)."""

    gpu: str | None = None
    flops: float | None = None
    bytes: float | None = None
    output_bytes: float | None = None
    precision: str | None = None  # the peak the floor uses: fp32, tf32 (fp32 matrix products), bf16, fp16, fp8
    sol_ms: float | None = None
    pct_of_sol: float | None = None  # sol_ms / the candidate's median time, in percent
    hard_floor_ms: float | None = None
    note: str | None = None  # why a figure is unknown


class SandboxLayer(BaseModel):
    """One layer of the sandbox in the process that ran the candidate (review/confine.py)."""

    state: Literal["active", "off", "unavailable"]
    mechanism: str | None = None  # when active, e.g. "network namespace", "Landlock ABI 7"
    detail: str | None = None  # when unavailable, why


class JudgeBatch(BaseModel):
    """The judge's batch of back-to-back calls (review/judge.py), by the judge's own clock: what bounded the
    candidate's timing."""

    calls: int  # the candidate's calls; its outputs of `checked_calls` were compared after it answered
    checked_calls: list[int] = Field(default_factory=list)
    reference_calls: int
    reference_s: dict[str, float] = Field(default_factory=dict)  # prepare, calls, commit: the reference runner's
    candidate_s: dict[str, float] = Field(default_factory=dict)
    overhead_us: float  # the part of a batch's `calls` taken as the judge's latency, not calls
    reference_pace_us: float  # each side's calls, less that, per call
    candidate_pace_us: float
    claimed_us: float  # the candidate's median by its runner's events
    reference_events_us: float | None = None  # the reference's median the figure started from, before any scaling
    confirmed: bool  # the candidate's pace is within the tolerance of its claim
    # the fastest event time the same walls would have confirmed (0: any): a claim far above it was not tested much
    fastest_confirmable_us: float = 0.0
    # calls whose written outputs the judge held to the digests the runner said at the end of its calls (0: a batch
    # from before its input file was masked and its outputs digested, whose prepare and commit could hide work)
    digests_checked: int = 0
    # calls whose outputs were compared at positions drawn after the fact, not whole (all but checked_calls; 0: a
    # batch from before they were)
    sampled_calls: int = 0
    # what each runner says its calls loop took, seconds (a hint for diagnosis, never used: the judge's clock is)
    runner_calls_s: dict[str, float] = Field(default_factory=dict)
    # whether each runner says it replayed its calls as a CUDA graph (None: not asked, on a CPU or a stateful problem;
    # a hint for diagnosis, never used)
    graphs: dict[str, bool | None] = Field(default_factory=dict)
    # the CPU both runners' timing and batches ran on, and why it (review/pinning.py); None: not pinned
    timing_cpu: str | None = None


class ReviewResult(BaseModel):
    compiled: bool
    correct: bool
    stage: Stage | None  # the stage that failed, None when the candidate is correct
    error: str | None
    error_kind: ErrorKind | None = None
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    ref_ms: float | None = None
    candidate_ms: float | None = None
    speedup: float | None = None
    compile_ms: float | None = None
    speedup_vs_compile: float | None = None
    device: str  # "cuda" or "cpu"
    device_name: str | None = None  # e.g. "NVIDIA H200" or "cpu (Triton interpreter)"
    backend: str
    flags: list[str] = Field(default_factory=list)
    checks: list[Check] = Field(default_factory=list)
    compile: CompileResult | None = None
    verify: VerifyResult | None = None
    timing: TimingResult | None = None
    kernels: KernelUsage | None = None
    policy: PolicyResult | None = None
    precision: Precision | None = None
    stage_seconds: dict[str, float] = Field(default_factory=dict)
    settings: dict = Field(default_factory=dict)
    problem: str | None = None
    candidate: str | None = None
    log: str | None = None  # trimmed worker log
    log_path: str | None = None  # the full worker log
    sandbox: dict[str, SandboxLayer] = Field(default_factory=dict)  # network, filesystem, environment, user
    speed_of_light: SpeedOfLight | None = None  # on a GPU in the table, when the candidate was timed
    judge_batch: JudgeBatch | None = None  # when the judge timed the candidate
    # the judge's first disagreement with the reference (its trials or its batch), where it decided the verdict; the
    # runner's own trials keep theirs in `verify`
    judge_mismatch: Mismatch | None = None

    @property
    def exit_code(self) -> ExitCode:
        if self.stage is None:  # correct, or (CUDA on CPU) compile-checked with nothing found wrong
            return ExitCode.OK
        return {
            "bad_problem": ExitCode.BAD_INPUT,
            "bad_candidate": ExitCode.BAD_INPUT,
            "compile_error": ExitCode.COMPILE_FAILED,
            "timeout": ExitCode.TIMEOUT,
            "rejected": ExitCode.REJECTED,
            "crash": ExitCode.CRASHED,
        }.get(self.error_kind or "", ExitCode.INCORRECT)
