"""The worker process: no secrets in its environment, logs kept, static checks and comparisons."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.conftest import DATA, process_running, run_review


def test_worker_environment_holds_no_secrets(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    monkeypatch.setenv("MY_SERVICE_TOKEN", "t0k3n")
    monkeypatch.setenv("KERNELSKILL_HARMLESS", "1")
    result = run_review("problems/p01_pointwise_gelu_chain.py", "candidates/special/env_probe.py", tmp_path, timing=False)
    assert result.correct, result.error  # the probe returns a wrong answer if it sees any secret-like variable
    log = Path(result.log_path).read_text()
    assert "sk-test-not-a-real-key" not in log and "t0k3n" not in log
    visible = next(line for line in log.splitlines() if line.startswith("visible:"))  # the probe did run and print
    assert "KERNELSKILL_HARMLESS" in visible and visible.endswith("leaked: []")


def test_clean_environment_drops_secret_like_names(monkeypatch):
    from kernelskill.review.sandbox import clean_environment

    monkeypatch.setenv("ANTHROPIC_API_KEY", "x")
    monkeypatch.setenv("HF_TOKEN", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    monkeypatch.setenv("DB_PASSWORD", "x")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    env = clean_environment()
    assert not {"ANTHROPIC_API_KEY", "HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD"} & env.keys()
    assert env["CUDA_VISIBLE_DEVICES"] == "0"


def test_full_log_is_kept_and_trimmed_copy_returned(tmp_path):
    result = run_review("problems/p02_row_softmax.py", "candidates/broken/runtime_error.py", tmp_path, timing=False)
    assert result.error_kind == "runtime_error"
    assert "runtime_error.py:" in result.error  # the candidate's own line, not the harness's frames
    log = Path(result.log_path).read_text()
    # the log holds the verdict and the whole traceback, the harness's frames too, ending in the candidate's error
    assert "[kernelskill] verify stage: runtime_error: the candidate raised on its first run" in log
    assert "Traceback (most recent call last)" in log and "is invalid for input of size 8192" in log
    assert "review/worker/" in log


def test_honest_candidates_pass_static_checks():
    from kernelskill.review.static_checks import static_checks

    sources = sorted((DATA / "candidates").glob("*/*_ok.py"))
    assert len(sources) >= 15
    for path in sources:
        assert static_checks(path.read_text(), str(path)) == [], path


@pytest.mark.parametrize("snippet,rule", [
    ("import torch\ntorch.allclose = None", "static:monkey-patch"),
    ("import torch\nsetattr(torch, 'isclose', None)", "static:monkey-patch"),
    ("import torch\ntorch.backends.cuda.matmul.allow_tf32 = True", "static:backend-flags"),
    ("import torch\nsetattr(torch.backends.cudnn, 'benchmark', True)", "static:backend-flags"),
    ("import torch\ntorch.set_float32_matmul_precision('high')", "static:backend-flags"),
    # a compiler option set to a plain value (CUDA-L1's L2/49 kernel) is a global setting, not a patch ...
    ("import torch\ntorch._inductor.config.coordinate_descent_tuning = True", "static:backend-flags"),
    ("import torch\ntorch._inductor.config.triton.autotune_pointwise = (1, 'a')", "static:backend-flags"),
    # ... but code assigned there is one
    ("import torch\ntorch._inductor.config.post_grad_custom_pass = lambda g: g", "static:monkey-patch"),
    ("import time\ntime.perf_counter = lambda: 0.0", "static:monkey-patch"),
    ("import sys\nf = sys._getframe(1)", "static:frame-access"),
    ("import sys\nm = sys.modules['kernelskill_problem']", "static:frame-access"),
    ("def f(fr):\n    return fr.f_back.f_locals", "static:frame-access"),
    ("import gc", "static:frame-access"),
    ("import subprocess", "static:process"),
    ("import os\nos.system('true')", "static:process"),
    ("x = eval('1')", "static:dynamic-code"),
    ("import multiprocessing", "static:concurrency"),
    ("try:\n    y = 1\nexcept Exception:\n    y = 2", "static:try-fallback"),
    ("import torch.nn as nn\nclass ModelNew(Model):\n    pass", "static:reference-model"),
])
def test_static_rules(snippet, rule):
    from kernelskill.review.static_checks import static_checks

    assert rule in {c.name for c in static_checks(snippet)}


def test_static_checks_allow_plain_kernel_code():
    from kernelskill.review.static_checks import static_checks

    ok = ("import os\nimport torch\ntry:\n    import triton\nexcept ImportError:\n    triton = None\n"
          "os.environ['TORCH_CUDA_ARCH_LIST'] = '9.0'\nx = torch.empty(3)\nx.data = x\n")
    assert static_checks(ok) == []


def test_compare_reports_errors_and_indices():
    from kernelskill.review.compare import compare_outputs

    ref = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    cand = ref.clone()
    cand[2, 1] += 1.0
    cmp = compare_outputs(ref, cand, 1e-2, 1e-2, trial=0)
    assert not cmp.ok and cmp.mismatch.first_indices == [[2, 1]] and cmp.mismatch.mismatched == 1
    assert cmp.max_abs_error == pytest.approx(1.0)
    nan = ref.clone()
    nan[0, 0] = float("nan")
    assert "NaN" in compare_outputs(ref, nan, 1e-2, 1e-2, 0).mismatch.reason
    both_nan = compare_outputs(nan, nan.clone(), 1e-2, 1e-2, 0)
    assert both_nan.ok  # NaN where the reference has NaN is fine
    assert not compare_outputs(ref, ref.double(), 1e-2, 1e-2, 0).ok  # dtype must match
    assert not compare_outputs((ref, ref), ref, 1e-2, 1e-2, 0).ok  # so must the number of outputs


def test_killing_the_reviewer_kills_its_worker(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    proc = subprocess.Popen(
        [sys.executable, "-m", "kernelskill.cli", "review", str(DATA / "problems/p01_pointwise_gelu_chain.py"),
         str(DATA / "candidates/broken/hang.py"), "--device", "cpu", "--log-dir", str(tmp_path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    from kernelskill.review.sandbox import descendants

    deadline = time.time() + 120
    started: list[int] = []
    while time.time() < deadline and len(started) < 4:  # the zygote, the holder, pid 1 and the worker in its hang
        time.sleep(0.5)
        started = descendants(proc.pid)
    assert len(started) >= 4, started
    # then the candidate's runner too: its holder, its init and the worker, which goes on into the hang
    while time.time() < deadline and len(started) < 7:
        time.sleep(0.25)
        started = descendants(proc.pid)
    time.sleep(1.5)  # let it reach the candidate's endless loop
    started = descendants(proc.pid)
    os.kill(proc.pid, signal.SIGKILL)  # no chance to clean up: the kernel's parent-death signals must do it
    proc.wait()
    for _ in range(40):
        alive = [pid for pid in started if process_running(pid)]
        if not alive:
            return
        time.sleep(0.25)
    raise AssertionError(f"{alive} outlived their killed reviewer")



def test_hidden_work_detection():
    from kernelskill.review.timing import hidden_work

    ref, ref_idle = [1.0] * 10, [1.02] * 10  # the reference's stop event is ~20 us before the device is idle
    assert not hidden_work([0.5] * 10, [0.52] * 10, ref, ref_idle)  # same host latency: nothing hidden
    assert hidden_work([0.05] * 10, [2.9] * 10, ref, ref_idle)  # 2.85 ms ran after the stop event


def test_cpu_timer_rotates_contents_under_fixed_buffers():
    from kernelskill.review.timing import Timer

    seen = []

    def fn(x):
        seen.append((x.data_ptr(), float(x[0])))
        return x * 2

    sets = [[torch.full((4,), float(i))] for i in range(3)]
    samples, synced, kept = Timer(torch.device("cpu")).run({"f": fn}, sets, warmup=0, iters=6, keep_last=3)
    assert len(samples["f"]) == 6 and samples["f"] == synced["f"]
    pointers = {p for p, _ in seen}
    assert len(pointers) == 2  # two fixed buffers ...
    by_pointer = {}
    for p, v in seen:
        by_pointer.setdefault(p, []).append(v)
    assert all(len(set(v)) > 1 for v in by_pointer.values())  # ... each seeing different contents over time
    assert [(k, float(out[0])) for k, out in kept["f"]] == [(k, 2.0 * k) for k, _ in kept["f"]]


def test_a_callable_of_seconds_per_call_gets_fewer_timed_calls_not_the_whole_time_stage():
    # A published kernel retried its failing build on every forward (5 s a call on the H200): 25 warm-up and 100
    # timed calls held the only GPU of a bench for the 600 s time stage. The timed loop keeps to a time budget;
    # both callables get the same (smaller) number of samples.
    import time as clock

    import torch

    from kernelskill.review.timing import MIN_ITERS, Timer

    def slow(x):
        clock.sleep(0.05)  # a budget of 0.4 s holds fewer than MIN_ITERS of these
        return x + 1

    sets = [[torch.full((4,), float(i))] for i in range(3)]
    start = clock.monotonic()
    samples, _, kept = Timer(torch.device("cpu")).run({"ref": lambda x: x + 1, "slow": slow}, sets, warmup=25,
                                                       iters=100, keep_last=3, budget_s=0.4)
    assert clock.monotonic() - start < 3  # without the budget: 125 slow calls, 6.25 s
    assert len(samples["slow"]) == len(samples["ref"]) == MIN_ITERS and len(kept["slow"]) == 3
    # a budget far above 50 calls (each zeroes a 32 MB buffer: milliseconds, more on a loaded CI machine)
    samples, _, _ = Timer(torch.device("cpu")).run({"ref": lambda x: x + 1}, sets, warmup=2, iters=50, budget_s=120)
    assert len(samples["ref"]) == 50  # fast callables keep every timed call


def test_compiler_errors_lead_with_the_error_not_the_command_line():
    from kernelskill.review.logs import compiler_errors

    text = (
        "Error building extension 'x': [1/3] /usr/local/cuda/bin/nvcc -MD -MF cuda.cuda.o.d -c cuda.cu -o cuda.cuda.o\n"
        "FAILED: [code=2] cuda.cuda.o\n"
        "/usr/local/cuda/bin/nvcc -MD -MF cuda.cuda.o.d -c /root/x/cuda.cu -o cuda.cuda.o\n"
        '/root/x/cuda.cu(12): error: identifier "scale_factor" is undefined\n'
        "      y[i] = x[i] * scale_factor;\n"
        "                    ^\n\n"
        '1 error detected in the compilation of "/root/x/cuda.cu".\n'
    )
    summary = compiler_errors(text)
    assert summary.splitlines()[0] == '/root/x/cuda.cu(12): error: identifier "scale_factor" is undefined'
    assert "scale_factor;" in summary and "-MD" not in summary


def test_compiler_options_set_to_values_are_strict_only_not_a_patch():
    # CUDA-L1's L2/49 kernel tunes Inductor with six such lines; KernelBench's harness runs it, so under
    # --rules kernelbench it must run too (a safety finding would stop it before it runs)
    from kernelskill.review.static_checks import STRICT_ONLY, static_checks

    src = "import torch\ntorch._inductor.config.force_fuse_cudnn = True\ntorch._dynamo.config.cache_size_limit = 64\n"
    names = {c.name for c in static_checks(src)}
    assert names == {"static:backend-flags"} and names <= STRICT_ONLY
