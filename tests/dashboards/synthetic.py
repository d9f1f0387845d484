"""A synthetic week of a small node for the dashboard tests (no tests here).

Interval records are generated in SQL (generate_series), laid out as
schema/000-foundation.sql's _measure.interval_record with counter positions read from
_measure.counter_def, then condensed into the tiers the way the collector does it
(_measure.note_intervals + _measure.condense). Fast (a few seconds) and deterministic: the
load follows a daily sine (peak in the afternoon, local time) plus a hashed jitter, so busy
hours break the default thresholds of schema/010-tiers.sql (busy_max > 70, qlen_max > 2 …)
and quiet ones do not. The lead will replace this with a real simulated week.

System \\DASH (Europe/Amsterdam), one measurement CPLNDAY1 with 5-minute intervals:
4 CPUs (VLX), TMF per CPU, volumes $SYSTEM and $DATA1 (paths P and B), lines $X25A/$X25B,
processes $TCP1 (PATHTCP), $SRV1/$SRV2 ($APPL.ET1.SERVER), $DATA1 (DP2), $COPY (FUP, priority
100), user counters TRANS (ACCUM) and RESPTIME (QUEUE) of $SRV1, FILE and DISCOPEN opens of
$DATA1.ET1.ACCOUNT and a temporary file #TEMP (filtered out by the file reports).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import psycopg

SYSTEM = "\\DASH"
TIME_ZONE = "Europe/Amsterdam"
START = datetime(2024, 5, 6, 0, 0, tzinfo=UTC)  # a Monday
DAYS = 7
STEP_S = 300
D_US = STEP_S * 1_000_000

# load factor in [0.05, 1]: daily sine peaking at 14:00 UTC, a per-entity offset, jitter.
LOAD = (
    "least(1.0, greatest(0.05, 0.5 + 0.42 * sin(2 * pi() * (extract(epoch FROM t) / 3600.0 - 8) / 24)"
    " + 0.04 * mod(e.entity_id, 4) + 0.16 * (mod((extract(epoch FROM t)::bigint / 300) * 7919"
    " + e.entity_id * 104729, 1000) / 1000.0 - 0.5)))"
)

# counter -> SQL expression of the delta (f = load factor, D = interval µs); others are 0.
COUNTERS: dict[str, dict[str, str]] = {
    "cpu": {
        "cpu_busy_time": "f * D", "cpu_qtime": "f * f * 3 * D", "mem_qtime": "0.1 * f * D",
        "swaps": "f * 3 * 300", "intr_busy_time": "0.3 * f * D", "send_busy_time": "0.1 * f * D",
        "dispatches": "f * 60000", "disc_ios": "f * 30000", "process_ovhd": "0.02 * f * D",
        "transactions": "f * 3000", "response_time": "f * 3000 * 400000",
    },
    "tmf": {"home_trans": "f * 3000", "home_trans_qtime": "f * 3000 * (300000 + 200000 * f)",
            "remote_trans": "f * 100", "aborting_trans": "f * 3"},
    "disc": {
        "requests": "f * 20000", "request_qtime": "f * f * 2.5 * D", "reads": "f * 15000",
        "writes": "f * 5000", "input_bytes": "f * 15000 * 4096", "output_bytes": "f * 5000 * 4096",
        "device_qbusy_time": "0.8 * f * D", "seek_busy_time": "0.3 * f * D",
        "write_busy_time": "0.2 * f * D", "cache_hits": "f * 12000", "cache_misses": "f * 3000",
        "block_splits": "f * 5",
    },
    "line": {
        "read_busy_time": "0.95 * f * D", "write_busy_time": "0.75 * f * D", "requests": "f * 6000",
        "reads": "f * 3000", "writes": "f * 3000", "input_bytes": "f * 3000 * 200",
        "output_bytes": "f * 3000 * 400", "transactions": "f * 1500",
        "response_time": "f * 1500 * (500000 + 1000000 * f)",
    },
    "process": {
        "cpu_busy_time": "0.6 * f * D", "ready_time": "0.1 * f * D", "dispatches": "f * 5000",
        "page_faults": "f * 10", "messages_sent": "f * 4000", "messages_received": "f * 1500",
        "recv_qtime": "f * f * 3 * D", "vsems": "f * 600",
    },
    "userdef": {"time_value": "CASE WHEN e.ids->>'name' = 'TRANS' THEN f * 1500 "
                              "ELSE f * 1500 * (400000 + 600000 * f) END"},
    "file": {"reads": "f * 2000", "writes": "f * 500", "updates_or_replies": "f * 400",
             "deletes_or_writereads": "f * 10", "info_calls": "f * 5", "file_busy_time": "0.1 * f * D"},
    "discopen": {"requests": "f * 2500", "driver_input_calls": "f * 2000", "driver_output_calls": "f * 500",
                 "cache_hits": "f * 1600", "block_splits": "f * 2", "requests_blocked": "f * 3"},
}

PROCESSES = [  # cpu, pin, name, program, priority
    (0, 20, "$TCP1", "$SYSTEM.SYSTEM.PATHTCP2", 170),
    (1, 30, "$SRV1", "$APPL.ET1.SERVER", 150),
    (2, 31, "$SRV2", "$APPL.ET1.SERVER", 150),
    (1, 5, "$DATA1", "$SYSTEM.SYSTEM.DP2", 220),
    (3, 40, "$COPY", "$SYSTEM.SYSTEM.FUP", 100),
]


def _entities() -> list[tuple[str, int, dict]]:
    out: list[tuple[str, int, dict]] = []
    for cpu in range(4):
        out.append(("cpu", cpu, {"cpu": cpu, "cpu_type": "VLX"}))
        out.append(("tmf", cpu, {"cpu": cpu}))
    for i, vol in enumerate(("$SYSTEM", "$DATA1")):
        out.append(("disc", i, {"cpu": i, "device_name": vol, "pin": 5, "path": "P"}))
        out.append(("disc", 1 - i, {"cpu": 1 - i, "device_name": vol, "pin": 6, "path": "B"}))
    for i, line in enumerate(("$X25A", "$X25B")):
        out.append(("line", i + 2, {"device_name": line, "cpu": i + 2, "pin": 12}))
    for cpu, pin, name, prog, prio in PROCESSES:
        out.append(("process", cpu, {"cpu": cpu, "pin": pin, "process_name": name,
                                      "program_file_name": prog, "priority": prio}))
    for counter in ("TRANS", "RESPTIME"):
        out.append(("userdef", 1, {"cpu": 1, "pin": 30, "process_name": "$SRV1",
                                    "program_file_name": "$APPL.ET1.SERVER", "name": counter,
                                    "index": 0}))
    for fno, fname in ((1, "$DATA1.ET1.ACCOUNT"), (2, "$DATA1.TEMP.#TEMP")):
        out.append(("file", 1, {"opener_cpu": 1, "opener_pin": 30, "file_number": fno,
                                 "file_name": fname, "device_type": 3}))
        out.append(("discopen", 1, {"opener_cpu": 1, "opener_pin": 30, "ocb_number": fno,
                                     "opener_system_name": SYSTEM, "file_name": fname}))
    return out


def populate(conn: psycopg.Connection, *, start: datetime = START, days: int = DAYS) -> int:
    """Insert the synthetic node and its interval records, condense; returns the system_id."""
    system_id = conn.execute(
        "INSERT INTO _measure.system (system_name, system_number, time_zone, os_version) "
        "VALUES (%s, 7, %s, 'C30') RETURNING system_id", (SYSTEM, TIME_ZONE)).fetchone()[0]
    contab = {"counters": [{"name": "TRANS", "type": "ACCUM"}, {"name": "RESPTIME", "type": "QUEUE"}]}
    end = start + timedelta(days=days)
    meas = conn.execute(
        "INSERT INTO _measure.measurement (system_id, name, contab, start_at, stop_at, interval_us, "
        "state) VALUES (%s, 'CPLNDAY1', %s, %s, %s, %s, 'stopped') RETURNING measurement_id",
        (system_id, json.dumps(contab), start, end, D_US)).fetchone()[0]
    codes = dict(conn.execute("SELECT entity, type_code FROM _measure.entity_type").fetchall())
    for etype, cpu, ids in _entities():
        key = "|".join(f"{k}={v}" for k, v in ids.items())
        conn.execute(
            "INSERT INTO _measure.entity (system_id, type_code, key, ids, cpu, first_seen_at) "
            "VALUES (%s, %s, %s, %s, %s, %s)", (system_id, codes[etype], key, json.dumps(ids), cpu, start))
    for etype, exprs in COUNTERS.items():
        defs = conn.execute("SELECT counter FROM _measure.counter_def WHERE entity = %s ORDER BY position",
                            (etype,)).fetchall()
        unknown = set(exprs) - {c for (c,) in defs}
        assert not unknown, f"{etype}: no such counters {unknown}"
        arr = ", ".join(f"({exprs[c]})::bigint" if c in exprs else "0" for (c,) in defs)
        conn.execute(
            f"""INSERT INTO _measure.interval_record (measurement_id, entity_id, record_at, from_at, to_at,
                    delta_us, closing_kind, system_id, type_code, cpu, counters)
                SELECT %(m)s, e.entity_id, %(start)s, t, t + %(step)s * INTERVAL '1 second', %(d)s, 3,
                       e.system_id, e.type_code, e.cpu, ARRAY[{arr}]
                  FROM _measure.entity e
                 CROSS JOIN generate_series(%(start)s, %(last)s, %(step)s * INTERVAL '1 second') t
                 CROSS JOIN LATERAL (SELECT CASE WHEN e.ids->>'path' = 'B' THEN 0.01 ELSE {LOAD} END AS f, %(d)s::numeric AS D) x
                 WHERE e.system_id = %(sys)s AND e.type_code = %(code)s""",
            {"m": meas, "start": start, "last": end - timedelta(seconds=STEP_S), "step": STEP_S,
             "d": D_US, "sys": system_id, "code": codes[etype]})
    conn.execute("SELECT _measure.note_intervals(%s::smallint, %s, %s)", (system_id, start, end))
    while conn.execute("SELECT _measure.condense(%s::smallint)", (system_id,)).fetchone()[0]:
        pass
    return system_id
