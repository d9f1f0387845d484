"""The schema runner: applies schema/ to a database, in one transaction, idempotently.

Layout of schema/ (style P4):

* ``NNN-name.sql``: versioned storage changes, applied once each in NNN order and recorded
  in ``_measure.schema_version``; frozen once released (a changed checksum is refused).
  ``NNN-name.timescale.sql`` and ``NNN-name.plain.sql`` hold the parts that differ with and
  without the timescaledb extension; they belong to version NNN and run right after it.
* ``idempotent/*.sql``: views, functions and grants, written ``CREATE OR REPLACE`` and
  re-applied on every run (same ``.timescale`` / ``.plain`` rule).
* ``*.citus.sql`` (idempotent only): a database with the citus extension (Citus, distributed
  PostgreSQL) gets the plain files and then these: ``idempotent/005-distribute.citus.sql``
  distributes the interval data and every tier by system_id and makes the catalogue and the
  configuration reference tables, before the other idempotent files run.
* ``catalog/*.csv``: the MEASURE counter catalogue, loaded into ``_measure.entity_type``,
  ``_measure.counter_def``, ``_measure.tier_entity`` and ``_measure.tier_item`` on every run
  (it is the single source of truth), after the versioned files and before the idempotent
  ones, which read it (the tier views of each entity type with tiers, for one).

The whole run holds an advisory lock and is one transaction: it is applied entirely or not
at all. A database written by a newer measuredb (a higher version than the files here) is
refused with a clear message. Whether the database uses TimescaleDB is decided at the first
run and recorded; later runs follow that choice. Citus is the database's own: a database
with the citus extension (created by the runner when the server preloads Citus, or required
by ``MEASUREDB_ENGINE=citus``) is built for Citus, and never with TimescaleDB.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

import psycopg

from core.database import one_row, scalar

if TYPE_CHECKING:
    from core.catalog import Catalog

SCHEMA_DIR = Path(__file__).resolve().parents[1] / "schema"
LOCK_KEY = 0x4D454153  # 'MEAS'
_VERSIONED = re.compile(r"^(?P<version>\d{3})-(?P<name>[a-z0-9][a-z0-9_-]*?)(?:\.(?P<variant>timescale|plain))?\.sql$")
_IDEMPOTENT = re.compile(r"^(?P<name>[0-9a-z][a-z0-9_-]*?)(?:\.(?P<variant>timescale|plain|citus))?\.sql$")

Mode = Literal["auto", "on", "off"]
# MEASUREDB_ENGINE: auto = Citus when the database has it (or the server preloads it), citus =
# require Citus, postgresql = never Citus (TimescaleDB then follows MEASUREDB_TIMESCALEDB)
EngineMode = Literal["auto", "citus", "postgresql"]
Engine = Literal["postgresql", "timescaledb", "citus"]


class SchemaError(RuntimeError):
    """The schema cannot be applied; the message says why and what to do."""


class SchemaTooNew(SchemaError):
    pass


Version = TypeVar("Version", int, None)


@dataclass(frozen=True)
class SqlFile(Generic[Version]):
    path: Path
    version: Version  # None for idempotent files
    variant: str | None  # None, 'timescale', 'plain' or 'citus'

    @property
    def text(self) -> str:
        return self.path.read_text(encoding="utf-8")

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.path.read_bytes()).hexdigest()

    def applies(self, timescale: bool, citus: bool = False) -> bool:
        """Does this file run on that engine? Citus gets the plain files and its own."""
        if self.variant == "citus":
            return citus
        return self.variant is None or (self.variant == "timescale") == timescale


@dataclass
class SchemaPlan:
    versioned: list[SqlFile[int]] = field(default_factory=list)
    idempotent: list[SqlFile[None]] = field(default_factory=list)

    @property
    def code_version(self) -> int:
        return max((f.version for f in self.versioned), default=0)


@dataclass(frozen=True)
class ApplyResult:
    version: int
    applied: list[str]
    timescaledb: bool
    citus: bool = False
    distributed: int = 0  # Citus: tables distributed by system_id
    reference: int = 0    # Citus: reference tables (on every node)
    workers: int = 0      # Citus: active worker nodes

    @property
    def engine(self) -> Engine:
        return "citus" if self.citus else "timescaledb" if self.timescaledb else "postgresql"

    def describe(self) -> str:
        if self.citus:
            return (f"Citus ({self.distributed} tables distributed by system_id, co-located; "
                    f"{self.reference} reference tables; {self.workers} workers)")
        return "TimescaleDB" if self.timescaledb else "plain PostgreSQL"


def load_plan(schema_dir: Path = SCHEMA_DIR) -> SchemaPlan:
    plan = SchemaPlan()
    for path in sorted(schema_dir.glob("*.sql")):
        m = _VERSIONED.match(path.name)
        if not m:
            raise SchemaError(
                f"{path}: a versioned schema file must be named NNN-name.sql "
                "(or NNN-name.timescale.sql / NNN-name.plain.sql)"
            )
        plan.versioned.append(SqlFile(path, int(m["version"]), m["variant"]))
    commons = [f.version for f in plan.versioned if f.variant is None]
    dupes = {v for v in commons if commons.count(v) > 1}
    if dupes:
        raise SchemaError(f"{schema_dir}: two versioned files share version {min(dupes):03d}")
    for f in plan.versioned:
        if f.variant is not None and f.version not in commons:
            raise SchemaError(f"{f.path}: no common file {f.version:03d}-*.sql for this variant")
    plan.versioned.sort(key=lambda f: (f.version, f.variant is not None, f.path.name))
    for path in sorted((schema_dir / "idempotent").glob("*.sql")):
        m = _IDEMPOTENT.match(path.name)
        if not m:
            raise SchemaError(f"{path}: an idempotent schema file must be named name.sql")
        plan.idempotent.append(SqlFile(path, None, m["variant"]))
    return plan


def _bootstrap(conn: psycopg.Connection) -> None:
    conn.execute(
        """
        CREATE SCHEMA IF NOT EXISTS _measure;
        CREATE TABLE IF NOT EXISTS _measure.schema_version (
            version     integer PRIMARY KEY,
            name        text NOT NULL,
            checksum    text NOT NULL,
            applied_at  timestamptz NOT NULL DEFAULT now()
        );
        CREATE TABLE IF NOT EXISTS _measure.install_info (
            singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
            timescaledb boolean NOT NULL,
            installed_at timestamptz NOT NULL DEFAULT now()
        );
        """
    )


def _decide_timescale(conn: psycopg.Connection, mode: Mode) -> bool:
    recorded = conn.execute("SELECT timescaledb FROM _measure.install_info").fetchone()
    installed = conn.execute(
        "SELECT 1 FROM pg_extension WHERE extname = 'timescaledb'"
    ).fetchone() is not None
    available = conn.execute(
        "SELECT 1 FROM pg_available_extensions WHERE name = 'timescaledb'"
    ).fetchone() is not None
    if recorded is not None:
        want = bool(recorded[0])
        if want and not installed:
            raise SchemaError(
                "this database was built with TimescaleDB but the timescaledb extension is "
                "missing; install it (CREATE EXTENSION timescaledb) or use another database"
            )
        if mode == "on" and not want:
            raise SchemaError(
                "MEASUREDB_TIMESCALEDB=on, but this database was built without TimescaleDB; "
                "its tables cannot be converted in place: use a new database"
            )
        return want
    if mode == "off":
        return False
    if installed:
        return True
    # CREATE EXTENSION of a library the server did not preload ends the session (FATAL)
    preloaded = "timescaledb" in [
        s.strip() for s in scalar(conn.execute("SHOW shared_preload_libraries")).split(",")]
    if available and not preloaded:
        if mode == "on":
            raise SchemaError(
                "MEASUREDB_TIMESCALEDB=on, but this PostgreSQL server was not started with "
                "shared_preload_libraries=timescaledb; set it (postgresql.conf or ALTER SYSTEM) "
                "and restart the server"
            )
        return False
    if available:
        try:
            with conn.transaction():
                conn.execute("CREATE EXTENSION IF NOT EXISTS timescaledb")
            return True
        except psycopg.Error as exc:
            if mode == "on":
                raise SchemaError(
                    f"MEASUREDB_TIMESCALEDB=on, but CREATE EXTENSION timescaledb failed: {exc}"
                ) from None
            return False
    if mode == "on":
        raise SchemaError(
            "MEASUREDB_TIMESCALEDB=on, but this PostgreSQL server has no timescaledb extension"
        )
    return False


def _preloads(conn: psycopg.Connection, library: str) -> bool:
    return library in [s.strip() for s in scalar(conn.execute("SHOW shared_preload_libraries")).split(",")]


def _decide_citus(conn: psycopg.Connection, engine: EngineMode, timescale_mode: Mode) -> bool:
    """Citus when the database has the citus extension; created here when the server preloads
    Citus (engine auto or citus). Citus databases never use TimescaleDB."""
    if engine not in ("auto", "citus", "postgresql"):
        raise SchemaError(f"bad setting MEASUREDB_ENGINE={engine!r}: use auto, citus or postgresql")
    installed = conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'").fetchone() is not None
    if not installed and engine != "postgresql" and _preloads(conn, "citus"):
        try:
            with conn.transaction():
                conn.execute("CREATE EXTENSION IF NOT EXISTS citus")
            installed = True
        except psycopg.Error as exc:
            if engine == "citus":
                raise SchemaError(f"MEASUREDB_ENGINE=citus, but CREATE EXTENSION citus failed: {exc}") from None
    if not installed:
        if engine == "citus":
            raise SchemaError(
                "MEASUREDB_ENGINE=citus, but this database has no citus extension and the server does "
                "not preload it: start the coordinator with shared_preload_libraries=citus (README "
                "\"Scale-out on Citus\")")
        return False
    if engine == "postgresql":
        raise SchemaError("MEASUREDB_ENGINE=postgresql, but this database has the citus extension: "
                          "use another database, or MEASUREDB_ENGINE=citus")
    if timescale_mode == "on":
        raise SchemaError("MEASUREDB_TIMESCALEDB=on, but this database has Citus: Citus and "
                          "TimescaleDB are never used together; set MEASUREDB_TIMESCALEDB=auto")
    if conn.execute("SELECT 1 FROM _measure.install_info WHERE timescaledb").fetchone():
        raise SchemaError("this database was built with TimescaleDB; it cannot become a Citus "
                          "database: use a new database")
    workers = scalar(conn.execute("SELECT count(*) FROM citus_get_active_worker_nodes()"))
    if workers == 0:
        raise SchemaError("this database has Citus but no worker nodes: add them on the coordinator "
                          "(SELECT citus_add_node('host', port)) first, then apply the schema; "
                          "nothing was applied")
    return True


def database_version(conn: psycopg.Connection) -> int | None:
    """The schema version recorded in the database, or None for an empty database."""
    row = conn.execute("SELECT to_regclass('_measure.schema_version') IS NOT NULL").fetchone()
    if not row or not row[0]:
        return None
    return scalar(conn.execute("SELECT max(version) FROM _measure.schema_version"))


def load_catalog_rows(conn: psycopg.Connection, schema_dir: Path) -> None:
    """Load catalog/entities.csv, counters.csv and tier_items.csv (validated by core.catalog)."""
    from core.catalog import load_catalog

    catalog = load_catalog(schema_dir / "catalog")
    with conn.cursor() as cur:
        cur.execute("CREATE TEMP TABLE _cat_entity (LIKE _measure.entity_type) ON COMMIT DROP")
        cur.execute("CREATE TEMP TABLE _cat_counter (LIKE _measure.counter_def) ON COMMIT DROP")
        with cur.copy("COPY _cat_entity (type_code, entity, measure_name, id_fields, help) FROM STDIN") as cp:
            for e in catalog.entities.values():
                cp.write_row((e.code, e.name, e.measure_name, list(e.id_fields), e.help))
        with cur.copy(
            "COPY _cat_counter (entity, counter, measure_name, kind, unit, max_of, help, position)"
            " FROM STDIN"
        ) as cp:
            for e in catalog.entities.values():
                for c in e.counters:
                    cp.write_row((e.name, c.name, c.measure_name, c.kind, c.unit, c.max_of,
                                  c.help, c.position + 1))
        cur.execute(
            """
            INSERT INTO _measure.entity_type AS t (type_code, entity, measure_name, id_fields, help)
            SELECT type_code, entity, measure_name, id_fields, help FROM _cat_entity
            ON CONFLICT (type_code) DO UPDATE
               SET entity = excluded.entity, measure_name = excluded.measure_name,
                   id_fields = excluded.id_fields, help = excluded.help
             WHERE (t.entity, t.measure_name, t.id_fields, t.help)
                   IS DISTINCT FROM (excluded.entity, excluded.measure_name, excluded.id_fields, excluded.help);
            INSERT INTO _measure.counter_def AS d
                   (entity, counter, measure_name, kind, unit, max_of, help, position)
            SELECT entity, counter, measure_name, kind, unit, max_of, help, position FROM _cat_counter
            ON CONFLICT (entity, counter) DO UPDATE
               SET measure_name = excluded.measure_name, kind = excluded.kind, unit = excluded.unit,
                   max_of = excluded.max_of, help = excluded.help, position = excluded.position
             WHERE (d.measure_name, d.kind, d.unit, d.max_of, d.help, d.position) IS DISTINCT FROM
                   (excluded.measure_name, excluded.kind, excluded.unit, excluded.max_of,
                    excluded.help, excluded.position);
            """
        )
        # the catalogue's counters as arrays, not a join with the temporary table: on Citus a
        # reference table is not modified with a subquery over a local table
        cur.execute(
            """
            DELETE FROM _measure.counter_def d
             WHERE (d.entity, d.counter, d.position) NOT IN (
                   SELECT u.entity, u.counter, u.position
                     FROM unnest(%(entity)s::text[], %(counter)s::text[], %(position)s::smallint[])
                          u (entity, counter, position))
            """,
            {"entity": [e.name for e in catalog.entities.values() for _ in e.counters],
             "counter": [c.name for e in catalog.entities.values() for c in e.counters],
             "position": [c.position + 1 for e in catalog.entities.values() for c in e.counters]},
        )
        if scalar(cur.execute("SELECT to_regclass('_measure.tier_entity') IS NOT NULL")):
            _load_tiers(cur, catalog)


def _load_tiers(cur: psycopg.Cursor, catalog: Catalog) -> None:
    """The entity types with tiers and their tier items (schema/140-tier-catalogue.sql); then
    the foreign key of _measure.threshold to them is validated, once."""
    items = [i for e in catalog.tiered for i in e.tier_items]
    try:
        cur.execute(
            """
            INSERT INTO _measure.tier_entity AS t (entity, tier_order)
            SELECT u.entity, u.tier_order FROM unnest(%(entity)s::text[], %(tier_order)s::smallint[]) u (entity, tier_order)
            ON CONFLICT (entity) DO UPDATE SET tier_order = excluded.tier_order
             WHERE t.tier_order IS DISTINCT FROM excluded.tier_order
            """,
            {"entity": [e.name for e in catalog.tiered], "tier_order": [e.tier_order for e in catalog.tiered]},
        )
        cur.execute(
            """
            INSERT INTO _measure.tier_item AS i (entity, item, enform, unit, help, position)
            SELECT u.* FROM unnest(%(entity)s::text[], %(item)s::text[], %(enform)s::text[], %(unit)s::text[],
                                   %(help)s::text[], %(position)s::smallint[]) u
            ON CONFLICT (entity, item) DO UPDATE
               SET enform = excluded.enform, unit = excluded.unit, help = excluded.help, position = excluded.position
             WHERE (i.enform, i.unit, i.help, i.position)
                   IS DISTINCT FROM (excluded.enform, excluded.unit, excluded.help, excluded.position)
            """,
            {"entity": [i.entity for i in items], "item": [i.item for i in items],
             "enform": [i.enform for i in items], "unit": [i.unit for i in items],
             "help": [i.help for i in items], "position": [i.position + 1 for i in items]},
        )
        cur.execute(
            """
            DELETE FROM _measure.tier_item i
             WHERE (i.entity, i.item) NOT IN (SELECT u.entity, u.item FROM unnest(%(entity)s::text[], %(item)s::text[]) u (entity, item))
            """,
            {"entity": [i.entity for i in items], "item": [i.item for i in items]},
        )
        cur.execute("DELETE FROM _measure.tier_entity t WHERE t.entity <> ALL (%s::text[])", (list(catalog.tiered_names),))
    except psycopg.errors.ForeignKeyViolation as exc:
        # only thresholds reference these rows: a type that lost its tiers still has some
        raise SchemaError(
            f"the catalogue gives entity types with thresholds no tiers ({exc.diag.message_detail or exc}): "
            "remove those thresholds first (measuredb threshold remove), or keep the type's tier_order in "
            "schema/catalog/entities.csv; nothing was applied") from None
    pending = cur.execute(
        "SELECT 1 FROM pg_constraint WHERE conrelid = '_measure.threshold'::regclass"
        " AND conname = 'threshold_entity_fkey' AND NOT convalidated").fetchone()
    if pending:
        try:
            cur.execute("ALTER TABLE _measure.threshold VALIDATE CONSTRAINT threshold_entity_fkey")
        except psycopg.errors.ForeignKeyViolation as exc:
            raise SchemaError(
                f"a threshold names an entity type without tiers ({exc.diag.message_detail or exc}): "
                "delete it from _measure.threshold, or give the type a tier_order in "
                "schema/catalog/entities.csv; nothing was applied") from None


def apply(url: str, *, mode: Mode = "auto", schema_dir: Path = SCHEMA_DIR,
          engine: EngineMode = "auto") -> ApplyResult:
    """Apply schema_dir to the database at url. Idempotent; all or nothing. mode: TimescaleDB
    (MEASUREDB_TIMESCALEDB); engine: Citus (MEASUREDB_ENGINE)."""
    plan = load_plan(schema_dir)
    applied: list[str] = []
    with psycopg.connect(url) as conn:
        conn.execute("SET client_min_messages = warning")
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
        current = database_version(conn)
        if current is not None and current > plan.code_version:
            raise SchemaTooNew(
                f"the database is at schema version {current}, newer than this measuredb "
                f"(version {plan.code_version}); upgrade measuredb, or point DATABASE_URL at "
                "another database. Nothing was changed."
            )
        _bootstrap(conn)
        citus = _decide_citus(conn, engine, mode)
        if citus:
            # the api-cache triggers (idempotent/032) sit on distributed tables too; they run
            # on the workers there, and 900-citus.citus.sql removes them again
            conn.execute("SET LOCAL citus.enable_unsafe_triggers = on")
        timescale = False if citus else _decide_timescale(conn, mode)
        conn.execute(
            "INSERT INTO _measure.install_info (timescaledb) VALUES (%s) ON CONFLICT DO NOTHING",
            (timescale,),
        )
        done: dict[int, str] = dict(conn.execute("SELECT version, checksum FROM _measure.schema_version").fetchall())
        common = {f.version: f for f in plan.versioned if f.variant is None}
        for version, f in common.items():
            if version in done and done[version] != _version_checksum(plan, version, timescale):
                raise SchemaError(
                    f"{f.path.name} (version {version:03d}) changed after it was applied; versioned "
                    "files are frozen: put the change in a new NNN file"
                )
        for f in plan.versioned:
            if f.version in done or not f.applies(timescale):
                continue
            _execute(conn, f)
            applied.append(f.path.name)
        for version in sorted({f.version for f in plan.versioned} - set(done)):
            conn.execute(
                "INSERT INTO _measure.schema_version (version, name, checksum) VALUES (%s, %s, %s)",
                (version, common[version].path.name, _version_checksum(plan, version, timescale)),
            )
        load_catalog_rows(conn, schema_dir)  # the idempotent files read the catalogue
        for idem in plan.idempotent:
            if idem.applies(timescale, citus):
                _execute(conn, idem)
        version = plan.code_version
        layout = {"distributed": 0, "reference": 0, "workers": 0}
        if citus:
            layout = dict(zip(layout, one_row(conn.execute(
                # (pg_dist_partition, not citus_tables: that one measures every shard from
                # other connections, which wait for the locks this transaction holds)
                "SELECT count(*) FILTER (WHERE p.partmethod = 'h'),"
                "       count(*) FILTER (WHERE p.partmethod = 'n' AND p.repmodel = 't'),"
                "       (SELECT count(*) FROM citus_get_active_worker_nodes())"
                "  FROM pg_dist_partition p JOIN pg_class c ON c.oid = p.logicalrelid"
                " WHERE c.relnamespace = '_measure'::regnamespace AND NOT c.relispartition")),
                strict=True))
    if citus:
        prepare_workers(url)
    return ApplyResult(version=version, applied=applied, timescaledb=timescale, citus=citus, **layout)


GROUP_ROLES = ("measure_writer", "measure_api", "measure_reader")


def prepare_workers(url: str) -> None:
    """Citus, after the schema's transaction, on every run (so also for a worker added since):
    the reference tables copied to every worker (Citus copies them to a new worker lazily, and
    refuses the collector's next new partition in a transaction that wrote a reference table
    until it has), and the group roles allowed to log in to the workers, never to the
    coordinator (a query through the coordinator reaches the shards as the session's role: the
    API's SET ROLE measure_api). Outside the schema's transaction: run_command_on_workers uses
    connections of its own, which would wait for the roles that transaction touched."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT replicate_reference_tables()")
        for role in GROUP_ROLES:
            failed = scalar(conn.execute(
                "SELECT string_agg(format('%%s:%%s: %%s', nodename, nodeport, result), '; ')"
                "  FROM run_command_on_workers(format("
                "       'SET citus.enable_ddl_propagation TO off; ALTER ROLE %%I LOGIN', %s::text))"
                " WHERE NOT success", (role,)))
            if failed:
                raise SchemaError(f"the schema was applied, but {role} cannot log in to the workers: {failed}")


def _version_checksum(plan: SchemaPlan, version: int, timescale: bool) -> str:
    h = hashlib.sha256()
    for f in plan.versioned:
        if f.version == version and f.applies(timescale):
            h.update(f.path.name.encode())
            h.update(f.path.read_bytes())
    return h.hexdigest()


def _execute(conn: psycopg.Connection, f: SqlFile[Any]) -> None:
    try:
        conn.execute(f.text)  # no parameters: the simple protocol runs every statement
    except psycopg.Error as exc:
        diag = exc.diag
        where = f" at character {diag.statement_position}" if diag.statement_position else ""
        if diag.context:
            where += f" ({diag.context.strip().splitlines()[-1]})"
        raise SchemaError(f"{f.path}: {str(exc).strip().splitlines()[0]}{where}; nothing was applied") from None


def status(url: str, schema_dir: Path = SCHEMA_DIR) -> dict:
    plan = load_plan(schema_dir)
    with psycopg.connect(url) as conn:
        db = database_version(conn)
        ts = None
        if db is not None:
            row = conn.execute("SELECT timescaledb FROM _measure.install_info").fetchone()
            ts = bool(row[0]) if row else None
    return {"database_version": db, "code_version": plan.code_version, "timescaledb": ts}
