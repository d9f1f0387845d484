"""What the collector does differently for the node it measures, behind one interface.

A *simulated* node (collector/node/engine.py) is deterministic: it has a history to backfill,
its state is rebuilt by replaying from the virtual clock's origin (or resumed from a
checkpoint file), and a restart continues where the stored copies end. The *host* node
(MEASUREDB_COLLECTOR_NODE=host, collector/node/host.py) measures the present: no backfill, no
replay, a restart starts a fresh epoch (collector/hostnode.py, docs/host-node.md).

The collector (collector/service.py) asks its :class:`NodeKind` instead of testing which node
it runs; :func:`node_kind` picks it from the settings.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Protocol

import psycopg

from collector.hostnode import HostNodeKind
from collector.node.anomalies import load_schedule
from collector.node.engine import Node
from collector.node.host import is_host_node
from collector.node.topology import load_node
from collector.node.workload import default_workload
from collector.settings import CollectorSettings
from core.catalog import Catalog
from core.times import SECOND


class NodeKind(Protocol):
    topology: Any
    # A node rebuilt by replay can resume from a checkpoint file; one that measures the
    # present keeps none.
    checkpoints: bool

    @property
    def resumed(self) -> Collection[int]:
        """Measurements running before a restart that keep their start time (no new start copy)."""

    def registering(self, conn: psycopg.Connection, system_id: int, epoch_us: int | None) -> None:
        """The node's own part of registering its system (and refusing what it cannot do)."""

    def first_epoch(self, now_us: int) -> int:
        """The virtual clock's origin of a first start."""

    def restart_epoch(self, conn: psycopg.Connection, collector_id: str, system_id: int,
                      stored_us: int, epoch_us: int | None) -> int:
        """The origin of a restart, given the one the database holds."""

    def make_node(self, catalog: Catalog, epoch_us: int) -> Any:
        """A node at the origin (the interface MEASMON needs: tables, now_us, step_us, …)."""

    def ended_before(self, stop_us: int | None, epoch_us: int) -> bool:
        """Is a measurement that stopped at stop_us over before this epoch (never measured)?"""


class SimulatedNodeKind:
    """A simulated node: history from ``backfill_days`` before now, replayed on restart."""

    checkpoints = True
    resumed: frozenset[int] = frozenset()

    def __init__(self, settings: CollectorSettings) -> None:
        self.settings = settings
        self.topology = load_node(settings.node)
        self.workload = settings.workload or default_workload(settings.node)
        # scheduled anomalies (collector/node/anomalies.py): read now, so a bad file stops the start
        self.anomalies = load_schedule(settings.anomalies) if settings.anomalies is not None else None

    def registering(self, conn: psycopg.Connection, system_id: int, epoch_us: int | None) -> None:
        pass

    def first_epoch(self, now_us: int) -> int:
        interval = self.settings.interval_seconds * SECOND
        return (now_us - self.settings.backfill_days * 86_400 * SECOND) // interval * interval

    def restart_epoch(self, conn: psycopg.Connection, collector_id: str, system_id: int,
                      stored_us: int, epoch_us: int | None) -> int:
        return stored_us

    def make_node(self, catalog: Catalog, epoch_us: int) -> Node:
        return Node(self.topology, self.workload, seed=self.settings.seed, start_us=epoch_us,
                    catalog=catalog, step_us=self.settings.step_seconds * SECOND,
                    anomalies=self.anomalies)

    def ended_before(self, stop_us: int | None, epoch_us: int) -> bool:
        return False  # replayed from the origin: every measurement is measured


def node_kind(settings: CollectorSettings) -> NodeKind:
    """The host node for ``host`` (or ``host:NAME``), a simulated node for any other name."""
    if is_host_node(settings.node):
        return HostNodeKind(settings)
    return SimulatedNodeKind(settings)
