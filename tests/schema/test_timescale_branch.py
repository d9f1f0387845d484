"""The TimescaleDB branch of schema/, checked statically (the same rules are exercised on a
real TimescaleDB by `make test-timescaledb`: the whole suite with MEASUREDB_TIMESCALEDB=on, and tests/test_engines.py).

The rules come from the TimescaleDB documentation and issue tracker (README "TimescaleDB"):
unique constraints of a hypertable include its time column; its compression settings cover
its primary key; the schema runner's single transaction admits no WITH DATA continuous
aggregate, no CONCURRENTLY, no refresh_continuous_aggregate and no COMMIT; and the plain and
TimescaleDB variants define the same objects with the same columns, so that the shared SQL
reads both alike. The continuous aggregates and jobs of versions 000-090 are retired by 100
(schema/100-interval-runs.timescale.sql says why). Every SQL file and every PL/pgSQL body
parses (tests/core/test_schema.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pglast
import pglast.stream
import pytest
from pglast import ast
from pglast.enums import ConstrType

from core import schema as runner

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


def dropped_tables() -> set[str]:
    out = set()
    for f in ALL_FILES:
        for s in stmts(f):
            if isinstance(s, ast.DropStmt) and s.removeType == pglast.enums.ObjectType.OBJECT_TABLE:
                out |= {".".join(n.sval for n in obj) for obj in s.objects}
    return out


def hypertables() -> dict[str, str]:
    """Hypertable -> its time column, from create_hypertable(..., by_range('col', ...)), of
    the tables the branch still has once every version is applied."""
    found = {}
    for f in TS_FILES:
        for node in walk(stmts(f)):
            if isinstance(node, ast.FuncCall) and funcname(node) == "create_hypertable":
                table = const_text(node.args[0])
                dim = node.args[1]
                assert isinstance(dim, ast.FuncCall) and funcname(dim) == "by_range", f.path.name
                found[table] = const_text(dim.args[0])
    return {t: c for t, c in found.items() if t not in dropped_tables()}


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

def test_the_branch_ends_with_one_hypertable_and_no_aggregates() -> None:
    assert hypertables() == {"_measure.interval_run": "from_at"}
    assert dropped_tables() >= {"_measure.counter_copy", "_measure.interval_record"}
    # every continuous aggregate of 010 is turned into a table by 100
    retired = next(f for f in TS_FILES if f.path.name == "100-interval-runs.timescale.sql").text
    assert set(caggs()) == {f"_measure.{e}_hour" for e in ("cpu", "disc", "line", "process", "userdef", "tmf")}
    assert "DROP MATERIALIZED VIEW _measure.%I CASCADE" in retired
    assert "delete_job" in retired


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
    settings = {t: c for t, c in settings.items() if t in hypertables()}
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
        if f.variant in ("plain", "timescale"):  # (a Citus file has no counterpart)
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
