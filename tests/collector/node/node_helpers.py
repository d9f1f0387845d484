"""Shared helpers for the simulated-node tests: hooks that record what MEASURE would see."""

from __future__ import annotations

import numpy as np

START_US = 1_780_000_000_000_000  # 2026-05-28 (UTC), a Thursday


class RecordingHooks:
    """Accumulates every bump per entity slot; measures transient entities when they start."""

    def __init__(self, node=None, keep_events: bool = False) -> None:
        self.node = node
        self.acc: dict[str, np.ndarray] = {}
        self.events: list[tuple] = []
        self.keep_events = keep_events
        self.calls: list[tuple[str, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self.keep_calls = False

    def attach(self, node) -> None:
        self.node = node
        node.hooks = self
        node.measure_all()

    def xctr(self, entity, slots, xptr, acc, level, peak, at_us) -> None:
        assert (xptr >= 0).all()
        a = self.acc.get(entity)
        need = int(slots.max()) + 1 if slots.size else 0
        if a is None or a.shape[0] < need:
            new = np.zeros((max(need, 64), acc.shape[1]))
            if a is not None:
                new[: a.shape[0]] = a
            a = self.acc[entity] = new
        a[slots] += acc
        if self.keep_events:
            for s in slots.tolist():
                self.events.append(("bump", entity, s, at_us))
        if self.keep_calls:
            self.calls.append((entity, slots.copy(), acc.copy(), level.copy(), peak.copy()))

    def entity_started(self, entity, slot, at_us) -> None:
        T = self.node.tables[entity]
        T.xptr[slot] = 10_000_000 + slot  # MEASURE picks transient entities up automatically
        self.events.append(("start", entity, slot, at_us))

    def entity_stopped(self, entity, slot, at_us) -> None:
        self.node.tables[entity].xptr[slot] = -1
        self.events.append(("stop", entity, slot, at_us))

    def cpu_failed(self, cpu, at_us) -> None:
        self.events.append(("cpu_failed", "cpu", cpu, at_us))

    def cpu_reloaded(self, cpu, at_us) -> None:
        self.events.append(("cpu_reloaded", "cpu", cpu, at_us))

    def total(self, entity: str, counter: str) -> np.ndarray:
        T = self.node.tables[entity]
        a = self.acc.get(entity)
        if a is None:
            return np.zeros(T.n)
        out = np.zeros(T.n)
        k = min(T.n, a.shape[0])
        out[:k] = a[:k, T.entity.index(counter)]
        return out
