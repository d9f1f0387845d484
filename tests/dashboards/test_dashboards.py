"""Every dashboard and alert rule (style P14): the JSON is valid and complete, the SQL uses macros
safely and reads only measure.* objects that exist, and every query, expanded exactly as
Grafana would (grafana.py; TimescaleDB off and on), runs as measure_reader on a database filled by
a simulated week (simulated.py), returns rows, and has the shape its panel needs."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pglast
import psycopg
import pytest
from pglast import ast
from pglast.visitors import Visitor

from tests.dashboards import simulated
from tests.dashboards.grafana import TimeRange, expand, expand_macros
from tests.dashboards.panels import (
    Query,
    alert_queries,
    alert_rules,
    dashboard_files,
    iter_panels,
    macro_problems,
    queries_of,
)

FILES = dashboard_files()
QUERIES = [q for f in FILES for q in queries_of(f)]
ALERTS = alert_queries()
DS_TYPE = "grafana-postgresql-datasource"
TIME_TYPES = {1184, 1114, 1700, 701, 20, 23}  # timestamptz, timestamp, numeric, float8, int8, int4
NUMERIC_TYPES = {1700, 701, 700, 20, 21, 23}
STRING_TYPES = {25, 1043, 19, 18}
WEEK = TimeRange(simulated.START, simulated.START + timedelta(days=simulated.DAYS))
TODAY_DASHBOARDS = {"sql-ipu"}
RANGES = {  # one range per tier measure.dashboard_tier picks
    "hour": (WEEK, 3600),
    "shift": (TimeRange(simulated.START - timedelta(days=20), simulated.START + timedelta(days=20)), 6 * 3600),
    "month": (TimeRange(simulated.START - timedelta(days=150), simulated.START + timedelta(days=60)), 86400),
}


def test_there_are_dashboards() -> None:
    stems = {f.stem for f in FILES}
    assert {"threshold", "cpu-trend", "cpu", "disc", "lines", "processes", "tmf", "user-counters",
            "transaction-resource", "sql-ipu", "exceptions"} <= stems


# ------------------------------------------------------------------ the JSON

@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_dashboard_json(path: Path) -> None:
    dash = json.loads(path.read_text(encoding="utf-8"))
    assert dash["uid"] == f"measuredb-{path.stem}" and len(dash["uid"]) <= 40
    assert dash["title"] and dash["description"]
    variables = dash["templating"]["list"]
    ds = [v for v in variables if v["type"] == "datasource"]
    assert len(ds) == 1 and ds[0]["name"] == "datasource" and ds[0]["query"] == DS_TYPE
    for v in variables:
        if v["type"] == "query":
            assert v["datasource"] == {"type": DS_TYPE, "uid": "${datasource}"}, v["name"]
    ids = [p["id"] for p in iter_panels(dash)]
    assert len(ids) == len(set(ids))
    for p in iter_panels(dash):
        assert p.get("title"), p
        assert p.get("description"), p["title"]
        assert p["fieldConfig"]["defaults"].get("unit"), p["title"]
        assert p["datasource"] == {"type": DS_TYPE, "uid": "${datasource}"}, p["title"]
        for t in p["targets"]:
            assert t["datasource"]["uid"] == "${datasource}" and t["rawQuery"] and t["rawSql"].strip()
            assert t["format"] == ("time_series" if p["type"] == "timeseries" else "table"), p["title"]
    for a in dash["annotations"]["list"]:
        if "target" in a:
            assert a["datasource"]["uid"] == "${datasource}"


@pytest.mark.parametrize("q", QUERIES + ALERTS, ids=lambda q: q.where)
def test_macros_are_used_safely(q: Query) -> None:
    assert macro_problems(q.sql) == []


# ------------------------------------------------------------------ against the catalog

class _Refs(Visitor):
    def __init__(self) -> None:
        self.relations: list[tuple[str | None, str, str | None]] = []  # schema, name, alias
        self.functions: list[tuple[str | None, str, str | None]] = []
        self.columns: list[tuple[str, str]] = []  # alias, column
        self.ctes: set[str] = set()

    def visit_CommonTableExpr(self, ancestors, node: ast.CommonTableExpr) -> None:
        self.ctes.add(node.ctename)

    def visit_RangeVar(self, ancestors, node: ast.RangeVar) -> None:
        self.relations.append((node.schemaname, node.relname, node.alias.aliasname if node.alias else None))

    def visit_RangeFunction(self, ancestors, node: ast.RangeFunction) -> None:
        fc = node.functions[0][0]
        if isinstance(fc, ast.FuncCall):
            names = [n.sval for n in fc.funcname]
            self.functions.append((names[0] if len(names) > 1 else None, names[-1],
                                   node.alias.aliasname if node.alias else None))

    def visit_FuncCall(self, ancestors, node: ast.FuncCall) -> None:
        names = [n.sval for n in node.funcname]
        if len(names) > 1:
            self.functions.append((names[0], names[-1], None))

    def visit_ColumnRef(self, ancestors, node: ast.ColumnRef) -> None:
        f = [x.sval for x in node.fields if isinstance(x, ast.String)]
        if len(f) == 2:
            self.columns.append((f[0], f[1]))


@pytest.fixture(scope="module")
def catalog(dash_db: str) -> dict:
    with psycopg.connect(dash_db) as c:
        rel_cols: dict[str, set[str]] = {}
        for t, col in c.execute("SELECT table_name, column_name FROM information_schema.columns "
                                "WHERE table_schema = 'measure'"):
            rel_cols.setdefault(t, set()).add(col)
        fn_cols: dict[str, set[str]] = {}
        for r, in c.execute("SELECT routine_name FROM information_schema.routines WHERE routine_schema = 'measure'"):
            fn_cols.setdefault(r, set())
        for r, p in c.execute(
                "SELECT r.routine_name, p.parameter_name FROM information_schema.routines r "
                "JOIN information_schema.parameters p ON p.specific_schema = r.specific_schema "
                "AND p.specific_name = r.specific_name WHERE r.routine_schema = 'measure' "
                "AND p.parameter_mode IN ('OUT', 'INOUT')"):
            fn_cols[r].add(p)
    return {"relations": rel_cols, "functions": fn_cols}


@pytest.mark.parametrize("q", QUERIES + ALERTS, ids=lambda q: q.where)
def test_reads_only_known_measure_objects(q: Query, catalog: dict) -> None:
    sql = expand(q.sql, WEEK, variables={"system": "\\DASH", "cpu": ["0"], "shift": ["1"],
                                         "volume": ["$X"], "line": ["$X"], "process": ["$X"],
                                         "capacity": "70", "min_cpu_seconds": "600", "max_priority": "200",
                                         "txprocess": "", "count_counter": "TRANS", "queue_counter": "Q",
                                         "top": "10"},
                 multi=["cpu", "shift", "volume", "line", "process"])
    refs = _Refs()
    refs(pglast.parse_sql(sql))
    aliases: dict[str, set[str]] = {}
    for schema, name, alias in refs.relations:
        if schema is None and name in refs.ctes:
            continue
        assert schema == "measure", f"{q.where}: reads {schema}.{name}; only measure.* is public"
        assert name in catalog["relations"], f"{q.where}: no view measure.{name}"
        aliases[alias or name] = catalog["relations"][name]
    for schema, name, alias in refs.functions:
        if schema in (None, "pg_catalog"):
            continue  # built-ins (generate_series, round; AT TIME ZONE parses as pg_catalog.timezone)
        assert schema == "measure", f"{q.where}: calls {schema}.{name}"
        assert name in catalog["functions"], f"{q.where}: no function measure.{name}"
        if alias:
            aliases[alias] = catalog["functions"][name]
    for alias, col in refs.columns:
        if aliases.get(alias):
            assert col in aliases[alias], f"{q.where}: {alias}.{col} does not exist"


# ------------------------------------------------------------------ executed as Grafana would

def _variables(reader: psycopg.Connection, path: Path, tr: TimeRange) -> tuple[dict, list[str]]:
    """Run the dashboard's variable queries in order (All for multi-value variables, the first
    value otherwise; custom and textbox variables take their default)."""
    dash = json.loads(path.read_text(encoding="utf-8"))
    values: dict[str, object] = {}
    multi = []
    for v in dash["templating"]["list"]:
        if v["type"] == "query":
            sql = expand(v["query"], tr, variables=values, multi=multi)
            cur = reader.execute(sql)
            cols = [d.name for d in cur.description]
            rows = cur.fetchall()
            assert rows, f"variable {v['name']} has no values"
            k = cols.index("__value") if "__value" in cols else 0
            vals = [str(r[k]) for r in rows]
            if v.get("multi") or v.get("includeAll"):
                values[v["name"]] = vals
                multi.append(v["name"])
            else:
                values[v["name"]] = vals[0]
        elif v["type"] in ("custom", "textbox"):
            values[v["name"]] = v["current"]["value"]
    return values, multi


def check_shape(q: Query, cur: psycopg.Cursor, rows: list) -> None:
    cols = [(d.name, d.type_code) for d in cur.description]
    names = [n for n, _ in cols]
    if q.kind in ("timeseries", "alert") or q.fmt == "time_series":
        assert "time" in names, f"{q.where}: no time column in {names}"
        t = names.index("time")
        assert cols[t][1] in TIME_TYPES, f"{q.where}: time column type {cols[t][1]}"
        others = [c for c in cols if c[0] != "time"]
        assert any(tc in NUMERIC_TYPES for _, tc in others), f"{q.where}: no numeric value column"
        assert all(tc in NUMERIC_TYPES | STRING_TYPES for _, tc in others), f"{q.where}: {cols}"
        times = [r[t] for r in rows]
        assert times == sorted(times), f"{q.where}: rows are not ordered by time"
    elif q.kind == "annotation":
        assert {"time", "text"} <= set(names), names
    elif q.kind == "barchart":
        assert any(tc in STRING_TYPES for _, tc in cols) and any(tc in NUMERIC_TYPES for _, tc in cols)
    else:
        assert cols


@pytest.mark.parametrize("timescaledb", [False, True], ids=["plain", "timescaledb"])
@pytest.mark.parametrize("tier", list(RANGES))
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_query_runs_and_returns_rows(path: Path, tier: str, timescaledb: bool,
                                           request: pytest.FixtureRequest) -> None:
    # the H-, J- and L-series panels read \\TODAY, in a database of its own (conftest.py)
    reader = request.getfixturevalue("today_reader" if path.stem in TODAY_DASHBOARDS else "reader")
    tr, interval_s = RANGES[tier]
    values, multi = _variables(reader, path, tr)
    assert reader.execute("SELECT measure.dashboard_tier(%s, %s)", (tr.start, tr.end)).fetchone()[0] == tier
    for q in queries_of(path):
        sql = expand(q.sql, tr, variables=values, multi=multi, interval_ns=interval_s * 10**9,
                     timescaledb=timescaledb)
        try:
            cur = reader.execute(sql)
        except psycopg.Error as e:
            raise AssertionError(f"{q.where} ({tier}, timescaledb={timescaledb}): {e}\n{sql}") from e
        rows = cur.fetchall()
        assert rows, f"{q.where} ({tier}, timescaledb={timescaledb}) returned no rows\n{sql}"
        check_shape(q, cur, rows)


@pytest.mark.parametrize("timescaledb", [False, True], ids=["plain", "timescaledb"])
def test_alert_queries_run_and_fire_on_a_breach(timescaledb: bool, dash_db: str, reader: psycopg.Connection) -> None:
    # backend-only path (no browser): evaluated at the end of the week's first hour in which a
    # CPU (simulated load), a disc and a line (staged limits) all broke a threshold
    with psycopg.connect(dash_db) as c:
        hour = c.execute("SELECT hour_at FROM _measure.hour_breach GROUP BY hour_at "
                         "HAVING count(DISTINCT entity) FILTER (WHERE entity IN ('cpu', 'disc', 'line')) = 3 "
                         "ORDER BY hour_at LIMIT 1").fetchone()
    assert hour, "no hour of the simulated week breaks a CPU, a disc and a line threshold"
    fired = {}
    for q in ALERTS:
        end = hour[0] + timedelta(hours=1)
        tr = TimeRange(end - timedelta(seconds=q.extra["range_s"]), end)
        sql = expand_macros(q.sql, tr, interval_ns=60 * 10**9, timescaledb=timescaledb)
        cur = reader.execute(sql)
        rows = cur.fetchall()
        if "measuredb-threshold-" not in q.where:
            continue  # the exception rule: below
        entity = q.where.split("measuredb-threshold-")[1].split("/")[0]
        if entity in ("userdef", "tmf"):  # no thresholds in force: no data, which the rule treats as OK
            assert rows == []
            continue
        assert rows, q.where
        check_shape(q, cur, rows)
        fired[entity] = max(r[-1] for r in rows)
    assert fired["cpu"] > 0 and fired["disc"] > 0 and fired["line"] > 0


@pytest.mark.parametrize("timescaledb", [False, True], ids=["plain", "timescaledb"])
def test_the_exception_alert_fires_on_a_major_exception(timescaledb: bool, dash_db: str,
                                                        reader: psycopg.Connection) -> None:
    # evaluated at the end of the first hour with a major exception (the week against a week
    # before it at half the load, tests/dashboards/conftest.py), and of an hour before the week
    with psycopg.connect(dash_db) as c:
        hour = c.execute("SELECT min(hour_at) FROM _measure.hour_baseline WHERE severity = 2").fetchone()[0]
    assert hour is not None
    (q,) = [q for q in ALERTS if "measuredb-exception-major" in q.where]
    fired = []
    for end in (hour + timedelta(hours=1), simulated.START):
        tr = TimeRange(end - timedelta(seconds=q.extra["range_s"]), end)
        cur = reader.execute(expand_macros(q.sql, tr, interval_ns=60 * 10**9, timescaledb=timescaledb))
        rows = cur.fetchall()
        if rows:
            check_shape(q, cur, rows)
        fired.append(max((r[-1] for r in rows), default=0))
    assert fired[0] > 0 and fired[1] == 0


def test_alert_rules_are_complete() -> None:
    rules = [r for r in alert_rules() if r["uid"] != "measuredb-exception-major"]
    assert {r["uid"] for r in alert_rules()} - {r["uid"] for r in rules} == {"measuredb-exception-major"}
    assert {r["uid"] for r in rules} == {f"measuredb-threshold-{e}" for e in
                                         ("cpu", "disc", "line", "process", "userdef", "tmf")}
    for r in rules:
        refs = {d["refId"]: d for d in r["data"]}
        assert r["condition"] in refs
        assert refs["A"]["datasourceUid"] == "measuredb"
        assert refs["B"]["model"]["type"] == "reduce" and refs["B"]["model"]["expression"] == "A"
        c = refs["C"]["model"]
        assert c["type"] == "threshold" and c["expression"] == "B"
        assert c["conditions"][0]["evaluator"] == {"type": "gt", "params": [0]}
        assert "measure.threshold_check" in refs["A"]["model"]["rawSql"]
