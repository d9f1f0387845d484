"""What condensing resolves once for the readers (schema/050-read-paths.sql): the losing
measurement of an entity-hour, the CPU trend line of each day and the stored threshold
violations. Each must give exactly what the readers computed from the hour tiers before."""

from __future__ import annotations

import psycopg
import pytest
import test_tiers_data as data


@pytest.fixture
def db(conn: psycopg.Connection) -> data.Builder:
    return data.load(conn)


def rows(conn, sql, *args):
    return conn.execute(sql, args).fetchall()


# Figure 2 computed from the hour view at read time (measure.report_cpu_trend before 050).
TREND_FROM_HOURS = """
    WITH h AS (
        SELECT c.*, c.local_hour::date AS day,
               max(c.qlen_avg) OVER w AS hq_max, min(c.qlen_avg) OVER w AS hq_min,
               max(c.swap_avg) OVER w AS hs_max, max(c.busy_avg) OVER w AS hb_max,
               min(c.busy_avg) OVER w AS hb_min
          FROM measure.cpu_hour c
         WHERE c.system_name = %(s)s
        WINDOW w AS (PARTITION BY c.hour_at))
    SELECT DISTINCT ON (h.day) h.system_name, h.day, h.loadid, h.cpu, h.cpu_type, h.os_version,
           h.hq_max, h.hq_max - h.hq_min, h.hs_max, h.hb_max, h.hb_max - h.hb_min
      FROM h WHERE h.day BETWEEN %(f)s AND %(t)s
     ORDER BY h.day, h.qlen_avg DESC NULLS LAST, h.hour_at, h.cpu"""


def test_the_losing_measurement_is_shadowed_once(db, conn) -> None:
    got = rows(conn, "SELECT entity, measurement_id = %s, hour_at FROM _measure.hour_shadow", db.meas["B"])
    assert got == [("cpu", True, data.t(10, 8))]
    # the hour view counts A only; the raw tier keeps both rows
    assert rows(conn, "SELECT count(*) FROM _measure.cpu_hour WHERE hour_at = %s", data.t(10, 8)) == [(2,)]
    assert rows(conn, "SELECT measurement_id = %s, busy_avg FROM measure.cpu_hour WHERE hour_at = %s",
                db.meas["A"], data.t(10, 8)) == [(True, 25)]


def test_a_longer_late_measurement_takes_the_hour_over(db, conn) -> None:
    db.cpu("B", 0, data.t(10, 8, 30), 30, busy=100)         # B now has 60 minutes, A 60: tie -> A
    db.note_and_condense(data.t(10, 8, 30), data.t(10, 8, 30))
    assert rows(conn, "SELECT measurement_id = %s FROM _measure.hour_shadow", db.meas["B"]) == [(True,)]
    db.cpu("B", 0, data.t(10, 8, 59), 1, busy=100)          # 61 minutes: B wins, A is shadowed
    db.note_and_condense(data.t(10, 8, 59), data.t(10, 8, 59))
    assert rows(conn, "SELECT measurement_id = %s FROM _measure.hour_shadow", db.meas["A"]) == [(True,)]
    assert rows(conn, "SELECT measurement_id = %s, busy_max FROM measure.cpu_hour WHERE hour_at = %s",
                db.meas["B"], data.t(10, 8)) == [(True, 100)]


def test_trend_report_equals_the_computation_from_hours(db, conn) -> None:
    args = {"s": data.SYSTEM, "f": "2024-03-01", "t": "2024-03-31"}
    expected = rows(conn, TREND_FROM_HOURS.replace("%(s)s", "%s").replace("%(f)s", "%s").replace("%(t)s", "%s"),
                    args["s"], args["f"], args["t"])
    got = rows(conn, "SELECT * FROM measure.report_cpu_trend(%s, '2024-03-01', '2024-03-31')", data.SYSTEM)
    assert got == expected and len(got) == 3
    db.cpu("A", 1, data.t(10, 10, 0), 30, busy=95, qlen=4.0)   # late data changes 03-10's line
    db.note_and_condense(data.t(10, 10), data.t(10, 10))
    got = rows(conn, "SELECT day::text, cpu, qlen_max FROM measure.report_cpu_trend(%s, '2024-03-10', '2024-03-10')",
               data.SYSTEM)
    assert got == [("2024-03-10", 1, 4)]   # 4.0 over its 30 measured minutes
    expected = rows(conn, TREND_FROM_HOURS.replace("%(s)s", "%s").replace("%(f)s", "%s").replace("%(t)s", "%s"),
                    args["s"], args["f"], args["t"])
    assert rows(conn, "SELECT * FROM measure.report_cpu_trend(%s, '2024-03-01', '2024-03-31')",
                data.SYSTEM) == expected


def _check(conn, broken: bool):
    return rows(conn, "SELECT * FROM measure.threshold_check(%s, '2024-03-01', '2024-04-01', NULL, NULL, %s)",
                data.SYSTEM, broken)


def test_stored_violations_equal_the_evaluated_ones(db, conn) -> None:
    assert rows(conn, "SELECT count(*) FROM _measure.breach_state") == [(1,)]
    stored = _check(conn, True)
    evaluated = [r for r in _check(conn, False) if r[-1]]
    assert stored == evaluated and len(stored) >= 5
    conn.execute("DELETE FROM _measure.breach_state")        # readers evaluate instead
    assert _check(conn, True) == evaluated


def test_a_threshold_change_is_stored_at_once(db, conn) -> None:
    conn.execute("UPDATE _measure.threshold SET limit_value = 20 WHERE system_id IS NULL AND entity = 'cpu' "
                 "AND item = 'busy_max'")
    # re-resolved by the trigger in the editing transaction (040-dashboards.sql): still complete
    assert rows(conn, "SELECT count(*) FROM _measure.breach_state") == [(1,)]
    evaluated = [r for r in _check(conn, False) if r[-1]]
    assert _check(conn, True) == evaluated
    assert ("busy_max", 30) in {(r[5], r[6]) for r in evaluated}      # 03-10 08:00: 30 % > 20, not > 70
    db.note_and_condense(data.t(10, 8), data.t(10, 8))
    assert rows(conn, "SELECT count(*) FROM _measure.breach_state") == [(1,)]
    assert _check(conn, True) == evaluated


def test_a_threshold_on_no_column_still_fails_the_reader_not_the_condensing(db, conn) -> None:
    conn.execute("INSERT INTO _measure.threshold (system_id, entity, item, operator, limit_value) "
                 "VALUES (NULL, 'cpu', 'no_such_item', '>', 1)")
    assert db.note_and_condense(data.t(10, 8), data.t(10, 8)) == 1
    assert rows(conn, "SELECT count(*) FROM _measure.breach_state") == [(0,)]
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="no_such_item"):
        _check(conn, True)


def test_one_item_is_the_full_check_filtered(db, conn) -> None:
    full = _check(conn, False)
    one = rows(conn, "SELECT * FROM measure.threshold_check(%s, '2024-03-01', '2024-04-01', 'cpu', 'busy_max')",
               data.SYSTEM)
    assert one == [r for r in full if r[1] == "cpu" and r[5] == "busy_max"] and one


def test_threshold_items_report_reads_the_stored_violations_alike(db, conn) -> None:
    sql = "SELECT * FROM measure.report_threshold_items(%s, '2024-03-09', NULL, %s)"
    for entity in ("cpu", "disc", "process"):
        stored = rows(conn, sql, data.SYSTEM, entity)
        conn.execute("SAVEPOINT s")
        conn.execute("DELETE FROM _measure.breach_state")        # readers evaluate instead
        evaluated = rows(conn, sql, data.SYSTEM, entity)
        conn.execute("ROLLBACK TO SAVEPOINT s")
        assert stored == evaluated
    assert len(rows(conn, sql, data.SYSTEM, "cpu")) >= 5
