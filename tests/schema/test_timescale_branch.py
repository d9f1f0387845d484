"""The TimescaleDB branch of schema/, checked statically (no TimescaleDB here).

The rules come from the TimescaleDB documentation and issue tracker (README "TimescaleDB"):
unique constraints of a hypertable include its time column; the schema runner's single
transaction admits no WITH DATA continuous aggregate, no CONCURRENTLY and no
refresh_continuous_aggregate; refreshes run only from procedures, by static CALL, outside
query loops and EXCEPTION blocks, each followed by COMMIT; continuous aggregates use only
immutable functions and no joins, ORDER BY, DISTINCT or window functions; every add_*_policy
and add_job is idempotent; and the plain and TimescaleDB variants define the same objects
with the same columns, so that the shared SQL reads both alike.
Every SQL file and every PL/pgSQL body parses (tests/schema/test_runner.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pglast
import pglast.stream
import psycopg
import pytest
from pglast import ast
from pglast.enums import ConstrType

from collector import schema as runner

SCHEMA = runner.SCHEMA_DIR
PLAN = runner.load_plan()
ALL_FILES = PLAN.versioned + PLAN.idempotent
TS_FILES = [f for f in ALL_FILES if f.variant == "timescale"]
RUN_BY_RUNNER = ALL_FILES  # every file runs inside the runner's one transaction


# ---------------------------------------------------------------- helpers

def walk(node) -> Iterator[ast.Node]:
    if isinstance(node, (list, tuple)):
        for x in node:
            yield from walk(x)
    elif isinstance(node, ast.Node):
        yield node
        for name in type(node).__slots__:
            yield from walk(getattr(node, name, None))


def stmts(f) -> list[ast.Node]:
    return [r.stmt for r in pglast.parse_sql(f.text)]


def funcname(call: ast.FuncCall) -> str:
    return call.funcname[-1].sval


def qualified(rv: ast.RangeVar) -> str:
    return f"{rv.schemaname or 'public'}.{rv.relname}"


def const_text(node) -> str | None:
    if isinstance(node, ast.A_Const) and isinstance(node.val, ast.String):
        return node.val.sval
    if isinstance(node, ast.TypeCast):
        return const_text(node.arg)
    return None


def named_args(call: ast.FuncCall) -> dict[str, ast.Node]:
    return {a.name: a.arg for a in call.args or () if isinstance(a, ast.NamedArgExpr)}


def hypertables() -> dict[str, str]:
    """Hypertable -> its time column, from create_hypertable(..., by_range('col', ...))."""
    found = {}
    for f in TS_FILES:
        for node in walk(stmts(f)):
            if isinstance(node, ast.FuncCall) and funcname(node) == "create_hypertable":
                table = const_text(node.args[0])
                dim = node.args[1]
                assert isinstance(dim, ast.FuncCall) and funcname(dim) == "by_range", f.path.name
                found[table] = const_text(dim.args[0])
    return found


def caggs() -> dict[str, ast.CreateTableAsStmt]:
    out = {}
    for f in TS_FILES:
        for s in stmts(f):
            if isinstance(s, ast.CreateTableAsStmt) and any(
                    o.defnamespace == "timescaledb" and o.defname == "continuous" for o in s.into.options or ()):
                out[qualified(s.into.rel)] = s
    return out


def routines(files) -> Iterator[tuple[object, ast.CreateFunctionStmt, str, str]]:
    """(file, statement, language, body) for every CREATE FUNCTION / PROCEDURE."""
    for f in files:
        text = f.text
        for raw in pglast.parse_sql(text):
            s = raw.stmt
            if not isinstance(s, ast.CreateFunctionStmt):
                continue
            opts = {o.defname: o.arg for o in s.options or ()}
            lang = opts["language"].sval if "language" in opts else "sql"
            yield f, s, lang, text[raw.stmt_location:raw.stmt_location + raw.stmt_len]


def target_name(t: ast.ResTarget) -> str:
    return t.name or t.val.fields[-1].sval


def routine_name(s: ast.CreateFunctionStmt) -> str:
    return ".".join(n.sval for n in s.funcname)


# ---------------------------------------------------------------- hypertables

def test_the_branch_has_its_hypertables_and_aggregates() -> None:
    assert hypertables() == {"_measure.counter_copy": "copy_at", "_measure.interval_record": "from_at"}
    assert set(caggs()) == {f"_measure.{e}_hour" for e in ("cpu", "disc", "line", "process", "userdef", "tmf")}


def test_unique_constraints_of_hypertables_include_the_time_column() -> None:
    tables = hypertables()
    checked = 0
    for f in ALL_FILES:
        for s in stmts(f):
            if isinstance(s, ast.CreateStmt) and qualified(s.relation) in tables:
                time_col = tables[qualified(s.relation)]
                for elt in s.tableElts:
                    cons = [elt] if isinstance(elt, ast.Constraint) else list(getattr(elt, "constraints", None) or ())
                    for c in cons:
                        if c.contype in (ConstrType.CONSTR_PRIMARY, ConstrType.CONSTR_UNIQUE,
                                         ConstrType.CONSTR_EXCLUSION):
                            keys = [k.sval for k in c.keys or ()] or [elt.colname]
                            assert time_col in keys, (f.path.name, s.relation.relname, keys)
                            checked += 1
            if isinstance(s, ast.IndexStmt) and s.unique and qualified(s.relation) in tables:
                cols = [p.name for p in s.indexParams]
                assert tables[qualified(s.relation)] in cols, (f.path.name, s.idxname, cols)
            if isinstance(s, ast.AlterTableStmt) and qualified(s.relation) in tables:
                for cmd in s.cmds:
                    c = getattr(cmd, "def_", None)
                    if isinstance(c, ast.Constraint) and c.contype in (ConstrType.CONSTR_PRIMARY,
                                                                       ConstrType.CONSTR_UNIQUE):
                        assert tables[qualified(s.relation)] in [k.sval for k in c.keys], f.path.name
    assert checked == 2


def test_the_compression_order_covers_the_primary_keys() -> None:
    # a key column that is neither segmentby nor orderby makes TimescaleDB decompress whole
    # segments to check a row written into a compressed chunk (and warn at ALTER TABLE); the
    # settings in force are the last ones the files set (a DO block of 070 included)
    settings: dict[str, set[str]] = {}
    for f in TS_FILES:
        for table, opts in re.findall(r"ALTER TABLE (\S+) SET \((.*?)\);", f.text, re.DOTALL):
            cols = set()
            for key in ("compress_segmentby", "compress_orderby"):
                m = re.search(rf"timescaledb\.{key} = '([^']*)'", opts)
                assert m, (f.path.name, table, key)
                cols |= {c.split()[0] for c in m.group(1).split(",")}
            settings[table] = cols
    keys = {}
    for f in ALL_FILES:
        for s in stmts(f):
            if isinstance(s, ast.CreateStmt) and qualified(s.relation) in hypertables():
                for elt in s.tableElts:
                    if isinstance(elt, ast.Constraint) and elt.contype == ConstrType.CONSTR_PRIMARY:
                        keys[qualified(s.relation)] = {k.sval for k in elt.keys}
    assert set(keys) == set(settings) == set(hypertables())
    for table, key in keys.items():
        assert key <= settings[table], (table, key - settings[table])


def test_no_foreign_key_points_at_or_leaves_a_hypertable() -> None:
    tables = hypertables()
    for f in ALL_FILES:
        for s in stmts(f):
            for c in walk(s):
                if isinstance(c, ast.Constraint) and c.contype == ConstrType.CONSTR_FOREIGN:
                    assert qualified(c.pktable) not in tables, (f.path.name, c.pktable.relname)
                    if isinstance(s, (ast.CreateStmt, ast.AlterTableStmt)):
                        assert qualified(s.relation) not in tables, (f.path.name, s.relation.relname)


# ---------------------------------------------------------------- the runner's transaction

@pytest.mark.parametrize("f", RUN_BY_RUNNER, ids=lambda f: f.path.name)
def test_nothing_that_cannot_run_in_a_transaction_block(f) -> None:
    for s in stmts(f):
        if isinstance(s, ast.CreateTableAsStmt) and s.objtype == pglast.enums.ObjectType.OBJECT_MATVIEW:
            assert s.into.skipData, f"{f.path.name}: {s.into.rel.relname} must be created WITH NO DATA"
        if isinstance(s, ast.IndexStmt):
            assert not s.concurrent, f"{f.path.name}: CREATE INDEX CONCURRENTLY {s.idxname}"
        assert not (isinstance(s, ast.ReindexStmt) and any(
            o.defname == "concurrently" for o in s.params or ())), f.path.name
        assert not isinstance(s, (ast.RefreshMatViewStmt, ast.VacuumStmt, ast.CreatedbStmt,
                                  ast.TransactionStmt)), f"{f.path.name}: {type(s).__name__}"
        if isinstance(s, ast.CallStmt):
            assert funcname(s.funccall) not in {"refresh_continuous_aggregate", "convert_to_columnstore",
                                                "add_columnstore_policy"}, f.path.name
    # ... nor hidden in a DO block or a function run by this file
    for node in walk(stmts(f)):
        if isinstance(node, ast.DoStmt):
            body = node.args[0].arg.sval
            assert "refresh_continuous_aggregate" not in body and "COMMIT" not in body.upper().split(), f.path.name


def test_refreshes_run_only_where_timescaledb_allows_them() -> None:
    calls = 0
    for f, s, lang, text in routines(ALL_FILES):
        if "refresh_continuous_aggregate" not in text:
            continue
        name = routine_name(s)
        assert s.is_procedure and lang == "plpgsql", f"{name}: only a PL/pgSQL procedure can refresh"
        assert not any(o.defname == "set" for o in s.options or ()), \
            f"{name}: a procedure with SET cannot COMMIT"
        tree = pglast.parse_plpgsql(text)[0]["PLpgSQL_function"]["action"]

        def visit(node, loops: tuple[str, ...], name: str = name) -> None:
            nonlocal calls
            if isinstance(node, list):
                for i, x in enumerate(node):
                    visit(x, loops, name)
                    if isinstance(x, dict) and "PLpgSQL_stmt_call" in x and "refresh_continuous_aggregate" in \
                            x["PLpgSQL_stmt_call"]["expr"]["PLpgSQL_expr"]["query"]:
                        assert i + 1 < len(node) and "PLpgSQL_stmt_commit" in node[i + 1], \
                            f"{name}: COMMIT right after every refresh"
                return
            if not isinstance(node, dict):
                return
            for kind, body in node.items():
                if kind == "PLpgSQL_stmt_call" and "refresh_continuous_aggregate" in body["expr"]["PLpgSQL_expr"]["query"]:
                    bad = {"PLpgSQL_stmt_fors", "PLpgSQL_stmt_forc", "PLpgSQL_stmt_dynfors"} & set(loops)
                    assert not bad, f"{name}: refresh inside a FOR loop over a query (timescaledb#3179)"
                    assert "exception block" not in loops, f"{name}: refresh inside a block with EXCEPTION"
                    calls += 1
                if kind == "PLpgSQL_stmt_dynexecute":
                    assert "refresh_continuous_aggregate" not in str(body), f"{name}: refresh by EXECUTE"
                inner = loops + (kind,)
                if kind == "PLpgSQL_stmt_block" and isinstance(body, dict) and body.get("exceptions"):
                    inner += ("exception block",)
                if isinstance(body, (dict, list)):
                    visit(body, inner, name)

        visit(tree, ())
    assert calls == len(caggs())  # the tiers job refreshes every hour aggregate


def test_jobs_and_policies_are_idempotent() -> None:
    seen = []
    for f in ALL_FILES:
        for s in stmts(f):
            for node in walk(s):
                if not isinstance(node, ast.FuncCall):
                    continue
                name = funcname(node)
                if re.fullmatch(r"add_\w+_policy", name):
                    arg = named_args(node).get("if_not_exists")
                    assert arg is not None and isinstance(arg, ast.A_Const) and arg.val.boolval, \
                        f"{f.path.name}: {name} without if_not_exists => true"
                    seen.append(name)
                if name == "add_job":
                    proc = const_text(node.args[0]).split(".")
                    guard = pglast.stream.RawStream()(s.whereClause) if isinstance(s, ast.SelectStmt) and s.whereClause else ""
                    assert "NOT EXISTS" in guard and "timescaledb_information.jobs" in guard \
                        and f"proc_name = '{proc[-1]}'" in guard and f"proc_schema = '{proc[0]}'" in guard, \
                        f"{f.path.name}: add_job('{'.'.join(proc)}') must look the job up first"
                    seen.append(name)
    assert seen.count("add_job") == 2 and seen.count("add_compression_policy") == 2


def test_no_refresh_policy_on_an_aggregate_the_tiers_job_refreshes() -> None:
    # overlapping refreshes of one aggregate fail (timescaledb#9248, #9571)
    for f in ALL_FILES:
        for node in walk(stmts(f)):
            if isinstance(node, ast.FuncCall) and funcname(node) == "add_continuous_aggregate_policy":
                pytest.fail(f"{f.path.name}: {const_text(node.args[0])} has a refresh policy")


# ---------------------------------------------------------------- continuous aggregates

IMMUTABLE_OK = {"time_bucket", "greatest", "least", "coalesce", "count", "sum", "min", "max", "avg"}


@pytest.mark.parametrize("name", sorted(caggs()))
def test_continuous_aggregate_follows_the_rules(name) -> None:
    s = caggs()[name]
    opts = {o.defname: o.arg for o in s.into.options}
    assert s.into.skipData, "WITH NO DATA"
    assert const_text(opts["materialized_only"]) == "true" or getattr(opts["materialized_only"], "sval", "") == "true"
    q = s.query
    assert len(q.fromClause) == 1 and isinstance(q.fromClause[0], ast.RangeVar), "one hypertable, no join"
    source = qualified(q.fromClause[0])
    assert source in hypertables()
    assert not (q.sortClause or q.distinctClause or q.windowClause or q.havingClause or q.withClause)
    assert not any(isinstance(n, (ast.WindowDef, ast.SubLink)) for n in walk(q.targetList))
    calls = {funcname(n) for n in walk([q.targetList, q.whereClause]) if isinstance(n, ast.FuncCall)}
    assert calls <= IMMUTABLE_OK, calls - IMMUTABLE_OK
    bucket = [t for t in q.targetList if isinstance(t.val, ast.FuncCall) and funcname(t.val) == "time_bucket"]
    assert len(bucket) == 1 and len(bucket[0].val.args) == 2, "time_bucket(width, time), no time zone"
    assert bucket[0].val.args[1].fields[-1].sval == hypertables()[source]
    grouped = {g.fields[-1].sval for g in q.groupClause}
    assert bucket[0].name in grouped


# ---------------------------------------------------------------- plain vs TimescaleDB

def _defined(f) -> dict[str, object]:
    """Objects a file defines: relations (with their columns) and routines (with signature)."""
    out: dict[str, object] = {}
    for raw in pglast.parse_sql(f.text):
        s = raw.stmt
        if isinstance(s, ast.CreateStmt):
            out[qualified(s.relation)] = [e.colname for e in s.tableElts if isinstance(e, ast.ColumnDef)]
        elif isinstance(s, ast.CreateTableAsStmt):
            out[qualified(s.into.rel)] = [target_name(t) for t in s.query.targetList]
        elif isinstance(s, ast.ViewStmt):
            out[qualified(s.view)] = [target_name(t) for t in s.query.targetList] \
                if isinstance(s.query, ast.SelectStmt) and s.query.targetList else None
        elif isinstance(s, ast.CreateFunctionStmt):
            sig = tuple((p.mode.name, p.name if p.mode.name.endswith("TABLE") else None,
                         pglast.stream.RawStream()(p.argType)) for p in s.parameters or ())
            ret = pglast.stream.RawStream()(s.returnType) if s.returnType else None
            out[routine_name(s)] = (s.is_procedure, sig, ret)
    return out


def _pairs() -> list[tuple[object, object]]:
    by_key: dict[tuple, dict[str, object]] = {}
    for f in ALL_FILES:
        if f.variant:
            key = (f.version, f.path.name.split(".")[0])
            by_key.setdefault(key, {})[f.variant] = f
    return [(v.get("plain"), v.get("timescale")) for v in by_key.values()]


@pytest.mark.parametrize("pair", _pairs(), ids=lambda p: (p[0] or p[1]).path.name.split(".")[0])
def test_plain_and_timescale_variants_define_the_same_shared_objects(pair) -> None:
    plain, ts = pair
    p = _defined(plain) if plain else {}
    t = _defined(ts) if ts else {}
    # code (not comments) that both branches run: shared SQL, the collector and the API
    shared_sql = re.sub(r"--[^\n]*", "", "\n".join(f.text for f in ALL_FILES if f.variant is None))
    shared_py = re.sub(r"#[^\n]*", "", "\n".join(
        p_.read_text() for d in ("collector", "api") for p_ in (SCHEMA.parent / d).rglob("*.py")))
    for name in sorted(set(p) | set(t)):
        bare = name.split(".", 1)[1]
        public = name.startswith("measure.")
        used_outside = re.search(rf"\b_?measure\.{re.escape(bare)}\b", shared_sql + shared_py) is not None
        if not (public or used_outside):
            continue  # private to its branch (e.g. the plain branch's *_hour_rows)
        assert name in p and name in t, f"{name} is read by shared code but defined in one branch only"
        if isinstance(p[name], list) or isinstance(t[name], list):
            assert p[name] == t[name], f"{name}: columns differ:\n plain {p[name]}\n ts    {t[name]}"
        else:
            assert p[name] == t[name], f"{name}: signature differs: {p[name]} vs {t[name]}"


def test_hour_tier_column_types_agree() -> None:
    # The plain tables declare the types; the aggregate's expressions must produce the same:
    # count -> bigint, sum of integers -> numeric, min/max of a column -> its type, of
    # numeric arithmetic -> numeric, time_bucket(timestamptz) -> timestamptz.
    plain = next(f for f in PLAN.versioned if f.path.name == "010-tiers.plain.sql")
    raw_types = {}
    for s in stmts(next(f for f in PLAN.versioned if f.path.name == "000-foundation.sql")):
        if isinstance(s, ast.CreateStmt) and s.relation.relname == "interval_record":
            raw_types = {e.colname: e.typeName.names[-1].sval for e in s.tableElts if isinstance(e, ast.ColumnDef)}
    declared = {}
    for s in stmts(plain):
        if isinstance(s, ast.CreateStmt):
            declared[qualified(s.relation)] = {e.colname: e.typeName.names[-1].sval
                                               for e in s.tableElts if isinstance(e, ast.ColumnDef)}
    alias = {"int2": "int2", "int4": "int4", "int8": "int8", "numeric": "numeric", "timestamptz": "timestamptz"}
    for name, s in caggs().items():
        for t in s.query.targetList:
            v = t.val
            fn = funcname(v) if isinstance(v, ast.FuncCall) else None
            if fn == "count":
                got = "int8"
            elif fn == "sum":
                got = "numeric"
            elif fn == "time_bucket":
                got = "timestamptz"
            elif fn in ("min", "max") and isinstance(v.args[0], ast.ColumnRef):
                got = raw_types[v.args[0].fields[-1].sval]
            elif fn in ("min", "max"):
                got = "numeric"  # 100.0 * x / delta_us, x::numeric / delta_us
            else:
                got = raw_types.get(getattr(v, "fields", [None])[-1].sval if isinstance(v, ast.ColumnRef) else None)
            assert alias.get(got, got) == declared[name][target_name(t)], (name, target_name(t), got)


# ---------------------------------------------------------------- the job's logic, on stand-ins

STAND_INS = """
CREATE SCHEMA timescaledb_information;
CREATE TABLE public.stub_jobs (job_id serial, proc_schema name, proc_name name, config jsonb);
CREATE VIEW timescaledb_information.jobs AS SELECT * FROM public.stub_jobs;
CREATE FUNCTION public.add_job(proc regproc, schedule_interval interval, config jsonb DEFAULT NULL)
RETURNS integer LANGUAGE sql AS $$
    INSERT INTO public.stub_jobs (proc_schema, proc_name, config)
    SELECT n.nspname, p.proname, config FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
     WHERE p.oid = proc RETURNING job_id $$;
CREATE TABLE public.stub_refresh (cagg text, lo timestamptz, hi timestamptz);
-- like the real refresh: COMMITs (so it fails in an atomic context), recomputes the window
CREATE PROCEDURE public.refresh_continuous_aggregate(cagg regclass, lo timestamptz, hi timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    v_ent text := replace(replace(cagg::text, '_measure.', ''), '_hour', '');
    v_hours timestamptz[] := ARRAY(SELECT generate_series(lo, hi - interval '1 hour', interval '1 hour'));
BEGIN
    INSERT INTO public.stub_refresh VALUES (cagg::text, lo, hi);
    COMMIT;
    EXECUTE format('DELETE FROM _measure.%I WHERE hour_at = ANY ($1)', v_ent || '_hour') USING v_hours;
    EXECUTE format('INSERT INTO _measure.%I SELECT r.* FROM _measure.system s, _measure.%I(s.system_id, $1) r',
                   v_ent || '_hour', v_ent || '_hour_rows') USING v_hours;
    COMMIT;
END $$;
"""


def test_tiers_job_logic_runs_on_stand_ins(fresh_database) -> None:
    # TimescaleDB's refresh, add_job and jobs view replaced by stand-ins on the plain branch:
    # checks the PL/pgSQL of the job (windows, commits, what it clears), not TimescaleDB.
    url = fresh_database("_ts_stand_ins")
    runner.apply(url, mode="off")
    ts_file = SCHEMA / "idempotent" / "021-condense.timescale.sql"
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(STAND_INS)
        for _ in range(2):  # re-applied on every start: the jobs are registered once
            with c.transaction():
                c.execute(ts_file.read_text())
        assert c.execute("SELECT proc_name FROM public.stub_jobs ORDER BY 1").fetchall() == [
            ("purge_job",), ("tiers_job",)]
        sys_id = c.execute("INSERT INTO _measure.system (system_name, system_number, time_zone) "
                           "VALUES ('\\T', 1, 'UTC') RETURNING system_id").fetchone()[0]
        m = c.execute("INSERT INTO _measure.measurement (system_id, name, contab, state) "
                      "VALUES (%s, 'M', '{}', 'running') RETURNING measurement_id", (sys_id,)).fetchone()[0]
        e = c.execute("INSERT INTO _measure.entity (system_id, type_code, key, ids, cpu, first_seen_at) "
                      "VALUES (%s, 1, 'cpu=0', '{\"cpu\": 0}', 0, '2024-01-01') RETURNING entity_id",
                      (sys_id,)).fetchone()[0]
        n = c.execute("SELECT count(*) FROM _measure.counter_def WHERE entity = 'cpu'").fetchone()[0]
        hours = ["2024-03-01 10:00+00", "2024-03-01 11:00+00", "2024-03-01 14:00+00", "2024-03-05 02:00+00"]
        for h in hours:
            c.execute("INSERT INTO _measure.interval_record (measurement_id, entity_id, record_at, from_at, to_at,"
                      " delta_us, closing_kind, system_id, type_code, cpu, counters) VALUES (%s, %s, '2024-01-01',"
                      " %s::timestamptz, %s::timestamptz + INTERVAL '1 hour', 3600000000, 3, %s, 1, 0,"
                      " array_fill(1800000000::bigint, ARRAY[%s]))", (m, e, h, h, sys_id, n))
            c.execute("SELECT _measure.note_intervals(%s::smallint, %s, %s)", (sys_id, h, h))
        with pytest.raises(psycopg.errors.InvalidTransactionTermination), c.transaction():
            c.execute("CALL _measure.tiers_job(1, '{}')")  # as the runner's transaction would
        c.execute("CALL _measure.tiers_job(1, '{}')")       # as the job scheduler calls it
        windows = c.execute("SELECT to_char(lo, 'DD HH24'), to_char(hi, 'DD HH24'), count(*) "
                            "FROM public.stub_refresh GROUP BY 1, 2 ORDER BY 1").fetchall()
        assert windows == [("01 10", "01 12", 6), ("01 14", "01 15", 6), ("05 02", "05 03", 6)]
        assert c.execute("SELECT count(*) FROM _measure.tier_dirty").fetchone() == (0,)
        assert c.execute("SELECT count(*), min(busy_avg), max(busy_avg) FROM measure.cpu_hour").fetchone() == (4, 50, 50)
        assert c.execute("SELECT shift_day::text, shift_no, hours FROM measure.cpu_shift ORDER BY 1").fetchall() == [
            ("2024-03-01", 2, 3), ("2024-03-05", 1, 1)]
