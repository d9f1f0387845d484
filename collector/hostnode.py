"""The host node as the collector sees it (MEASUREDB_COLLECTOR_NODE=host; the node itself,
reading /proc, is collector/node/host.py; docs/host-node.md).

A host node measures the present: no backfill, no replay. A first start begins the default
measurement at the next interval boundary; a restart starts a fresh epoch there too:
measurements running in the database resume at it (keeping their start time; the intervals
while the collector was away are missing, nothing is invented), those whose stop time passed
meanwhile are marked stopped at it. The durable watermark only moves forward
(collector/sink.py), as for a simulated node. Its system records the host's OS version.
"""

from __future__ import annotations

import psycopg

from collector.errors import CollectorConfigError
from collector.node.host import HostNode, host_topology
from collector.settings import CollectorSettings
from core.catalog import Catalog
from core.times import SECOND, now_us


class HostNodeKind:
    """collector.nodekind.NodeKind of this machine."""

    checkpoints = False  # it never resumes: a restart starts a fresh epoch

    def __init__(self, settings: CollectorSettings) -> None:
        self.settings = settings
        self.topology = host_topology(settings.node)
        self.resumed: set[int] = set()

    def registering(self, conn: psycopg.Connection, system_id: int, epoch_us: int | None) -> None:
        if epoch_us is not None and epoch_us < now_us() - self.settings.step_seconds * SECOND:
            raise CollectorConfigError(
                f"{self.topology.system_name} is this host, measured as it runs: it has no history "
                "to backfill (use a simulated node, e.g. --node demo, for history)")
        conn.execute("UPDATE _measure.system SET os_version = %s WHERE system_id = %s",
                     (self.topology.os_version, system_id))

    def first_epoch(self, now: int) -> int:
        return next_on_grid(now, self.settings.interval_seconds * SECOND)  # a host has no history

    def restart_epoch(self, conn: psycopg.Connection, collector_id: str, system_id: int,
                      stored_us: int, epoch_us: int | None) -> int:
        """A fresh epoch; the measurements running now resume at it."""
        epoch = epoch_us if epoch_us is not None else self.first_epoch(now_us())
        conn.execute("UPDATE _measure.collector_state SET epoch_at = _measure.us_to_timestamptz(%s),"
                     " updated_at = now() WHERE collector_id = %s", (epoch, collector_id))
        self.resumed = {mid for (mid,) in conn.execute(
            "SELECT measurement_id FROM _measure.measurement WHERE system_id = %s AND state = 'running'",
            (system_id,))}
        return epoch

    def make_node(self, catalog: Catalog, epoch_us: int) -> HostNode:
        return HostNode(self.topology, catalog=catalog, step_us=self.settings.step_seconds * SECOND)

    def ended_before(self, stop_us: int | None, epoch_us: int) -> bool:
        return stop_us is not None and stop_us <= epoch_us


def next_on_grid(us: int, grid_us: int) -> int:
    """The first time on the grid at or after us."""
    return -(-us // grid_us) * grid_us
