"""The performance data base: hour, shift, month and year tiers from a hand-built data set
(tests/schema/test_tiers_data.py explains every number), late data, retention, roles, and the
plain/TimescaleDB branches agreeing on the hour-tier SELECT."""

from __future__ import annotations

import re
from decimal import Decimal as D

import pglast
import pglast.stream
import psycopg
import pytest
import test_tiers_data as data

from core import schema as runner
from core.catalog import load_catalog

SCHEMA = runner.SCHEMA_DIR


@pytest.fixture
def db(conn: psycopg.Connection) -> data.Builder:
    return data.load(conn)


def rows(conn, sql, *args):
    return conn.execute(sql, args).fetchall()


def test_hour_tier_one_row_per_cpu_hour_with_min_max_and_coverage(db, conn) -> None:
    got = rows(conn, """
        SELECT cpu, to_char(local_hour, 'MM-DD HH24:MI'), loadid, measurement_id = %s, samples, coverage_ratio,
               busy_avg, busy_max, busy_min, busy_delt, qlen_avg, qlen_max, qlen_delt, swap_avg, swap_max,
               ibusy_avg, ibusy_max
          FROM measure.cpu_hour WHERE system_name = %s ORDER BY cpu, hour_at""", db.meas["A"], data.SYSTEM)
    assert got == [
        (0, "03-09 23:00", "DT06923", True, 2, 1, 70, 90, 50, 40, 2, 3, 2, 2, 3, 20, 30),
        # measurement B (100 % busy for 30 minutes) lost to A (60 minutes in that hour)
        (0, "03-10 00:00", "DT07000", True, 2, 1, 25, 30, 20, 10, D("0.25"), D("0.3"), D("0.1"),
         D("0.05"), D("0.1"), D("2.5"), 3),
        # 01:00 PST (UTC 09:00) has no data; 02:00 does not exist (DST), 03:00 PDT is half measured
        (0, "03-10 03:00", "DT07003", True, 1, D("0.5"), 80, 80, 80, 0, 1, 1, 0, 0, 0, 0, 0),
        (0, "03-20 00:00", "DT08000", True, 1, 1, 40, 40, 40, 0, D("0.5"), D("0.5"), 0, 0, 0, 0, 0),
        (1, "03-09 23:00", "DT06923", True, 2, 1, 10, 10, 10, 0, 0, 0, 0, 0, 0, 0, 0),
    ]


def test_shift_crossing_midnight_and_dst_belongs_to_the_day_it_began(db, conn) -> None:
    got = rows(conn, """
        SELECT cpu, shift_day::text, shift_no, hours, shift_hours, round(coverage_ratio, 6), busy_avg, busy_max,
               busy_min, busy_delt, qlen_avg, qlen_max, qlen_min, qlen_delt
          FROM measure.cpu_shift WHERE system_name = %s ORDER BY cpu, shift_day""", data.SYSTEM)
    # busy: hours 70, 25 (1 h each) and 80 (half an hour): (70*3600 + 25*3600 + 80*1800) / 9000 = 54
    # shift 3 of 03-09 runs 23:00 PST .. 07:00 PDT = 7 real hours; 2.5 measured -> 2.5 / 7
    assert got == [
        (0, "2024-03-09", 3, 3, 7, D("0.357143"), 54, 80, 25, 55, D("1.1"), 2, D("0.25"), D("1.75")),
        (0, "2024-03-19", 3, 1, 8, D("0.125"), 40, 40, 40, 0, D("0.5"), D("0.5"), D("0.5"), 0),
        (1, "2024-03-09", 3, 1, 7, D("0.142857"), 10, 10, 10, 0, 0, 0, 0, 0),
    ]


def test_month_and_year_tiers(db, conn) -> None:
    month = rows(conn, """SELECT cpu, month::text, shift_no, shifts, hours, busy_avg, busy_max, busy_min, busy_delt
                            FROM measure.cpu_month WHERE system_name = %s ORDER BY cpu""", data.SYSTEM)
    # (70*3600 + 25*3600 + 80*1800 + 40*3600) / 12600 = 50; BUSY-DELT-M = max(55, 0)
    assert month == [(0, "2024-03-01", 3, 2, 4, 50, 80, 25, 55), (1, "2024-03-01", 3, 1, 1, 10, 10, 10, 0)]
    year = rows(conn, """SELECT cpu, year, months, busy_avg, busy_max, busy_delt, qlen_delt
                           FROM measure.cpu_year WHERE system_name = %s ORDER BY cpu""", data.SYSTEM)
    assert year == [(0, 2024, 1, 50, 80, 55, D("1.75")), (1, 2024, 1, 10, 10, 0, 0)]


def test_disc_paths_fold_per_volume(db, conn) -> None:
    assert rows(conn, "SELECT volume, paths, busy_avg, busy_max, qlen_avg FROM measure.disc_hour") == [
        ("$DATA1", 2, 60, 60, 1)]
    assert rows(conn, "SELECT volume, shift_day::text, busy_avg, qlen_avg FROM measure.disc_shift") == [
        ("$DATA1", "2024-03-09", 60, 1)]


def test_late_data_recomputes_exactly_the_affected_buckets(db, conn) -> None:
    def snapshot():
        return {
            "hour": rows(conn, "SELECT cpu, hour_at, busy_avg, busy_min, samples FROM measure.cpu_hour ORDER BY 1, 2"),
            "shift": rows(conn, "SELECT cpu, shift_day, busy_avg, busy_max, busy_delt FROM measure.cpu_shift ORDER BY 1, 2"),
            "month": rows(conn, "SELECT cpu, busy_avg, busy_max, busy_delt FROM measure.cpu_month ORDER BY 1"),
            "year": rows(conn, "SELECT cpu, busy_avg FROM measure.cpu_year ORDER BY 1"),
            "stamps": rows(conn, "SELECT shift_day, subject, item, condensed_at FROM _measure.tier_shift "
                                 "WHERE shift_day <> '2024-03-09' ORDER BY 1, 2, 3"),
        }
    before = snapshot()
    db.cpu("A", 0, data.t(10, 10, 30), 30, busy=0, qlen=0)  # the rest of the half-measured hour
    assert db.note_and_condense(data.t(10, 10, 30), data.t(10, 10, 30)) == 1
    after = snapshot()
    changed_hours = set(after["hour"]) - set(before["hour"])
    assert [(h[0], h[1].hour, h[2], h[3], h[4]) for h in changed_hours] == [(0, 10, 40, 0, 2)]
    assert after["shift"][0][2:] == (45, 70, 45) and before["shift"][0][2:] == (54, 80, 55)
    assert after["shift"][1:] == before["shift"][1:]          # the other shifts are untouched
    assert after["stamps"] == before["stamps"]                 # ... not even rewritten
    assert after["month"][0] == (0, D("43.75"), 70, 45) and after["month"][1] == before["month"][1]
    assert after["year"][0] == (0, D("43.75"))


def retention(conn, keep: str, now) -> dict:
    conn.execute("SELECT _measure.retention_set('raw', %s::interval)", (keep,))
    return conn.execute("SELECT _measure.retention_run(false, %s, 'test')", (now,)).fetchone()[0]


def test_retention_holds_back_days_until_their_tiers_are_complete(db, conn) -> None:
    now = data.t(30, 0)
    db.cpu("A", 1, data.t(20, 9), 60, busy=5)                 # stored and noted, not condensed
    before_parts = rows(conn, "SELECT lo FROM _measure.run_parts() ORDER BY lo")
    out = retention(conn, "5 days", now)
    assert [(h["class"], h["first_hour"]) for h in out["held_back"]] == [("raw", "2024-03-20T09:00:00+00:00")]
    held = out["held_back"][0]
    assert held["hours"] == ["2024-03-20T09:00:00+00:00"] and "not condensed" in held["reason"]
    # the days before the held one went, the held one and every later one stayed
    kept = rows(conn, "SELECT lo FROM _measure.run_parts() ORDER BY lo")
    assert kept == [p for p in before_parts if p[0] >= data.t(20, 0)] and len(kept) < len(before_parts)
    gone = [r for r in out["removed"] if r["class"] == "raw"]
    assert [r["from"] for r in gone[:-1]] == ["2024-03-10T00:00:00+00:00"]  # a day (partition or chunk)
    assert gone[-1]["object"] == "_measure.extra_copy"
    # once condensed, the rest goes up to the cut-off (03-25) and the tiers stay as they were
    db.note_and_condense(data.t(20, 9), data.t(20, 9))
    shifts = rows(conn, "SELECT * FROM measure.cpu_shift ORDER BY cpu, shift_day")
    n_intervals = conn.execute("SELECT sum(n) FROM _measure.interval_run").fetchone()[0]
    out = retention(conn, "5 days", now)
    assert out["held_back"] == []
    assert sum(r.get("intervals", 0) for r in out["removed"]) == n_intervals
    assert rows(conn, "SELECT count(*) FROM _measure.interval_run") == [(0,)]
    assert rows(conn, "SELECT * FROM measure.cpu_shift ORDER BY cpu, shift_day") == shifts
    assert rows(conn, "SELECT purged_before FROM _measure.purged WHERE class = 'raw'") == [(data.t(21, 0),)]
    # every purge is logged with what it removed
    log = rows(conn, "SELECT dry_run, requested_by, jsonb_array_length(removed) > 0 FROM _measure.purge_log ORDER BY purge_id")
    assert log == [(False, "test", True), (False, "test", True)]


def test_retention_dry_run_changes_nothing(db, conn) -> None:
    conn.execute("SELECT _measure.retention_set('raw', '5 days')")
    parts = rows(conn, "SELECT lo FROM _measure.run_parts()")
    out = conn.execute("SELECT _measure.retention_run(true, %s, 'test')", (data.t(30, 0),)).fetchone()[0]
    assert out["dry_run"] and [r["class"] for r in out["removed"]][:1] == ["raw"]
    assert rows(conn, "SELECT lo FROM _measure.run_parts()") == parts
    assert rows(conn, "SELECT count(*) FROM _measure.purged") == [(0,)]


def test_retention_policy_is_validated(conn) -> None:
    for cls, keep, message in [("raw", "12 hours", "at least 1 day"), ("nosuch", "1 day", "unknown retention class"),
                               ("raw", None, "cannot be kept for ever"),
                               ("hour", "10 days", "hour data must be kept at least as long as raw data"),
                               ("day", "401 days", "at least 31 days longer than hour")]:
        with pytest.raises(psycopg.errors.InvalidParameterValue, match=message):
            conn.execute("SELECT _measure.retention_set(%s, %s::interval)", (cls, keep))
        conn.rollback()
    assert rows(conn, "SELECT class, keep FROM _measure.retention_set('raw', '90 days')")[0] == (
        "raw", __import__("datetime").timedelta(days=90))


def test_tier_retention_drops_old_hours_and_keeps_the_upper_tiers(db, conn) -> None:
    conn.execute("SELECT _measure.retention_set('raw', '5 days')")
    conn.execute("SELECT _measure.retention_set('hour', '8 days')")
    months = rows(conn, "SELECT * FROM measure.cpu_month ORDER BY cpu, month")
    shifts = rows(conn, "SELECT * FROM measure.cpu_shift ORDER BY cpu, shift_day")
    out = conn.execute("SELECT _measure.retention_run(false, %s, 'test')", (data.t(30, 0),)).fetchone()[0]
    assert "_measure.cpu_hour" in [r["object"] for r in out["removed"] if r["class"] == "hour"]
    assert rows(conn, "SELECT count(*) FROM _measure.cpu_hour WHERE hour_at < %s", data.t(22, 0)) == [(0,)]
    # recondensing the purged period keeps what lies above it
    conn.execute("SELECT _measure.recondense(%s::smallint, %s, %s)", (db.system_id, data.t(9, 0), data.t(21, 0)))
    assert rows(conn, "SELECT * FROM measure.cpu_month ORDER BY cpu, month") == months
    assert rows(conn, "SELECT * FROM measure.cpu_shift ORDER BY cpu, shift_day") == shifts


def test_recondensing_after_retention_keeps_the_tiers_of_purged_hours(db, conn) -> None:
    # the hour and record tiers of hours whose interval runs are gone are kept as condensed:
    # recondensing them (after a shift edit, say) recomputes only what lies above them
    window = (data.SYSTEM, data.t(10, 0), data.t(11, 0))

    def state():
        return {"hours": rows(conn, "SELECT * FROM measure.cpu_hour ORDER BY cpu, hour_at"),
                "process_hours": rows(conn, "SELECT * FROM measure.process_hour ORDER BY entity_id, hour_at"),
                "summary": rows(conn, "SELECT * FROM measure.report_process_summary(%s, %s, %s)", *window),
                "files": rows(conn, "SELECT * FROM measure.report_file_summary(%s, %s, %s)", *window),
                "resource": rows(conn, "SELECT * FROM measure.report_transaction_resource(%s, %s, %s)", *window)}

    before = state()
    assert before["summary"] and before["files"] and before["hours"]
    retention(conn, "5 days", data.t(30, 0))
    assert conn.execute("SELECT _measure.raw_horizon()").fetchone() == (data.t(21, 0),)
    assert conn.execute("SELECT count(*) FROM _measure.interval_run WHERE from_at < %s", (data.t(21, 0),)).fetchone() == (0,)
    conn.execute("SELECT _measure.note_intervals(%s::smallint, %s, %s)", (db.system_id, data.t(9, 0), data.t(21, 0)))
    assert state() == before                                 # noted, not condensed: the tiers still answer
    conn.execute("SELECT _measure.recondense(%s::smallint, %s, %s)", (db.system_id, data.t(9, 0), data.t(21, 0)))
    assert state() == before
    # a window's partial first hour before the cut-off counts whole (its runs are gone)
    late_start = rows(conn, "SELECT * FROM measure.report_process_summary(%s, %s, %s)",
                      data.SYSTEM, data.t(10, 7, 20), data.t(11, 0))
    assert late_start == before["summary"]
    # an hour after the cut-off is recomputed from its runs as before
    db.cpu("A", 1, data.t(26, 9), 60, busy=5)
    db.note_and_condense(data.t(26, 9), data.t(26, 9))
    assert rows(conn, "SELECT cpu, busy_avg FROM measure.cpu_hour WHERE hour_at = %s", data.t(26, 9)) == [(1, 5)]
    # and history loaded again before the horizon is condensed, not ignored
    db.cpu("A", 1, data.t(15, 9), 60, busy=7)
    db.note_and_condense(data.t(15, 9), data.t(15, 9))
    assert rows(conn, "SELECT cpu, busy_avg FROM measure.cpu_hour WHERE hour_at = %s", data.t(15, 9)) == [(1, 7)]


ENTITIES = ("cpu", "disc", "line", "process", "userdef", "tmf")


def _targets(sql: str) -> list[str]:
    """The output column names of a SELECT."""
    select = pglast.parse_sql(sql)[0].stmt
    return [t.name or pglast.stream.RawStream()(t.val) for t in select.targetList]


def test_the_hour_tier_functions_are_the_one_definition(conn) -> None:
    # both engines condense with the generated _measure.<entity>_hour_rows functions, whose
    # body is exactly what the one definition of the hour tiers (_measure.hour_tier_sql) writes
    for ent in ENTITIES:
        body = conn.execute("SELECT prosrc FROM pg_proc WHERE oid = %s::regprocedure",
                            (f"_measure.{ent}_hour_rows(smallint, timestamptz[])",)).fetchone()[0]
        generated = conn.execute("SELECT _measure.hour_tier_sql(%s)", (ent,)).fetchone()[0]
        assert "RETURN QUERY\n" + generated + ";\nEND" in body, ent
        assert _targets(generated)[:9] == ["system_id", "entity_id", "measurement_id", "hour_at", "cpu",
                                           "samples", "elapsed_us", "first_from_at", "last_to_at"], ent


def _reference_hour_sql(conn, ent: str) -> str:
    """The hour tier computed interval by interval, as the retired continuous aggregates did:
    every interval's value (numeric) into min() and max()."""
    rates = {"percent": "100.0 * {x} / delta_us", "queue": "{x}::numeric / delta_us",
             "per_second": "1000000.0 * {x} / delta_us"}
    cols = []
    for pos, sum_col, rate, min_col, max_col in rows(conn, """
            SELECT position, sum_col, rate, min_col, max_col FROM _measure.hour_tier_column
             WHERE entity = %s ORDER BY ord""", ent):
        x = f"greatest(counters[{pos}], 0)"
        cols.append(f"sum({x}) AS {sum_col}")
        if rate:
            cols += [f"min({rates[rate].format(x=x)}) AS {min_col}", f"max({rates[rate].format(x=x)}) AS {max_col}"]
    return (f"SELECT system_id, entity_id, measurement_id, date_bin(INTERVAL '1 hour', from_at, "
            f"TIMESTAMPTZ '2000-01-01 00:00:00+00') AS hour_at, min(cpu) AS cpu, count(*) AS samples, "
            f"sum(delta_us) AS elapsed_us, min(from_at) AS first_from_at, max(to_at) AS last_to_at, "
            f"{', '.join(cols)} FROM _measure.interval_record WHERE type_code = "
            f"(SELECT type_code FROM _measure.entity_type WHERE entity = '{ent}') "
            f"GROUP BY system_id, entity_id, measurement_id, 4")


def test_generated_hour_functions_equal_the_interval_by_interval_values_on_awkward_data(conn) -> None:
    # records of one system over three hours: deltas of 10^12 and more (computed interval by
    # interval), just below 10^12, negative (clamped), missing counters (a short array: NULL ->
    # 0), several DELTA-TIMEs within an hour, two measurements of one entity
    hours = ["2024-05-01 10:00+00", "2024-05-01 11:00+00", "2024-05-01 12:00+00"]
    counts = dict(rows(conn, "SELECT entity, count(*) FROM _measure.counter_def GROUP BY 1"))
    for ent in ENTITIES:
        code = conn.execute("SELECT type_code FROM _measure.entity_type WHERE entity = %s", (ent,)).fetchone()[0]
        conn.execute("""
            INSERT INTO _measure.interval_record (measurement_id, entity_id, record_at, from_at, to_at, delta_us,
                                                  closing_kind, system_id, type_code, cpu, counters)
            SELECT 1 + n %% 2, 1000 * %(code)s + n %% 5, '2024-05-01', t, t + d * INTERVAL '1 microsecond', d, 3, 99, %(code)s,
                   n %% 4,
                   ARRAY(SELECT CASE WHEN n %% 5 = 0 AND (n + k) %% 7 = 0 THEN 1000000000000 + n * 7919
                                     WHEN (n + k) %% 29 = 0 THEN 999999999999 - n
                                     WHEN n %% 5 = 0 AND (n + k) %% 13 = 0 THEN 5000000000000000 + k
                                     WHEN (n + k) %% 11 = 0 THEN -(n * k)
                                     ELSE (n * 104729 + k * 7919) %% (d / 10 + 7) END::bigint
                           FROM generate_series(1, greatest(%(len)s - n %% 3, 1)) k)
              FROM generate_series(1, 400) n
             CROSS JOIN LATERAL (SELECT TIMESTAMPTZ '2024-05-01 10:00+00' + (n * 26) * INTERVAL '1 second' AS t,
                                        (ARRAY[60000000, 59999999, 30000000, 3600000000, 7])[1 + n / 10 %% 5]::bigint AS d) x
        """, {"code": code, "len": counts[ent]})
        expected = rows(conn, f"SELECT * FROM ({_reference_hour_sql(conn, ent)}) c WHERE system_id = 99 "
                              "ORDER BY entity_id, measurement_id, hour_at")
        got = rows(conn, f"SELECT * FROM _measure.{ent}_hour_rows(99::smallint, %s::timestamptz[]) "
                         "ORDER BY entity_id, measurement_id, hour_at", hours)
        assert len(expected) == 5 * 2 * 3 and got == expected, ent  # entities x measurements x hours
    # both ways of computing the extremes were taken: entities 0 have deltas of 10^12 and
    # more, the others none; every entity-hour has several DELTA-TIMEs
    assert rows(conn, """
        SELECT entity_id %% 1000, bool_or(big), min(deltas) > 1
          FROM (SELECT entity_id, measurement_id, date_bin(INTERVAL '1 hour', from_at, TIMESTAMPTZ '2000-01-01') AS h,
                       bool_or(counters[1] >= 1000000000000) AS big, count(DISTINCT delta_us) AS deltas
                  FROM _measure.interval_record WHERE system_id = 99 AND type_code = 2 GROUP BY 1, 2, 3) g
         GROUP BY 1 ORDER BY 1""") == [(0, True, True), (1, False, True), (2, False, True), (3, False, True),
                                       (4, False, True)]
    # and the runs they were packed into are as many as the rule says: records of one
    # counter record are consecutive only when one FROM is the previous TO (here: never)
    assert rows(conn, "SELECT count(*) = sum(n) FROM _measure.interval_run WHERE system_id = 99") == [(True,)]


def test_counter_positions_in_tier_sql_match_the_catalogue(conn) -> None:
    cat = load_catalog()
    seen = 0
    for ent in ENTITIES:
        text = conn.execute("SELECT _measure.hour_tier_sql(%s)", (ent,)).fetchone()[0]
        for pos, e, counter in re.findall(r"ir\.c\[ir\.i\]\[(\d+)\] /\* (\w+)\.(\w+) \*/", text):
            assert e == ent and cat.entity(ent).index(counter) + 1 == int(pos), (ent, counter)
            seen += 1
        # the interval-by-interval extremes (deltas of 10^12 and more) read the rate counters' positions
        rated = {p for (p,) in rows(conn, "SELECT position FROM _measure.hour_tier_column WHERE entity = %s"
                                          " AND rate IS NOT NULL", ent)}
        extremes = {int(p) for p in re.findall(r"_measure\.hour_extreme\([^)]*?, (\d+), '\w+', (?:true|false)\)", text)}
        assert extremes == rated, ent
    spec = rows(conn, "SELECT entity, position, counter, type_code FROM _measure.hour_tier_column")
    for ent, pos, counter, code in spec:
        assert cat.entity(ent).index(counter) + 1 == pos and cat.entity(ent).code == code, (ent, counter)
    assert seen == 46 and len(spec) == 46  # every counter of the six hour tiers, read once per interval


def test_thresholds_default_to_figure_9(db, conn) -> None:
    assert rows(conn, "SELECT item, operator, limit_value FROM measure.threshold "
                      "WHERE system_name = %s AND entity = 'cpu' ORDER BY item", data.SYSTEM) == [
        ("busy_delt", ">", 20), ("busy_max", ">", 70), ("ibusy_max", ">", 25),
        ("qlen_delt", ">", 1), ("qlen_max", ">", 2), ("swap_max", ">", 2)]


def test_every_stored_statistic_is_in_the_public_views(conn) -> None:
    """Each minimum and maximum an hour row stores (and the measured span) can be read from
    the public hour view, and the shift, month and year views carry the same extremes."""
    def columns(rel: str) -> list[str]:
        return [r[0] for r in rows(conn, "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass"
                                         " AND attnum > 0 AND NOT attisdropped ORDER BY attnum", rel)]

    missing = {}
    for ent in ("cpu", "disc", "line", "process", "userdef", "tmf"):
        stored = [c for c in columns(f"_measure.{ent}_hour") if c.endswith(("_min", "_max"))]
        assert stored, ent
        for tier in ("hour", "shift", "month", "year"):
            want = stored + (["first_from_at", "last_to_at"] if tier == "hour" else [])
            gone = [c for c in want if c not in columns(f"measure.{ent}_{tier}")]
            if gone:
                missing[f"measure.{ent}_{tier}"] = gone
    assert missing == {}


def test_hour_view_minima(db, conn) -> None:
    got = rows(conn, """
        SELECT v.cpu, to_char(v.local_hour, 'MM-DD HH24:MI'), v.qlen_min, v.mqlen_min, v.swap_min, v.ibusy_min,
               v.sbusy_min, v.busy_min, v.first_from_at < v.last_to_at,
               (v.mqlen_min, v.swap_min, v.ibusy_min, v.sbusy_min) = (h.mqlen_min, h.swap_min, h.ibusy_min, h.sbusy_min)
          FROM measure.cpu_hour v
          JOIN _measure.cpu_hour h USING (system_id, entity_id, measurement_id, hour_at)
         WHERE v.system_name = %s ORDER BY v.cpu, v.hour_at LIMIT 2""", data.SYSTEM)
    assert [g[:3] + g[7:] for g in got] == [(0, "03-09 23:00", 1, 50, True, True),
                                            (0, "03-10 00:00", D("0.2"), 20, True, True)]
