"""The threshold dashboard reads what condensing resolved once (schema/idempotent/040-dashboards.sql,
schema/060-dashboard-rollups.sql): _measure.hour_breach and _measure.threshold_rollup. On the
simulated week (simulated.py) its panels must give exactly what the old panel SQL computed from the
hour views (up to 7 days), and the rollups exactly what a full evaluation of every threshold on
every hour gives, grouped by shift and month here in Python; a threshold edit and late data are
resolved at once."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import psycopg
import pytest

from tests.dashboards import simulated
from tests.dashboards.grafana import TimeRange, expand
from tests.dashboards.panels import DASHBOARDS
from tests.dashboards.reference import shift_of, shifts_of

SYS = simulated.SYSTEM
WEEK = TimeRange(simulated.START, simulated.START + timedelta(days=simulated.DAYS))
SHIFT_RANGE = TimeRange(simulated.START - timedelta(days=20), simulated.START + timedelta(days=20))
MONTH_RANGE = TimeRange(simulated.START - timedelta(days=150), simulated.START + timedelta(days=60))
ALL = TimeRange(simulated.START - timedelta(days=2), simulated.START + timedelta(days=simulated.DAYS + 2))

# The panels' SQL before the thresholds were resolved at condense time (dashboards/build.py of
# c8ea0d8), reading the full evaluation (threshold_check without p_broken) instead of the stored rows.
OLD_FIGURE1 = """
SELECT h.hour_at AS "time", h.cpu AS "CPU #", to_char(h.local_hour, 'YYYY-MM-DD HH24:MI') AS "time of day",
       b.shift_no AS shift, h.qlen_max, h.qlen_delt, h.swap_max, h.busy_max, h.busy_delt, h.ibusy_max,
       h.qlen_avg, h.swap_avg, h.busy_avg, h.ibusy_avg, b.broken
  FROM (SELECT c.hour_at, c.subject, min(c.shift_no) AS shift_no,
               string_agg(c.item || ' ' || c.operator || ' ' || c.limit_value, ', ' ORDER BY c.item) AS broken
          FROM measure.threshold_check('$system', $__timeFrom(), $__timeTo(), 'cpu', NULL, NULL) c
         WHERE c.broken AND c.shift_no IN ($shift) AND c.subject IN ($cpu)
         GROUP BY c.hour_at, c.subject) b
  JOIN measure.cpu_hour h ON h.system_name = '$system' AND h.hour_at = b.hour_at AND h.cpu::text = b.subject
 ORDER BY h.cpu, h.hour_at"""
OLD_SERIES = """
WITH v AS (
    SELECT $__timeGroupAlias(hour_at,$__interval), subject, max(value) AS value,
           max(operator || ' ' || limit_value) AS rule, max(limit_value) AS lim
      FROM measure.threshold_check('$system', $__timeFrom(), $__timeTo(), '{entity}', '{item}') c
     WHERE c.item = '{item}'{cpus} AND c.shift_no IN ($shift)
     GROUP BY 1, 2)
SELECT "time", {label} AS metric, value FROM v
UNION ALL
SELECT DISTINCT "time", 'limit ' || rule, lim FROM v
 ORDER BY 1, 2"""
OLD_ANNOTATION = """
SELECT c.hour_at AS "time", c.hour_at + INTERVAL '1 hour' AS timeend,
       c.entity || ' ' || c.subject || ': ' ||
       string_agg(c.item || ' ' || round(c.value, 1) || ' ' || c.operator || ' ' || c.limit_value, ', ' ORDER BY c.item) AS text,
       c.entity || ',threshold' AS tags
  FROM measure.threshold_check('$system', $__timeFrom(), $__timeTo(), NULL, NULL, NULL) c
 WHERE c.broken AND c.shift_no IN ($shift)
 GROUP BY c.hour_at, c.entity, c.subject
 ORDER BY 1"""


def panels() -> dict[str, str]:
    dash = json.loads((DASHBOARDS / "threshold.json").read_text(encoding="utf-8"))
    out = {p["title"]: p["targets"][0]["rawSql"] for p in dash["panels"]}
    out["annotation"] = next(a["target"]["rawSql"] for a in dash["annotations"]["list"] if "target" in a)
    return out


def series_panels() -> list[tuple[str, str, str, int | None]]:
    """(title, entity, item, top) of every threshold graph."""
    out = []
    for title in panels():
        if "(limit" in title:
            entity, item = title.split(" ")[:2]
            top = int(title.rsplit("top ", 1)[1]) if "top " in title else None
            out.append((title, entity.lower(), item, top))
    return out


def run(conn: psycopg.Connection, sql: str, tr: TimeRange, shifts: list[str], cpus: list[str],
        interval_s: int = 3600) -> list[tuple]:
    sql = expand(sql, tr, variables={"system": SYS, "shift": shifts, "cpu": cpus}, multi=["shift", "cpu"],
                 interval_ns=interval_s * 10**9)
    return conn.execute(sql).fetchall()


@pytest.fixture
def db(dash_db: str):
    """The simulated week as its owner, in a transaction rolled back after the test."""
    with psycopg.connect(dash_db) as c:
        yield c
        c.rollback()


# ------------------------------------------------------------------ the reference: every hour evaluated

def evaluation(conn) -> list[tuple]:
    """measure.threshold_check without p_broken: every threshold on every hour, evaluated now."""
    return conn.execute("SELECT entity, subject, hour_at, item, value, operator, limit_value, broken "
                        "FROM measure.threshold_check(%s, %s, %s)", (SYS, ALL.start, ALL.end)).fetchall()


def expected_rollup(conn) -> set[tuple]:
    """threshold_rollup as (grain, entity, item, start_at, shift_no, subject, end_at, bucket, hours,
    vmax, vmin, broken_hours, rules, low), from the full evaluation."""
    tz, shifts = shifts_of(conn)
    values: dict[tuple, Decimal | None] = {}
    broken: dict[tuple, bool] = defaultdict(bool)
    rules: dict[tuple, list[tuple[str, Decimal]]] = defaultdict(list)
    for entity, subject, hour, item, value, op, limit, brk in evaluation(conn):
        values[entity, subject, hour, item] = value
        broken[entity, subject, hour, item] |= bool(brk)
        if (op, limit) not in rules[entity, item]:
            rules[entity, item].append((op, limit))
    cells: dict[tuple, list] = defaultdict(list)
    stars: dict[tuple, dict[datetime, bool]] = defaultdict(dict)
    for (entity, subject, hour, item), value in values.items():
        day, no, start, end = shift_of(hour, tz, shifts)
        cells[entity, item, start, no, subject, end, day].append((value, broken[entity, subject, hour, item]))
        star = stars[entity, start, no, subject, end, day]
        star[hour] = star.get(hour, False) or broken[entity, subject, hour, item]
    out = set()
    months: dict[tuple, list] = defaultdict(list)
    for (entity, item, start, no, subject, end, day), cell in cells.items():
        vals = [v for v, _ in cell if v is not None]
        rs = sorted(rules[entity, item])
        row = (entity, item, no, subject, len(vals), max(vals, default=None), min(vals, default=None),
               sum(b for _, b in cell), ", ".join(f"{o} {v}" for o, v in rs), all(o in ("<", "<=") for o, _ in rs))
        out.add(("shift", entity, item, start, no, subject, end, day, *row[4:]))
        months[entity, item, no, subject, day.replace(day=1)].append(row)
    for (entity, start, no, subject, end, day), hours in stars.items():
        out.add(("shift", entity, "*", start, no, subject, end, day, len(hours), None, None,
                 sum(hours.values()), None, False))
        months[entity, "*", no, subject, day.replace(day=1)].append(
            (entity, "*", no, subject, len(hours), None, None, sum(hours.values()), None, False))
    for (entity, item, no, subject, month), rows in months.items():
        first = datetime(month.year, month.month, 1, tzinfo=tz)
        nxt = datetime(month.year + month.month // 12, month.month % 12 + 1, 1, tzinfo=tz)
        vmax = [r[5] for r in rows if r[5] is not None]
        vmin = [r[6] for r in rows if r[6] is not None]
        out.add(("month", entity, item, first.astimezone(UTC), no, subject, nxt.astimezone(UTC), month,
                 sum(r[4] for r in rows), max(vmax, default=None), min(vmin, default=None),
                 sum(r[7] for r in rows), rows[0][8], rows[0][9]))
    return out


def stored_rollup(conn) -> set[tuple]:
    return set(conn.execute(
        "SELECT grain, entity, item, start_at, shift_no, subject, end_at, bucket, hours, vmax, vmin, broken_hours, "
        "rules, low FROM _measure.threshold_rollup WHERE system_id = measure.system_id_of(%s)", (SYS,)).fetchall())


def stored_breaches(conn) -> list[tuple]:
    return sorted(conn.execute(
        "SELECT entity, subject, hour_at, item, value, operator, limit_value FROM _measure.hour_breach "
        "WHERE system_id = measure.system_id_of(%s)", (SYS,)).fetchall())


def evaluated_breaches(conn) -> list[tuple]:
    return sorted(r[:7] for r in evaluation(conn) if r[7])


def assert_resolved(conn) -> None:
    assert conn.execute("SELECT count(*) FROM _measure.breach_state").fetchone() == (1,)
    assert stored_breaches(conn) == evaluated_breaches(conn)
    stored, expected = stored_rollup(conn), expected_rollup(conn)
    assert stored == expected, (sorted(stored - expected)[:5], sorted(expected - stored)[:5])


# ------------------------------------------------------------------ the simulated week

def test_the_week_breaks_thresholds_of_every_kind(db) -> None:
    got = dict(db.execute("SELECT entity || ' ' || item, count(*) FROM _measure.hour_breach GROUP BY 1").fetchall())
    assert got.get("cpu busy_max", 0) > 0 and got.get("cpu qlen_max", 0) > 0      # the simulated load
    assert got.get("disc busy_max", 0) > 0 and got.get("line write_busy_max", 0) > 0    # staged limits
    assert got.get("line requests_per_second", 0) > 0                                # a lower limit


def test_stored_rows_equal_the_full_evaluation(db) -> None:
    assert_resolved(db)


@pytest.mark.parametrize(("shifts", "cpus"), [(["1", "2", "3"], ["0", "1"]), (["2", "3"], ["0"])])
def test_hour_tier_panels_equal_the_old_computation(shifts, cpus, reader) -> None:
    new = panels()
    old = run(reader, OLD_FIGURE1, WEEK, shifts, cpus)
    got = run(reader, new["Threshold report (Figure 1)"], WEEK, shifts, cpus)
    assert [r[:4] + r[5:] for r in got] == old and old
    assert all(r[4] == 1 for r in got)
    anno_old = run(reader, OLD_ANNOTATION, WEEK, shifts, cpus)
    assert sorted(run(reader, new["annotation"], WEEK, shifts, cpus)) == sorted(anno_old) and anno_old
    for title, entity, item, top in series_panels():
        label = "'CPU ' || subject" if entity == "cpu" else "subject"
        sql = OLD_SERIES.format(entity=entity, item=item, label=label,
                                cpus=" AND c.subject IN ($cpu)" if entity == "cpu" else "")
        for interval in (3600, 6 * 3600):
            old = run(reader, sql, WEEK, shifts, cpus, interval)
            if top:   # the top subjects by their largest value, then only their rows and buckets
                best: dict[str, Decimal] = {}
                for _, metric, value in old:
                    if not metric.startswith("limit ") and value is not None:
                        best[metric] = max(best.get(metric, value), value)
                keep = sorted(best, key=lambda m: (-best[m], m))[:top]
                times = {t for t, m, _ in old if m in keep}
                old = [r for r in old if r[1] in keep or (r[1].startswith("limit ") and r[0] in times)]
                assert len({m for _, m, _ in old if not m.startswith("limit ")}) == min(top, len(best))
            assert run(reader, new[title], WEEK, shifts, cpus, interval) == old, (title, interval)
            assert old, title


def _bucket(t: datetime, interval_s: int) -> Decimal:
    """$__timeGroupAlias(t, interval) without TimescaleDB: the bucket's start in epoch seconds."""
    return Decimal(int(t.timestamp()) // interval_s * interval_s)


@pytest.mark.parametrize("tr", [SHIFT_RANGE, MONTH_RANGE], ids=["shift", "month"])
def test_rollup_tier_panels_equal_the_evaluation_grouped(tr, db, reader) -> None:
    grain = "shift" if tr is SHIFT_RANGE else "month"
    shifts, cpus = ["1", "2", "3"], ["0", "1"]
    rows = [r for r in expected_rollup(db) if r[0] == grain]
    assert rows
    names = {no: name for no, name, *_ in shifts_of(db)[1]}
    rules = {(e, i): (op, lim) for e, i, op, lim in db.execute(
        "SELECT entity, item, operator, limit_value FROM measure.threshold WHERE system_name = %s", (SYS,))}
    new = panels()

    # Figure 1: one row per CPU and bucket with a breaking hour
    star = {(r[3], r[4], r[5]): r for r in rows if r[1] == "cpu" and r[2] == "*" and r[11] > 0}
    items = ("qlen_max", "qlen_delt", "swap_max", "busy_max", "busy_delt", "ibusy_max")
    by_cell = {(r[3], r[4], r[5], r[2]): r for r in rows if r[1] == "cpu"}
    expected = []
    for (start, no, subject), s in star.items():
        label = s[7].strftime("%Y-%m-%d" if grain == "shift" else "%Y-%m") + " " + names[no]
        vals = [by_cell[start, no, subject, i][10 if by_cell[start, no, subject, i][13] else 9]
                if (start, no, subject, i) in by_cell else None for i in items]
        broken = ", ".join(f"{r[2]} {r[12]} ({r[11]} h)" for r in sorted(
            (r for k, r in by_cell.items() if k[:3] == (start, no, subject) and k[3] != "*" and r[11] > 0),
            key=lambda r: r[2]))
        expected.append((start, int(subject), label, no, s[11], *vals, None, None, None, None, broken))
    expected.sort(key=lambda r: (r[1], r[0], r[3]))
    assert run(reader, new["Threshold report (Figure 1)"], tr, shifts, cpus) == expected and expected

    # the graphs: per $__interval bucket and subject the largest value of the buckets in it
    for title, entity, item, top in series_panels():
        interval = 6 * 3600 if grain == "shift" else 86400
        op, lim = rules[entity, item]
        vals: dict[tuple, Decimal] = {}
        for r in rows:
            if r[1] == entity and r[2] == item and r[9] is not None and (entity != "cpu" or r[5] in cpus):
                k = (_bucket(r[3], interval), r[5])
                vals[k] = max(vals.get(k, r[9]), r[9])
        if top:
            best: dict[str, Decimal] = {}
            for (_, s), v in vals.items():
                best[s] = max(best.get(s, v), v)
            keep = set(sorted(best, key=lambda s: (-best[s], s))[:top])
            vals = {k: v for k, v in vals.items() if k[1] in keep}
        label = (lambda s: "CPU " + s) if entity == "cpu" else (lambda s: s)
        want = sorted([(t, label(s), v) for (t, s), v in vals.items()]
                      + [(t, f"limit {op} {lim}", lim) for t in {t for t, _ in vals}])
        assert run(reader, new[title], tr, shifts, cpus, interval) == want, title

    # annotations: per bucket and entity type, each broken item with its hours, subjects and worst subject
    per_item: dict[tuple, list] = defaultdict(list)
    for r in rows:
        if r[2] != "*" and r[11] > 0:
            per_item[r[3], r[1], r[2]].append(r)
    texts: dict[tuple, list[str]] = defaultdict(list)
    ends: dict[tuple, datetime] = {}
    for (start, entity, item), rs in sorted(per_item.items()):
        hours: dict[str, int] = defaultdict(int)
        for r in rs:
            hours[r[5]] += r[11]
        worst, most = min(hours.items(), key=lambda kv: (-kv[1], kv[0]))
        n = len(hours)
        texts[start, entity].append(f"{item} {rs[0][12]} {sum(hours.values())} h, {n} subject{'s' if n > 1 else ''}, "
                                    f"most {worst} ({most} h)")
        ends[start, entity] = max(ends.get((start, entity), rs[0][6]), max(r[6] for r in rs))
    want = sorted((start, ends[start, entity], f"{entity}: " + "; ".join(t), f"{entity},threshold")
                  for (start, entity), t in texts.items())
    assert sorted(run(reader, new["annotation"], tr, shifts, cpus)) == want and want


def test_the_shift_and_cpu_filters_apply_to_rollup_tiers(reader) -> None:
    new = panels()["Threshold report (Figure 1)"]
    every = run(reader, new, SHIFT_RANGE, ["1", "2", "3"], ["0", "1"])
    some = run(reader, new, SHIFT_RANGE, ["2"], ["0"])
    assert some == [r for r in every if r[3] == 2 and r[1] == 0]


# ------------------------------------------------------------------ changes after condensing

def test_a_threshold_edit_is_resolved_in_the_same_transaction(db) -> None:
    db.execute("UPDATE _measure.threshold SET limit_value = 40 WHERE system_id IS NULL AND entity = 'cpu' "
               "AND item = 'busy_max'")
    assert_resolved(db)
    assert ("cpu", "busy_max", ">", Decimal(40)) in {(r[0], r[3], r[5], r[6]) for r in stored_breaches(db)}
    db.execute("DELETE FROM _measure.threshold WHERE system_id IS NOT NULL AND entity = 'disc'")
    assert_resolved(db)
    assert not [r for r in stored_breaches(db) if r[0] == "disc"]
    db.execute("INSERT INTO _measure.threshold (system_id, entity, item, operator, limit_value) "
               "VALUES (measure.system_id_of(%s), 'tmf', 'trans_avg', '>', 0.1), "
               "(measure.system_id_of(%s), 'cpu', 'qlen_max', '>', 0.5)", (SYS, SYS))   # a new entity, an override
    assert_resolved(db)
    assert {"tmf"} <= {r[0] for r in stored_breaches(db)}
    db.execute("UPDATE _measure.threshold SET enabled = false WHERE entity = 'process'")
    assert_resolved(db)
    assert not [r for r in stored_rollup(db) if r[1] == "process"]
    db.execute("TRUNCATE _measure.threshold")
    assert stored_breaches(db) == [] and stored_rollup(db) == set()
    assert_resolved(db)


def test_a_threshold_that_names_no_column_leaves_the_reader_to_fail(db) -> None:
    db.execute("INSERT INTO _measure.threshold (system_id, entity, item, operator, limit_value) "
               "VALUES (NULL, 'cpu', 'no_such_item', '>', 1)")
    assert db.execute("SELECT count(*) FROM _measure.breach_state").fetchone() == (0,)
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="no_such_item"):
        db.execute("SELECT * FROM measure.threshold_table(%s, %s, %s)", (SYS, SHIFT_RANGE.start, SHIFT_RANGE.end))


def test_late_data_is_resolved_when_its_hour_is_condensed(db) -> None:
    # a second measurement measured CPU 1 over a quiet night hour and a minute, fully busy: it
    # has more measured time than the default measurement there, so it counts for that hour
    hour = simulated.START + timedelta(days=2, hours=1)
    sys_id, entity, code, n = db.execute(
        "SELECT e.system_id, e.entity_id, e.type_code, (SELECT count(*) FROM measure.counter_def d "
        "WHERE d.entity = 'cpu') FROM measure.entity e WHERE e.entity = 'cpu' AND e.cpu = 1").fetchone()
    busy = db.execute("SELECT position FROM measure.counter_def WHERE entity = 'cpu' AND counter = 'cpu_busy_time'"
                      ).fetchone()[0]
    assert db.execute("SELECT busy_max FROM measure.cpu_hour WHERE cpu = 1 AND hour_at = %s", (hour,)).fetchone()[0] < 70
    meas = db.execute("INSERT INTO _measure.measurement (system_id, name, contab, state) "
                      "VALUES (%s, 'LATE', '{}', 'stopped') RETURNING measurement_id", (sys_id,)).fetchone()[0]
    counters = [0] * n
    counters[busy - 1] = 3_660_000_000   # 61 minutes from the hour's start: more than the default's 60
    db.execute("INSERT INTO _measure.interval_record (measurement_id, entity_id, record_at, from_at, to_at, delta_us, "
               "closing_kind, system_id, type_code, cpu, counters) "
               "VALUES (%s, %s, %s, %s, %s, 3660000000, 3, %s, %s, 1, %s)",
               (meas, entity, hour, hour, hour + timedelta(minutes=61), sys_id, code, counters))
    db.execute("SELECT _measure.note_intervals(%s::smallint, %s, %s)", (sys_id, hour, hour))
    assert db.execute("SELECT _measure.condense(%s::smallint)", (sys_id,)).fetchone() == (1,)
    assert ("cpu", "1", hour, "busy_max") in {r[:4] for r in stored_breaches(db)}
    assert_resolved(db)
