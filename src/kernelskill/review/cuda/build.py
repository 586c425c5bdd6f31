"""`build_inline`: the extension torch's load_inline would build from the same arguments, found in the cache or built.

The finished extension is cached under `cuda-build/<key>/`, the key a hash of everything that can change the
binary. A build happens in a temporary sibling folder renamed into place, one at a time per key (`cache.flock`).
The C++ and CUDA units compile in parallel, each object taken from the object cache when it is there. Each unit is
tried in the plan's variants, fastest first: a variant that fails (a split one, or one with a narrowed set of torch
headers) gives way to the next, and only the last, exactly what torch compiles, can fail the candidate; the first
failure of a last variant cancels the other unit. Then the objects are linked and the library is recorded with its completion marker.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kernelskill.review.cuda import CudaCompileError, cache, toolchain
from kernelskill.review.cuda.cache import file_sha, flock, touch
from kernelskill.review.cuda.compile import CompiledObject, UnitFailed, compile_unit, diagnostics
from kernelskill.review.cuda.plan import NAME_PLACEHOLDER, BuildPlan, Unit, plan_build
from kernelskill.review.cuda.toolchain import BUILDER_VERSION, Runner, command_line
from kernelskill.review.logs import compiler_errors, filter_header_warnings, trim_log

OWN_FILES = ("main.cpp", "cuda.cu")
_OWN_ERROR = re.compile(r"\b(main\.cpp|cuda\.cu)(:\d+|\(\d+\)).*\berror\b", re.IGNORECASE)
# Errors a narrowed CUDA unit gives when it misses a declaration that torch's headers would have brought in: the
# next, wider variant is tried. Any other error in a narrowed unit goes straight to the unit torch compiles, whose
# errors alone are the candidate's (a narrowed unit is this builder's text, not the candidate's: KernelBench
# Leaderboard's L1/37 kernel divides two tensors, and `operator/` is not among ATen's core headers).
_MISSING_DECLARATION = re.compile(
    r"is undefined|was not declared|has no member|is not a member|has not been declared|does not name a type|"
    r"incomplete type|no instance of|more than one instance|no matching function|is ambiguous|"
    r"must be a class or namespace|is not a template|not a class or namespace|unknown type name|"
    r"explicit type is missing|no operator .* matches|no match for .*operator|no suitable"
)


@dataclass
class BuiltExtension:
    """What one build (or cache hit) produced. `steps` holds seconds per step: pch, cpp, cuda, link, check, import;
    `cuda.<tool>` for nvcc's steps (cuda.host-E, cuda.cudafe++, cuda.device-E, cuda.cicc, cuda.ptxas,
    cuda.fatbinary, cuda.host-compile: the host and device chains run side by side, so they overlap; cuda.narrowed:
    narrowed units that failed before this one, not in `cuda`), and `wait`
    for the time spent waiting on another process's lock (the same object or library being built there).

    `failed`: set only by a prebuild ("build" mode of `inline`) when this builder failed outside the candidate's
    own code; the review on the GPU then tries torch's own load_inline."""

    name: str
    module_name: str
    key: str
    so_path: Path | None
    cache_hit: bool
    seconds: float
    steps: dict[str, float] = field(default_factory=dict)
    log: str = ""
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    pch_used: bool | None = None
    cuda_variant: str | None = None
    failed: str | None = None

    def to_dict(self) -> dict:
        out = asdict(self)
        out["so_path"] = str(self.so_path) if self.so_path else None
        return out


class _ObjectVanished(Exception):
    """A cached object was removed (by `kernelskill cache prune` in another process) between lookup and link."""


class _NameNotPatched(Exception):
    """The objects compiled under `NAME_PLACEHOLDER` did not link, or the library still holds the placeholder where
    the patch did not reach it (LTO's compressed sections): it is built again from objects compiled with the module's
    own name, as torch builds it."""


def _named(text: str, plan: BuildPlan) -> str:
    """A compiler's command line or message as it reads with the module's own name (the placeholder's bytes are the
    module's name in the library too)."""
    return text.replace(NAME_PLACEHOLDER, plan.module_name)


def _name_object(obj: Path, directory: Path, module_name: str) -> Path:
    """A copy of the object compiled under `NAME_PLACEHOLDER` with the module's name written over the placeholder (the
    same length: no offset in the object moves). The cached object stays as it is, for other names."""
    data = obj.read_bytes()
    directory.mkdir(parents=True, exist_ok=True)
    named = directory / obj.name
    named.write_bytes(data.replace(NAME_PLACEHOLDER.encode(), module_name.encode()))
    return named


# ----------------------------------------------------------------------------------------------------------- objects
def _cached_object(key: str) -> CompiledObject | None:
    found = cache.load_object(key)
    if found is None:
        return None
    path, info = found
    return CompiledObject(path, info.get("log", ""), 0.0, True, info.get("pch_used"), 0.0, info.get("notes", []))


def _object_for(units: list[Unit], directory: Path, runner: Runner, pch_flags: list[str] | None,
                parallel_nvcc: bool, waited: dict[str, float] | None = None) -> tuple[Unit, CompiledObject]:
    """The object of the first unit that compiles, from the object cache when it is there. A narrowed unit that
    fails for want of a declaration gives way to the next one, and one that fails otherwise to the last one (what
    torch compiles); only the last unit's failure is the candidate's."""
    notes: list[str] = []
    skip_to_last, narrowed_s = False, 0.0  # seconds spent on narrowed units that failed
    skipped: set[str] = set()
    for i, unit in enumerate(units):
        last = i == len(units) - 1
        if (skip_to_last or unit.variant in skipped) and not last:
            continue
        cached = _cached_object(unit.key)
        if cached is None:
            asked = time.perf_counter()
            with flock(cache.object_lock(unit.key)):
                if waited is not None:
                    waited[unit.kind] = waited.get(unit.kind, 0.0) + time.perf_counter() - asked
                cached = _cached_object(unit.key)
                if cached is None:
                    began = time.perf_counter()
                    try:
                        built = compile_unit(unit, directory / unit.kind, runner=runner, pch_flags=pch_flags,
                                             parallel_nvcc=parallel_nvcc)
                    except UnitFailed as failed:
                        if last or runner.cancelled():
                            raise
                        narrowed_s += time.perf_counter() - began
                        missing = bool(_MISSING_DECLARATION.search(diagnostics(failed.output)))
                        if unit.host_text:
                            # a split that fails says nothing of the unsplit source: the next variant is tried
                            # whatever the error. A host part short of a declaration is compiled against what torch
                            # includes (split-types), and the core variant, whose prelude is the same, is passed over;
                            # one that fails otherwise passes over the other split variant.
                            skipped |= {"core"} if missing else {"split", "split-types"}
                        else:
                            skip_to_last = not missing
                        first = next((ln for ln in diagnostics(failed.output).splitlines() if "error" in ln),
                                     diagnostics(failed.output).strip()[:200]).strip()
                        what = (f"cut into a device part and a host part ({unit.variant})" if unit.host_text else
                                f"with fewer of torch's headers ({unit.variant})")
                        then = next((u.variant for u in units[i + 1:] if u.variant not in skipped), "exact")
                        notes.append(f"{unit.filename} {what} failed ({first}); "
                                     + ("compiled again as torch compiles it" if skip_to_last else
                                        f"compiled again as the {then} variant, up to what torch compiles"))
                        continue
                    built.notes[:0] = notes
                    if narrowed_s:
                        built.phases["narrowed"] = round(narrowed_s, 3)
                    built.path = cache.store_object(unit.key, built.path, {"log": built.log, "pch_used": built.pch_used,
                                                                           "notes": built.notes})
                    return unit, built
        cached.notes[:0] = notes
        return unit, cached
    raise AssertionError("no units")  # unreachable: the last unit either returns or raises


# -------------------------------------------------------------------------------------------------------- extensions
def _finished(plan: BuildPlan, start: float) -> BuiltExtension | None:
    """The cached build, when its completion marker is there and the library matches it."""
    entry = cache.extension_dir(plan.key)
    try:
        info = json.loads((entry / "build.json").read_text())
        so_path = entry / info["so"]
        if info["key"] != plan.key or info["so_sha256"] != file_sha(so_path):
            return None
    except (OSError, ValueError, KeyError):
        return None
    touch(entry / "build.json")
    return BuiltExtension(plan.name, plan.module_name, plan.key, so_path, True, round(time.perf_counter() - start, 3),
                          {"check": round(time.perf_counter() - start, 3)}, "", info.get("warnings", []),
                          info.get("notes", []), info.get("pch_used"), info.get("cuda_variant"))


def build_inline(name: str, cpp_sources, cuda_sources=None, functions=None, extra_cflags=None, extra_cuda_cflags=None,
                 extra_ldflags=None, extra_include_paths=None, with_cuda: bool | None = None,
                 with_pytorch_error_handling: bool = True, no_implicit_headers: bool = False,
                 arch: str | list[str] | None = None, pch: bool = True, parallel_nvcc: bool = True,
                 link: bool = True, verbose: bool = False) -> BuiltExtension:
    """Build (or find in the cache) the extension load_inline would build from these arguments; do not import it.

    `arch` is needed when no GPU is visible (prebuilding on CPU cores). `link=False` compiles the objects only
    (a compile check where torch's CUDA libraries are missing). Raises CudaCompileError with the compiler's errors.
    """
    start = time.perf_counter()
    plan = plan_build(name, cpp_sources, cuda_sources, functions, extra_cflags, extra_cuda_cflags, extra_ldflags,
                      extra_include_paths, with_cuda, with_pytorch_error_handling, no_implicit_headers, arch)
    failed = cache.remembered_failure(plan.key)
    if failed is not None:  # the same sources, flags and toolchain failed in their own lines before
        raise CudaCompileError(f"{failed['message']}\n(remembered from an earlier build of the same sources; the "
                               f"full log is in {cache.failures_dir()})", failed.get("log", ""), in_own_code=True)
    try:
        try:
            return _build_or_find(plan, start, pch, parallel_nvcc, link, verbose)
        except _NameNotPatched:
            plan = plan_build(name, cpp_sources, cuda_sources, functions, extra_cflags, extra_cuda_cflags,
                              extra_ldflags, extra_include_paths, with_cuda, with_pytorch_error_handling,
                              no_implicit_headers, arch, name_placeholder=False)
            built = _build_or_find(plan, start, pch, parallel_nvcc, link, verbose)
            built.notes.append("the module's name could not be written into the objects compiled without it: "
                               "compiled again with it")
            return built
    except CudaCompileError as exc:
        if exc.in_own_code:
            cache.remember_failure(plan.key, str(exc), exc.log)
        raise


def _build_or_find(plan: BuildPlan, start: float, pch: bool, parallel_nvcc: bool, link: bool,
                   verbose: bool) -> BuiltExtension:
    if link:
        found = _finished(plan, start)
        if found is not None:
            return found
        asked = time.perf_counter()
        with flock(cache.extension_lock(plan.key)):
            waited = time.perf_counter() - asked
            found = _finished(plan, start)  # another process may have built it while this one waited
            if found is not None:
                return found
            built = _build_retrying(plan, start, pch, parallel_nvcc, link, verbose)
            built.steps["wait"] = round(built.steps.get("wait", 0.0) + waited, 3)
            return built
    return _build_retrying(plan, start, pch, parallel_nvcc, link, verbose)


def _build_retrying(plan: BuildPlan, start: float, pch: bool, parallel_nvcc: bool, link: bool,
                    verbose: bool) -> BuiltExtension:
    try:
        return _build(plan, start, pch, parallel_nvcc, link, verbose)
    except _ObjectVanished:
        return _build(plan, start, pch, parallel_nvcc, link, verbose)  # the objects are compiled afresh now


def _compile_objects(plan: BuildPlan, tmp: Path, runner: Runner, pch: bool, parallel_nvcc: bool,
                     waited: dict[str, float]) -> dict[str, tuple[Unit, CompiledObject]]:
    """The C++ and CUDA objects, compiled side by side; the first failure cancels the other and is raised as the
    candidate's CudaCompileError."""
    jobs = [("cpp", plan.cpp_units or [plan.cpp])] + ([("cuda", plan.cuda)] if plan.cuda else [])
    first_failure: list[UnitFailed] = []
    guard = threading.Lock()

    def job(units: list[Unit]) -> tuple[Unit, CompiledObject]:
        try:
            return _object_for(units, tmp, runner, plan.pch_flags if pch else None, parallel_nvcc, waited)
        except UnitFailed as failed:
            with guard:
                if not first_failure:  # the other unit fails next, killed: its output is not the candidate's
                    first_failure.append(failed)
            runner.cancel()
            raise
        except BaseException:
            runner.cancel()
            raise

    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        futures = [(kind, pool.submit(job, units)) for kind, units in jobs]
        results = {}
        for kind, future in futures:
            with contextlib.suppress(UnitFailed):
                results[kind] = future.result()
    if first_failure:
        failed = first_failure[0]
        label = "CUDA sources (cuda.cu, nvcc)" if failed.unit.kind == "cuda" else "C++ sources (main.cpp)"
        found = diagnostics(failed.output)
        raise CudaCompileError(f"extension {plan.name!r}: the {label} failed to compile:\n"
                               + _named(compiler_errors(found), plan),
                               _named(trim_log(failed.log, max_lines=120), plan), in_own_code=bool(_OWN_ERROR.search(found)))
    return results


def _build(plan: BuildPlan, start: float, pch: bool, parallel_nvcc: bool, link: bool, verbose: bool) -> BuiltExtension:
    root = cache.build_dir()
    root.mkdir(parents=True, exist_ok=True)
    entry = cache.extension_dir(plan.key)
    if link and entry.exists():
        shutil.rmtree(entry, ignore_errors=True)  # no completion marker, or a library that does not match it
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{plan.key[:12]}-", dir=root))
    runner = Runner()
    try:
        waited: dict[str, float] = {}
        results = _compile_objects(plan, tmp, runner, pch, parallel_nvcc, waited)
        kinds = list(results)  # "cpp", then "cuda" when there are CUDA sources
        objects = [results[kind][1] for kind in kinds]
        log = _named("\n".join(o.log for o in objects if not o.cached), plan)
        notes = [_named(n, plan) for o in objects for n in o.notes] + [
            f"{o.path.name} reused from the object cache" for o in objects if o.cached]
        steps = {"pch": round(objects[0].pch_seconds, 3)} if objects[0].pch_seconds else {}
        for kind in kinds:
            steps[kind] = round(results[kind][1].seconds, 3)
        steps.update({f"cuda.{tool}": seconds for tool, seconds in results["cuda"][1].phases.items()}
                     if "cuda" in results else {})
        if waited:
            steps["wait"] = round(max(waited.values()), 3)  # the two units wait side by side
        cuda_variant = results["cuda"][0].variant if "cuda" in results else None
        for unit, _ in results.values():
            (tmp / unit.filename).write_text(unit.text)
            if unit.host_text:
                (tmp / "host.cpp").write_text(unit.host_text)
        warnings = filter_header_warnings(_named("\n".join(o.log for o in objects), plan), OWN_FILES)
        so_path = None
        if link:
            so_name = f"{plan.module_name}.so"
            paths = []
            for kind in kinds:
                unit, obj = results[kind]
                try:
                    paths.append(_name_object(obj.path, tmp / "named" / kind, plan.module_name) if unit.placeholder
                                 else obj.path)
                except FileNotFoundError:  # pruned from the object cache meanwhile
                    raise _ObjectVanished(plan.name) from None
            argv = [*toolchain.cxx(), *[str(p) for p in paths], *plan.link_flags, "-o", so_name]
            code, out, seconds = runner.run(argv, tmp)
            steps["link"] = round(seconds, 3)
            log += f"\n{command_line(argv)}\n{out}"
            if code != 0:
                if any(not o.path.exists() for o in objects):  # pruned from the object cache meanwhile: not the
                    raise _ObjectVanished(plan.name)            # candidate's fault, compile again
                if any(unit.placeholder for unit, _ in results.values()):
                    raise _NameNotPatched(plan.name)  # maybe the patch's fault (LTO): linked as torch links first
                raise CudaCompileError(f"extension {plan.name!r}: linking failed:\n" + compiler_errors(out),
                                       trim_log(log, max_lines=120))
            if (any(unit.placeholder for unit, _ in results.values())
                    and NAME_PLACEHOLDER.encode() in (tmp / so_name).read_bytes()):
                raise _NameNotPatched(plan.name)
            shutil.rmtree(tmp / "named", ignore_errors=True)
            (tmp / "build.log").write_text(log)
            info = {"key": plan.key, "name": plan.name, "module_name": plan.module_name, "so": so_name,
                    "so_sha256": file_sha(tmp / so_name), "builder": BUILDER_VERSION, "pid": os.getpid(),
                    "created": time.time(), "steps": steps, "warnings": warnings, "notes": notes,
                    "pch_used": objects[0].pch_used, "cuda_variant": cuda_variant}
            (tmp / "build.json").write_text(json.dumps(info, indent=1))  # the completion marker
            for kind in kinds:  # objects live in the object cache
                shutil.rmtree(tmp / kind, ignore_errors=True)
            tmp.chmod(0o755)  # mkdtemp makes it private
            os.rename(tmp, entry)
            so_path = entry / so_name
        if verbose:
            print(log)
        compiled_from_cache = not link and all(o.cached for o in objects)  # a compile check seen before
        return BuiltExtension(plan.name, plan.module_name, plan.key, so_path, compiled_from_cache,
                              round(time.perf_counter() - start, 3), steps, log, warnings, notes,
                              objects[0].pch_used, cuda_variant)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
