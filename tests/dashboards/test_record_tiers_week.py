"""The record tiers (schema/idempotent/024-record-tiers.sql) on the simulated week of \\DASH
(simulated.py: the real collector path, per-slice condensing): the process, file, DISCOPEN and
transaction-resource reports are the same with `measuredb.record_tiers` on and off, for the whole
week and for 12 windows drawn with random.Random(1986) (random minute offsets, 10 minutes to 7
days long), read as Grafana reads them (role measure_reader)."""

from __future__ import annotations

import random
from datetime import timedelta

import psycopg
import pytest

from tests.dashboards import simulated
from tests.record_tiers import report_rows

SYS = simulated.SYSTEM
WEEK = (simulated.START, simulated.START + timedelta(days=simulated.DAYS))


def windows() -> list[tuple]:
    rng = random.Random(1986)
    week_minutes = simulated.DAYS * 24 * 60
    out = [WEEK]
    for _ in range(12):
        minutes = round(10 * (week_minutes / 10) ** rng.random())    # 10 minutes .. 7 days, log-uniform
        start = WEEK[0] + timedelta(minutes=rng.randint(0, week_minutes - minutes))
        out.append((start, start + timedelta(minutes=minutes)))
    return out


WINDOWS = windows()


def calls(reader) -> list[tuple[str, str, dict]]:
    """(label, the report call with the window as %(f)s / %(t)s, extra parameters)."""
    measurements = [m for (m,) in reader.execute(
        "SELECT measurement_id FROM measure.measurement WHERE system_name = %s ORDER BY 1", (SYS,))]
    out = []
    for m in (None, *measurements):
        out += [
            (f"report_process_summary m={m}", "measure.report_process_summary(%(s)s, %(f)s, %(t)s, %(m)s)", {"m": m}),
            (f"report_busy_process min=0 m={m}",
             "measure.report_busy_process(%(s)s, %(f)s, %(t)s, 0, 1000, %(m)s)", {"m": m}),
            (f"report_process_activity m={m}", "measure.report_process_activity(%(s)s, %(f)s, %(t)s, %(m)s)",
             {"m": m}),
            (f"report_file_summary m={m}", "measure.report_file_summary(%(s)s, %(f)s, %(t)s, %(m)s)", {"m": m}),
            (f"report_discopen_summary m={m}", "measure.report_discopen_summary(%(s)s, %(f)s, %(t)s, %(m)s)",
             {"m": m}),
        ]
    out.append(("report_busy_process (defaults)", "measure.report_busy_process(%(s)s, %(f)s, %(t)s)", {}))
    for cpu in (0, 1):
        out.append((f"report_process_disc_file_activity cpu={cpu}",
                    "measure.report_process_disc_file_activity(%(s)s, %(f)s, %(t)s, %(c)s)", {"c": cpu}))
    out.append(("report_transaction_resource", "measure.report_transaction_resource(%(s)s, %(f)s, %(t)s)", {}))
    out.append(("report_transaction_resource process=$ET1%",
                "measure.report_transaction_resource(%(s)s, %(f)s, %(t)s, '$ET1%%')", {}))
    return out


def test_the_week_is_condensed_and_read_from_day_tiers(dash_db) -> None:
    with psycopg.connect(dash_db) as conn:
        sid = conn.execute("SELECT system_id FROM _measure.system WHERE system_name = %s", (SYS,)).fetchone()[0]
        assert conn.execute("SELECT count(*) FROM _measure.tier_dirty WHERE system_id = %s "
                            "AND hour_at < %s", (sid, WEEK[1])).fetchone() == (0,)
        plan = dict(conn.execute("SELECT grain::text, count(*)::int FROM _measure.window_plan(%s::smallint, %s, %s) "
                                 "GROUP BY 1", (sid, *WEEK)).fetchall())
        assert plan == {"d": 7}


@pytest.mark.parametrize("window", WINDOWS, ids=lambda w: f"{w[0]:%m%d-%H%M}_{w[1]:%m%d-%H%M}")
def test_every_report_is_the_same_with_tiers_on_and_off(reader, window) -> None:
    bad, empty = [], []
    for label, call, extra in calls(reader):
        params = {"s": SYS, "f": window[0], "t": window[1], **extra}
        on = report_rows(reader, call, params, tiers=True)
        off = report_rows(reader, call, params, tiers=False)
        if not on:
            empty.append(label)
        if on != off:
            bad.append(f"{label}:\n    tiers on only:  {[r for r in on if r not in off]}\n"
                       f"    tiers off only: {[r for r in off if r not in on]}")
    assert not bad, f"[{window[0].isoformat()} .. {window[1].isoformat()}) record tiers on != off:\n" + "\n".join(bad)
    if window == WEEK:   # the week has rows in every report: the comparison is not of empties
        assert empty == [], empty
