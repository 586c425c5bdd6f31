"""The devices of this machine, each taken by one evaluation at a time or shared by a few reviews, and the line of
reviews waiting for them."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from kernelskill.review.turns import Turn, Turns

# Spare review workers kept starting per GPU. On the H200 host, busy with builds, a worker started in a median 9.2 s
# (Python, torch, the CUDA context, the sandbox) and a review with the compile baseline then held the GPU 6.2 s: one
# spare would not be up in time, two are (docs/h200/kernelbench/compile).
SPARES_PER_GPU = 2
# Reviews a GPU holds at once by default (bench --reviews-per-gpu N: their untimed steps side by side, each timed step
# with the GPU alone, review/turns.py). One: in two back-to-back calls on one H100 host (two runs, not one), four at
# once reviewed the same 37 cold CUDA kernels at the pace one did (10.75 and 10.66 a minute; each review's steps
# waited 7 s of its 12.7 s for their turn: docs/h200/build_breakdown, session 12), so sharing stays a choice until a
# side-by-side run shows it pays.
REVIEWS_PER_GPU = 1


class Devices:
    """An evaluation takes a device and gives it back when it ends: one at a time, or with `share` above 1 up to that
    many reviews at once, each with its `Turn` on the device (review/turns.py: the timed steps of each run alone).
    A profile (`take(alone=True)`) has its device alone for the whole evaluation.

    Reviews that wait for a device form a line, in the order they will get one (a queue's waiters are woken first
    come, first served). With `warm` set (reviewer.warm_runner, on one GPU: on several, which one a review gets is
    not known ahead), the first SPARES_PER_GPU reviews in line have their candidate's runner started while they
    wait: a candidate's runner serves that candidate alone (its caches are its own), so it cannot be started
    before the candidate is known, and starting it inside the review would hold the device through the start-up."""

    def __init__(self, gpus: list[str] | None, share: int = 1) -> None:
        self.gpus = list(gpus or [])  # empty: the one device as this process sees it
        self.share = max(1, share)
        self._free: queue.Queue[str | None] = queue.Queue()  # a place on a device, `share` of them each
        self.turns = {gpu: Turns() for gpu in self.gpus or [None]}
        self._held = {gpu: 0 for gpu in self.turns}  # evaluations holding each device now
        self._idle_from = {gpu: time.monotonic() for gpu in self.turns}  # since when none has
        self._held_lock = threading.Lock()
        for _ in range(self.share):
            for gpu in self.gpus or [None]:
                self._free.put(gpu)
        self.idle_since = threading.local()  # when the taken device was last left idle, per thread (see `take`)
        self.warm: Callable[..., bool] | None = None  # warm(problem, candidate, settings, env=...)
        self._line: list[list] = []  # [(problem, candidate, settings), started] of the reviews waiting
        self._line_lock = threading.Lock()

    @contextmanager
    def take(self, review: tuple | None = None, alone: bool = False
             ) -> Iterator[tuple[dict[str, str], float, Callable[[], None], Turn | None]]:
        """(the worker's environment, seconds waited, a call that gives the device back before the block ends: a
        review's last steps need none, the review's turn on a shared device or None). `idle_since.value`: since
        when the device had been idle (the moment it was taken, when another evaluation held it). `review`:
        (problem, candidate, settings) of the review that will run, for the line. `alone`: no other evaluation's
        step runs on the device during the block."""
        place = [review, False]
        self._in_line(place, join=review is not None)
        queued = time.monotonic()
        gpu = self._free.get()
        self._in_line(place, join=False)
        with self._held_lock:
            self._held[gpu] += 1
            self.idle_since.value = self._idle_from[gpu] if self._held[gpu] == 1 else time.monotonic()
        turn = self.turns[gpu].turn() if self.share > 1 else None
        given = threading.Lock()

        def give_back() -> None:
            if given.acquire(blocking=False):
                if turn is not None:
                    turn.close()
                with self._held_lock:
                    self._held[gpu] -= 1
                    if self._held[gpu] == 0:
                        self._idle_from[gpu] = time.monotonic()
                self._free.put(gpu)

        try:
            if alone and turn is not None:
                with turn.hold_alone():
                    yield self.environment(gpu), time.monotonic() - queued, give_back, turn
            else:
                yield self.environment(gpu), time.monotonic() - queued, give_back, turn
        finally:
            give_back()

    @staticmethod
    def environment(gpu: str | None) -> dict[str, str]:
        return {} if gpu is None else {"CUDA_VISIBLE_DEVICES": gpu}

    def _in_line(self, place: list, join: bool) -> None:
        """Join the line, or leave it (the device is taken); then start the runners of the first reviews in line
        that have none yet."""
        if self.warm is None:
            return
        with self._line_lock:
            if join:
                self._line.append(place)
            else:
                self._line = [p for p in self._line if p is not place]
            for ahead in self._line[:SPARES_PER_GPU]:
                if not ahead[1]:
                    ahead[1] = True
                    problem, candidate, settings = ahead[0]
                    try:
                        self.warm(problem, candidate, settings,
                                  env=self.environment(self.gpus[0] if self.gpus else None))
                    except Exception:  # noqa: BLE001 - its review starts its runner itself, and says what failed
                        pass
