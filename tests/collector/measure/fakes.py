"""A tiny deterministic node for MEASURE's own tests: exact, hand-checkable counter values.

Every CPU is busy half of every second (CPU-BUSY-TIME grows 500,000 µs per second) with a
ready queue of exactly 2 (CPU-QTIME grows 2 µs per µs); every process is always busy
(CPU-BUSY-TIME = its age in µs, still busy at every step end) and sends 3 messages a second.
Transient processes start and stop on request.
"""

from __future__ import annotations

import numpy as np

from collector.node.hooks import EntityTable, NullHooks
from core.catalog import load_catalog

SECOND = 1_000_000


class FakeNode:
    def __init__(self, n_cpus: int = 2, start_us: int = 0) -> None:
        cat = load_catalog()
        self.now_us = start_us
        self.hooks = NullHooks()
        self.tables = {name: EntityTable(cat.entity(name)) for name in ("cpu", "process", "userdef")}
        for cpu in range(n_cpus):
            self.tables["cpu"].add(cpu=cpu, at_us=start_us)
        self.add_process("$TCP1", 0, "$SYSTEM.SYSTEM.PATHTCP2", 150)
        self.add_process("$APP1", 1, "$PROGS.SERVER1.APP", 140)
        self._pending_stop: list[tuple[str, int]] = []

    def add_process(self, name: str, cpu: int, program: str, priority: int, *,
                    transient: bool = False) -> int:
        table = self.tables["process"]
        return table.add(cpu=cpu, at_us=self.now_us, transient=transient, pin=10 + table.n,
                         process_name=name, program_file_name=program, priority=priority)

    def start_process(self, name: str, cpu: int = 0) -> int:
        slot = self.add_process(name, cpu, "$PROGS.BATCH.JOB", 100, transient=True)
        self.hooks.entity_started("process", slot, self.now_us)
        return slot

    def stop_process(self, slot: int) -> None:
        self.hooks.entity_stopped("process", slot, self.now_us)
        self.tables["process"].alive[slot] = False

    def advance(self, until_us: int) -> None:
        while self.now_us < until_us:
            t1 = min(until_us, (self.now_us // SECOND + 1) * SECOND)
            dt = t1 - self.now_us
            self._bump(t1, dt)
            self.now_us = t1

    def _bump(self, at_us: int, dt: int) -> None:
        cpu = self.tables["cpu"]
        e = cpu.entity
        slots = cpu.measured_slots()
        if slots.size:
            acc = np.zeros((slots.size, len(e.counters)))
            level = np.zeros_like(acc)
            acc[:, e.index("cpu_busy_time")] = dt / 2
            acc[:, e.index("cpu_qtime")] = 2 * dt
            level[:, e.index("cpu_qtime")] = 2
            acc[:, e.index("dispatches")] = dt // 1000
            self.hooks.xctr("cpu", slots, cpu.xptr[slots], acc, level, level.copy(), at_us)
        proc = self.tables["process"]
        p = proc.entity
        slots = proc.measured_slots()
        if slots.size:
            acc = np.zeros((slots.size, len(p.counters)))
            level = np.zeros_like(acc)
            acc[:, p.index("cpu_busy_time")] = dt
            level[:, p.index("cpu_busy_time")] = 1
            acc[:, p.index("messages_sent")] = 3 * dt / SECOND
            self.hooks.xctr("process", slots, proc.xptr[slots], acc, level, np.zeros_like(acc), at_us)
