"""One translation unit to an object file, without the cache: g++ against the precompiled header for the C++ unit,
nvcc for the CUDA unit with its host front end (cudafe++) and device front end (cicc) side by side rather than one
after the other (nvcc's own `--dryrun` commands, with the module id written beforehand so neither waits for the
other). When nvcc's dry run has a shape this does not know, nvcc runs as it is.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from kernelskill.review.cuda import pch, split, toolchain
from kernelskill.review.cuda.plan import BINDINGS_HEADER, SPLIT_DEVICE_INCLUDES, Unit
from kernelskill.review.cuda.toolchain import CANCELLED, Runner, command_line, expand, host_command

_DIAGNOSTIC = re.compile(r"\(\d+\): (error|catastrophic)|:\d+:(\d+:)? (fatal )?error|: error:|error: ")


@dataclass
class CompiledObject:
    path: Path
    log: str
    seconds: float
    cached: bool
    pch_used: bool | None = None
    pch_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)  # nvcc's steps: seconds per tool (see `nvcc_phases`)


class UnitFailed(Exception):
    """A unit did not compile (or was cancelled because another did not); `output` is the compiler's."""

    def __init__(self, unit: Unit, output: str, log: str) -> None:
        super().__init__(unit.filename)
        self.unit, self.output, self.log = unit, output, log


def diagnostics(output: str) -> str:
    """The compiler's own output, without the command lines and timings this package adds."""
    return "\n".join(line for line in output.splitlines() if not line.startswith(("#$ ", "$ ", "[nvcc phases")))


# ------------------------------------------------------------------------------------------ nvcc, phases in parallel
def _phase_name(step: str, env: dict) -> str:
    """The step's tool as the build's timings name it: cudafe++, cicc, ptxas, fatbinary, or the host compiler's
    preprocess for the host (host-E) or device (device-E) pass, and its final compile (host-compile)."""
    tokens = shlex.split(step)
    tool = os.path.basename(expand(tokens[0], env)) if tokens else "?"
    if tool in ("cudafe++", "cicc", "ptxas", "fatbinary"):
        return tool
    if "-E" in tokens:
        return "device-E" if any(t.startswith("-D__CUDA_ARCH__=") for t in tokens) else "host-E"
    return "host-compile"


def nvcc_phases(argv: list[str], cwd: Path, module_id: str, runner: Runner,
                phases: dict[str, float] | None = None) -> tuple[int, str] | None:
    """Run nvcc's steps with the host front end beside the device one. None when the dry run has a shape this does
    not know (then the caller runs nvcc itself). Seconds per step go into `phases` (by `_phase_name`)."""
    timings = phases if phases is not None else {}
    keep = "nvcc-keep"
    (cwd / keep).mkdir(exist_ok=True)
    dry = subprocess.run([*argv, "--dryrun", "-keep", "-keep-dir", keep], cwd=cwd, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, errors="replace")
    if dry.returncode != 0:
        return None
    env, commands = dict(os.environ), []
    for line in dry.stdout.splitlines():
        if not line.startswith("#$ "):
            continue
        body = line[3:].strip()
        assignment = re.match(r"([A-Za-z_]\w*)=(.*)$", body)
        try:
            if assignment:
                env[assignment.group(1)] = " ".join(shlex.split(assignment.group(2)))
            elif body:
                commands.append((body, shlex.split(body)))
        except ValueError:
            return None
    host, device, final = [], [], []
    for i, (body, tokens) in enumerate(commands):
        tool = os.path.basename(expand(tokens[0], env))
        if tool == "cudafe++":
            host.append(body)
        elif tool in ("cicc", "ptxas", "fatbinary"):
            device.append(body)
        elif "-E" in tokens:
            (device if any(t.startswith("-D__CUDA_ARCH__=") for t in tokens) else host).append(body)
        elif "-c" in tokens and i == len(commands) - 1:
            final.append(body)
        else:
            return None  # nvlink, rm, or anything new: not a shape this knows
    cudafe = [c for c in host if "cudafe++" in c]
    ids = re.findall(r'--module_id_file_name\s+"?([^"\s]+)"?', dry.stdout)
    if (len(final) != 1 or len(cudafe) != 1 or len(host) != 2 or not device or len(set(ids)) != 1
            or cudafe[0].count(" --gen_module_id_file") != 1 or dry.stdout.count("--gen_module_id_file") != 1):
        return None
    # cudafe++ writes the module id that cicc reads: write it first, and both front ends can start at once.
    (cwd / ids[0]).write_text(module_id)
    host = [c.replace(" --gen_module_id_file", "") if c is cudafe[0] else c for c in host]
    step_runner = Runner(runner)

    def chain(steps: list[str]) -> tuple[int, str, float]:
        outs, total = [], 0.0
        for step in steps:
            code, out, seconds = step_runner.run(["/bin/sh", "-c", step], cwd, env)
            name = _phase_name(step, env)
            timings[name] = round(timings.get(name, 0.0) + seconds, 3)
            outs.append(f"#$ {step}\n{out}" if out.strip() else f"#$ {step}")
            total += seconds
            if code != 0:
                step_runner.cancel()  # the other front end would only repeat the same errors
                return code, "\n".join(outs), total
        return 0, "\n".join(outs), total

    with ThreadPoolExecutor(max_workers=2) as pool:
        host_run, device_run = pool.submit(chain, host), pool.submit(chain, device)
        (host_code, host_out, host_s), (dev_code, dev_out, dev_s) = host_run.result(), device_run.result()
    timing = f"[nvcc phases side by side: host front end {host_s:.1f} s, device {dev_s:.1f} s"
    for code, out in ((host_code, host_out), (dev_code, dev_out)):
        if code != 0 and code != -9:
            return (code, f"{out}\n{timing}]") if _DIAGNOSTIC.search(out) else None
    if host_code or dev_code:
        return None
    code, out, final_s = step_runner.run(["/bin/sh", "-c", final[0]], cwd, env)
    timings["host-compile"] = round(final_s, 3)
    log = f"{host_out}\n{dev_out}\n#$ {final[0]}\n{out}\n{timing}, host compile {final_s:.1f} s]"
    if code != 0 and not _DIAGNOSTIC.search(out):
        return None
    shutil.rmtree(cwd / keep, ignore_errors=True)  # preprocessed files: tens of MB with torch headers
    return code, log


# ------------------------------------------------------------------------------------------------------------- split
def _compile_split(unit: Unit, directory: Path, runner: Runner, parallel_nvcc: bool) -> CompiledObject:
    """The split variant (`split.py`): the device part through nvcc, the host part through the host compiler against
    its precompiled header, side by side; then one relocatable object of the two, as the other variants give."""
    start = time.perf_counter()
    (directory / "host.cpp").write_text(unit.host_text)
    notes: list[str] = []
    phases: dict[str, float] = {}
    host = host_command(unit.argv)
    if host is None:
        raise UnitFailed(unit, "nvcc's dry run for the host part has a shape this does not know", "")
    compiler, flags = host
    step_runner = Runner(runner)

    def device(extra: tuple[str, ...] = ()) -> tuple[int, str]:
        includes = [a for name in SPLIT_DEVICE_INCLUDES for a in ("-include", name)]
        argv = [*unit.argv, *includes, *extra, "-c", unit.filename, "-o", "device.o"]
        phased = nvcc_phases(argv, directory, f"_{unit.key[:8]}_7_cuda_cu_{unit.key[8:16]}", step_runner, phases) \
            if parallel_nvcc else None
        if phased is None:
            code, out, _ = step_runner.run(argv, directory)
            phased = code, f"{command_line(argv)}\n{out}"
        if phased[0] != 0:
            step_runner.cancel()
        return phased

    def host_part() -> tuple[int, str]:
        extra, built_s, log = pch.split_header_flags(compiler, flags, unit.host_header, step_runner, notes)
        if built_s:
            phases["split-pch"] = round(built_s, 3)
        if not extra:
            (directory / pch.SPLIT_HEADER).write_text(unit.host_header)
            extra = ["-include", pch.SPLIT_HEADER]
        argv = [*compiler, *flags, *extra, "-x", "c++", "-c", "host.cpp", "-o", "host.o"]
        code, out, seconds = step_runner.run(argv, directory)
        phases["split-host"] = round(seconds, 3)
        if "-H" in extra:
            out, used = pch.clean_header_tree(out)
            if not used:
                notes.append("the split host part's precompiled header was not used")
        if code != 0:
            step_runner.cancel()
        return code, (f"{log}\n" if log else "") + f"{command_line(argv)}\n{out}"

    if unit.templates:  # the host part first: what it launches is what the device part must instantiate
        host_code, host_out = host_part()
        if host_code:
            raise UnitFailed(unit, host_out, host_out)
        instances, why_not = _instances(unit, directory, runner)
        if why_not:
            raise UnitFailed(unit, why_not, host_out)
        (directory / unit.filename).write_text(unit.text + instances)
        # the instances' host stubs linkable from the host part (weak; this extension has one device program)
        dev_code, dev_out = device(("-static-global-template-stub=false",))
    else:
        with ThreadPoolExecutor(max_workers=2) as pool:
            device_run, host_run = pool.submit(device), pool.submit(host_part)
            (dev_code, dev_out), (host_code, host_out) = device_run.result(), host_run.result()
    log = f"{dev_out}\n{host_out}"
    for code, out in ((dev_code, dev_out), (host_code, host_out)):
        if code != 0 and code != -9:
            raise UnitFailed(unit, out, log)
    if dev_code or host_code:
        raise UnitFailed(unit, CANCELLED, log)
    argv = [*toolchain.cxx(), "-r", "-nostdlib", "device.o", "host.o", "-o", "cuda.o"]
    code, out, seconds = runner.run(argv, directory)
    phases["split-join"] = round(seconds, 3)
    log += f"\n{command_line(argv)}\n{out}"
    if code != 0:
        raise UnitFailed(unit, out, log)
    # a kernel the host part calls and the device part does not define (a stub the device part keeps to itself)
    # would fail at the link or the import, after this unit was taken: found here, it gives way to the next variant
    undefined = _undefined(directory / "cuda.o", directory, runner)
    if isinstance(undefined, str):
        raise UnitFailed(unit, undefined, log)
    missing = [n for n in undefined if any(re.match(rf"(void )?{re.escape(k)}($|[<(])", n) for k in unit.kernels)
               or n.startswith(split.SYMBOL_ACCESSOR)]
    if missing:
        raise UnitFailed(unit, f"the host part calls a kernel or a variable's accessor the device part does not "
                               f"define: {missing[0]}", log)
    return CompiledObject(directory / "cuda.o", log, time.perf_counter() - start, False, None, 0.0, notes, phases)


_NOT_NAMEABLE = re.compile(r"c10::|at::|torch::|\(anonymous namespace\)|\{lambda|\{unnamed")


def _undefined(obj: Path, directory: Path, runner: Runner) -> list[str] | str:
    """The demangled names of the symbols `obj` uses and does not define; the reason when nm cannot tell."""
    argv = ["nm", "-u", "-C", obj.name]
    code, out, _ = runner.run(argv, directory)
    if code != 0:
        return f"{command_line(argv)}\n{out}"
    return [line.strip()[2:] for line in out.splitlines() if line.strip().startswith("U ")]


def _instances(unit: Unit, directory: Path, runner: Runner) -> tuple[str, str | None]:
    """(text, None): the explicit instantiations, appended to the device part, of the kernel templates the compiled
    host part launches (`template __global__ void k<float>(float const*, int);`); ("", why) when there are none to
    give (an instance of a type the torch-free part cannot name: c10::Half)."""
    undefined = _undefined(directory / "host.o", directory, runner)
    if isinstance(undefined, str):
        return "", undefined
    wanted = [n for n in undefined if any(n.startswith(f"void {k}<") for k in unit.templates)]
    unnameable = [n for n in wanted if _NOT_NAMEABLE.search(n)]
    if unnameable:
        return "", ("the host part launches a kernel instance the device part cannot name without torch: "
                    + unnameable[0])
    return ("\n// the instances the host part launches (kernelskill cuda_build, split)\n"
            + "".join(f"template __global__ {n};\n" for n in wanted)), None


# -------------------------------------------------------------------------------------------------------------- unit
def compile_unit(unit: Unit, directory: Path, *, runner: Runner | None = None, pch_flags: list[str] | None = None,
                 parallel_nvcc: bool = True) -> CompiledObject:
    """Compile one unit in `directory` (no cache). A C++ unit uses the precompiled header for `pch_flags` when it
    is ready, builds it first when nobody else is building it, and compiles without it otherwise."""
    runner = runner or Runner()
    directory.mkdir(parents=True, exist_ok=True)
    (directory / unit.filename).write_text(unit.text)
    if unit.host_text:
        return _compile_split(unit, directory, runner, parallel_nvcc)
    out_name = "main.o" if unit.kind == "cpp" else "cuda.o"
    notes: list[str] = []
    phases: dict[str, float] = {}
    pch_seconds, pch_log, extra = 0.0, "", []
    if unit.pch and pch_flags is not None:
        extra, pch_seconds, pch_log = pch.header_flags(pch_flags, runner, notes, bindings=unit.variant == "bindings")
        if not extra and unit.variant == "bindings":  # the header's text instead of its precompiled form
            (directory / pch.BINDINGS).write_text(BINDINGS_HEADER)
            extra = ["-include", pch.BINDINGS]
        if pch_log and runner.cancelled():  # another unit failed while this one built the header
            raise UnitFailed(unit, CANCELLED, pch_log)
    if unit.kind == "cuda" and parallel_nvcc and os.path.basename(unit.argv[0]) == "nvcc":  # not through ccache
        argv = [*unit.argv, "-c", unit.filename, "-o", out_name]
        start = time.perf_counter()
        module_id = f"_{unit.key[:8]}_7_cuda_cu_{unit.key[8:16]}"
        phased = nvcc_phases(argv, directory, module_id, runner, phases)
        if phased is None:
            phases.clear()
            notes.append("nvcc's steps could not be run side by side: ran nvcc as is")
            code, out, seconds = runner.run(argv, directory)
        else:
            (code, out), seconds = phased, time.perf_counter() - start
    else:
        argv = [*unit.argv, *extra, "-c", unit.filename, "-o", out_name]
        code, out, seconds = runner.run(argv, directory)
    pch_used = None
    if unit.kind == "cpp" and "-H" in extra:
        out, pch_used = pch.clean_header_tree(out)
        if not pch_used:
            reason = next((line for line in out.splitlines() if "Winvalid-pch" in line), "no reason given")
            notes.append(f"the precompiled header was not used ({reason.strip()})")
    log = (f"{pch_log}\n" if pch_log else "") + f"{command_line(argv)}\n{out}"
    if code != 0:
        raise UnitFailed(unit, out, log)
    return CompiledObject(directory / out_name, log, seconds, False, pch_used, pch_seconds, notes, phases)
