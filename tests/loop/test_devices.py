"""The line of reviews waiting for a device: the first in line have their candidate's runner started ahead."""

from __future__ import annotations

import threading
import time

from kernelskill.loop.devices import SPARES_PER_GPU, Devices


def test_the_first_reviews_in_line_have_their_runners_started_while_they_wait():
    devices = Devices(["0"])
    started: list[tuple[str, dict]] = []
    devices.warm = lambda problem, candidate, settings, env: started.append((candidate, env)) or True
    taken: list[str] = []
    release = threading.Event()

    def review(name: str) -> None:
        with devices.take(("p", name, None)):
            taken.append(name)
            release.wait(10)

    first = threading.Thread(target=review, args=("a",))
    first.start()
    while not taken:
        time.sleep(0.01)
    waiting = [threading.Thread(target=review, args=(n,)) for n in ("b", "c", "d")]
    for t in waiting:
        t.start()
        time.sleep(0.05)
    # "a" was first in line and had its runner started before it took the device; of those waiting, only the
    # first SPARES_PER_GPU, in the order they joined
    assert [c for c, _ in started] == ["a", "b", "c"][: 1 + SPARES_PER_GPU]
    assert all(env == {"CUDA_VISIBLE_DEVICES": "0"} for _, env in started)  # what the device will give them
    release.set()
    for t in (first, *waiting):
        t.join(10)
    assert [c for c, _ in started] == ["a", "b", "c", "d"] and taken == ["a", "b", "c", "d"]
