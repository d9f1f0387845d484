"""MEASURE hooks of the simulated node: entity tables and the XCTR-like bump interface.

As in the 1986 MEASURE article, the operating system keeps, in each entity's control block, a
pointer to its counter record (``xptr``); a zero/negative pointer means "not measured" and the
bump costs nothing. Here every entity type is an :class:`EntityTable` (columnar identifying
fields, ``alive``, ``cpu``, ``xptr``), and the node reports counter contributions only through
:meth:`NodeHooks.xctr`, only for slots whose ``xptr >= 0``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from core.catalog import EntityDef

__all__ = ["EntityTable", "NodeHooks", "NullHooks"]


class EntityTable:
    """All entities of one type: one slot per entity, identifying fields as columns.

    ``ids[field]`` is a numpy array (object for names, int64 for numbers) with one value per
    slot; ``alive`` says which slots currently exist; ``cpu`` is the CPU the entity lives in
    (−1 if none); ``xptr`` is the counter-record pointer set by MEASURE (−1 = not measured).
    Slots of stopped transient entities are never reused within a node's life, so a slot
    number identifies one incarnation.
    """

    def __init__(self, entity: EntityDef, capacity: int = 16) -> None:
        self.entity = entity
        self.name = entity.name
        self.n = 0
        self.ids: dict[str, np.ndarray] = {}
        self._cap = max(capacity, 1)
        self.alive = np.zeros(self._cap, dtype=bool)
        self.cpu = np.full(self._cap, -1, dtype=np.int64)
        self.xptr = np.full(self._cap, -1, dtype=np.int64)
        self.started_us = np.zeros(self._cap, dtype=np.int64)
        self.transient = np.zeros(self._cap, dtype=bool)
        self.extra: dict[str, Any] = {}

    @property
    def n_counters(self) -> int:
        return len(self.entity.counters)

    def _grow(self, need: int) -> None:
        if need <= self._cap:
            return
        cap = max(need, 2 * self._cap)
        for name in ("alive", "cpu", "xptr", "started_us", "transient"):
            old = getattr(self, name)
            new = np.full(cap, -1 if name in ("cpu", "xptr") else 0, dtype=old.dtype)
            new[: old.size] = old
            setattr(self, name, new)
        for k, old in self.ids.items():
            new = np.empty(cap, dtype=old.dtype)
            if old.dtype == object:
                new[:] = ""
            else:
                new[:] = 0
            new[: old.size] = old
            self.ids[k] = new
        self._cap = cap

    def add(self, *, cpu: int = -1, at_us: int = 0, transient: bool = False, **ids: Any) -> int:
        """Append one entity (alive) and return its slot."""
        slot = self.n
        self._grow(slot + 1)
        for k, v in ids.items():
            if k not in self.ids:
                dt = object if isinstance(v, str) else np.int64
                arr = np.empty(self._cap, dtype=dt)
                arr[:] = "" if dt is object else 0
                self.ids[k] = arr
            self.ids[k][slot] = v
        self.alive[slot] = True
        self.cpu[slot] = cpu
        self.started_us[slot] = at_us
        self.transient[slot] = transient
        self.n += 1
        return slot

    def id_of(self, slot: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, arr in self.ids.items():
            v = arr[slot]
            out[k] = v.item() if isinstance(v, np.generic) else v
        return out

    def measured_slots(self) -> np.ndarray:
        n = self.n
        return np.flatnonzero(self.alive[:n] & (self.xptr[:n] >= 0))


@runtime_checkable
class NodeHooks(Protocol):
    """What MEASURE sees of the node. Every method may be a no-op."""

    def xctr(
        self,
        entity: str,
        slots: np.ndarray,
        xptr: np.ndarray,
        acc: np.ndarray,
        level: np.ndarray,
        peak: np.ndarray,
        at_us: int,
    ) -> None:
        """Bump counter records: rows of acc/level/peak belong to ``slots`` (all xptr >= 0).

        The arrays are the node's own buffers, valid for the duration of the call only (the
        node reuses them next step): copy what you keep."""

    def entity_started(self, entity: str, slot: int, at_us: int) -> None: ...

    def entity_stopped(self, entity: str, slot: int, at_us: int) -> None: ...

    def cpu_failed(self, cpu: int, at_us: int) -> None: ...

    def cpu_reloaded(self, cpu: int, at_us: int) -> None: ...


@dataclass
class NullHooks:
    """No-op hooks: a node with nothing measured."""

    calls: int = field(default=0)

    def xctr(self, entity, slots, xptr, acc, level, peak, at_us) -> None:
        self.calls += 1

    def entity_started(self, entity: str, slot: int, at_us: int) -> None:
        pass

    def entity_stopped(self, entity: str, slot: int, at_us: int) -> None:
        pass

    def cpu_failed(self, cpu: int, at_us: int) -> None:
        pass

    def cpu_reloaded(self, cpu: int, at_us: int) -> None:
        pass
