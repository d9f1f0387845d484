"""schema/170-threshold-shifts.sql: the systems whose stored violations the per-shift rule
changes are rebuilt once by the next schema run (the idempotent files), then the list is empty."""

from __future__ import annotations

import importlib.util
from datetime import date
from pathlib import Path

import psycopg

from core import reports
from core import schema as runner
from tests.engine import MODE

_spec = importlib.util.spec_from_file_location("test_tiers_data", Path(__file__).parent / "test_tiers_data.py")
data = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(data)


def test_pending_systems_are_rebuilt_once_by_the_next_schema_run(fresh_database) -> None:
    url = fresh_database("_thr_shifts")
    runner.apply(url, mode=MODE)
    with psycopg.connect(url) as c:
        data.load(c)
        sid = c.execute("SELECT system_id FROM _measure.system WHERE system_name = %s", (data.SYSTEM,)).fetchone()[0]
        c.execute("INSERT INTO _measure.threshold (system_id, entity, item, operator, limit_value, shift_no, help)"
                  " VALUES (%s, 'cpu', 'busy_max', '>', 85, 3, 'shift 3 only')", (sid,))
        want = reports.run_report(c, "threshold", system=data.SYSTEM, day=date(2024, 3, 9), shift=3)
        # as an older release left it: violations stored under the old rule, the system listed
        c.execute("DELETE FROM _measure.hour_breach WHERE system_id = %s", (sid,))
        c.execute("INSERT INTO _measure.threshold_rebuild_pending VALUES (%s)", (sid,))
    runner.apply(url, mode=MODE)
    with psycopg.connect(url) as c:
        assert c.execute("SELECT count(*) FROM _measure.threshold_rebuild_pending").fetchone()[0] == 0
        assert c.execute("SELECT count(*) FROM _measure.hour_breach WHERE system_id = %s", (sid,)).fetchone()[0] > 0
        got = reports.run_report(c, "threshold", system=data.SYSTEM, day=date(2024, 3, 9), shift=3)
    assert got == want and [r["time_of_day"] for r in got] == ["23:00"]
