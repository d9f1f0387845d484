"""Where a backfill's time goes: wall seconds per phase (simulation, encoding, the writer's
COPY, condensing, waiting for the writer, …), summed over the run, from any thread.

The collector keeps one :class:`Phases` per backfill; `measuredb backfill` logs the table at
DEBUG (at INFO with MEASUREDB_COLLECTOR_PROGRESS=lines) and bench/bench_scale.py reads it
(the profile in bench/RESULTS.md). Timing a phase costs two clock reads."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["Phases"]


class Phases:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.cpu: dict[str, float] = {}  # CPU seconds of the thread that ran the phase
        self._lock = threading.Lock()

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        t0, c0 = time.perf_counter(), time.thread_time()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - t0, time.thread_time() - c0)

    def add(self, name: str, seconds: float, cpu: float = 0.0) -> None:
        with self._lock:
            self.seconds[name] = self.seconds.get(name, 0.0) + seconds
            self.cpu[name] = self.cpu.get(name, 0.0) + cpu

    def laps(self) -> Callable[[str], None]:
        """A stopwatch: each call `lap(name)` adds the time since the previous lap (or since
        laps() was called) to `name`."""
        last = [time.perf_counter(), time.thread_time()]

        def lap(name: str) -> None:
            now, cpu = time.perf_counter(), time.thread_time()
            self.add(name, now - last[0], cpu - last[1])
            last[:] = now, cpu
        return lap

    def line(self) -> str:
        """One line: `phase=wall/cpu s` for each phase, in the order they first ran."""
        with self._lock:
            return " ".join(f"{name}={s:.2f}/{self.cpu[name]:.2f}" for name, s in self.seconds.items())
