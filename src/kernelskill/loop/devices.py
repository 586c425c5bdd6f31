"""The devices of this machine, taken one evaluation at a time, and the line of reviews waiting for them."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

# Spare review workers kept starting per GPU. On the H200 host, busy with builds, a worker started in a median 9.2 s
# (Python, torch, the CUDA context, the sandbox) and a review with the compile baseline then held the GPU 6.2 s: one
# spare would not be up in time, two are (docs/h200/kernelbench/compile).
SPARES_PER_GPU = 2


class Devices:
    """One evaluation per device at a time: an evaluation takes a device and gives it back when it ends.

    Reviews that wait for a device form a line, in the order they will get one (a queue's waiters are woken first
    come, first served). With `warm` set (reviewer.warm_runner, on one GPU: on several, which one a review gets is
    not known ahead), the first SPARES_PER_GPU reviews in line have their candidate's runner started while they
    wait: a candidate's runner serves that candidate alone (its caches are its own), so it cannot be started
    before the candidate is known, and starting it inside the review would hold the device through the start-up."""

    def __init__(self, gpus: list[str] | None) -> None:
        self.gpus = list(gpus or [])  # empty: the one device as this process sees it
        self._free: queue.Queue[tuple[str | None, float]] = queue.Queue()  # (device, free since)
        for gpu in self.gpus or [None]:
            self._free.put((gpu, time.monotonic()))
        self.idle_since = threading.local()  # the taken device's last release, per thread (see `take`)
        self.warm: Callable[..., bool] | None = None  # warm(problem, candidate, settings, env=...)
        self._line: list[list] = []  # [(problem, candidate, settings), started] of the reviews waiting
        self._line_lock = threading.Lock()

    @contextmanager
    def take(self, review: tuple | None = None) -> Iterator[tuple[dict[str, str], float, Callable[[], None]]]:
        """(the worker's environment, seconds waited, a call that gives the device back before the block ends: a
        review's last steps need none). `idle_since.value`: when the device was last given back. `review`:
        (problem, candidate, settings) of the review that will run, for the line."""
        place = [review, False]
        self._in_line(place, join=review is not None)
        queued = time.monotonic()
        gpu, since = self._free.get()
        self._in_line(place, join=False)
        self.idle_since.value = since
        given = threading.Lock()
        give_back = lambda: given.acquire(blocking=False) and self._free.put((gpu, time.monotonic()))  # type: ignore[func-returns-value]  # noqa: E731
        try:
            yield self.environment(gpu), time.monotonic() - queued, give_back
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
