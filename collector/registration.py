"""A collector's rows in the database: its system, its checkpoint row (node, seed, step, the
virtual clock's origin and the durable watermark) and, on a first start, the default
measurement of every entity."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import psycopg

from collector.measure.contab import Contab, ContabBuilder
from collector.node.extras import user_counter_specs
from core.catalog import load_catalog
from core.database import one_row

log = logging.getLogger(__name__)

DEFAULT_MEASUREMENT = "DEFAULT"


def default_contab(topology: Any) -> Contab:
    """Every entity of every type, and every user counter the node's programs declare (an
    ADD COUNTER each, as Figure 3 does for RESP-TIME and THROUGHPUT)."""
    b = ContabBuilder()
    for entity in load_catalog().entities:
        b.add(entity, None)
    for name, program, ctr_type in user_counter_specs(topology):
        b.add_counter(name, program, ctr_type)
    return b.build()


def register_system(conn: psycopg.Connection, topology: Any) -> int:
    """The node's system (its id). A system already configured keeps its settings
    (`measuredb system set` may have changed its time zone or CPU type: the node file's are
    only the first values)."""
    t = topology
    system_id, time_zone = one_row(conn.execute(
        """
        INSERT INTO _measure.system (system_name, system_number, time_zone)
        VALUES (%s, %s, %s)
        ON CONFLICT (system_name) DO UPDATE SET system_name = excluded.system_name
        RETURNING system_id, time_zone
        """,
        (t.system_name, t.system_number, t.time_zone),
    ))
    if time_zone != t.time_zone:
        log.info("%s keeps its configured time zone %s (the node says %s)",
                 t.system_name, time_zone, t.time_zone)
    # CPU TYPE of the reports and views: the node's processor type, unless configured
    conn.execute("INSERT INTO _measure.system_cpu_type (system_id, cpu, cpu_type)"
                 " SELECT %s, NULL, %s WHERE NOT EXISTS"
                 " (SELECT 1 FROM _measure.system_cpu_type WHERE system_id = %s)",
                 (system_id, t.cpu_type, system_id))
    register_components(conn, system_id, t)
    return system_id


def register_components(conn: psycopg.Connection, system_id: int, topology: Any) -> int:
    """The node's own PATHWAY server programs are "application servers" of the transaction
    resource report (_measure.component_map, ATM article Table 4): one row per program for
    this system, added once (an analyst's own rows and edits are left alone). The generic
    rows of the schema cover system programs and $APPL/$PROGS programs."""
    n = 0
    for program in sorted({sc["program"].upper() for sc in topology.server_classes}):
        n += conn.execute(
            "INSERT INTO _measure.component_map (system_id, priority, match_on, pattern, component)"
            " SELECT %s, 45, 'program_file_name', %s, 'server' WHERE NOT EXISTS ("
            "   SELECT 1 FROM _measure.component_map WHERE system_id = %s"
            "      AND match_on = 'program_file_name' AND pattern = %s)",
            (system_id, program, system_id, program),
        ).rowcount
    return n


@dataclass
class State:
    """A registered collector: its system, the virtual clock's origin, the durable watermark
    (-1: nothing stored yet)."""

    system_id: int
    epoch_us: int
    durable_until_us: int


@dataclass(frozen=True)
class CollectorRow:
    """What _measure.collector_state holds of a collector (durable_until_us -1: nothing yet)."""

    node: str
    seed: int
    step_us: int
    epoch_us: int
    durable_until_us: int


def collector_row(conn: psycopg.Connection, collector_id: str) -> CollectorRow | None:
    row = conn.execute(
        "SELECT node, seed, step_us, _measure.timestamptz_to_us(epoch_at),"
        " _measure.timestamptz_to_us(durable_until) FROM _measure.collector_state"
        " WHERE collector_id = %s",
        (collector_id,),
    ).fetchone()
    if row is None:
        return None
    node, seed, step_us, epoch_us, durable = row
    return CollectorRow(node, seed, step_us, epoch_us, -1 if durable is None else durable)


def create_collector(conn: psycopg.Connection, collector_id: str, system_id: int, *, node: str,
                     seed: int, step_us: int, epoch_us: int, interval_us: int, topology: Any) -> None:
    """A first start: the collector's row, and the default measurement of every entity from
    the origin on."""
    conn.execute(
        "INSERT INTO _measure.collector_state (collector_id, system_id, node, seed, step_us, epoch_at)"
        " VALUES (%s, %s, %s, %s, %s, _measure.us_to_timestamptz(%s))",
        (collector_id, system_id, node, seed, step_us, epoch_us),
    )
    conn.execute(
        "INSERT INTO _measure.measurement (system_id, name, contab, source, start_at, interval_us, state)"
        " VALUES (%s, %s, %s, %s, _measure.us_to_timestamptz(%s), %s, 'scheduled')",
        (system_id, DEFAULT_MEASUREMENT, default_contab(topology).model_dump_json(),
         "default measurement of every entity, created at the collector's first start",
         epoch_us, interval_us),
    )
