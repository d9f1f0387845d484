"""Clocks for the simulated node (style P11): the node owns virtual time; real time is a wrapper.

``SimulatedClock`` runs as fast as the machine allows. ``RealtimeClock(factor)`` paces a run so
that one real second covers ``factor`` simulated seconds, and reports overruns (a step that
took longer than its real-time budget) instead of drifting silently.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Overrun", "RealtimeClock", "SimulatedClock"]


@dataclass
class SimulatedClock:
    """Virtual time only: ``wait_until`` returns at once."""

    now_us: int

    def wait_until(self, sim_us: int) -> None:
        self.now_us = sim_us


@dataclass(slots=True)
class Overrun:
    sim_us: int
    behind_s: float


@dataclass
class RealtimeClock:
    """Pace simulated time against the wall clock; ``factor`` simulated seconds per real second.

    ``strict=True`` raises when the simulation falls more than ``tolerance_s`` behind;
    otherwise overruns are recorded in ``overruns`` (and passed to ``on_overrun``).
    """

    now_us: int
    factor: float = 1.0
    strict: bool = False
    tolerance_s: float = 0.5
    on_overrun: Callable[[Overrun], None] | None = None
    overruns: list[Overrun] = field(default_factory=list)
    _sleep: Callable[[float], None] = time.sleep
    _mono: Callable[[], float] = time.monotonic
    _t0_real: float | None = None
    _t0_sim: int = 0

    def __post_init__(self) -> None:
        if self.factor <= 0:
            raise ValueError("factor must be > 0 (simulated seconds per real second)")

    def wait_until(self, sim_us: int) -> None:
        if self._t0_real is None:
            self._t0_real, self._t0_sim = self._mono(), self.now_us
        due = self._t0_real + (sim_us - self._t0_sim) / 1e6 / self.factor
        late = self._mono() - due
        if late > self.tolerance_s:
            o = Overrun(sim_us, late)
            self.overruns.append(o)
            if self.on_overrun:
                self.on_overrun(o)
            if self.strict:
                raise RuntimeError(
                    f"simulation is {late:.2f} s behind real time at sim {sim_us} µs "
                    f"(factor {self.factor}); lower the factor or the node size"
                )
        elif late < 0:
            self._sleep(-late)
        self.now_us = sim_us
