"""The sandbox on a real machine: does every probe escape fail, and what does the sandbox cost?

    PYTHONPATH=src python3 scripts/sandbox_probe.py --out $OUT/sandbox [--device cpu] [--repeats 4]

(a) The probe candidate (tests/data/candidates/special/sandbox_probe.py) tries to read a planted secret file, write
    outside its folders, list the home directory, reach a local HTTP server through http.client, read secrets from
    ordinary-named variables (DATABASE_URL, a password inside OPENAI_BASE_URL), read the harness's environment
    through /proc and read what another process left in /dev/shm. It runs in front of a Triton review, a CUDA
    (load_inline) review and an ncu-profiled run of the profiler's driver, and once more with the sandbox off (the
    probe must then get through, or it proves nothing).
    Printed: a table escape x run, and every layer's state in each run.
(b) Review wall time, sandbox on vs off, on the same candidates in one run: interleaved (the order alternates per
    round), warm workers and the build cache included; the first round (worker start, builds) is reported apart.
    Printed: the ratio on/off of the summed wall time of the warm rounds (target <= 1.05) and of a cold start.

Writes sandbox_probe.json and the logs under --out. Without a GPU (--device cpu) the reviews run on the CPU
(Triton's interpreter, CUDA compile-checked) and ncu is skipped. About 3-4 minutes on one H200.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
PROBE_FILE = DATA / "candidates" / "special" / "sandbox_probe.py"
END_OF_PROBE = "# ---- end of the probe"
ESCAPES = ("read_secret", "write_outside", "list_home", "connect", "environment", "harness_environ", "harness_cmdline",
           "unix_connect", "user_cache", "survivor", "shared_memory")
P01 = DATA / "problems" / "p01_pointwise_gelu_chain.py"
G01 = DATA / "problems" / "gpu" / "g01_pointwise_chain_64m.py"
CANDIDATES = {
    "triton": DATA / "candidates" / "p01_pointwise_gelu_chain" / "triton_ok.py",
    "cuda": DATA / "candidates" / "p01_pointwise_gelu_chain" / "cuda_ok.py",
}


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"hello")

    def log_message(self, *args):
        pass


def probe_source(candidate: Path) -> str:
    """The probe's escapes in front of a working candidate (the candidate still has to pass the review)."""
    text = PROBE_FILE.read_text()
    return text[:text.index(END_OF_PROBE)] + "\n" + candidate.read_text()


def parse_probe(text: str) -> dict | None:
    for line in text.splitlines():
        at = line.find("sandbox-probe: ")
        if at >= 0:
            return json.loads(line[at + len("sandbox-probe: "):])
    return None


def settings_for(device: str, sandbox, **extra):
    from kernelskill.settings import ReviewSettings

    cpu = dict(warmup=1, iters=3) if device == "cpu" else {}
    return ReviewSettings(device=device, sandbox=sandbox, **{**cpu, **extra})


def run_review(problem: Path, source: str, name: str, device: str, sandbox, log_dir: Path, env=None, **extra):
    from kernelskill.candidate import parse_candidate
    from kernelskill.review.reviewer import review

    candidate = parse_candidate(source, log_dir / name)
    log_dir.mkdir(parents=True, exist_ok=True)
    (log_dir / name).write_text(source)
    return review(problem, candidate, settings_for(device, sandbox, **extra), log_dir=log_dir, env=env)


def layers_of(report: dict) -> str:
    from kernelskill.review.confine import describe

    return describe({k: (v if isinstance(v, dict) else v.model_dump(exclude_none=True)) for k, v in report.items()})


# ---------------------------------------------------------------------------------------------------------- (a)
def said(label: str, run: dict) -> None:
    """One configuration's outcome as soon as it is known: a run cut short by its time limit still says something
    (the table comes only after every configuration)."""
    through = sorted(e for e, r in (run.get("probe") or {}).items() if isinstance(r, dict) and r.get("ok"))
    print(f"[probe] {label}: {run['verdict']}, {run.get('seconds', '-')} s; escapes through: "
          f"{', '.join(through) or 'none'}", flush=True)


def probes(out: Path, device: str) -> dict:
    from kernelskill.profiling.run import ProfileSettings, find_ncu, run_profile
    from kernelskill.settings import Sandbox

    from kernelskill.review.confine import NCU_PORTS
    from kernelskill.review.processes import named

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    while srv.server_address[1] in NCU_PORTS:  # the ports a profiled program may still reach without a namespace
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    planted = Path(tempfile.mkdtemp(prefix="kernelskill-planted-"))
    (planted / "secret.txt").write_text("the planted secret")
    os.environ.update(DATABASE_URL="postgres://u:pw@h/db", OPENAI_BASE_URL="https://user:hunter2@llm.example/v1",
                      COMPANY_DB="internal-only")
    runs: dict[str, dict] = {}
    import socket

    unix_path = str(planted / "server.sock")  # a UNIX socket server, as tmux's, ssh-agent's or docker's would be
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(unix_path)
    unix.listen(8)
    os.chmod(unix_path, 0o777)
    os.chmod(planted, 0o755)

    def answer():
        while True:
            try:
                conn, _ = unix.accept()
            except OSError:
                return
            conn.sendall(b"a shell")
            conn.close()

    threading.Thread(target=answer, daemon=True).start()
    user_cache = planted / "users-triton-cache"  # stands for the user's own cache, which unconfined programs load
    user_cache.mkdir()
    user_cache.chmod(0o777)
    os.environ["TRITON_CACHE_DIR"] = str(user_cache)

    shm = Path(f"/dev/shm/kernelskill-probe-neighbour-{os.getpid()}")  # what another runner could have left there
    shm.write_text("a neighbour's file")
    shm.chmod(0o644)
    labels: list[str] = []

    def targets(label: str) -> dict:
        outside = planted / f"outside-{label}.txt"
        labels.append(label)
        return {"PROBE_SECRET_FILE": str(planted / "secret.txt"), "PROBE_OUTSIDE_FILE": str(outside),
                "PROBE_HOME": str(Path.home()), "PROBE_PORT": str(srv.server_address[1]),
                "PROBE_HARNESS_PID": str(os.getpid()), "PROBE_UNIX_SOCKET": unix_path,
                "PROBE_USER_CACHE": str(user_cache), "PROBE_SHM_FILE": str(shm),
                "PROBE_SURVIVOR_NAME": f"ks-surv-{os.getpid() % 10000}-{len(labels)}"}

    def survived(got: dict | None, env: dict) -> None:
        """A grandchild still running (by the name it gave itself) a second after the review: the survivor escape
        got through; and a file the candidate left in /dev/shm for the next runner."""
        time.sleep(1.2)
        alive = named(env["PROBE_SURVIVOR_NAME"])
        for pid in alive:
            os.kill(pid, 9)
        left = Path(env["PROBE_SHM_FILE"] + ".planted")
        if got and "survivor" in got:
            got["survivor"] = {"ok": bool(alive), "got": "still running after the review" if alive else "died with it"}
        if got and "shared_memory" in got:
            got["shared_memory"]["left_for_the_next"] = left.exists()
        left.unlink(missing_ok=True)

    plan = [("triton review", "triton", Sandbox()), ("cuda review", "cuda", Sandbox()),
            ("triton, sandbox off", "triton", Sandbox(network=False, filesystem=False, environment=False, user=False,
                                                     processes=False))]
    for label, backend, sandbox in plan:
        start = time.perf_counter()
        try:
            env = targets(label)
            result = run_review(P01, probe_source(CANDIDATES[backend]), f"probe_{backend}.py", device, sandbox,
                                out / "probe" / label.replace(" ", "_").replace(",", ""), env=env,
                                timing=False, rules="kernelbench", guards={"static_checks": False})
            got = parse_probe(Path(result.log_path).read_text(errors="replace"))
            survived(got, env)
            runs[label] = {"probe": got, "verdict": "correct" if result.correct else (result.error_kind or "checked"),
                           "error": (result.error or "")[:300], "layers": layers_of(result.sandbox),
                           "seconds": round(time.perf_counter() - start, 1)}
        except Exception as exc:  # noqa: BLE001 - a script: report and go on
            runs[label] = {"probe": None, "verdict": f"harness error: {type(exc).__name__}: {exc}"}
        said(label, runs[label])
    if device != "cuda":
        runs["ncu profile"] = {"probe": None, "verdict": "skipped: no GPU"}
    elif find_ncu("ncu") is None:
        runs["ncu profile"] = {"probe": None, "verdict": "skipped: ncu is not on PATH"}
    else:
        work = Path(tempfile.mkdtemp(prefix="kernelskill-ncu-probe-"))
        work.chmod(0o755)  # as a run folder would be: mkdtemp's 0700 would keep the driver from dropping root
        cand = work / "probe_candidate.py"
        cand.write_text(probe_source(CANDIDATES["triton"]))
        env = targets("ncu")
        run = run_profile(P01, cand, ProfileSettings(keep_dir=work / "profile", ncu_timeout_s=150, run_timeout_s=90,
                                                     env=env))
        shutil.copytree(work, out / "probe" / "ncu_profile", dirs_exist_ok=True)
        for step, log in (("torch profiler", "torch_profiler.log"), ("ncu profile", "ncu_profile.log")):
            text = (work / "profile" / log).read_text(errors="replace") if (work / "profile" / log).exists() else ""
            got = parse_probe(text)
            survived(got, env)
            runs[f"profiler: {step}"] = {"probe": got, "verdict": f"ncu {run.ncu_status}",
                                         "error": (run.ncu_note or run.profiler_note or "")[:300],
                                         "layers": layers_of(run.sandbox.get(step, {}))}
            said(f"profiler: {step}", runs[f"profiler: {step}"])
    srv.shutdown()
    unix.close()
    shutil.rmtree(planted, ignore_errors=True)
    shm.unlink(missing_ok=True)
    return runs


def cell(probe: dict | None, escape: str) -> str:
    if not probe:
        return "-"
    entry = probe.get(escape, {})
    if entry.get("ok"):
        return "ESCAPED"
    return "blocked (" + str(entry.get("got", "")).split(":")[0][:24] + ")"


def print_probe_table(runs: dict) -> None:
    labels = list(runs)
    width = max(28, *(len(x) + 2 for x in labels))
    print("\n(a) probe escapes\n" + "escape".ljust(18) + "".join(x.ljust(width) for x in labels))
    for escape in ESCAPES:
        print(escape.ljust(18) + "".join(cell(runs[x]["probe"], escape).ljust(width) for x in labels))
    print("uid".ljust(18) + "".join(str((runs[x]["probe"] or {}).get("uid", "-")).ljust(width) for x in labels))
    print("verdict".ljust(18) + "".join(str(runs[x]["verdict"])[:width - 2].ljust(width) for x in labels))
    for label in labels:
        print(f"  layers, {label}: {runs[label].get('layers', '-')}")
        if runs[label].get("error"):
            print(f"  note, {label}: {runs[label]['error'].splitlines()[0]}")


# ---------------------------------------------------------------------------------------------------------- (b)
def overhead(out: Path, device: str, repeats: int, deadline: float) -> dict:
    from kernelskill.settings import Sandbox

    modes = {"on": Sandbox(), "off": Sandbox(network=False, filesystem=False, environment=False, user=False,
                                             processes=False)}
    cases = [("p01 triton", P01, CANDIDATES["triton"]), ("p01 cuda", P01, CANDIDATES["cuda"])]
    if device == "cuda":
        cases.append(("g01 triton", G01, DATA / "candidates" / "g01_pointwise_chain_64m" / "triton_ok.py"))
    walls: dict[str, dict[str, list[float]]] = {m: {c[0]: [] for c in cases} for m in modes}
    failures = []
    round_s = 0.0  # the last warm round's seconds: the budget check needs one before a fourth round starts
    for r in range(repeats + 1):  # round 0: worker start and builds
        if r >= 3 and time.monotonic() + round_s > deadline:
            print(f"  (stopped after {r - 1} warm rounds: the time budget is spent)")
            break
        round_start = time.monotonic()
        for mode in (("on", "off") if r % 2 == 0 else ("off", "on")):
            for name, problem, candidate in cases:
                start = time.perf_counter()
                result = run_review(problem, candidate.read_text(), candidate.name, device, modes[mode],
                                    out / "overhead" / mode / name.replace(" ", "_"))
                walls[mode][name].append(time.perf_counter() - start)
                if result.stage is not None and not (result.compile and result.compile.checked_only):
                    failures.append(f"{mode} {name}: {result.error_kind}: {(result.error or '')[:200]}")
        round_s = time.monotonic() - round_start
    cold = {}
    for mode in ("on", "off"):  # a fresh worker each: what a review costs when no worker is warm
        start = time.perf_counter()
        run_review(P01, CANDIDATES["triton"].read_text(), "cold.py", device, modes[mode], out / "overhead" / "cold",
                   reuse_worker=False)
        cold[mode] = time.perf_counter() - start
    warm = {m: sum(sum(v[1:]) for v in walls[m].values()) for m in modes}
    return {"walls": walls, "warm_total_s": warm, "ratio_warm": warm["on"] / warm["off"] if warm["off"] else None,
            "first_round_s": {m: sum(v[0] for v in walls[m].values()) for m in modes}, "cold_s": cold,
            "ratio_cold": cold["on"] / cold["off"] if cold.get("off") else None, "failures": failures}


def print_overhead(res: dict, repeats: int) -> None:
    print(f"\n(b) review wall time, sandbox on vs off ({repeats} warm rounds, interleaved)")
    for name in res["walls"]["on"]:
        on, off = res["walls"]["on"][name][1:], res["walls"]["off"][name][1:]
        if not on or not off:
            continue
        print(f"  {name:12s} on {sum(on) / len(on):7.3f} s   off {sum(off) / len(off):7.3f} s   "
              f"ratio {sum(on) / sum(off):5.3f}")
    print(f"  warm total: on {res['warm_total_s']['on']:.2f} s, off {res['warm_total_s']['off']:.2f} s, "
          f"ratio {res['ratio_warm']:.3f} (target <= 1.05)")
    print(f"  first round (worker start, builds): on {res['first_round_s']['on']:.1f} s, "
          f"off {res['first_round_s']['off']:.1f} s")
    print(f"  cold review (fresh worker): on {res['cold_s']['on']:.2f} s, off {res['cold_s']['off']:.2f} s, "
          f"ratio {res['ratio_cold']:.3f}")
    for failure in res["failures"]:
        print(f"  FAILED REVIEW: {failure}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")) / "sandbox")
    parser.add_argument("--device", choices=["cuda", "cpu"], default=None, help="default: cuda when there is a GPU")
    parser.add_argument("--repeats", type=int, default=None, help="warm rounds (default 4 on a GPU, 2 on CPU)")
    parser.add_argument("--skip-overhead", action="store_true")
    parser.add_argument("--skip-probes", action="store_true")
    parser.add_argument("--budget", type=float, default=225.0, help="seconds: fewer warm rounds when it runs out")
    args = parser.parse_args(argv)
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    repeats = args.repeats or (4 if device == "cuda" else 2)
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    report: dict = {"device": device, "uid": os.geteuid(), "python": sys.version.split()[0],
                    "torch": torch.__version__}
    report["probes"] = {} if args.skip_probes else probes(args.out, device)
    if report["probes"]:
        print_probe_table(report["probes"])
    if not args.skip_overhead:
        report["overhead"] = overhead(args.out, device, repeats, time.monotonic() + args.budget
                                      - (time.perf_counter() - started))
        print_overhead(report["overhead"], repeats)
    report["seconds"] = round(time.perf_counter() - started, 1)
    (args.out / "sandbox_probe.json").write_text(json.dumps(report, indent=1, default=str))
    print(f"\n{report['seconds']:.0f} s; wrote {args.out / 'sandbox_probe.json'}")
    on = [r for label, r in report["probes"].items() if "off" not in label and r.get("probe")]
    escaped = [f"{label}: {e}" for label, r in report["probes"].items() if "off" not in label and r.get("probe")
               for e in ESCAPES if r["probe"].get(e, {}).get("ok")]
    if escaped:
        print("ESCAPES THAT WENT THROUGH: " + "; ".join(escaped))
    return 1 if escaped or (report["probes"] and not on) else 0


if __name__ == "__main__":
    sys.exit(main())
