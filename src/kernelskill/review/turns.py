"""Turns on one device, for the reviews that share it.

A judged review's steps on a device are of two kinds. Most only need the device to work: a runner's verify stage,
the judge's trials, making the batch's inputs, comparing outputs. The steps that are timed need it
alone: the reference's timing, the candidate's own timing stage, and the two batches the judge times (the
candidate's, its runner's kill, the reference's: one step, so nothing else runs between the two sides). Several
reviews may hold one device at once (loop/devices.py); through their `Turn`s:

- a plain step starts when no timed step runs or waits, and runs beside other plain steps;
- a timed step waits until no other step runs, and steps asked for after it wait for it (it goes first);
- honest runners do device work only inside the steps they are granted: a runner under turns waits for the
  harness's `go` before each of its stages (worker/session.StageLog), and the judge sends each command inside a
  step. Loading and building (a runner's first two stages) are the host's work and take no step. A runner outside
  a step is not trusted to stay idle: every process of every *other* review's runners is stopped (SIGSTOP, with
  everything it started) for the length of each timed step, and continued after. A review's limits grow by the
  time its runners spent stopped (`Turn.paused`).

A review with a device to itself (the only holder, or `hold_alone`) pays for none of this beyond the bookkeeping:
its steps are granted at once. What stays outside: GPU work a stopped runner queued before it was stopped still
runs to its end (a stopped process launches nothing new, and one kernel of a candidate's own is bounded by that
candidate's own limits).
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from kernelskill.review.processes import signal_all, stop_tree

Kind = Literal["plain", "timed"]


class Turns:
    """The turns of one device: how many plain steps run, which review's timed step runs, how many wait."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._plain = 0
        self._timed: Turn | None = None
        self._waiting_timed = 0
        self._turns: set[Turn] = set()
        self.timed_steps = 0  # granted so far (for tests and the record)
        self.stops = 0  # timed steps that stopped at least one process of another review

    def turn(self) -> Turn:
        """A review's turn on this device; `close` it when the review ends."""
        turn = Turn(self)
        with self._cond:
            self._turns.add(turn)
        return turn

    def _begin(self, turn: Turn, kind: Kind) -> None:
        with self._cond:
            if kind == "plain":
                self._cond.wait_for(lambda: self._timed is None and self._waiting_timed == 0)
                self._plain += 1
                return
            self._waiting_timed += 1
            try:
                self._cond.wait_for(lambda: self._timed is None and self._plain == 0)
            finally:
                self._waiting_timed -= 1
            self._timed = turn
            self.timed_steps += 1
            now = time.monotonic()
            stopped_any = False
            for other in self._turns:
                if other is not turn:
                    stopped_any |= other._stop(now)
            self.stops += stopped_any

    def _end(self, turn: Turn, kind: Kind) -> None:
        with self._cond:
            if kind == "plain":
                self._plain -= 1
            else:
                now = time.monotonic()
                for other in self._turns:
                    if other is not turn:
                        other._go_on(now)
                self._timed = None
            self._cond.notify_all()

    def _register(self, turn: Turn, pid: int) -> None:
        with self._cond:
            turn._pids.add(pid)
            if self._timed is not None and self._timed is not turn:  # started during another's timed step
                turn._stop(time.monotonic(), only=pid)

    def _close(self, turn: Turn) -> None:
        with self._cond:
            self._turns.discard(turn)
            turn._go_on(time.monotonic())


class Turn:
    """One review's steps on a shared device, and the processes of its runners."""

    def __init__(self, turns: Turns) -> None:
        self._turns = turns
        self._pids: set[int] = set()
        self._step: Kind | None = None
        self._stopped: list[int] = []
        self._stopped_at: float | None = None
        self._paused = 0.0
        self._whole = False  # hold_alone: every step of the review is timed, granted once
        self.waited = 0.0  # seconds its steps waited for their turn

    def begin(self, kind: Kind) -> float:
        """Wait for a step of `kind` (ending the step in progress first); returns the seconds waited."""
        if self._whole:
            return 0.0
        self.end()
        began = time.monotonic()
        self._turns._begin(self, kind)
        self._step = kind
        waited = time.monotonic() - began
        self.waited += waited
        return waited

    def end(self) -> None:
        if self._whole or self._step is None:
            return
        kind, self._step = self._step, None
        self._turns._end(self, kind)

    @contextmanager
    def step(self, kind: Kind) -> Iterator[float]:
        """A step of `kind` for the block; yields the seconds it waited."""
        waited = self.begin(kind)
        try:
            yield waited
        finally:
            self.end()

    @contextmanager
    def hold_alone(self) -> Iterator[None]:
        """The device to this review alone for the block: one timed step, which every step inside joins (a review
        run again after it ran out of memory beside others; a profile)."""
        self.begin("timed")
        self._whole = True
        try:
            yield
        finally:
            self._whole = False
            self.end()

    def add(self, pid: int) -> None:
        """A runner of this review: stopped while any other review's timed step runs."""
        self._turns._register(self, pid)

    def discard(self, pid: int) -> None:
        with self._turns._cond:
            self._pids.discard(pid)

    def paused(self) -> float:
        """Seconds this review's runners have spent stopped for other reviews' timed steps, so far."""
        with self._turns._cond:
            return self._paused + (time.monotonic() - self._stopped_at if self._stopped_at is not None else 0.0)

    def close(self) -> None:
        """The review is over: its step ends, and whatever of its runners another's timed step holds stopped goes
        on (to its death, as a rule: a review ends after killing its runners)."""
        self._whole = False
        self.end()
        self._turns._close(self)

    # called with the Turns' lock held
    def _stop(self, now: float, only: int | None = None) -> bool:
        for pid in [only] if only is not None else sorted(self._pids):
            self._stopped += stop_tree(pid)
        if self._stopped and self._stopped_at is None:
            self._stopped_at = now
        return bool(self._stopped)

    def _go_on(self, now: float) -> None:
        if self._stopped:
            signal_all(self._stopped, signal.SIGCONT)
            self._stopped = []
        if self._stopped_at is not None:
            self._paused += now - self._stopped_at
            self._stopped_at = None
