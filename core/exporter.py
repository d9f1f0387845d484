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

Interval records are read one system and UTC hour at a time (:func:`_hours`; a run's
intervals all begin in the UTC hour it begins), as the runs are stored: the server only
streams the hour's rows of ``measure.interval_run`` (:func:`_run_query`, binary, the
counters as PostgreSQL's bigint[][] form) in the order of the entity key and measurement
name, and this module decodes them with NumPy (:func:`_read_hour`), orders the hour's
records by FROM (then that order), and writes them: CSV lines assembled as NUL-padded
fixed-width fields whose NULs are dropped (:func:`_hour_csv`, no pyarrow needed), Parquet from
the same arrays (:func:`_hour_batches`). Every distinct FROM and TO of the hour is formatted
once by the server's own ``measure.local_iso`` / ``measure.julian_timestamp``
(:func:`_instants`: an hour has a few dozen), so the text is the server's. The result is byte
for byte the ``COPY (interval_query) TO STDOUT (FORMAT csv)`` that unpacks the runs on the
server (:func:`interval_query`, kept as the definition; decoding there cost 4× the time of a
raw COPY TO of the same rows, bench/RESULTS.md), and Parquet holds the typed query's values
(tests/core/test_import_export.py compares both for every entity type). Memory: one hour of
one entity type at a time (a ref16 DISCOPEN hour: 614,640 records, their counters 74 MB),
formatted 32,768 rows at a time (peak RSS of `measuredb export` of ref16 hours: about 250 MB
as CSV, 280 MB as Parquet; bench/bench_transfer.py).

Tiers stream by ``COPY (…) TO STDOUT`` (the text never depends on the session's DateStyle
or TimeZone): CSV as it comes, Parquet parsed by Arrow's CSV reader a block at a time
(numeric columns become float64 in Parquet; CSV keeps every digit). Both read only the public
schema ``measure`` (``measure.interval_run``, ``entity``, ``measurement``, ``system`` and
functions granted to measure_api), so the API's role can run them (GET /export uses
:func:`interval_csv`). An export imported into an empty database gives the same tiers
(tests/core/test_import_export.py).
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, BinaryIO

import numpy as np
import psycopg
from psycopg import sql
from psycopg.adapt import Loader

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
    hour that holds runs (:func:`_hours`)."""
    for sid, _, _, first, last in _hours(conn, ent, system_ids, lo, hi):
        yield interval_query(ent, [sid], first, last, time_format=time_format, typed=typed)[0]


def _hours(conn: psycopg.Connection, ent: EntityDef, system_ids: list[int], lo: datetime | None,
           hi: datetime | None) -> Iterator[tuple[int, str, str, datetime, datetime]]:
    """(system id, name, time zone, from, to) of each system (by name) and UTC hour that
    holds runs of the entity type, the hour cut to [lo, hi): a run's intervals all begin in
    the UTC hour it begins (the table's CHECK), so the hour's runs give exactly the hour's
    rows, and a reader sorts one hour's rows (in memory) instead of the whole range on disk
    (a ref16 day's DISCOPEN: 15.8 M rows)."""
    systems = conn.execute("SELECT system_id, system_name, time_zone FROM measure.system"
                           " WHERE system_id = ANY (%s) ORDER BY system_name", (system_ids,)).fetchall()
    for sid, name, zone in systems:
        at = lo if lo is not None else datetime(1970, 1, 1, tzinfo=UTC)
        while True:
            hour = scalar(conn.execute(_NEXT_HOUR, (sid, ent.code, at, hi, hi)))
            if hour is None:
                break
            first = max(lo, hour) if lo is not None else hour
            last = min(hi, hour + _HOUR) if hi is not None else hour + _HOUR
            yield sid, name, zone, first, last
            at = hour + _HOUR


# ---------------------------------------------------------------- interval records, decoded here

_ROW_SLICE = 1 << 15  # rows formatted at a time (bounded memory; the arrays stay in the allocator's cache)
_INT8_ARRAY_OID = 1016  # bigint[]
_ARRAY_ITEM = np.dtype([("len", ">i4"), ("value", ">i8")])  # an element of a binary bigint[]: length, value


class _RawLoader(Loader):
    """A binary value as its bytes (the runs' counters, decoded by :func:`_decode_counters`)."""

    format = psycopg.pq.Format.BINARY

    def load(self, data: Any) -> bytes:
        return bytes(data)


@dataclass
class _Hour:
    """The interval records of one system and UTC hour, decoded from its runs: rows in export
    order (``run``: the run of each row, ``i``: its interval's 1-based index in the run),
    per-run values, each row's FROM and TO (Unix µs), the counters (a row of ``values`` per
    interval of every run, ``valid`` False where the reference query gives NULL)."""

    runs: list[tuple[Any, ...]]
    run: np.ndarray
    from_us: np.ndarray
    to_us: np.ndarray
    counter_row: np.ndarray
    values: np.ndarray  # (intervals, counters)
    valid: np.ndarray | None


def _run_query(ent: EntityDef, system_id: int, lo: datetime, hi: datetime, *,
               counted: bool = False) -> tuple[sql.Composed, list[str]]:
    """The runs of one system holding interval records whose FROM lies in [lo, hi) (one UTC
    hour at most), with what interval_query computes once per run, in the order of its ORDER
    BY after the FROM (entity key, measurement name); and the columns' types. counted: only
    each run's n."""
    cols: list[tuple[sql.Composable, str]] = [(sql.SQL("m.name"), "text")]
    for f in ent.id_fields:
        text = sql.SQL("e.ids->>{}").format(sql.Literal(f))
        cols.append((sql.SQL("({})::bigint").format(text), "int8") if f in _INT_FIELDS else (text, "text"))
    if "cpu" not in ent.id_fields:
        cols.append((sql.SQL("(CASE WHEN r.cpu >= 0 THEN r.cpu END)::bigint"), "int8"))
    cols += [(sql.SQL("r.delta_us::bigint"), "int8"), (sql.SQL("r.error::bigint"), "int8")]
    if ent.name == "userdef":
        cols.append((sql.SQL("_measure.user_counter_type(r.measurement_id, e.ids->>'name')"), "text"))
    cols += [(sql.SQL("(extract(epoch FROM r.from_at) * 1000000)::bigint"), "int8"),
             (sql.SQL("measure.run_first(r.from_at, r.delta_us, {}::timestamptz)::bigint").format(sql.Literal(lo)),
              "int8"),
             (sql.SQL("least(r.n, measure.run_last(r.from_at, r.delta_us, {}::timestamptz))::bigint").format(
                 sql.Literal(hi)), "int8"),
             (sql.SQL("r.n::bigint"), "int8"), (sql.SQL("r.counters"), "int8[]")]
    if counted:
        cols = [(sql.SQL("r.n"), "int8")]
    if counted:
        cols = [(sql.SQL("r.n"), "int8")]
    query = sql.SQL(
        "SELECT {cols}\n"
        "  FROM measure.interval_run r\n"
        "  JOIN measure.entity e ON e.entity_id = r.entity_id\n"
        "  JOIN (SELECT measurement_id, name FROM measure.measurement) m ON m.measurement_id = r.measurement_id\n"
        " WHERE r.type_code = {code} AND r.system_id = {system}\n"
        "   AND r.from_at >= date_bin(INTERVAL '1 hour', {lo}::timestamptz, TIMESTAMPTZ '2000-01-01 00:00:00+00')\n"
        "   AND r.from_at < {hi}::timestamptz\n"
        " ORDER BY e.key, m.name").format(cols=sql.SQL(", ").join(c for c, _ in cols), code=sql.Literal(ent.code),
                                          system=sql.Literal(system_id), lo=sql.Literal(lo), hi=sql.Literal(hi))
    return query, [t for _, t in cols]


def _decode_counters(data: bytes, values: np.ndarray) -> np.ndarray | None:
    """Decode a run's counters (bigint[][] in PostgreSQL's binary form) into values (zeros,
    n × width for a run of n intervals) as ``c[i][p]`` gives them for i = 1..n and p =
    1..width; returns their validity (None: all valid): NULL past the array's bounds, for a
    NULL element, and unless the array has two dimensions."""
    n, width = values.shape
    ndim, has_null, _ = struct.unpack_from(">iii", data)
    dims = struct.unpack_from(f">{2 * ndim}i", data, 12)
    if ndim != 2:
        return np.zeros((n, width), bool)
    rows, first_row, k, first_col = dims
    at = 12 + 8 * ndim
    present = None
    if has_null:  # elements of varying size (a NULL is its length -1 alone)
        found = np.zeros((rows, k), np.int64)
        present = np.zeros((rows, k), bool)
        for e in range(rows * k):
            (size,) = struct.unpack_from(">i", data, at)
            at += 4
            if size >= 0:
                found.flat[e] = struct.unpack_from(">q", data, at)[0]
                present.flat[e] = True
                at += size
    else:
        found = np.frombuffer(data, _ARRAY_ITEM, rows * k, at).reshape(rows, k)["value"]
    # subscripts i, p of c[i][p] where the array has them (its bounds need not start at 1)
    i0, i1 = max(1, first_row), min(n, first_row + rows - 1)
    p0, p1 = max(1, first_col), min(width, first_col + k - 1)
    if i0 <= i1 and p0 <= p1:
        cut = (slice(i0 - first_row, i1 + 1 - first_row), slice(p0 - first_col, p1 + 1 - first_col))
        values[i0 - 1:i1, p0 - 1:p1] = found[cut]
    if (i0, i1, p0, p1) == (1, n, 1, width) and present is None:
        return None
    valid = np.zeros((n, width), bool)
    if i0 <= i1 and p0 <= p1:
        valid[i0 - 1:i1, p0 - 1:p1] = True if present is None else present[cut]
    return valid


def _read_hour(conn: psycopg.Connection, ent: EntityDef, system_id: int, lo: datetime, hi: datetime) -> _Hour:
    """The interval records of one system whose FROM lies in [lo, hi) (within one UTC hour),
    read as their runs (a row per run: the server only streams them) and decoded here."""
    width = len(ent.counters)
    query, types = _run_query(ent, system_id, lo, hi)
    # the hour's intervals, to decode the counters in place (grown if runs arrived since)
    values = np.zeros((int(scalar(conn.execute(sql.SQL("SELECT coalesce(sum(n), 0) FROM ({}) q").format(
        _run_query(ent, system_id, lo, hi, counted=True)[0]))) or 0), width), np.int64)
    valid: np.ndarray | None = None
    runs: list[tuple[Any, ...]] = []
    total = 0
    with conn.cursor() as cur:  # binary COPY: a run at a time, none of them held as bytes
        cur.adapters.register_loader(_INT8_ARRAY_OID, _RawLoader)
        with cur.copy(sql.SQL("COPY ({}) TO STDOUT (FORMAT binary)").format(query)) as cp:
            cp.set_types(types)
            for row in cp.rows():
                n = row[-2]
                if total + n > len(values):
                    values = np.concatenate([values, np.zeros((max(n, len(values)), width), np.int64)])
                    if valid is not None:
                        valid = np.concatenate([valid, np.ones((len(values) - len(valid), width), bool)])
                run_valid = _decode_counters(row[-1], values[total:total + n])
                if run_valid is not None:
                    if valid is None:
                        valid = np.ones(values.shape, bool)
                    valid[total:total + n] = run_valid
                runs.append(row[:-1])
                total += n
    # per run: from (µs), first and last index, where its intervals' counters begin
    n_runs = len(runs)
    from0 = np.fromiter((r[-4] for r in runs), np.int64, n_runs)
    first = np.fromiter((r[-3] for r in runs), np.int64, n_runs)
    last = np.fromiter((r[-2] for r in runs), np.int64, n_runs)
    delta = np.fromiter((r[_delta_at(ent)] for r in runs), np.int64, n_runs)
    sizes = np.fromiter((r[-1] for r in runs), np.int64, n_runs)
    base = np.cumsum(sizes) - sizes
    # a row per interval of [first, last] of each run, ordered by FROM, then the runs' order
    counts = np.maximum(last - first + 1, 0)
    run = np.repeat(np.arange(n_runs), counts)
    i = first[run] + np.arange(len(run)) - np.repeat(np.cumsum(counts) - counts, counts)
    from_us = from0[run] + (i - 1) * delta[run]
    order = np.lexsort((run, from_us))
    run, i, from_us = run[order], i[order], from_us[order]
    return _Hour([r[:-4] for r in runs], run, from_us, from_us + delta[run], base[run] + i - 1, values, valid)


def _delta_at(ent: EntityDef) -> int:
    """Where DELTA-TIME is in a row of _run_query."""
    return 1 + len(ent.id_fields) + ("cpu" not in ent.id_fields)


_INSTANTS = {  # an instant (Unix µs) of a system's zone as export writes it, by the server's own functions
    ("iso", False): "measure.local_iso({at}, %s)",
    ("julian", False): "measure.julian_timestamp({at}, %s)::text",
    ("julian", True): "measure.julian_timestamp({at}, %s)",
}


def _instants(conn: psycopg.Connection, at_us: np.ndarray, zone: str, time_format: str, typed: bool) -> list[Any]:
    """The distinct instants of an hour, formatted by the functions interval_query calls (an
    hour of records has few: the server formats each once, not once per row)."""
    expr = _INSTANTS[time_format, typed].format(at="TIMESTAMPTZ 'epoch' + u.at * INTERVAL '1 microsecond'")
    row = conn.execute(f"SELECT array_agg({expr} ORDER BY u.k) FROM unnest(%s::bigint[]) WITH ORDINALITY u (at, k)",
                       (zone, at_us.tolist())).fetchone()
    return list(row[0]) if row and row[0] is not None else []


def _csv_field(value: Any, encoding: str) -> bytes:
    """A value as COPY … (FORMAT csv) writes it: NULL empty, the empty string and any text
    holding a comma, quote, CR or LF quoted (quotes doubled)."""
    if value is None:
        return b""
    text = str(value)
    if text == "" or any(c in text for c in ',"\r\n'):
        text = '"' + text.replace('"', '""') + '"'
    return text.encode(encoding)


def _table(texts: Sequence[bytes]) -> np.ndarray:
    """Byte strings as the rows of a matrix, NUL-padded (text never holds a NUL)."""
    width = max(map(len, texts), default=0)
    return np.frombuffer(b"".join(t.ljust(width, b"\0") for t in texts), np.uint8).reshape(len(texts), width)


def _digits(values: np.ndarray, valid: np.ndarray | None) -> np.ndarray:
    """Integers as their decimal text, right-aligned in the rows of a NUL-padded matrix (an
    invalid value: all NUL, i.e. empty)."""
    neg = values < 0
    rest = np.abs(values).astype(np.uint64)  # (the magnitude of -2^63 too)
    top = int(rest.max(initial=0))
    width = len(str(top)) + bool(neg.any())
    out = np.zeros((len(values), width), np.uint8)
    used = np.zeros(len(values), np.int64)
    for d in range(width - 1, -1, -1):
        q = rest // 10
        digit = (rest - q * 10).astype(np.uint8) + 48
        show = rest > 0 if d < width - 1 else np.ones(len(values), bool)
        out[:, d] = np.where(show, digit, 0)
        used += show
        rest = q
    if neg.any():
        at = np.flatnonzero(neg)
        out[at, width - 1 - used[at]] = ord("-")
    if valid is not None:
        out[~valid] = 0
    return out


def _hour_csv(conn: psycopg.Connection, hour: _Hour, system_name: str, zone: str, ent: EntityDef,
              time_format: str) -> Iterator[tuple[bytes, int]]:
    """The CSV lines of a decoded hour, a slice of rows at a time (with its number of rows):
    each slice a matrix of fixed-width fields (NUL-padded) whose NULs are then dropped."""
    n = len(hour.run)
    if not n:
        return
    enc = conn.info.encoding
    cut = _delta_at(ent)
    head = _table([b",".join([_csv_field(system_name, enc), *(_csv_field(v, enc) for v in r[:cut])]) + b","
                   for r in hour.runs])
    tail = _table([b"," + b",".join(_csv_field(v, enc) for v in r[cut:]) + b"," for r in hour.runs])
    at, where = np.unique(np.concatenate([hour.from_us, hour.to_us]), return_inverse=True)
    times = _table([_csv_field(t, enc) for t in _instants(conn, at, zone, time_format, False)])
    comma = np.full((1, 1), ord(","), np.uint8)
    for s in range(0, n, _ROW_SLICE):
        rows = slice(s, min(s + _ROW_SLICE, n))
        run, counter_row = hour.run[rows], hour.counter_row[rows]
        values = hour.values[counter_row]
        valid = None if hour.valid is None else hour.valid[counter_row]
        size = len(run)
        parts = [head[run], times[where[rows]], np.broadcast_to(comma, (size, 1)), times[where[n:][rows]], tail[run]]
        for p in range(len(ent.counters)):
            if p:
                parts.append(np.broadcast_to(comma, (size, 1)))
            parts.append(_digits(values[:, p], None if valid is None else valid[:, p]))
        parts.append(np.full((size, 1), ord("\n"), np.uint8))
        lines = np.concatenate(parts, axis=1).ravel()
        yield lines[lines != 0].tobytes(), size


def _hour_batches(conn: psycopg.Connection, hour: _Hour, system_name: str, zone: str, ent: EntityDef,
                  time_format: str, schema: Any) -> Iterator[Any]:
    """A decoded hour as Arrow record batches of `schema` (the typed interval_query's
    columns), a slice of rows at a time."""
    import pyarrow as pa

    n, cut, fields = len(hour.run), _delta_at(ent), list(schema)
    per_run = {j: pa.array([r[j] for r in hour.runs], fields[1 + j + 2 * (j >= cut)].type)
               for j in range(len(fields) - 3 - len(ent.counters))}
    if time_format == "julian":
        at, where = np.unique(np.concatenate([hour.from_us, hour.to_us]), return_inverse=True)
        julian = np.asarray(_instants(conn, at, zone, time_format, True), np.int64)
        from_at, to_at = julian[where[:n]], julian[where[n:]]
        when = pa.int64()
    else:
        from_at, to_at, when = hour.from_us, hour.to_us, pa.timestamp("us", tz="UTC")
    for s in range(0, n, _ROW_SLICE):
        rows = slice(s, min(s + _ROW_SLICE, n))
        run = pa.array(hour.run[rows])
        values = hour.values[hour.counter_row[rows]].T.copy()  # a column per counter
        valid = None if hour.valid is None else hour.valid[hour.counter_row[rows]].T
        cols = [pa.array([system_name] * len(run), pa.string())]
        cols += [per_run[j].take(run) for j in range(cut)]
        cols += [pa.array(from_at[rows], when), pa.array(to_at[rows], when)]
        cols += [per_run[j].take(run) for j in range(cut, len(per_run))]
        for p in range(len(ent.counters)):
            cols.append(pa.array(values[p], pa.int64(), mask=None if valid is None else ~valid[p]))
        yield pa.record_batch(cols, schema=schema)


# ---------------------------------------------------------------- writing


def write_csv(conn: psycopg.Connection, query: sql.Composed, out: BinaryIO,
              progress: Callable[[int], None] | None = None) -> int:
    """COPY the query's rows as CSV with a header into out; returns the rows written."""
    with conn.cursor() as cur:
        with cur.copy(sql.SQL("COPY ({}) TO STDOUT WITH (FORMAT csv, HEADER)").format(query)) as cp:
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


def write_parquet(conn: psycopg.Connection, query: sql.Composed, names: list[str],
                  types: list[str], out: BinaryIO, progress: Callable[[int], None] | None = None) -> int:
    """The query's rows as a Parquet file (the tiers); returns the rows written. The rows
    travel as CSV (COPY) and Arrow's reader parses them, a block at a time: instants as integer microseconds (exact), numbers as their text,
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
    copy = sql.SQL("COPY (SELECT {} FROM ({}) x) TO STDOUT (FORMAT csv)").format(sql.SQL(", ").join(cols), query)
    with pq.ParquetWriter(out, schema) as writer, conn.cursor() as cur, cur.copy(copy) as cp:
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


def interval_csv(conn: psycopg.Connection, ent: EntityDef, system_ids: list[int], lo: datetime | None,
                 hi: datetime | None, *, time_format: str = "iso") -> Iterator[bytes]:
    """The interval records as CSV under their header, chunk by chunk, byte for byte what
    COPY of interval_query writes: an hour of runs at a time read as they are stored and
    decoded here (:func:`_read_hour`), the numbers formatted here (:func:`_hour_csv`)."""
    for data, _ in _interval_csv(conn, ent, system_ids, lo, hi, time_format):
        yield data


def _interval_csv(conn: psycopg.Connection, ent: EntityDef, system_ids: list[int], lo: datetime | None,
                  hi: datetime | None, time_format: str) -> Iterator[tuple[bytes, int]]:
    """interval_csv's chunks with the rows each holds."""
    yield (",".join(interval_header(ent)) + "\n").encode(), 0  # (the names need no quoting)
    for sid, name, zone, first, last in _hours(conn, ent, system_ids, lo, hi):
        yield from _hour_csv(conn, _read_hour(conn, ent, sid, first, last), name, zone, ent, time_format)


def write_interval_csv(conn: psycopg.Connection, ent: EntityDef, system_ids: list[int], lo: datetime | None,
                       hi: datetime | None, out: BinaryIO, progress: Callable[[int], None] | None = None, *,
                       time_format: str = "iso") -> int:
    """interval_csv into out; returns the rows written."""
    total = 0
    for data, rows in _interval_csv(conn, ent, system_ids, lo, hi, time_format):
        out.write(data)
        total += rows
        if progress:
            progress(len(data))
    return total


def write_interval_parquet(conn: psycopg.Connection, ent: EntityDef, system_ids: list[int], lo: datetime | None,
                           hi: datetime | None, names: list[str], types: list[str], out: BinaryIO,
                           progress: Callable[[int], None] | None = None, *, time_format: str = "iso") -> int:
    """The interval records as Parquet (the typed interval_query's columns), a row group per
    slice of an hour's rows, decoded as write_interval_csv does; returns the rows written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([pa.field(n, _arrow_type(pa, t)) for n, t in zip(names, types, strict=True)])
    total = 0
    with pq.ParquetWriter(out, schema) as writer:
        for sid, name, zone, first, last in _hours(conn, ent, system_ids, lo, hi):
            # (the hour held only while it is written: not beside the next one)
            for batch in _hour_batches(conn, _read_hour(conn, ent, sid, first, last), name, zone, ent,
                                       time_format, schema):
                writer.write_batch(batch)
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
        return write_interval_csv(conn, spec.entity, system_ids, lo, hi, out, progress, time_format=time_format)
    if fmt == "csv":
        return write_csv(conn, query, out, progress)
    if spec.kind == "interval":
        return write_interval_parquet(conn, spec.entity, system_ids, lo, hi, names, types, out, progress,
                                      time_format=time_format)
    return write_parquet(conn, query, names, types, out, progress)
