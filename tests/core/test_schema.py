"""The schema runner: idempotent, versioned, all-or-nothing, refuses newer databases."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pglast
import psycopg
import pytest

from core import schema as runner

SCHEMA = runner.SCHEMA_DIR
ALL_SQL = sorted(SCHEMA.glob("*.sql")) + sorted((SCHEMA / "idempotent").glob("*.sql"))


@pytest.mark.parametrize("path", ALL_SQL, ids=lambda p: p.name)
def test_every_sql_file_parses(path: Path) -> None:
    # Both branches, plain and TimescaleDB, must at least be valid PostgreSQL syntax, and
    # so must the PL/pgSQL bodies (of the TimescaleDB branch too, which no test server here
    # compiles; tests/schema/test_timescale_branch.py checks its rules).
    text = path.read_text()
    raws = pglast.parse_sql(text)
    assert raws, path
    for raw in raws:
        body = text[raw.stmt_location:raw.stmt_location + raw.stmt_len]
        if type(raw.stmt).__name__ in ("CreateFunctionStmt", "DoStmt") and \
                re.search(r"LANGUAGE\s+plpgsql|^DO\s", body, re.IGNORECASE | re.MULTILINE):
            try:
                pglast.parse_plpgsql(body)
            except pglast.parser.ParseError as exc:
                # libpg_query cannot resolve some namespaces offline; that is not a syntax error
                if "Not implemented" not in str(exc):
                    raise AssertionError(f"{path.name}: {exc}\n{body[:200]}") from None


def test_plan_has_both_branches_of_version_0() -> None:
    plan = runner.load_plan()
    variants = {(f.version, f.variant) for f in plan.versioned}
    assert (0, None) in variants and (0, "timescale") in variants
    assert plan.code_version == max(v for v, _ in variants)


def _objects(url: str) -> list[tuple]:
    with psycopg.connect(url) as c:
        return c.execute(
            """
            SELECT n.nspname, c.relname, c.relkind, pg_get_viewdef(c.oid) IS NOT NULL
              FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname IN ('_measure', 'measure') ORDER BY 1, 2
            """
        ).fetchall()


def test_fresh_apply_then_reapply_is_a_no_op(fresh_database) -> None:
    url = fresh_database("_runner_noop")
    first = runner.apply(url, mode="off")
    assert first.version == runner.load_plan().code_version
    assert first.applied[0] == "000-foundation.sql"
    assert "000-foundation.timescale.sql" not in first.applied
    assert first.timescaledb is False
    with psycopg.connect(url) as c:
        c.execute("INSERT INTO _measure.system (system_name, system_number, time_zone) "
                  "VALUES ('\\DEMO', 1, 'America/Los_Angeles')")
        versions = c.execute("SELECT version, checksum, applied_at FROM _measure.schema_version").fetchall()
    before = _objects(url)
    second = runner.apply(url, mode="off")
    assert second.applied == []
    assert _objects(url) == before
    with psycopg.connect(url) as c:
        assert c.execute("SELECT version, checksum, applied_at FROM _measure.schema_version").fetchall() == versions
        assert c.execute("SELECT system_name FROM _measure.system").fetchall() == [("\\DEMO",)]
        # the catalogue was loaded into the database
        assert c.execute("SELECT count(*) FROM _measure.entity_type").fetchone()[0] >= 14
        assert c.execute(
            "SELECT kind FROM _measure.counter_def WHERE entity = 'cpu' AND measure_name = 'CPU-BUSY-TIME'"
        ).fetchone() == ("busy",)


def test_refuses_a_database_of_a_newer_version(fresh_database) -> None:
    url = fresh_database("_runner_newer")
    runner.apply(url, mode="off")
    with psycopg.connect(url) as c:
        c.execute("INSERT INTO _measure.schema_version (version, name, checksum) VALUES (999, '999-future.sql', 'x')")
    before = _objects(url)
    with pytest.raises(runner.SchemaTooNew, match=r"schema version 999, newer than this measuredb"):
        runner.apply(url, mode="off")
    assert _objects(url) == before


def _copy_schema(tmp_path: Path) -> Path:
    target = tmp_path / "schema"
    shutil.copytree(SCHEMA, target)
    return target


def test_a_failing_new_file_changes_nothing(fresh_database, tmp_path: Path) -> None:
    url = fresh_database("_runner_atomic")
    schema_dir = _copy_schema(tmp_path)
    runner.apply(url, mode="off", schema_dir=schema_dir)
    (schema_dir / "900-good.sql").write_text("CREATE TABLE _measure.good_one (x int);")
    (schema_dir / "901-bad.sql").write_text("CREATE TABLE _measure.bad_one (x int);\nSELEC 1;")
    with pytest.raises(runner.SchemaError, match=r"901-bad.sql: syntax error .*nothing was applied"):
        runner.apply(url, mode="off", schema_dir=schema_dir)
    with psycopg.connect(url) as c:
        assert c.execute("SELECT to_regclass('_measure.good_one')").fetchone() == (None,)
        assert c.execute("SELECT max(version) FROM _measure.schema_version").fetchone()[0] < 900


def test_a_changed_frozen_file_is_refused(fresh_database, tmp_path: Path) -> None:
    url = fresh_database("_runner_frozen")
    schema_dir = _copy_schema(tmp_path)
    runner.apply(url, mode="off", schema_dir=schema_dir)
    f = schema_dir / "000-foundation.sql"
    f.write_text(f.read_text() + "\n-- edited after release\n")
    with pytest.raises(runner.SchemaError, match=r"000-foundation.sql \(version 000\) changed after it was applied"):
        runner.apply(url, mode="off", schema_dir=schema_dir)


def _with_tier_order(schema_dir: Path, target: Path, **tier_order: str) -> Path:
    """A copy of schema_dir whose catalogue gives entity types another tier_order ('': no tiers,
    and its tier items go too). A new directory: the catalogue is read once per directory."""
    shutil.copytree(schema_dir, target)
    cat = target / "catalog"
    lines = (cat / "entities.csv").read_text().splitlines(keepends=True)
    for i, line in enumerate(lines):
        fields = line.split(",", 6)
        if fields[1] in tier_order:
            lines[i] = ",".join([*fields[:5], tier_order[fields[1]], fields[6]])
    (cat / "entities.csv").write_text("".join(lines))
    items = (cat / "tier_items.csv").read_text().splitlines(keepends=True)
    (cat / "tier_items.csv").write_text("".join(x for x in items if tier_order.get(x.split(",")[0]) != ""))
    return target


def test_the_tiered_types_follow_the_catalogue(fresh_database, tmp_path: Path) -> None:
    url = fresh_database("_runner_tiers")
    schema_dir = _copy_schema(tmp_path)
    runner.apply(url, mode="off", schema_dir=schema_dir)
    # tmf: no thresholds name it, it may lose its tiers; disc: the order follows the catalogue
    runner.apply(url, mode="off", schema_dir=_with_tier_order(schema_dir, tmp_path / "s1", tmf="", disc="7"))
    with psycopg.connect(url) as c:
        assert c.execute("SELECT _measure.tiered_entities()").fetchone()[0] == [
            "cpu", "line", "process", "userdef", "disc"]
        assert c.execute("SELECT count(*) FROM measure.tier_item WHERE entity = 'tmf'").fetchone()[0] == 0
        with pytest.raises(psycopg.errors.InvalidParameterValue, match=r"entity: tmf is no entity type with "
                                                                       r"thresholds \(cpu, line, process, userdef, disc\)"):
            c.execute("SELECT _measure.threshold_key(NULL, 'tmf', 'trans_avg', '>', NULL)")
        c.rollback()
        with pytest.raises(psycopg.errors.ForeignKeyViolation):
            c.execute("INSERT INTO _measure.threshold (entity, item, operator, limit_value) VALUES ('tmf', 'x', '>', 1)")
    # the default thresholds name cpu
    with pytest.raises(runner.SchemaError, match=r"entity types with thresholds no tiers .*cpu.*: remove those "
                                                 r"thresholds first.*nothing was applied"):
        runner.apply(url, mode="off", schema_dir=_with_tier_order(schema_dir, tmp_path / "s2", cpu=""))
    with psycopg.connect(url) as c:
        assert c.execute("SELECT _measure.tiered_entities()").fetchone()[0] == [
            "cpu", "line", "process", "userdef", "disc"]


def test_bad_file_names_are_refused(tmp_path: Path) -> None:
    schema_dir = _copy_schema(tmp_path)
    (schema_dir / "7-oops.sql").write_text("SELECT 1;")
    with pytest.raises(runner.SchemaError, match=r"7-oops.sql: a versioned schema file must be named NNN-name.sql"):
        runner.load_plan(schema_dir)


def test_timescale_on_without_the_extension_is_a_clear_error(fresh_database) -> None:
    url = fresh_database("_runner_ts")
    with psycopg.connect(url) as c:
        available = c.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'timescaledb'").fetchone()
        preloaded = "timescaledb" in c.execute("SHOW shared_preload_libraries").fetchone()[0]
    if available and preloaded:  # a server with TimescaleDB: `on` must build the hypertable branch
        assert runner.apply(url, mode="on").timescaledb is True
        return
    message = "shared_preload_libraries=timescaledb" if available else "has no timescaledb extension"
    with pytest.raises(runner.SchemaError, match=message):
        runner.apply(url, mode="on")
    assert runner.status(url)["database_version"] is None
    if available:  # installed but not preloaded: `auto` builds the plain branch (the session survives)
        assert runner.apply(url, mode="auto").timescaledb is False


def test_read_only_role_cannot_write_storage(db_url: str) -> None:
    with psycopg.connect(db_url) as c:
        c.execute("SET ROLE measure_reader")
        assert c.execute("SELECT count(*) FROM measure.counter_def").fetchone()[0] > 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute("SELECT * FROM _measure.system")
        c.rollback()
