"""The record tiers (schema/090-record-tiers.sql, schema/idempotent/024-record-tiers.sql) give
the process, file, DISCOPEN and transaction-resource reports exactly what the interval records
give: for every window, every report and measurement, `measuredb.record_tiers` on == off.

Hand-built data of \\TEST (tests/schema/test_tiers_data.py's Builder), 20-minute intervals from
2024-03-30 00:00 to 2024-05-01 06:00 UTC (all of April: a whole UTC month), counters drawn from
random.Random(7):

  PROCESS   $S1 (CPU 0, PIN 10, $APPL.ET1.SERVER): two incarnations, the second from
            2024-04-15 12:40 (both in the hour 12:00); $COPY (CPU 1, PIN 20, FUP), messages
            received only on every third day.
  FILE      $DATA1.ET1.ACCOUNT opened by both processes (the first open reopened 04-22),
            $DATA1.ET1.#TEMP, a non-disc open ($ZTC0, DEVICE-TYPE 48), $DATA2.ET1.HISTORY with
            calls only every sixth hour, an occasional negative WRITES delta.
  DISCOPEN  ACCOUNT (0,10) reopened 04-10; ACCOUNT (1,20) with I/O only on days divisible by 5
            (cache hits otherwise); #TEMP; HISTORY with cache hits only; BRANCH with negative
            deltas.
  TERMINAL  $ATM1 A and B with transactions and response time, none on 04-25.
  CPU       0 and 1 also count transactions (the source when terminals have none: 04-25).
  Measurement B (a second measurement): $S1 at 10-minute intervals 2024-04-03 12:30-15:00
  and 04-15 12:00 (both incarnations), one interval 04-20 05:00 (its own record_at); CPU 0,
  terminal A and DISCOPEN ACCOUNT (0,10) in 04-03 13:00; FILE ACCOUNT (0,10) in 04-20 05:00.
  Where A misses intervals B has more time in the hour and wins (04-03 13:00: $S1, CPU 0,
  terminal A, DISCOPEN; 04-15 12:00: $S1; 04-20 05:00: $S1, FILE); elsewhere A wins (more
  time, or a tie: the lower measurement id).
  The hour 2024-04-03 13:00 of the processes has hand-picked counters (test of exact values).
"""

from __future__ import annotations

import importlib.util
import random
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal as D
from pathlib import Path

import psycopg
import pytest

from tests.record_tiers import report_rows

_spec = importlib.util.spec_from_file_location(
    "test_tiers_data", Path(__file__).parent / "test_tiers_data.py")
data = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(data)

M = data.M
SYSTEM = data.SYSTEM
START = datetime(2024, 3, 30, tzinfo=UTC)
END = datetime(2024, 5, 1, 6, tzinfo=UTC)
STEP = timedelta(minutes=20)
HAND_HOUR = datetime(2024, 4, 3, 13, tzinfo=UTC)   # A and B overlap; B wins for $S1


def at(month: int, day: int, hh: int = 0, mm: int = 0, ss: int = 0) -> datetime:
    return datetime(2024, month, day, hh, mm, ss, tzinfo=UTC)


S1 = {"process_name": "$S1", "pin": 10, "program_file_name": "$APPL.ET1.SERVER", "priority": 150}
COPY = {"process_name": "$COPY", "pin": 20, "program_file_name": "$SYSTEM.SYSTEM.FUP", "priority": 100}
S1_INC1, S1_INC2 = at(3, 29, 22), at(4, 15, 12, 40)


def file_ids(name: str, cpu: int, pin: int, number: int, device_type: int = 3) -> dict:
    return {"opener_cpu": cpu, "opener_pin": pin, "file_number": number, "file_name": name,
            "device_type": device_type}


FILES = {  # label: (cpu of the entity, ids)
    "F1": (0, file_ids("$DATA1.ET1.ACCOUNT", 0, 10, 1)),
    "F2": (1, file_ids("$DATA1.ET1.ACCOUNT", 1, 20, 1)),
    "F3": (0, file_ids("$DATA1.ET1.#TEMP", 0, 10, 2)),
    "F4": (0, file_ids("$ZTC0", 0, 10, 3, device_type=48)),
    "F5": (1, file_ids("$DATA2.ET1.HISTORY", 1, 20, 2)),
}


def discopen_ids(name: str, cpu: int, pin: int, ocb: int) -> dict:
    return {"opener_cpu": cpu, "opener_pin": pin, "ocb_number": ocb, "opener_system_name": SYSTEM,
            "file_name": name}


DISCOPENS = {  # label: (cpu of the disc process, ids)
    "D1": (1, discopen_ids("$DATA1.ET1.ACCOUNT", 0, 10, 1)),
    "D2": (1, discopen_ids("$DATA1.ET1.ACCOUNT", 1, 20, 2)),
    "D3": (1, discopen_ids("$DATA1.ET1.#TEMP", 0, 10, 3)),
    "D4": (0, discopen_ids("$DATA2.ET1.HISTORY", 1, 20, 4)),
    "D5": (0, discopen_ids("$DATA2.ET1.BRANCH", 0, 10, 5)),
}
TERMINALS = {"TA": {"line_name": "$ATM1", "subdev_name": "A"},
             "TB": {"line_name": "$ATM1", "subdev_name": "B"}}

COPY_COLUMNS = ("measurement_id, entity_id, record_at, from_at, to_at, delta_us, closing_kind, "
                "system_id, type_code, cpu, counters")


class World:
    """The Builder's system and entities; interval records gathered and written with COPY,
    and kept in a ledger (for the sums computed in Python)."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn
        self.b = data.Builder(conn)
        self.pending: list[tuple] = []
        self.ledger: list[dict] = []

    def add(self, meas: str, etype: str, cpu: int, ids: dict | None, start: datetime, minutes: int,
            record_at: datetime | None = None, **values: int) -> None:
        eid = self.b.entity(etype, cpu, **(ids or {}))
        record_at = record_at or data.t(1, 0)
        delta_us = minutes * 60 * M
        self.pending.append((self.b.meas[meas], eid, record_at, start, start + timedelta(minutes=minutes),
                             delta_us, 3, self.b.system_id, data.CAT.entity(etype).code, cpu,
                             data.counters(etype, **values)))
        self.ledger.append({"meas": self.b.meas[meas], "etype": etype, "eid": eid, "ids": ids or {},
                            "record_at": record_at, "from_at": start, "delta_us": delta_us,
                            "values": values})

    def flush(self) -> None:
        with self.conn.cursor().copy(f"COPY _measure.interval_record ({COPY_COLUMNS}) FROM STDIN") as cp:
            for row in self.pending:
                cp.write_row(row)
        self.pending.clear()


def hour(t: datetime) -> datetime:
    return t.replace(minute=0, second=0, microsecond=0)


def build(conn: psycopg.Connection) -> World:  # noqa: C901 - the test's world, built step by step
    w = World(conn)
    rng = random.Random(7)
    a_missing = {  # (entity label, FROM-TIMESTAMP) that measurement A did not record
        ("S1", at(4, 3, 12, 40)), ("S1", at(4, 3, 13, 20)), ("S1", at(4, 3, 13, 40)),
        ("S1", at(4, 20, 5, 0)), ("S1", at(4, 20, 5, 20)), ("S1", at(4, 20, 5, 40)),
        ("CPU0", at(4, 3, 13, 40)), ("TA", at(4, 3, 13, 20)), ("D1", at(4, 3, 13, 0)),
        ("F1", at(4, 20, 5, 20)), ("S1", at(4, 15, 12, 20)),
    }
    t = START
    while t < END:
        for cpu in (0, 1):
            if (f"CPU{cpu}", t) not in a_missing:
                n = rng.randint(0, 6)
                w.add("A", "cpu", cpu, None, t, 20, cpu_busy_time=rng.randint(10, 1150) * M,
                      cpu_qtime=rng.randint(0, 2000) * M, swaps=rng.randint(0, 50), transactions=n,
                      response_time=n * rng.randint(300_000, 2_000_000))
        # $S1: the first incarnation until 04-15 12:40 (A misses its 12:20), the second from 12:40
        if ("S1", t) not in a_missing:
            if hour(t) == HAND_HOUR:
                vals = {"cpu_busy_time": 500 * M, "messages_sent": 5000, "messages_received": 5000}
            else:
                vals = {"cpu_busy_time": rng.randint(0, 900) * M, "messages_sent": rng.randint(0, 500),
                        "messages_received": rng.randint(1, 300), "ready_time": rng.randint(0, 200) * M}
            w.add("A", "process", 0, S1, t, 20, record_at=S1_INC1 if t < S1_INC2 else S1_INC2, **vals)
        if hour(t) == HAND_HOUR:
            vals = {"cpu_busy_time": 100 * M, "messages_sent": 7, "messages_received": 1}
        else:
            vals = {"cpu_busy_time": rng.randint(0, 1100) * M, "messages_sent": rng.randint(0, 3000),
                    "messages_received": rng.randint(0, 5) if t.day % 3 == 0 else 0}
        w.add("A", "process", 1, COPY, t, 20, record_at=at(3, 29), **vals)
        for label, (cpu, ids) in FILES.items():
            if (label, t) in a_missing:
                continue
            record_at = at(3, 29)
            if label == "F1" and t >= at(4, 22):
                record_at = at(4, 22)
            if label == "F5" and t.hour % 6:
                vals = {}
            else:
                vals = {"reads": rng.randint(0, 50), "writes": rng.randint(0, 20),
                        "updates_or_replies": rng.randint(0, 10), "deletes_or_writereads": rng.randint(0, 5),
                        "info_calls": rng.randint(0, 3), "file_busy_time": rng.randint(0, 60) * M}
                if label == "F2" and rng.random() < 0.05:
                    vals["writes"] = -3
            w.add("A", "file", cpu, ids, t, 20, record_at=record_at, **vals)
        for label, (cpu, ids) in DISCOPENS.items():
            if (label, t) in a_missing:
                continue
            record_at = at(4, 10) if label == "D1" and t >= at(4, 10) else at(3, 29)
            io = {"driver_input_calls": rng.randint(0, 40), "driver_output_calls": rng.randint(0, 20)}
            if label == "D4" or (label == "D2" and t.day % 5):
                io = {}
            if label == "D5":
                io = {"driver_input_calls": rng.randint(-20, 30), "driver_output_calls": rng.randint(-5, 10)}
            w.add("A", "discopen", cpu, ids, t, 20, record_at=record_at, requests=rng.randint(0, 100),
                  cache_hits=rng.randint(0, 60), block_splits=rng.randint(-1, 2),
                  requests_blocked=rng.randint(0, 3), **io)
        for label, ids in TERMINALS.items():
            if (label, t) in a_missing:
                continue
            n = rng.randint(0, 4) if label == "TA" else rng.choice((0, 0, 0, 1))
            if t.month == 4 and t.day == 25:     # no terminal transactions: the CPUs' are reported
                n = 0
            response = sum(rng.randint(200_000, 3_000_000) for _ in range(n))
            w.add("A", "terminal", 0, ids, t, 20, transactions=n, response_time=response,
                  requests=2 * n, reads=n, writes=n)
        t += STEP
    # measurement B
    t = at(4, 3, 12, 30)
    while t < at(4, 3, 15):
        vals = ({"cpu_busy_time": 30 * M, "messages_sent": 10, "messages_received": 20} if hour(t) == HAND_HOUR
                else {"cpu_busy_time": rng.randint(0, 450) * M, "messages_sent": rng.randint(0, 250),
                      "messages_received": rng.randint(1, 150)})
        w.add("B", "process", 0, S1, t, 10, record_at=S1_INC1, **vals)
        w.add("B", "discopen", 1, DISCOPENS["D1"][1], t, 10, record_at=at(3, 29),
              requests=rng.randint(0, 50), driver_input_calls=rng.randint(0, 20),
              driver_output_calls=rng.randint(0, 10), cache_hits=rng.randint(0, 30))
        if hour(t) == HAND_HOUR:
            w.add("B", "cpu", 0, None, t, 10, cpu_busy_time=rng.randint(10, 590) * M)
            n = rng.randint(0, 2)
            w.add("B", "terminal", 0, TERMINALS["TA"], t, 10, transactions=n,
                  response_time=n * rng.randint(100_000, 5_000_000))
        t += timedelta(minutes=10)
    # B's own counter record of $S1 (another record_at): a second row of the process where B wins
    w.add("B", "process", 0, S1, at(4, 20, 5), 20, record_at=at(4, 20, 4, 59), cpu_busy_time=77 * M,
          messages_sent=3, messages_received=4)
    # B in the hour both incarnations of $S1 run (A misses 12:20: B has 60 minutes, A 40)
    for mm in range(0, 60, 10):
        w.add("B", "process", 0, S1, at(4, 15, 12, mm), 10, record_at=S1_INC1 if mm < 40 else S1_INC2,
              cpu_busy_time=rng.randint(0, 450) * M, messages_sent=rng.randint(0, 250),
              messages_received=rng.randint(1, 150))
    for mm in (0, 20, 40):
        w.add("B", "file", 0, FILES["F1"][1], at(4, 20, 5, mm), 20, record_at=at(3, 29), reads=1000 + mm)
    w.flush()
    w.b.note_and_condense(START, END)
    # as autovacuum would (this transaction is not visible to it): without statistics the
    # planner reads the interval records of a month a hundred times slower
    conn.execute("ANALYZE _measure.interval_record")
    conn.execute("ANALYZE _measure.record_tier")
    return w


@pytest.fixture(scope="module")
def world(db_url: str):
    """One database state for the module: built in a transaction that is rolled back at the end
    (tests that change it do so in a savepoint, rolled back)."""
    with psycopg.connect(db_url) as conn:
        w = build(conn)
        yield w
        conn.rollback()


# ---------------------------------------------------------------- the reports and the comparison

def calls(w: World) -> list[tuple[str, str, dict]]:
    """(label, SQL after FROM with the window as %(f)s / %(t)s, extra parameters)."""
    out = []
    for mname, mid in (("NULL", None), ("A", w.b.meas["A"]), ("B", w.b.meas["B"])):
        out += [
            (f"report_process_summary m={mname}",
             "measure.report_process_summary(%(s)s, %(f)s, %(t)s, %(m)s)", {"m": mid}),
            (f"report_busy_process min=0 m={mname}",
             "measure.report_busy_process(%(s)s, %(f)s, %(t)s, 0, 200, %(m)s)", {"m": mid}),
            (f"report_process_activity m={mname}",
             "measure.report_process_activity(%(s)s, %(f)s, %(t)s, %(m)s)", {"m": mid}),
            (f"report_file_summary m={mname}",
             "measure.report_file_summary(%(s)s, %(f)s, %(t)s, %(m)s)", {"m": mid}),
            (f"report_discopen_summary m={mname}",
             "measure.report_discopen_summary(%(s)s, %(f)s, %(t)s, %(m)s)", {"m": mid}),
        ]
    out.append(("report_busy_process (defaults)", "measure.report_busy_process(%(s)s, %(f)s, %(t)s)", {}))
    out.append(("report_busy_process min=30 max_priority=120",
                "measure.report_busy_process(%(s)s, %(f)s, %(t)s, 30, 120)", {}))
    for cpu, pin in ((0, None), (1, None), (0, 10), (1, 10)):
        out.append((f"report_process_disc_file_activity cpu={cpu} pin={pin}",
                    "measure.report_process_disc_file_activity(%(s)s, %(f)s, %(t)s, %(c)s, %(p)s)",
                    {"c": cpu, "p": pin}))
    out.append(("report_transaction_resource", "measure.report_transaction_resource(%(s)s, %(f)s, %(t)s)", {}))
    out.append(("report_transaction_resource process=$S%",
                "measure.report_transaction_resource(%(s)s, %(f)s, %(t)s, '$S%%')", {}))
    return out


def differences(w: World, windows, system: str = SYSTEM) -> tuple[list[tuple], dict]:
    """For every window and call: (from, to, label, rows only with tiers on, rows only with tiers
    off) where on != off, and the row counts."""
    bad, counts = [], {}
    for f, t in windows:
        for label, call, extra in calls(w):
            params = {"s": system, "f": f, "t": t, **extra}
            on = report_rows(w.conn, call, params, tiers=True)
            off = report_rows(w.conn, call, params, tiers=False)
            counts[(f, t, label)] = len(on)
            if on != off:
                bad.append((f, t, label, [r for r in on if r not in off], [r for r in off if r not in on]))
    return bad, counts


def explain(bad: list[tuple]) -> str:
    return "record tiers on != off:\n" + "\n".join(
        f"[{f.isoformat()} .. {t.isoformat()}) {label}:\n    tiers on only:  {on}\n    tiers off only: {off}"
        for f, t, label, on, off in bad)


def plan(w: World, f: datetime, t: datetime) -> dict[str, int]:
    return dict(w.conn.execute(
        "SELECT grain::text, count(*)::int FROM _measure.window_plan(%s::smallint, %s, %s) GROUP BY 1",
        (w.b.system_id, f, t)).fetchall())


BIG = (at(3, 30, 0, 7), at(5, 1, 5, 13))
WINDOWS = [
    BIG,
    (START, END),                                   # all the data, hour-aligned
    (at(4, 1), at(5, 1)),                           # exactly the month of April
    (at(4, 3, 13), at(4, 3, 14)),                   # the hand-picked hour (A and B overlap)
    (at(4, 3, 13, 10), at(4, 3, 13, 50)),           # inside one hour
    (at(4, 3, 12, 30), at(4, 3, 15, 10)),           # measurement B's hours
    (at(4, 2, 17, 20), at(4, 5)),                   # ends exactly at a day boundary
    (at(4, 10, 6), at(4, 20, 18)),                  # days and hours, reopened files, B at 04-20
    (at(4, 15, 11, 59, 30), at(4, 15, 13, 0, 1)),  # the second incarnation of $S1, seconds
    (at(4, 14, 23, 40), at(4, 16, 0, 20)),          # a whole day with partial hours either side
    (at(4, 30, 22, 13), at(5, 1, 5, 47)),           # across the month boundary
    (at(4, 24, 23, 30), at(4, 26)),                 # terminals quiet on 04-25: CPU transactions
    (at(3, 1), at(3, 29)),                          # no data
    (at(6, 1), at(7, 1)),                           # no data, a whole month
    (at(4, 3, 13), at(4, 3, 13)),                   # empty
]


def test_the_plan_reads_months_days_hours_and_raw_edges(world) -> None:
    assert world.conn.execute("SELECT count(*) FROM _measure.tier_dirty WHERE system_id = %s",
                              (world.b.system_id,)).fetchone() == (0,)
    tiers = dict(world.conn.execute(
        "SELECT grain::text, count(*)::int FROM _measure.record_tier WHERE system_id = %s GROUP BY 1",
        (world.b.system_id,)).fetchall())
    assert set(tiers) == {"h", "d", "m"}
    # 03-30 00:07 .. 05-01 05:13: April, 03-31, the hours 03-30 01:00-23:00 and 05-01 00:00-04:00,
    # and the two partial hours at the edges
    assert plan(world, *BIG) == {"m": 1, "d": 1, "h": 23 + 5, "r": 2}
    assert plan(world, at(4, 1), at(5, 1)) == {"m": 1}
    assert plan(world, at(4, 2, 17, 20), at(4, 5)) == {"r": 1, "h": 6, "d": 2}
    assert plan(world, at(4, 3, 13, 10), at(4, 3, 13, 50)) == {"r": 1}
    world.conn.execute("SET LOCAL measuredb.record_tiers = off")
    try:
        assert plan(world, *BIG) == {"r": 1}
    finally:
        world.conn.execute("RESET measuredb.record_tiers")


@pytest.mark.parametrize("window", WINDOWS, ids=lambda w: f"{w[0]:%m%d%H%M%S}-{w[1]:%m%d%H%M%S}")
def test_every_report_is_the_same_with_tiers_on_and_off(world, window) -> None:
    bad, counts = differences(world, [window])
    assert not bad, explain(bad)
    if window in (BIG, (START, END)):  # every report has rows: the comparison is not of empties
        empty = [k[2] for k, n in counts.items() if not n]
        assert empty == ["report_process_disc_file_activity cpu=1 pin=10"]   # no such process


def test_no_data_windows_are_empty(world) -> None:
    _, counts = differences(world, [(at(3, 1), at(3, 29))])
    # the transaction-resource report always has its system_overhead and total lines
    assert all(n == (2 if "transaction_resource" in k[2] else 0) for k, n in counts.items()), counts


def test_the_comparison_sees_a_wrong_tier(world) -> None:
    """The test above would see a tier that disagrees with the interval records."""
    conn = world.conn
    with conn.transaction(force_rollback=True):
        conn.execute("UPDATE _measure.record_tier t SET counters[2] = t.counters[2] + 1 FROM _measure.entity_type e "
                     "WHERE e.type_code = t.type_code AND e.entity = 'file' AND t.grain = 'm' AND t.best")
        conn.execute("UPDATE _measure.response_hist SET response_us = response_us + 1000000 WHERE grain = 'm'")
        bad, _ = differences(world, [(at(4, 1), at(5, 1))])
        assert {b[2] for b in bad} == {
            "report_file_summary m=NULL", "report_transaction_resource", "report_transaction_resource process=$S%",
            "report_process_disc_file_activity cpu=0 pin=None", "report_process_disc_file_activity cpu=0 pin=10",
            "report_process_disc_file_activity cpu=1 pin=None"}


def test_condensed_and_read_in_other_time_zones(world) -> None:
    """Buckets are UTC whatever the session's TimeZone when condensing or reading."""
    conn = world.conn
    with conn.transaction(force_rollback=True):
        conn.execute("SET LOCAL TimeZone = 'Asia/Kathmandu'")      # +05:45
        conn.execute("SELECT _measure.recondense(%s::smallint, %s, %s)", (world.b.system_id, at(4, 9), at(4, 12)))
        conn.execute("SET LOCAL TimeZone = 'America/St_Johns'")    # -02:30
        assert plan(world, at(4, 1), at(5, 1)) == {"m": 1}
        assert plan(world, *BIG) == {"m": 1, "d": 1, "h": 23 + 5, "r": 2}
        bad, _ = differences(world, [(at(4, 1), at(5, 1)), (at(4, 9, 18, 30), at(4, 12, 2, 15))])
        assert not bad, "TimeZone: " + explain(bad)


def test_late_data_in_a_condensed_hour_is_read_raw_until_condensed_again(world) -> None:
    conn = world.conn
    late_hour = at(4, 10, 9)
    windows = [(late_hour, late_hour + timedelta(hours=1)), (at(4, 10, 9, 15), at(4, 10, 9, 45)),
               (at(4, 10), at(4, 11)), (at(4, 1), at(5, 1)), (at(4, 9, 20, 10), at(4, 11, 3, 3))]
    ledger_size = len(world.ledger)

    def account_opens() -> int:
        return conn.execute("SELECT open_count FROM measure.report_discopen_summary(%s, %s, %s) "
                            "WHERE file_name = '$DATA1.ET1.ACCOUNT'",
                            (SYSTEM, late_hour, late_hour + timedelta(hours=1))).fetchone()[0]

    with conn.transaction(force_rollback=True):
        assert account_opens() == 2
        before = {}
        for f, t in windows:
            before[(f, t)] = report_rows(conn, "measure.report_file_summary(%(s)s, %(f)s, %(t)s, NULL)",
                                         {"s": SYSTEM, "f": f, "t": t}, tiers=True)
        assert plan(world, at(4, 1), at(5, 1)) == {"m": 1}
        # late records: a new file open and DISCOPEN, a new process, a new incarnation of $COPY,
        # a new terminal, and measurement B taking $S1's hour over (70 minutes against 60)
        new_file = file_ids("$DATA3.LATE.FILE", 1, 30, 1)
        new_disc = discopen_ids("$DATA3.LATE.FILE", 1, 30, 9)
        late = {"process_name": "$LATE", "pin": 30, "program_file_name": "$APPL.LATE.PROG", "priority": 120}
        for mm in (0, 20, 40):
            t = late_hour + timedelta(minutes=mm)
            world.add("A", "file", 1, new_file, t, 20, record_at=at(4, 10, 9), reads=11, writes=mm)
            world.add("A", "discopen", 1, new_disc, t, 20, record_at=at(4, 10, 9), driver_input_calls=5,
                      cache_hits=3, requests=8)
            world.add("A", "process", 1, late, t, 20, record_at=at(4, 10, 9), cpu_busy_time=600 * M,
                      messages_sent=40, messages_received=9)
            world.add("A", "terminal", 0, {"line_name": "$ATM1", "subdev_name": "C"}, t, 20,
                      transactions=3, response_time=3 * 1_500_000)
        world.add("A", "process", 1, COPY, late_hour + timedelta(minutes=10), 20, record_at=at(4, 10, 9, 10),
                  cpu_busy_time=900 * M, messages_sent=5, messages_received=2)
        world.add("B", "process", 0, S1, late_hour, 30, record_at=S1_INC1, cpu_busy_time=1 * M,
                  messages_sent=1, messages_received=1)
        world.add("B", "process", 0, S1, late_hour + timedelta(minutes=30), 40, record_at=S1_INC1,
                  cpu_busy_time=2 * M, messages_sent=2, messages_received=2)
        for mm, minutes in ((0, 30), (30, 40)):   # and DISCOPEN ACCOUNT (0,10)'s hour, without I/O
            world.add("B", "discopen", 1, DISCOPENS["D1"][1], late_hour + timedelta(minutes=mm), minutes,
                      record_at=at(4, 10), requests=4, cache_hits=4)
        world.flush()
        conn.execute("SELECT _measure.note_intervals(%s::smallint, %s, %s)",
                     (world.b.system_id, late_hour, late_hour + timedelta(minutes=70)))
        p = plan(world, at(4, 1), at(5, 1))
        assert "m" not in p and p["r"] == 2 and p["d"] == 29, p   # 09:00 and 10:00 of 04-10 raw
        bad, _ = differences(world, windows)
        assert not bad, "late data, not condensed: " + explain(bad)
        for f, t in windows:   # and the late records are counted
            now = report_rows(conn, "measure.report_file_summary(%(s)s, %(f)s, %(t)s, NULL)",
                              {"s": SYSTEM, "f": f, "t": t}, tiers=True)
            assert now != before[(f, t)] and any("$DATA3.LATE.FILE" in r for r in now)
        conn.execute("SELECT _measure.condense(%s::smallint)", (world.b.system_id,))
        assert plan(world, at(4, 1), at(5, 1)) == {"m": 1}
        bad, _ = differences(world, windows)
        assert not bad, "late data, condensed again: " + explain(bad)
        # B (70 minutes) took $S1's and DISCOPEN ACCOUNT (0,10)'s hour over from A (60 minutes)
        assert account_opens() == 1          # (1,20) only (I/O on days divisible by 5)
        assert conn.execute("SELECT * FROM measure.report_process_summary(%s, %s, %s) WHERE program_file_name "
                            "= '$APPL.ET1.SERVER'", (SYSTEM, late_hour, late_hour + timedelta(hours=1))
                            ).fetchall() == [("$APPL.ET1.SERVER", 1, 3, 3, 3)]
    del world.ledger[ledger_size:]


@pytest.mark.parametrize("tiers", [True, False], ids=["tiers-on", "tiers-off"])
def test_hand_worked_hour_counts_only_the_winning_measurement(world, tiers) -> None:
    def summary(m):
        sql = "measure.report_process_summary(%(s)s, %(f)s, %(t)s, %(m)s)"
        params = {"s": SYSTEM, "f": HAND_HOUR, "t": HAND_HOUR + timedelta(hours=1), "m": m}
        if not tiers:
            world.conn.execute("SET measuredb.record_tiers = off")
        try:
            return world.conn.execute(f"SELECT * FROM {sql} ORDER BY 1", params).fetchall()
        finally:
            world.conn.execute("RESET measuredb.record_tiers")

    assert plan(world, HAND_HOUR, HAND_HOUR + timedelta(hours=1)) == {"h": 1}
    # $S1: A has one 20-minute interval (500 s busy, 5000 messages each way); B six 10-minute
    # intervals (30 s, 10 sent, 20 received each): B has more time and is the one counted.
    # $COPY: A only, three intervals of 100 s, 7 sent, 1 received.
    assert summary(None) == [("$APPL.ET1.SERVER", 1, D(180), D(120), D(60)),
                             ("$SYSTEM.SYSTEM.FUP", 1, D(300), D(3), D(21))]
    assert summary(world.b.meas["A"]) == [("$APPL.ET1.SERVER", 1, D(500), D(5000), D(5000)),
                                          ("$SYSTEM.SYSTEM.FUP", 1, D(300), D(3), D(21))]
    assert summary(world.b.meas["B"]) == [("$APPL.ET1.SERVER", 1, D(180), D(120), D(60))]


def expected_process_summary(w: World, f: datetime, t: datetime, meas: int | None) -> list[tuple]:
    """report_process_summary worked out from the ledger in Python."""
    recs = [r for r in w.ledger if r["etype"] == "process" and f <= r["from_at"] < t
            and (meas is None or r["meas"] == meas)]
    run = defaultdict(int)
    for r in recs:
        run[(r["eid"], hour(r["from_at"]), r["meas"])] += r["delta_us"]
    best = {}
    for (eid, h, m), _us in sorted(run.items(), key=lambda kv: (kv[0][0], kv[0][1], -kv[1], kv[0][2])):
        best.setdefault((eid, h), m)
    sums = defaultdict(lambda: [0, 0, 0])
    program = {}
    for r in recs:
        if best[(r["eid"], hour(r["from_at"]))] != r["meas"]:
            continue
        key = (r["eid"], r["record_at"])
        program[key] = r["ids"]["program_file_name"]
        v = r["values"]
        for i, name in enumerate(("cpu_busy_time", "messages_received", "messages_sent")):
            sums[key][i] += max(v.get(name, 0), 0)
    out = defaultdict(lambda: [0, 0, 0, 0])
    for key, (cpu, rcv, snt) in sums.items():
        o = out[program[key]]
        o[0] += 1
        o[1] += cpu
        o[2] += rcv
        o[3] += snt
    return [(p, n, D(cpu) / D(M), D(rcv), D(snt)) for p, (n, cpu, rcv, snt) in sorted(out.items())]


@pytest.mark.parametrize("window", [BIG, (at(4, 3, 12, 30), at(4, 3, 15, 10)), (at(4, 10, 6), at(4, 20, 18)),
                                    (at(4, 15, 11, 59, 30), at(4, 15, 13, 0, 1))],
                         ids=lambda w: f"{w[0]:%m%d%H%M%S}-{w[1]:%m%d%H%M%S}")
def test_process_summary_equals_the_sums_worked_out_in_python(world, window) -> None:
    for m in (None, world.b.meas["A"], world.b.meas["B"]):
        got = world.conn.execute("SELECT * FROM measure.report_process_summary(%s, %s, %s, %s) ORDER BY 1",
                                 (SYSTEM, *window, m)).fetchall()
        assert got == expected_process_summary(world, *window, m), m


def test_transaction_response_source_falls_back_to_the_cpus(world) -> None:
    """04-25 has no terminal transactions: the CPUs' are the response source, tiers on and off."""
    for tiers in (True, False):
        for (f, t), source in (((at(4, 25), at(4, 26)), "cpu"), ((at(4, 24, 23, 30), at(4, 26)), "terminal"),
                               (BIG, "terminal")):
            got = report_rows(world.conn, "(SELECT DISTINCT response_source, transactions > 0 AS counted "
                              "FROM measure.report_transaction_resource(%(s)s, %(f)s, %(t)s))",
                              {"s": SYSTEM, "f": f, "t": t}, tiers=tiers)
            assert got == [f"({source},t)"], (f, t, tiers)


def test_the_summed_counters_exist_and_the_others_are_null(conn) -> None:
    # a typo in _measure.record_tier_counter would leave a report's column NULL without a word
    assert conn.execute("SELECT k.entity, k.counter FROM _measure.record_tier_counter k "
                        "LEFT JOIN _measure.counter_def d USING (entity, counter) "
                        "WHERE d.counter IS NULL").fetchall() == []
    kept = conn.execute("SELECT d.position FROM _measure.counter_def d JOIN _measure.record_tier_counter k "
                        "USING (entity, counter) WHERE d.entity = 'process' ORDER BY 1").fetchall()
    assert [p for (p,) in kept] == [1, 6, 7]   # CPU-BUSY-TIME, MESSAGES-SENT, MESSAGES-RECEIVED
    sql = conn.execute("SELECT _measure.record_sums_sql(t.type_code, 'x', true, '::bigint') "
                       "FROM _measure.entity_type t WHERE t.entity = 'process'").fetchone()[0]
    parts = sql.removeprefix("ARRAY[").removesuffix("]").replace(", 0)", " 0)").split(", ")
    assert len(parts) == 40 and parts[0] == "sum(greatest(x[1] 0))::bigint"  # 37 + the IPU counters
    assert parts[1] == "NULL::bigint" and parts[6] == "sum(greatest(x[7] 0))::bigint"


def test_deleting_a_measurement_takes_it_out_of_the_tiers(world) -> None:
    conn, b_id = world.conn, world.b.meas["B"]
    windows = [(HAND_HOUR, HAND_HOUR + timedelta(hours=1)), (at(4, 1), at(5, 1)), (START, END)]
    with conn.transaction(force_rollback=True):
        only_a = {w: report_rows(conn, "measure.report_process_summary(%(s)s, %(f)s, %(t)s, %(m)s)",
                                 {"s": SYSTEM, "f": w[0], "t": w[1], "m": world.b.meas["A"]}, tiers=True)
                  for w in windows}
        conn.execute("SELECT measure.delete_measurement(%s)", (b_id,))
        conn.execute("SELECT _measure.condense(%s::smallint, 1000000)", (world.b.system_id,))
        for table in ("record_tier", "discopen_file_tier", "discopen_open_hours"):
            assert conn.execute(f"SELECT count(*) FROM _measure.{table} WHERE measurement_id = %s",
                                (b_id,)).fetchone() == (0,), table
        for w in windows:   # what is left is measurement A's, read the same both ways
            for tiers in (True, False):
                assert report_rows(conn, "measure.report_process_summary(%(s)s, %(f)s, %(t)s, NULL)",
                                   {"s": SYSTEM, "f": w[0], "t": w[1]}, tiers=tiers) == only_a[w]
        bad, _ = differences(world, windows[1:])
        assert not bad, explain(bad)
