"""Problem code runs confined wherever it runs: `optimize` and `bench` check a problem, and the speed of light and
`memory explain --problem` count its work, in one confined child per problem (review/probe.py), never in the
harness, whose environment holds the API keys."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from kernelskill.bench.runner import BenchRequest, run_bench
from kernelskill.errors import ProblemError
from kernelskill.loop.optimize import OptimizeRequest, optimize
from kernelskill.loop.settings import LoopSettings
from kernelskill.problem import read_problem
from kernelskill.review import probe
from kernelskill.review.probe import SandboxUnavailable, check_problem
from kernelskill.review.work import measure_problem_work
from kernelskill.settings import ReviewSettings

from ..loop.helpers import PROBLEM, AgentScript, FakeEvaluator

SECRET = "sk-probe-test-0f1e2d3c4b5a-secret"

ENTRIES = '''

class Model(nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
{get_inputs}


def get_init_inputs():
    return []
'''


def problem_file(path: Path, top: str, get_inputs: str = "    return [torch.randn(4)]") -> Path:
    path.write_text("import os\nimport torch\nimport torch.nn as nn\n" + top + ENTRIES.format(get_inputs=get_inputs))
    return path


@pytest.fixture(autouse=True)
def fresh_cache():
    probe.clear_cache()
    yield
    probe.clear_cache()


def test_problem_code_never_sees_the_harness_secrets(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("MY_SERVICE_TOKEN", SECRET)
    path = problem_file(tmp_path / "1_reads_keys.py",
                        'SEEN = [os.environ.get("OPENAI_API_KEY"), os.environ.get("MY_SERVICE_TOKEN")]\n'
                        'SEEN += [v for v in os.environ.values() if "secret" in v]\n',
                        '    raise ValueError(f"seen: {SEEN}")')
    with pytest.raises(ProblemError) as info:
        check_problem(read_problem(path))
    # run in this process (as before), the problem read the key and its error carried it out
    assert "seen: [None, None]" in str(info.value) and SECRET not in str(info.value)
    assert "`get_inputs()` raised ValueError" in str(info.value)  # the check's own words, as before


def test_problem_code_cannot_write_outside_its_scratch_folder(tmp_path):
    outside = tmp_path / "escaped.txt"
    path = problem_file(tmp_path / "2_writes.py", f'''
try:
    open({str(outside)!r}, "w").write("escaped")
    WROTE = "wrote outside"
except OSError as exc:
    WROTE = type(exc).__name__
open("inside.txt", "w").write("its own folder is writable")
''', '    raise ValueError(f"{WROTE} from {os.getcwd()}")')
    with pytest.raises(ProblemError, match=r"raised ValueError: PermissionError from (\S+)") as info:
        check_problem(read_problem(path))
    assert not outside.exists()
    scratch = Path(str(info.value).rsplit(" from ", 1)[1].strip())
    assert scratch.name.startswith("kernelskill-worker-") and not scratch.exists()  # its scratch folder is gone


def test_a_problem_whose_get_inputs_hangs_is_stopped_at_the_limit_with_whatever_it_started(tmp_path):
    marker = f"{os.getpid() % 1000 + 4000}.123"  # a sleep only this test starts
    path = problem_file(tmp_path / "3_hangs.py", "import subprocess\nimport time\n",
                        f'    subprocess.Popen(["sleep", "{marker}"])\n    time.sleep(3600)')

    def started() -> list[str]:
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                found += [pid] if marker in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace") else []
            except OSError:
                pass
        return found

    seen, probing = [], threading.Event()

    def watch() -> None:  # the problem's sleep seen running: the limit stopped get_inputs(), not an earlier step
        while probing.is_set() and not seen:
            seen.extend(started())
            time.sleep(0.1)

    probing.set()
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    start = time.monotonic()
    try:
        with pytest.raises(ProblemError) as info:  # the limit runs from the probe's start (the zygote is up by then)
            check_problem(read_problem(path), timeout_s=10)
    finally:
        probing.clear()
        watcher.join()
    assert time.monotonic() - start < 60
    message = str(info.value)
    assert "did not finish within 10 s" in message and "get_inputs()" in message and "\n" not in message
    assert seen, "the problem's get_inputs() never started its sleep within the limit"
    time.sleep(0.5)
    left = started()
    assert not left, f"processes the problem started outlived its probe: {left}"


def break_the_sandbox(monkeypatch):
    """The child's confine.apply() raises, as it does when a requested layer cannot be applied. Only the probe's
    environment is broken: the modules that bind clean_environment by name at import are imported first, so a first
    import while the patch is on does not keep the broken function for the rest of the session (the reviewer did,
    and failed every later review in that test process)."""
    import kernelskill.profiling.run  # noqa: F401 - imported before the patch, see above
    import kernelskill.review.reviewer  # noqa: F401
    from kernelskill.review import confine, sandbox

    real = sandbox.clean_environment

    def broken(*args, **kwargs):
        return {**real(*args, **kwargs), confine.SPEC_VAR: '{"layers": {"network": true}}'}

    monkeypatch.setattr(sandbox, "clean_environment", broken)


def test_a_sandbox_that_cannot_be_applied_stops_optimize_before_any_model_call(tmp_path, monkeypatch):
    break_the_sandbox(monkeypatch)
    client = AgentScript()  # any call would be recorded
    request = OptimizeRequest(problem=PROBLEM, model="script:", out=tmp_path / "run",
                              loop=LoopSettings(seeds=1, rounds=1, profile="off"), review=ReviewSettings(device="cpu"))
    with pytest.raises(SandboxUnavailable) as info:
        optimize(request, client=client, evaluator=FakeEvaluator())
    message = str(info.value)
    assert "\n" not in message and "KeyError" in message and "sandbox could not be set up" in message
    assert int(info.value.exit_code) == 2  # a user-fixable error: printed as one line, no traceback
    assert client.calls == [] and not (tmp_path / "run").exists()


def test_a_sandbox_that_cannot_be_applied_stops_bench_instead_of_failing_each_task(tmp_path, monkeypatch):
    folder = tmp_path / "p"
    folder.mkdir()
    for name in ("1_a.py", "2_b.py"):
        (folder / name).write_text(PROBLEM.read_text())
    break_the_sandbox(monkeypatch)
    client = AgentScript()
    with pytest.raises(SandboxUnavailable):
        run_bench(BenchRequest(problems=folder, model="script:", out=tmp_path / "run", parallel=1,
                               loop=LoopSettings(seeds=1, rounds=0, profile="off"),
                               review=ReviewSettings(device="cpu")), client=client, evaluator=FakeEvaluator())
    assert client.calls == []


def test_one_child_per_problem_answers_the_check_and_the_work_count(tmp_path, monkeypatch):
    runs = []
    real = probe.run_probe
    monkeypatch.setattr(probe, "run_probe", lambda *a, **k: runs.append(a[0].path) or real(*a, **k))
    problem = read_problem(os.path.relpath(PROBLEM))  # as optimize names it: as typed
    threads = [threading.Thread(target=check_problem, args=(problem,)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    work = measure_problem_work(PROBLEM)  # the speed of light's and `memory explain --problem`'s count
    assert runs == [Path(os.path.relpath(PROBLEM))] and work.bytes == 32768 and work.flops == 0
    # another source at the same path is another problem
    copy = tmp_path / "gelu.py"
    copy.write_text(PROBLEM.read_text() + "\n# changed\n")
    check_problem(read_problem(copy))
    assert runs[1:] == [copy]


def test_a_probe_answer_is_read_strictly():
    problem = read_problem(PROBLEM)
    # one line that is not an answer (an extra field) and the whole answer is refused: the check fails
    forged = b'{"kind": "checked"}\n{"kind": "counted", "work": {"source": "x"}, "extra": 1}\n'
    found = probe._read_answer(problem, forged, b"", 0, 1.0, 60)
    assert found.error and "gave an answer that is not one (exit code 0)" in found.error
    assert probe._read_answer(problem, b'{"kind": "checked"}\n' * 3, b"", 0, 1.0, 60).error
    good = b'{"kind": "checked"}\n{"kind": "counted", "work": {"source": "x", "flops": 2.0}}\n'
    assert probe._read_answer(problem, good, b"", 0, 1.0, 60) == probe.Probe(None, probe.ProblemWork(source="x",
                                                                                                      flops=2.0))
    nothing = probe._read_answer(problem, b"", b"Traceback ...\nSystemExit: 3\n", 3, 1.0, 60)
    assert nothing.error and "ended without an answer (exit code 3)" in nothing.error and "SystemExit" in nothing.error


@pytest.mark.slow
def test_the_cli_says_so_in_one_line_and_asks_no_model(tmp_path):
    """A sitecustomize makes every confine.apply() raise, as it does where a requested layer cannot be applied: the
    commands stop with exit 2 and one line naming the cause, before any run folder or model call (the base URL
    points at a port where nothing listens: a call would be a connection error, not this)."""
    import subprocess
    import sys

    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "from kernelskill.review import confine\n\n\n"
        "def apply(spec=None):\n"
        "    raise OSError('Landlock is not available on this kernel; set KERNELSKILL_SANDBOX to opt out')\n\n\n"
        "confine.apply = apply\n")
    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC"))}
    env.update(PYTHONPATH=f"{root / 'src'}{os.pathsep}{site}", OPENAI_API_KEY=SECRET)
    folder = tmp_path / "problems"
    folder.mkdir()
    (folder / "1_gelu.py").write_text(PROBLEM.read_text())
    model = ["--model", "openai/m", "--base-url", "http://127.0.0.1:9/v1", "--device", "cpu"]
    for args in (["optimize", str(PROBLEM), *model, "--out", str(tmp_path / "o")],
                 ["bench", "--problems", str(folder), *model, "--out", str(tmp_path / "b")]):
        r = subprocess.run([sys.executable, "-m", "kernelskill.cli", *args], env=env, capture_output=True, text=True,
                           timeout=300)
        lines = [line for line in r.stderr.splitlines() if line.strip()]
        assert r.returncode == 2, r.stderr[-3000:]
        assert "Traceback" not in r.stderr and len(lines) == 1, r.stderr
        assert "sandbox could not be set up" in lines[0] and "Landlock is not available" in lines[0]
    assert not (tmp_path / "o").exists()
