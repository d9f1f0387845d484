"""Exporting interval records and tiers: ``measuredb export`` and ``GET /export``.

* Interval records of any entity type, one row per interval, under the header that
  ``measuredb import`` reads (:func:`core.importer.interval_header`): SYSTEM,
  MEASUREMENT, the identifying fields, CPU, FROM-TIMESTAMP, TO-TIMESTAMP (ISO 8601 in the
  system's local time with its UTC offset, or MEASURE Julian timestamps), DELTA-TIME, ERROR,
  (USERDEF: TYPE) and every counter by its MEASURE name. Rows are the intervals whose FROM lies
  in [from, to), ordered by system, FROM, entity and measurement.
* Tiers: ``measure.<entity>_<tier>`` (hour, shift, month, year of the entity types with tiers
  in the catalogue: CPU, DISC, LINE, PROCESS, USERDEF, TMF) with the view's own column names; the buckets that overlap [from, to) (shift,
  month and year buckets by the system's local dates). Instants are written in UTC ISO 8601,
  local times and dates in ISO 8601, numbers exactly as stored.

Both stream by ``COPY (…) TO STDOUT`` (the text never depends on the session's DateStyle
or TimeZone): CSV as it comes, Parquet parsed by Arrow's CSV reader a block at a time
(numeric columns become float64 in Parquet; CSV keeps every digit). Interval records are
read one UTC hour of runs at a time (:func:`interval_chunks`: each query sorts one hour's
rows, never the whole range at once). Both read only the public schema ``measure``, so
the API's role can run them. An export imported into an empty database gives the same tiers
(tests/core/test_import_export.py).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, BinaryIO

import psycopg
from psycopg import sql

from core.catalog import TIERS, EntityDef, load_catalog
from core.database import scalar
from core.entities import ID_FIELD_RANGES
from core.importer import interval_header

__all__ = ["KINDS", "TIERS", "ExportError", "ExportSpec", "export", "plan", "systems_of"]

KINDS = ("interval", *TIERS)
_BUCKET = {"hour": "hour_at", "shift": "shift_day", "month": "month", "year": "year"}


class ExportError(ValueError):
    """A request that cannot be exported (unknown system, entity type without tiers …)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class ExportSpec:
    entity: EntityDef
    kind: str  # interval, hour, shift, month, year

    def filename(self, fmt: str) -> str:
        return f"{self.entity.name}-{self.kind}.{fmt}"


def plan(entity: str | None, kind: str | None) -> list[ExportSpec]:
    """What to export: one entity type or all (None / 'all'), interval records or a tier or all
    kinds (tiers only where they exist)."""
    cat = load_catalog()
    kind = (kind or "interval").lower()
    if kind not in (*KINDS, "all"):
        raise ExportError(f"unknown kind {kind!r}: one of {', '.join(KINDS)} or all", "tier")
    kinds = KINDS if kind == "all" else (kind,)
    if entity is None or entity.strip().lower() == "all":
        ents = list(cat)
    else:
        try:
            ents = [cat.entity(entity)]
        except KeyError as exc:
            raise ExportError(str(exc), "entity") from None
        if kind not in ("interval", "all") and not ents[0].tiered:
            raise ExportError(f"{ents[0].measure_name} has no tiers (interval records only); tiers exist for "
                              f"{', '.join(e.measure_name for e in cat.tiered)}", "tier")
    return [ExportSpec(e, k) for e in ents for k in kinds if k == "interval" or e.tiered]


def systems_of(conn: psycopg.Connection, system: str | None) -> list[tuple[int, str, str]]:
    """(system_id, name, time zone) of one system (by name) or of all."""
    if system is None:
        return [tuple(r) for r in conn.execute(
            "SELECT system_id, system_name, time_zone FROM measure.system ORDER BY system_name")]
    name = system.strip().upper()
    if name and not name.startswith("\\"):
        name = "\\" + name
    row = conn.execute("SELECT system_id, system_name, time_zone FROM measure.system WHERE system_name = %s",
                       (name,)).fetchone()
    if row is None:
        known = ", ".join(r[0] for r in conn.execute("SELECT system_name FROM measure.system ORDER BY 1"))
        raise ExportError(f"unknown system {system} (known: {known or 'none yet'})", "system")
    return [tuple(row)]


# ---------------------------------------------------------------- the queries


def interval_query(ent: EntityDef, system_ids: list[int], lo: datetime | None, hi: datetime | None, *,
                   time_format: str = "iso", typed: bool = False) -> tuple[sql.Composed, list[str]]:
    """The SELECT of the interval records (columns = interval_header) and the column types for
    Parquet ('text', 'int', 'timestamptz')."""
    header = interval_header(ent)
    at_from = sql.SQL("r.from_at + (g.i - 1) * r.delta_us * INTERVAL '1 microsecond'")
    at_to = sql.SQL("r.from_at + g.i * r.delta_us * INTERVAL '1 microsecond'")

    def when(at: sql.Composable) -> tuple[sql.Composable, str]:
        if time_format == "julian":
            return sql.SQL("measure.julian_timestamp({}, s.time_zone)").format(at), "int"
        if typed:
            return at, "timestamptz"
        return sql.SQL("measure.local_iso({}, s.time_zone)").format(at), "text"

    cols: list[tuple[sql.Composable, str]] = [(sql.SQL("s.system_name"), "text"), (sql.SQL("m.name"), "text")]
    for f in ent.id_fields:
        if f in _INT_FIELDS:
            cols.append((sql.SQL("(e.ids->>{})::bigint").format(sql.Literal(f)), "int"))
        else:
            cols.append((sql.SQL("e.ids->>{}").format(sql.Literal(f)), "text"))
    if "cpu" not in ent.id_fields:
        cols.append((sql.SQL("CASE WHEN r.cpu >= 0 THEN r.cpu END"), "int"))
    cols += [when(at_from), when(at_to), (sql.SQL("r.delta_us"), "int"), (sql.SQL("r.error"), "int")]
    if ent.name == "userdef":
        cols.append((sql.SQL("_measure.user_counter_type(r.measurement_id, e.ids->>'name')"), "text"))
    cols += [(sql.SQL("d.c[g.i][{}]").format(sql.Literal(c.position + 1)), "int") for c in ent.counters]
    assert len(cols) == len(header)
    where = [sql.SQL("r.type_code = {}").format(sql.Literal(ent.code)),
             sql.SQL("r.system_id = ANY ({}::smallint[])").format(sql.Literal(system_ids))]
    first: sql.Composable = sql.SQL("1")
    last: sql.Composable = sql.SQL("r.n")
    if lo is not None:
        where.append(sql.SQL("r.from_at >= date_bin(INTERVAL '1 hour', {0}::timestamptz, "
                             "TIMESTAMPTZ '2000-01-01 00:00:00+00')").format(sql.Literal(lo)))
        first = sql.SQL("measure.run_first(r.from_at, r.delta_us, {}::timestamptz)").format(sql.Literal(lo))
    if hi is not None:
        where.append(sql.SQL("r.from_at < {}::timestamptz").format(sql.Literal(hi)))
        last = sql.SQL("least(r.n, measure.run_last(r.from_at, r.delta_us, {}::timestamptz))").format(sql.Literal(hi))
    query = sql.SQL(
        "SELECT {cols}\n"
        "  FROM measure.interval_run r\n"
        "  JOIN measure.system s ON s.system_id = r.system_id\n"
        "  JOIN measure.entity e ON e.entity_id = r.entity_id\n"
        "  JOIN (SELECT measurement_id, name FROM measure.measurement) m ON m.measurement_id = r.measurement_id\n"
        " CROSS JOIN LATERAL (SELECT r.counters || '{{}}'::bigint[] AS c OFFSET 0) d\n"
        " CROSS JOIN LATERAL generate_series({first}, {last}) g (i)\n"
        " WHERE {where}\n"
        " ORDER BY s.system_name, {at_from}, e.key, m.name").format(
        cols=sql.SQL(", ").join(sql.SQL("{} AS {}").format(c, sql.Identifier(h))
                                for (c, _), h in zip(cols, header, strict=True)),
        first=first, last=last, where=sql.SQL(" AND ").join(where), at_from=at_from)
    return query, [t for _, t in cols]


_INT_FIELDS = frozenset(ID_FIELD_RANGES)  # identifying fields that are integers


def tier_columns(conn: psycopg.Connection, ent: EntityDef, kind: str) -> list[tuple[str, str]]:
    """(column, type) of measure.<entity>_<tier>, in order."""
    return [(n, t) for n, t in conn.execute(
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a"
        " WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
        (f"measure.{ent.name}_{kind}",))]


def tier_query(conn: psycopg.Connection, ent: EntityDef, kind: str, system_ids: list[int],
               lo: datetime | None, hi: datetime | None, *, typed: bool = False) -> tuple[sql.Composed, list[str], list[str]]:
    """The SELECT of a tier's rows, its column names and types."""
    cols = tier_columns(conn, ent, kind)
    out = []
    for name, typ in cols:
        col = sql.SQL("x.{}").format(sql.Identifier(name))
        if not typed:
            if typ == "timestamp with time zone":
                col = sql.SQL("measure.local_iso({}, 'UTC')").format(col)
            elif typ == "timestamp without time zone":
                col = sql.SQL("measure.iso_timestamp({})").format(col)
            elif typ == "date":
                col = sql.SQL("to_char({}, 'YYYY-MM-DD')").format(col)
        out.append(sql.SQL("{} AS {}").format(col, sql.Identifier(name)))
    bucket = sql.Identifier(_BUCKET[kind])
    where = [sql.SQL("x.system_id = ANY ({}::smallint[])").format(sql.Literal(system_ids))]
    local_lo = sql.SQL("({}::timestamptz AT TIME ZONE s.time_zone)").format(sql.Literal(lo))
    local_hi = sql.SQL("(({}::timestamptz - INTERVAL '1 microsecond') AT TIME ZONE s.time_zone)").format(sql.Literal(hi))
    if kind == "hour":
        if lo is not None:
            where.append(sql.SQL("x.hour_at > {}::timestamptz - INTERVAL '1 hour'").format(sql.Literal(lo)))
        if hi is not None:
            where.append(sql.SQL("x.hour_at < {}::timestamptz").format(sql.Literal(hi)))
    elif kind in ("shift", "month"):
        first = local_lo if kind == "shift" else sql.SQL("date_trunc('month', {})").format(local_lo)
        if lo is not None:
            where.append(sql.SQL("x.{} >= {}::date").format(bucket, first))
        if hi is not None:
            where.append(sql.SQL("x.{} <= {}::date").format(bucket, local_hi))
    else:
        if lo is not None:
            where.append(sql.SQL("x.year >= extract(year FROM {})").format(local_lo))
        if hi is not None:
            where.append(sql.SQL("x.year <= extract(year FROM {})").format(local_hi))
    query = sql.SQL("SELECT {cols}\n  FROM measure.{view} x JOIN measure.system s ON s.system_id = x.system_id\n"
                    " WHERE {where}\n ORDER BY x.system_name, x.{bucket}, {all}").format(
        cols=sql.SQL(", ").join(out), view=sql.Identifier(f"{ent.name}_{kind}"),
        where=sql.SQL(" AND ").join(where), bucket=bucket,
        all=sql.SQL(", ").join(sql.Literal(i) for i in range(1, len(cols) + 1)))
    return query, [n for n, _ in cols], [t for _, t in cols]


_HOUR = timedelta(hours=1)
# the UTC hour of the next run of a system and entity type at or after a time, before another
_NEXT_HOUR = ("SELECT date_bin(INTERVAL '1 hour', min(from_at), TIMESTAMPTZ '2000-01-01 00:00:00+00')"
              "  FROM measure.interval_run WHERE system_id = %s AND type_code = %s"
              "   AND from_at >= date_bin(INTERVAL '1 hour', %s, TIMESTAMPTZ '2000-01-01 00:00:00+00')"
              "   AND (%s::timestamptz IS NULL OR from_at < %s)")


def interval_chunks(conn: psycopg.Connection, ent: EntityDef, system_ids: list[int], lo: datetime | None,
                    hi: datetime | None, *, time_format: str = "iso",
                    typed: bool = False) -> Iterator[sql.Composed]:
    """The interval records of interval_query, in its order, as one query per system and UTC
    hour that holds runs: a run's intervals all begin in the UTC hour it begins (the table's
    CHECK), so the hour's runs give exactly the hour's rows. Each query sorts one hour's rows
    (in memory) instead of one sort of the whole range on disk (a ref16 day's DISCOPEN: 15.8 M
    rows)."""
    systems = [r[0] for r in conn.execute("SELECT system_id FROM measure.system WHERE system_id = ANY (%s)"
                                          " ORDER BY system_name", (system_ids,))]
    for sid in systems:
        at = lo if lo is not None else datetime(1970, 1, 1, tzinfo=UTC)
        while True:
            hour = scalar(conn.execute(_NEXT_HOUR, (sid, ent.code, at, hi, hi)))
            if hour is None:
                break
            first = max(lo, hour) if lo is not None else hour
            last = min(hi, hour + _HOUR) if hi is not None else hour + _HOUR
            yield interval_query(ent, [sid], first, last, time_format=time_format, typed=typed)[0]
            at = hour + _HOUR


# ---------------------------------------------------------------- writing


def write_csv(conn: psycopg.Connection, query: sql.Composed | Iterator[sql.Composed], out: BinaryIO,
              progress: Callable[[int], None] | None = None, *, header: Sequence[str] = ()) -> int:
    """COPY the query's rows (or the rows of several queries, one after the other, under
    `header`) as CSV with a header into out; returns the rows written."""
    if isinstance(query, sql.Composed):
        return _copy_csv(conn, query, out, progress, with_header=True)
    out.write((",".join(header) + "\n").encode())  # (the names need no quoting: interval_header)
    return sum(_copy_csv(conn, q, out, progress, with_header=False) for q in query)


def _copy_csv(conn: psycopg.Connection, query: sql.Composed, out: BinaryIO,
              progress: Callable[[int], None] | None, *, with_header: bool) -> int:
    with conn.cursor() as cur:
        with cur.copy(sql.SQL("COPY ({}) TO STDOUT WITH (FORMAT csv{})").format(
                query, sql.SQL(", HEADER" if with_header else ""))) as cp:
            for data in cp:
                out.write(data)
                if progress:
                    progress(len(data))
        return max(cur.rowcount, 0)


def _arrow_type(pa: Any, typ: str) -> Any:
    if typ in ("int", "smallint", "integer", "bigint"):
        return pa.int64()
    if typ.startswith("numeric") or typ in ("double precision", "real"):
        return pa.float64()
    if typ in ("timestamptz", "timestamp with time zone"):
        return pa.timestamp("us", tz="UTC")
    if typ == "timestamp without time zone":
        return pa.timestamp("us")
    if typ == "date":
        return pa.date32()
    if typ == "boolean":
        return pa.bool_()
    return pa.string()


class _CopyStream(io.RawIOBase):
    """The bytes of a COPY TO STDOUT as a readable stream (what pyarrow's CSV reader reads)."""

    def __init__(self, chunks: Iterator[Any]) -> None:
        self.chunks = chunks
        self.pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        """As much as b holds (COPY sends a row a message: a read of one message would be an
        Arrow block, and a Parquet row group, of one row)."""
        view, filled = memoryview(b).cast("B"), 0
        while filled < len(view):
            if not self.pending:
                try:
                    self.pending = bytes(next(self.chunks))
                except StopIteration:
                    break
            n = min(len(view) - filled, len(self.pending))
            view[filled:filled + n] = self.pending[:n]
            self.pending = self.pending[n:]
            filled += n
        return filled


_TIMES = ("timestamptz", "timestamp with time zone", "timestamp without time zone")


def write_parquet(conn: psycopg.Connection, query: sql.Composed | Iterator[sql.Composed], names: list[str],
                  types: list[str], out: BinaryIO, progress: Callable[[int], None] | None = None) -> int:
    """The query's rows (or those of several queries, one after the other) as a Parquet file;
    returns the rows written. The rows travel as CSV (COPY) and Arrow's reader parses them,
    a block at a time: instants as integer microseconds (exact), numbers as their text,
    NULL (unquoted empty) apart from the empty string (quoted)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    schema = pa.schema([pa.field(n, _arrow_type(pa, t)) for n, t in zip(names, types, strict=True)])
    cols, read = [], {}
    for n, t in zip(names, types, strict=True):
        col = sql.SQL("x.{}").format(sql.Identifier(n))
        if t in _TIMES:
            col = sql.SQL("(extract(epoch FROM {}) * 1000000)::bigint").format(col)
        elif t == "date":
            col = sql.SQL("to_char({}, 'YYYY-MM-DD')").format(col)
        cols.append(col)
        read[n] = pa.int64() if t in _TIMES else schema.field(n).type
    options = pacsv.ConvertOptions(column_types=read, null_values=[""], strings_can_be_null=True,
                                   quoted_strings_can_be_null=False, true_values=["t"], false_values=["f"])
    total = 0
    with pq.ParquetWriter(out, schema) as writer:
        for q in [query] if isinstance(query, sql.Composed) else query:
            copy = sql.SQL("COPY (SELECT {} FROM ({}) x) TO STDOUT (FORMAT csv)").format(sql.SQL(", ").join(cols), q)
            with conn.cursor() as cur, cur.copy(copy) as cp:
                reader = pacsv.open_csv(_CopyStream(iter(cp)), read_options=pacsv.ReadOptions(
                    column_names=names, block_size=1 << 22), convert_options=options)
                for batch in reader:
                    arrays = [c.cast(schema.field(i).type) if c.type != schema.field(i).type else c
                              for i, c in enumerate(batch.columns)]
                    writer.write_batch(pa.record_batch(arrays, schema=schema))
                    total += batch.num_rows
                    if progress:
                        progress(batch.num_rows)
    return total


def export(conn: psycopg.Connection, spec: ExportSpec, out: BinaryIO, *, system_ids: list[int],
           lo: datetime | None = None, hi: datetime | None = None, fmt: str = "csv",
           time_format: str = "iso", progress: Callable[[int], None] | None = None) -> int:
    """Write one export (interval records or a tier of one entity type) to out; returns the
    number of rows."""
    if fmt not in ("csv", "parquet"):
        raise ExportError(f"unknown format {fmt!r}: csv or parquet", "format")
    if time_format not in ("iso", "julian"):
        raise ExportError(f"unknown time format {time_format!r}: iso or julian", "time_format")
    if spec.kind == "interval":
        query, types = interval_query(spec.entity, system_ids, lo, hi, time_format=time_format,
                                      typed=fmt == "parquet")
        names = interval_header(spec.entity)
    else:
        query, names, types = tier_query(conn, spec.entity, spec.kind, system_ids, lo, hi, typed=fmt == "parquet")
    if fmt == "csv" and spec.kind == "interval":
        return write_csv(conn, interval_chunks(conn, spec.entity, system_ids, lo, hi, time_format=time_format),
                         out, progress, header=names)
    if fmt == "csv":
        return write_csv(conn, query, out, progress)
    if spec.kind == "interval":
        return write_parquet(conn, interval_chunks(conn, spec.entity, system_ids, lo, hi, time_format=time_format,
                                                   typed=True), names, types, out, progress)
    return write_parquet(conn, query, names, types, out, progress)
