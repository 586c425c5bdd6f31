"""The verify stage: every trial runs reference and candidate on fresh inputs (each its own copy, in an order drawn
per trial), compares their outputs and checks what the candidate did (harness intact, plain outputs, inputs left
alone, kernels of its own). After get_inputs()' own trials come trials on inputs of other scales and offsets
(precision.DISTRIBUTIONS), and every comparison also counts what a strict tolerance would refuse. Functions over the
review's `Worker` state; the time stage re-verifies with `one_trial`.
"""

from __future__ import annotations

import os
from contextlib import nullcontext
from typing import TYPE_CHECKING

from kernelskill.review.results import Precision
from kernelskill.review.worker.checks import changed, degenerate, map_tensors, verify_record
from kernelskill.review.worker.session import Verdict

if TYPE_CHECKING:
    from kernelskill.review.worker.stages import Worker


def candidate_first(w: Worker) -> bool:
    order = w.settings.order
    return order == "candidate_first" or (order == "random" and w.rng.random() < 0.5)


def poison(w: Worker) -> None:
    if w.device.type == "cuda" and w.guards.poison_freed_memory:
        from kernelskill.review.guards import poison_free_cuda_memory

        poison_free_cuda_memory(w.device)


def weight_storages(module, device) -> dict:
    """The storages of a module's floating-point parameters and buffers on `device`'s kind, by address."""
    from itertools import chain

    import torch

    out = {}
    for t in chain(module.parameters(), module.buffers()):
        if t.device.type == device.type and t.is_floating_point() and t.layout == torch.strided:
            storage = t.untyped_storage()
            if storage.nbytes():
                out[storage.data_ptr()] = storage
    return out


def move_candidate(w: Worker) -> None:
    """Move ModelNew to the device, as KernelBench's harness does before every trial, keeping alive every storage
    of its weights that the move left behind.

    Moving an `nn.LSTM`/`nn.GRU` re-packs its weights into a new buffer (`flatten_parameters`) and frees the old
    one; a CUDA graph the candidate captured before keeps reading it. KernelBench's harness passes such a kernel
    while the caching allocator leaves the freed block alone (CUDA-L1's L3/35, 37, 41, 42) and fails it when the
    block is reused (L3/39, 2 of 5 trials); poisoning freed memory would fail every one. Kept alive, nothing can
    reuse or poison the old buffer, so the trials judge the kernel as that harness does when the block is left
    alone, and `stale_weights_check` then overwrites it once to learn whether the candidate reads it."""
    model = w.candidate.model
    before = weight_storages(model, w.device)
    model.to(w.device)
    now = weight_storages(model, w.device)
    for address, kept in before.items():
        if address not in now:
            w.left_behind.setdefault(address, kept)


def stale_weights_check(w: Worker) -> None:
    """One more trial with the weight storages that moves left behind overwritten (0xFF bytes: NaN), then restored.
    A candidate whose outputs change read weights the module no longer holds: the strict-only violation
    `runtime:stale-weights` (under --rules kernelbench a flag, as KernelBench's harness passes it while the freed
    block is not reused)."""
    torch = w.torch
    current = weight_storages(w.candidate.model, w.device)
    stale = [storage for address, storage in w.left_behind.items() if address not in current]
    if not stale:
        return
    views = [torch.empty(0, dtype=torch.uint8, device=s.device).set_(s) for s in stale]
    saved = [v.clone() for v in views]
    for v in views:
        v.fill_(0xFF)
    try:  # trial 999: apart from the verify trials (from 0) and the time stage's re-checks (from 1000)
        cmp, _ = one_trial(w, 999, w.req.seeds.trials[0], candidate_first(w), False)
        problem = None if cmp.ok else cmp.mismatch.reason
    except Verdict:  # a check that fired (integrity, output type): the verdict it is
        raise
    except Exception as exc:  # computing from NaN weights may raise too
        problem = f"it raised {type(exc).__name__}: {str(exc)[:300]}"
    finally:
        for v, s in zip(views, saved):
            v.copy_(s)
    size = sum(s.nbytes() for s in stale)
    if problem is None:
        return
    w.policy_violations.append({
        "name": "runtime:stale-weights",
        "detail": f"the candidate reads weights its module no longer holds: moving ModelNew to the device again "
                  f"(as KernelBench's harness does before every trial) left {len(stale)} old weight buffer(s) "
                  f"behind ({size / 2**20:.1f} MiB; an nn.LSTM/nn.GRU re-packs its weights on every .to()/.cuda()), "
                  f"and with them overwritten, a trial on get_inputs()' inputs failed: {problem}. A CUDA graph "
                  "captured before the move keeps reading the freed buffer; capture it again when the weights' "
                  "addresses change, or read them through the module (KernelBench's harness passes this while the "
                  "freed block is not reused; --rules kernelbench keeps it as a flag)"})


def copy_parameters(w: Worker) -> list[str]:
    """Copy parameters and buffers whose names, shapes and dtypes match, and whose values differ, from Model into
    ModelNew; returns their names (empty: copying would change nothing)."""
    ref_state = w.ref_model.state_dict()
    copied = []
    with w.torch.no_grad():
        for name, value in w.candidate.model.state_dict().items():
            src = ref_state.get(name)
            if (src is not None and src.shape == value.shape and src.dtype == value.dtype
                    and not w.torch.equal(src, value)):
                value.copy_(src)
                copied.append(name)
    return copied


def one_trial(w: Worker, index: int, seed: int, cand_first: bool, profile: bool,
              distribution: str = "normal") -> tuple:
    """Run reference and candidate on fresh inputs; returns (comparison, reference output)."""
    from kernelskill.review.compare import compare_outputs
    from kernelskill.review.guards import output_problem
    from kernelskill.review.precision import STRICT_TOL, distributed, tf32_settings

    torch = w.torch
    inputs = distributed(w.make_inputs(seed), distribution, torch)
    ref_args = w.copy_args(inputs)
    cand_args = w.copy_args(inputs) if w.guards.clone_inputs else ref_args

    # Both modules are moved to the device again before each trial, as KernelBench's harness does (`.cuda()`): a
    # no-op for most modules, but an RNN re-packs its weights into a new buffer, and a candidate that kept the old
    # buffer (a CUDA graph captured on its first call) must not pass here and fail there.
    def reference():
        w.ref_model.to(w.device)
        if index == 0:
            w.reference_tf32 = tf32_settings(torch)
        with w.ref_trace if index == 0 else nullcontext():
            out = w.run_reference(ref_args)
        # Keep a copy and free the original: its memory is what a cheating candidate would try to get back.
        kept = map_tensors(out, lambda t: t.detach().clone())
        del out
        return kept

    def candidate():
        move_candidate(w)
        poison(w)
        w.tracker.trace = w.cand_trace
        try:
            with w.cand_trace:
                if profile:
                    # CUPTI torn down when the profile ends: left attached (Kineto's default in some releases), it
                    # slows every later launch of this process, and the judge's batch, run here after the stages,
                    # is held against the reference runner's, which never profiled (H200, CUDA-L1 L2/68: 53 us a
                    # call before one profile, 74 after; with teardown 36 and 36; scripts/profiler_aftereffect.py)
                    os.environ["TEARDOWN_CUPTI"] = "1"
                    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                        out = w.candidate.run(cand_args)
                    w.profiled.update(e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
                else:
                    out = w.candidate.run(cand_args)
        finally:
            w.tracker.trace = None
        return out

    if cand_first:
        cand_out = candidate()
        ref_out = reference()
    else:
        ref_out = reference()
        cand_out = candidate()
    w.candidate.check_integrity()
    if w.guards.output_types:
        problem = output_problem(cand_out, w.device)
        if problem:
            raise w.log.reject("runtime:output-type", problem)
    if w.guards.clone_inputs and changed(inputs, cand_args):
        w.flags.add("candidate_mutates_inputs")
    w.output_bytes = max(w.output_bytes, stored_bytes(cand_out, torch))
    return compare_outputs(ref_out, cand_out, w.settings.atol, w.settings.rtol, index, (STRICT_TOL, STRICT_TOL)), ref_out


def stored_bytes(out, torch) -> int:
    """The bytes the output tensors occupy: no more than their elements need (a slice of a larger buffer), and as
    little as their storage holds (an expanded view of one value holds one element)."""
    from kernelskill.review.compare import flatten_outputs

    total = 0
    for t in flatten_outputs(out):
        if isinstance(t, torch.Tensor):
            total += min(t.numel() * t.element_size(), t.untyped_storage().nbytes())
    return total


def verify(w: Worker) -> None:
    """All trials, with ModelNew's parameters as its own __init__ made them after Model's seed (KernelBench's
    protocol: a candidate may derive its weights from that initialization). If a trial fails and Model has
    parameters of the same names and shapes with other values, they are copied in and all trials run again:
    a candidate that only creates its parameters in another order than Model is not failed for that."""
    w.log.stage("verify")
    w.first_run()
    w.tracker.launches.clear()  # count only launches made while verifying, not the compile warm-up
    failure = trials(w)
    weights = "same_seed"
    if failure is not None:
        copied = copy_parameters(w)
        if copied:
            first = failure
            weights = "copied_by_name"
            failure = trials(w)
            if failure is not None:
                failure = (failure[0] + f" (with Model's parameters copied by name: {', '.join(copied[:6])}"
                           + (" ..." if len(copied) > 6 else "") + f"; with its own: {first[0]})", *failure[1:])
    w.log.update(weights=weights)
    if failure is not None:
        error, verify, worst_abs, worst_rel = failure
        w.log.update(verify=verify)
        raise w.log.fail("mismatch", error, max_abs_error=worst_abs, max_rel_error=worst_rel)
    stale_weights_check(w)
    kernel_policy(w)
    if w.policy_violations:
        w.log.update(policy_violations=w.policy_violations)
    note_backend_flags(w)
    w.log.update(flags=sorted(w.flags))
    w.log.end_stage()


def trials(w: Worker) -> tuple | None:
    """Run every verify trial; None when all pass, else (error, verify record, max abs, max rel error).

    A trial of another distribution whose reference outputs are not finite (where get_inputs()' own are) is not
    compared: the problem is not defined there. It still runs on both sides, which keeps a stateful reference and
    its candidate in step. Under --rules kernelbench a mismatch on another distribution does not decide: KernelBench's
    harness tries get_inputs()' own inputs only (a candidate computing in fp16 under autocast passes there and misses
    on inputs scaled x10), so it is kept as the flag `other_inputs_mismatch` and in the record's
    failed_distributions, and the trials go on."""
    from kernelskill.review.compare import flatten_outputs
    from kernelskill.review.precision import DISTRIBUTIONS, nonfinite
    from kernelskill.review.rules import RuleSet

    seeds = w.req.seeds
    n = w.settings.trials
    plan = [(i, seeds.trials[i], "normal") for i in range(n)]
    if w.guards.input_distributions:
        plan += [(n + k, seeds.trials[k % n], name) for k, name in enumerate(DISTRIBUTIONS)]
    worst_abs = worst_rel = 0.0
    ref_outputs, used, skipped, failed = [], [], {}, {}
    flag_only = not RuleSet.of(w.settings.rules).other_inputs_decide
    strict_bad = normal_nonfinite = compared = 0
    outcome = None
    for i, seed, dist in plan:
        profile = dist == "normal" and w.device.type == "cuda" and i == seeds.profile_trial % n
        cmp, ref_out = one_trial(w, i, seed, candidate_first(w), profile, dist)
        bad, count = nonfinite(ref_out, w.torch)
        if dist == "normal":
            normal_nonfinite += bad
            ref_outputs.append(map_tensors(ref_out, lambda t: t.detach().flatten()[:4096].cpu()))
        elif bad and not normal_nonfinite:
            skipped[dist] = (f"the reference's outputs are not finite on these inputs ({bad} of {count} elements "
                             "NaN/Inf)")
            continue
        if dist not in used:
            used.append(dist)
        if not cmp.ok and dist != "normal" and flag_only:
            failed.setdefault(dist, f"trial {i + 1} of {len(plan)}: {cmp.mismatch.reason}")
            strict_bad += max(cmp.strict_bad, 1)  # outside the configured tolerance: outside the strict one too
            w.flags.add(f"other_inputs_mismatch: {dist} inputs, {failed[dist]} (not part of KernelBench's verdict)")
            continue
        worst_abs, worst_rel = max(worst_abs, cmp.max_abs_error), max(worst_rel, cmp.max_rel_error)
        if not cmp.ok:
            cmp.mismatch.distribution = dist
            where = "" if dist == "normal" else f" ({dist} inputs)"
            outcome = (f"trial {i + 1} of {len(plan)}{where}: {cmp.mismatch.reason}",
                       verify_record(False, compared, compared, w.settings, worst_abs, worst_rel, cmp.mismatch, used,
                                     skipped, failed), worst_abs, worst_rel)
            break
        compared += 1
        strict_bad += cmp.strict_bad
    dtypes = sorted({str(t.dtype).removeprefix("torch.") for out in ref_outputs[:1] for t in flatten_outputs(out)
                     if isinstance(t, w.torch.Tensor) and t.is_floating_point()})
    w.log.update(precision=Precision(output_dtypes=dtypes, reference_tf32=w.reference_tf32 or {},
                                     strict_tolerance_ok=None if outcome else strict_bad == 0,
                                     strict_mismatched=None if outcome else strict_bad))
    if outcome:
        return outcome
    w.log.update(verify=verify_record(True, compared, compared, w.settings, worst_abs, worst_rel, None, used, skipped,
                                      failed),
                 max_abs_error=worst_abs, max_rel_error=worst_rel)
    w.flags.update(degenerate(ref_outputs, w.settings.atol, w.torch))
    return None


def note_backend_flags(w: Worker) -> None:
    """Global switches the candidate flipped (the reference ran under them too, as in KernelBench's harness)."""
    from kernelskill.review.guards import changed_backend_flags

    changed = changed_backend_flags(w.session.backend_flags)
    if changed:
        w.flags.update(f"backend_flag_changed:{name}={value}" for name, value in changed.items())
        w.log.update(backend_flags_changed={k: str(v) for k, v in changed.items()})


def kernel_policy(w: Worker) -> None:
    """The candidate must launch kernels of its own and must not simply re-run the reference's operators."""
    names = w.req.kernel_names
    own = dict(w.tracker.launches)
    for kernel in w.profiled:
        for name in names:
            if name in kernel and name not in own:
                own[name] = own.get(name, 0) + 1
    ref_ops, cand_ops = dict(w.ref_trace.ops), dict(w.cand_trace.ops)
    w.log.update(kernels={"own_kernels": own, "candidate_ops": cand_ops, "reference_ops": ref_ops,
                         "profiled_kernels": sorted(w.profiled)})
    if not w.guards.kernel_policy:
        return
    if w.settings.allow_torch_ops:
        w.flags.add("torch_ops_allowed")
        return
    # Policy, not safety: the candidate is still timed; `--rules strict` turns a violation into the verdict.
    violation = None
    if not own:
        violation = {"name": "policy:no-custom-kernel",
                     "detail": "the candidate launched no kernel of its own (Triton or CUDA); it must do the work in "
                               "its own kernels (--rules kernelbench or --allow-torch-ops accept PyTorch-only "
                               "candidates)"}
    elif ref_ops and set(ref_ops) <= set(cand_ops):
        violation = {"name": "policy:reruns-reference-ops",
                     "detail": f"the candidate calls every PyTorch operator the reference uses "
                               f"({', '.join(sorted(ref_ops))}) besides its own kernels, so PyTorch does the real "
                               "work (--rules kernelbench or --allow-torch-ops accept this)"}
    if violation:
        w.policy_violations.append(violation)
