"""The entity types with tiers have one definition: the catalogue (schema/catalog/entities.csv,
column tier_order; their tier items in tier_items.csv). No product code writes the list out again,
and every place that needs it (the SQL, the API's enums, export, the dashboards' alert rules)
derives the same list, in the same order, from it."""

from __future__ import annotations

import importlib.util
import re
import typing
from pathlib import Path

import psycopg
import pytest

from api.configuration.schemas import Entity
from api.main import create_app
from api.tiers.schemas import StoredTier, TierEntity, TierName
from core import exporter
from core.catalog import TIERS, load_catalog
from tests.schema import test_tiers_data as data

REPO = Path(__file__).resolve().parents[1]
CAT = load_catalog()
# what the catalogue says today, and the public contract (OpenAPI enums, SQL messages) keeps
TIERED = ("cpu", "disc", "line", "process", "userdef", "tmf")

# 'cpu', 'disc', 'line', 'process' in sequence, either quote style, any spacing: a list of the
# tiered types written out (also the catalogue's first four, should they ever change)
LITERAL_LISTS = [
    re.compile(r"""['"]cpu['"]\s*,\s*['"]disc['"]\s*,\s*['"]line['"]\s*,\s*['"]process['"]""", re.I),
    re.compile(r"\s*,\s*".join(rf"""['"]{n}['"]""" for n in CAT.tiered_names[:4]), re.I),
]


def product_files() -> list[Path]:
    """Python and SQL of the product: the frozen numbered migrations schema/NNN-*.sql (released
    files are never edited) and tests/ are not product code to scan."""
    files = [p for d in ("api", "cli", "collector", "core", "schema/idempotent")
             for p in sorted((REPO / d).rglob("*")) if p.suffix in (".py", ".sql") and p.is_file()]
    return [*files, REPO / "dashboards" / "build.py"]


def literal_lists(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    return [f"{path.relative_to(REPO)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
            for rx in LITERAL_LISTS for m in rx.finditer(text)]


def test_the_catalogue_names_the_tiered_types_and_their_items() -> None:
    assert CAT.tiered_names == TIERED
    assert [e.tier_order for e in CAT.tiered] == sorted(e.tier_order for e in CAT.tiered)
    assert all(e.tier_items for e in CAT.tiered)
    assert not any(e.tier_items for e in CAT if not e.tiered)
    assert [i.item for i in CAT.entity("disc").tier_items][:2] == ["busy", "qlen"]


def test_no_product_code_writes_the_tiered_types_out() -> None:
    files = product_files()
    assert len(files) > 50 and all(p.exists() for p in files)
    found = [hit for p in files for hit in literal_lists(p)]
    assert found == [], ("the entity types with tiers are written out; read them from the catalogue "
                         "(core.catalog: load_catalog().tiered_names; SQL: _measure.tiered_entities()):\n"
                         + "\n".join(found))


def test_the_check_finds_a_list_written_out() -> None:
    # the frozen migration that still holds one (010-tiers.sql, replaced by 140-tier-catalogue.sql)
    assert literal_lists(REPO / "schema" / "010-tiers.sql")
    for text in ("""ENTITIES = ("cpu", "disc", "line", "process")""", "ARRAY['cpu','disc', 'line' ,'process']",
                 """Literal['CPU', "DISC", 'LINE', 'PROCESS', 'userdef']"""):
        assert any(rx.search(text) for rx in LITERAL_LISTS), text


def test_python_places_derive_the_catalogue_list() -> None:
    assert [e.value for e in TierEntity] == list(TIERED)
    assert typing.get_args(Entity) == TIERED
    assert [t.value for t in StoredTier] == list(TIERS) and [t.value for t in TierName] == [*TIERS, "auto"]
    assert [s.entity.name for s in exporter.plan(None, "hour")] == sorted(TIERED, key=lambda n: CAT.entity(n).code)
    spec = importlib.util.spec_from_file_location("dashboards_build", REPO / "dashboards" / "build.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    rules = build.alerting()["groups"][0]["rules"]
    assert [r["labels"]["entity"] for r in rules] == list(TIERED)


def test_openapi_enums_keep_the_contract() -> None:
    doc = create_app(database_url="postgresql://nobody@127.0.0.1:1/none").openapi()
    assert doc["components"]["schemas"]["TierEntity"]["enum"] == list(TIERED)
    threshold = doc["components"]["schemas"]["ThresholdWrite"]["properties"]["entity"]
    assert threshold["enum"] == list(TIERED)


def test_the_database_reads_the_catalogue(conn: psycopg.Connection) -> None:
    assert conn.execute("SELECT _measure.tiered_entities()").fetchone()[0] == list(TIERED)
    items = [(i.entity, i.item, i.enform, i.unit, i.help) for e in CAT.tiered for i in e.tier_items]
    assert conn.execute("SELECT * FROM measure.tier_item").fetchall() == items
    for ent in CAT.tiered:
        for tier in TIERS:
            assert conn.execute("SELECT to_regclass(%s)", (f"measure.{ent.name}_{tier}",)).fetchone()[0]
        columns = [r[0] for r in conn.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 ORDER BY attnum",
            (f"measure.{ent.name}_month",))]
        want = [f"{i.item}_{s}" for i in ent.tier_items for s in ("avg", "max", "min", "delt")]
        assert [c for c in columns if c in want] == want
    # the entity of a threshold: a foreign key to the catalogue's tiered types, no list of names
    checks = conn.execute("SELECT conname, contype, convalidated, confrelid::regclass::text FROM pg_constraint"
                          " WHERE conrelid = '_measure.threshold'::regclass AND contype IN ('c', 'f')"
                          " AND %s = ANY (SELECT attname FROM"
                          " pg_attribute WHERE attrelid = conrelid AND attnum = ANY (conkey))", ("entity",)).fetchall()
    assert checks == [("threshold_entity_fkey", "f", True, "_measure.tier_entity")]
    with pytest.raises(psycopg.errors.ForeignKeyViolation):
        conn.execute("INSERT INTO _measure.threshold (entity, item, operator, limit_value) VALUES ('terminal', 'x', '>', 1)")


def test_sql_messages_list_the_catalogue_types(conn: psycopg.Connection) -> None:
    listed = "cpu, disc, line, process, userdef, tmf"
    with pytest.raises(psycopg.errors.InvalidParameterValue) as ei:
        conn.execute("SELECT _measure.threshold_key(NULL, 'terminal', 'busy_max', '>', NULL)")
    assert str(ei.value).splitlines()[0] == f"entity: terminal is no entity type with thresholds ({listed})"
    conn.rollback()
    for call in ("measure.report_threshold_items(%s, current_date, NULL, 'terminal')",
                 "measure.threshold_check(%s, now(), now(), 'terminal')"):
        data.Builder(conn)
        with pytest.raises(psycopg.errors.InvalidParameterValue) as ei:
            conn.execute(f"SELECT * FROM {call}", (data.SYSTEM,))
        assert ei.value.diag.message_hint == f"entity: one of {listed}"
        conn.rollback()


def test_every_tier_item_is_computed_from_the_hour_tiers(conn: psycopg.Connection) -> None:
    """_measure.hour_item computes each item the catalogue names, of every type with tiers, and
    no other: an hour of each type condensed."""
    b = data.Builder(conn)
    start = data.t(10, 7)
    proc = {"process_name": "$S1", "pin": 10, "program_file_name": "$APPL.ET1.SERVER", "priority": 150}
    ids = {"cpu": {}, "tmf": {}, "disc": {"device_name": "$DATA1", "pin": 7, "path": "P"},
           "line": {"device_name": "$LINE1", "pin": 9}, "process": proc,
           "userdef": {**proc, "name": "RQ", "index": 0}}
    assert set(ids) == set(TIERED)
    for name in TIERED:
        b.interval("A", name, 0, start, 60, ids[name])
    b.note_and_condense(start, data.t(10, 8))
    got = conn.execute("SELECT DISTINCT entity, item FROM _measure.hour_item WHERE system_id = %s",
                       (b.system_id,)).fetchall()
    assert sorted(got) == sorted((i.entity, i.item) for e in CAT.tiered for i in e.tier_items)
