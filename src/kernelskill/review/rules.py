"""What `--rules` means, in one place.

Two rule sets judge the same run. `kernelbench` is KernelBench's harness: a candidate that compiles and matches the
reference on get_inputs()' inputs is correct, whatever it leaned on. `strict` adds this project's rules: no
violation (a fallback to the reference, backend flags flipped, a task's backend not used, stale weights read …)
and right on the other input distributions too. Every part of the project that asks what the chosen rule set
allows asks a `RuleSet`: the reviewer's verdict, the runner's trials, the loop's backend check.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelskill.review.results import Check, PolicyResult
from kernelskill.settings import Rules


@dataclass(frozen=True)
class RuleSet:
    name: Rules

    @classmethod
    def of(cls, name: Rules) -> RuleSet:
        if name not in ("strict", "kernelbench"):
            raise ValueError(f"unknown rule set {name!r}: strict or kernelbench")
        return cls(name)

    @property
    def violations_reject(self) -> bool:
        """A broken strict rule rejects the candidate (strict), or stays a flag beside the verdict (kernelbench)."""
        return self.name == "strict"

    @property
    def other_inputs_decide(self) -> bool:
        """A miss on another input distribution (inputs scaled, offset) ends the trials as a mismatch (strict), or is
        the flag `other_inputs_mismatch` and the trials go on (kernelbench, whose harness tries get_inputs() only)."""
        return self.name == "strict"

    def accepts_backend(self, candidate_backend: str, task_backend: str) -> bool:
        """Whether a candidate of this backend is reviewed for a task of that one. KernelBench's harness takes any
        working ModelNew (published kernels are often plain PyTorch, or Triton in a CUDA task)."""
        return self.name == "kernelbench" or candidate_backend == task_backend

    def source_unreadable(self, backend: str) -> bool:
        """KernelBench's harness `exec`s a CUDA or plain-PyTorch candidate from its text: code that reads its own
        source back (torch.jit.script, inspect) fails there, and under kernelbench here. Triton reads kernel sources
        through inspect and KernelBench writes Triton candidates to a file: those keep theirs."""
        return self.name == "kernelbench" and backend != "triton"

    def policy(self, kernelbench_ok: bool, violations: list[Check], other_inputs_ok: bool,
               weights: str | None) -> PolicyResult:
        """Both rule sets' verdicts on one run; `rules` says which one the review's `correct` is."""
        return PolicyResult(rules=self.name, violations=violations, weights=weights,
                            correct_kernelbench=kernelbench_ok,
                            correct_strict=kernelbench_ok and not violations and other_inputs_ok)
