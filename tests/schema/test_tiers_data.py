"""A small hand-built performance data base (no tests here; used by test_tiers.py and
tests/queries/test_reports.py). Every value below is chosen so that hourly, shift, month,
threshold and trend results can be worked out by hand.

System \\TEST in America/Los_Angeles, shifts 1: 07-15, 2: 15-23, 3: 23-07 (crosses midnight).
DST starts 2024-03-10 02:00 PST -> 03:00 PDT, so shift 3 of 2024-03-09 (23:00 PST to 07:00
PDT) lasts 7 hours: UTC 07:00 .. 14:00 on 2024-03-10.

CPU 0, measurement A, 30-minute intervals (UTC):
  07:00 busy 50 % qlen 1.0 swap 1/s intr 10 %  | 07:30 busy 90 % qlen 3.0 swap 3/s intr 30 %
  08:00 busy 20 % qlen 0.2 swap 0   intr 2 %   | 08:30 busy 30 % qlen 0.3 swap 0.1/s intr 3 %
  09:00 missing hour
  10:00 busy 80 % qlen 1.0            (LATE: 10:30 busy 0 % qlen 0, added by a test)
  2024-03-20 07:00-08:00 busy 40 % qlen 0.5 (shift 3 of 2024-03-19)
CPU 1, measurement A: 07:00 and 07:30 busy 10 %.
CPU 0, measurement B (a second measurement of the same CPU): 08:00-08:30 busy 100 %:
  measurement A has more time in that hour and wins, so B is never counted.
DISC $DATA1, paths P and B, 07:00-08:00: DEVICE-QBUSY 50 % + 10 %, REQUEST-QTIME 1.0 + 0.
PROCESS (07:00-08:00): $S1 (0,10) and $S2 (1,11) of $APPL.ET1.SERVER, $COPY (0,20) of FUP.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import psycopg

from core.catalog import load_catalog

SYSTEM = "\\TEST"
CAT = load_catalog()
M = 1_000_000  # µs per second


def t(day: int, hh: int, mm: int = 0, month: int = 3) -> datetime:
    return datetime(2024, month, day, hh, mm, tzinfo=UTC)


def counters(entity: str, **values: int) -> list[int]:
    ent = CAT.entity(entity)
    out = [0] * len(ent.counters)
    for name, v in values.items():
        out[ent.index(name)] = v
    return out


class Builder:
    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn
        self.system_id = conn.execute(
            "INSERT INTO _measure.system (system_name, system_number, time_zone, os_version) "
            "VALUES (%s, 5, 'America/Los_Angeles', 'B30') RETURNING system_id", (SYSTEM,)
        ).fetchone()[0]
        conn.execute(
            "INSERT INTO _measure.shift (system_id, shift_no, begin_time, end_time) VALUES "
            "(%(s)s, 1, '07:00', '15:00'), (%(s)s, 2, '15:00', '23:00'), (%(s)s, 3, '23:00', '07:00')",
            {"s": self.system_id})
        self.meas = {}
        for name in ("A", "B"):
            self.meas[name] = conn.execute(
                "INSERT INTO _measure.measurement (system_id, name, contab, state) "
                "VALUES (%s, %s, '{}', 'stopped') RETURNING measurement_id",
                (self.system_id, "CPLN" + name)).fetchone()[0]
        self.entities: dict[tuple, int] = {}
        self.next_id = 1000 * self.system_id

    def entity(self, etype: str, cpu: int, **ids) -> int:
        key = (etype, cpu, json.dumps(ids, sort_keys=True))
        if key not in self.entities:
            self.next_id += 1
            code = CAT.entity(etype).code
            ids_all = {"cpu": cpu, **ids}
            self.conn.execute(
                "INSERT INTO _measure.entity (entity_id, system_id, type_code, key, ids, cpu, first_seen_at) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (self.next_id, self.system_id, code, "|".join(f"{k}={v}" for k, v in ids_all.items()),
                 json.dumps(ids_all), cpu, t(1, 0)))
            self.entities[key] = self.next_id
        return self.entities[key]

    def interval(self, meas: str, etype: str, cpu: int, start: datetime, minutes: int,
                 ids: dict | None = None, record_at: datetime | None = None, **values: int) -> None:
        """One interval record; record_at (default 03-01 00:00) tells incarnations of an entity
        apart (a file opened again is a new counter record)."""
        eid = self.entity(etype, cpu, **(ids or {}))
        end = start + timedelta(minutes=minutes)
        self.conn.execute(
            "INSERT INTO _measure.interval_record (measurement_id, entity_id, record_at, from_at, to_at, "
            "delta_us, closing_kind, system_id, type_code, cpu, counters) "
            "VALUES (%s, %s, %s, %s, %s, %s, 3, %s, %s, %s, %s)",
            (self.meas[meas], eid, record_at or t(1, 0), start, end, minutes * 60 * M, self.system_id,
             CAT.entity(etype).code, cpu, counters(etype, **values)))

    def cpu(self, meas: str, cpu: int, start: datetime, minutes: int, busy: float, qlen: float = 0,
            swaps: float = 0, intr: float = 0) -> None:
        s = minutes * 60
        self.interval(meas, "cpu", cpu, start, minutes,
                      cpu_busy_time=round(busy / 100 * s * M), cpu_qtime=round(qlen * s * M),
                      swaps=round(swaps * s), intr_busy_time=round(intr / 100 * s * M))

    def note_and_condense(self, start: datetime, end: datetime) -> int:
        self.conn.execute("SELECT _measure.note_intervals(%s::smallint, %s, %s)",
                          (self.system_id, start, end))
        return self.conn.execute("SELECT _measure.condense(%s::smallint)", (self.system_id,)).fetchone()[0]


def load(conn: psycopg.Connection) -> Builder:
    b = Builder(conn)
    b.cpu("A", 0, t(10, 7, 0), 30, busy=50, qlen=1.0, swaps=1, intr=10)
    b.cpu("A", 0, t(10, 7, 30), 30, busy=90, qlen=3.0, swaps=3, intr=30)
    b.cpu("A", 0, t(10, 8, 0), 30, busy=20, qlen=0.2, swaps=0, intr=2)
    b.cpu("A", 0, t(10, 8, 30), 30, busy=30, qlen=0.3, swaps=0.1, intr=3)
    b.cpu("A", 0, t(10, 10, 0), 30, busy=80, qlen=1.0)
    b.cpu("A", 0, t(20, 7, 0), 60, busy=40, qlen=0.5)
    b.cpu("A", 1, t(10, 7, 0), 30, busy=10)
    b.cpu("A", 1, t(10, 7, 30), 30, busy=10)
    b.cpu("B", 0, t(10, 8, 0), 30, busy=100)
    vol = {"device_name": "$DATA1", "pin": 7}
    b.interval("A", "disc", 0, t(10, 7), 60, {**vol, "path": "P"},
               device_qbusy_time=1800 * M, request_qtime=3600 * M)
    b.interval("A", "disc", 1, t(10, 7), 60, {**vol, "path": "B"}, device_qbusy_time=360 * M)
    server = {"process_name": "$S1", "pin": 10, "program_file_name": "$APPL.ET1.SERVER", "priority": 150}
    b.interval("A", "process", 0, t(10, 7), 60, server,
               cpu_busy_time=720 * M, messages_sent=900, messages_received=100)
    b.interval("A", "process", 1, t(10, 7), 60, {**server, "process_name": "$S2", "pin": 11},
               cpu_busy_time=360 * M, messages_sent=300, messages_received=100)
    b.interval("A", "process", 0, t(10, 7), 60,
               {"process_name": "$COPY", "pin": 20, "program_file_name": "$SYSTEM.SYSTEM.FUP", "priority": 100},
               cpu_busy_time=1800 * M, messages_sent=3600)
    acct = {"opener_pin": 10, "file_number": 1, "file_name": "$DATA1.ET1.ACCOUNT", "device_type": 3}
    b.interval("A", "file", 0, t(10, 7), 60, {**acct, "opener_cpu": 0},
               reads=50, writes=10, updates_or_replies=5, info_calls=2)
    b.interval("A", "file", 1, t(10, 7), 60, {**acct, "opener_cpu": 1, "opener_pin": 11}, reads=30)
    b.interval("A", "file", 0, t(10, 7), 60,
               {"opener_cpu": 0, "opener_pin": 10, "file_number": 2, "file_name": "$DATA1.ET1.#TEMP",
                "device_type": 3}, reads=99)
    b.note_and_condense(t(10, 7), t(20, 7))
    return b
