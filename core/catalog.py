"""The MEASURE counter catalogue: entity types, their counters and their tiers, loaded from CSV.

``schema/catalog/entities.csv``, ``counters.csv`` and ``tier_items.csv`` are the single source
of truth; this module loads and validates them and offers lookups::

    cat = load_catalog()
    cpu = cat.entity("CPU")              # also "cpu", "DISK" (synonym of DISC), or 1
    cpu.counter("CPU-BUSY-TIME")         # also "cpu_busy_time", any case
    cpu.index("cpu_qtime")               # position in the record layout (0-based)
    cpu.kinds                            # np.int8 array of KIND_* codes, record order
    cat.tiered_names                     # the entity types with tiers, in tier_order
    cpu.tier_items                       # the items of its shift, month and year tiers

Tiers: the entity types with a ``tier_order`` in entities.csv have the tiers :data:`TIERS`
(``measure.<entity>_hour`` … ``_year``); the order numbers them wherever they are listed (API
enums, dashboards, messages). ``tier_items.csv`` names the items their shift, month and year
tiers keep (``<item>_avg``, ``_max``, ``_min``, ``_delt``), in column order.

Row order of counters within an entity is the record layout (``CounterDef.position``).
Names: ``measure_name`` is the verbatim legacy MEASURE name; ``name`` is its mechanical
snake case (:func:`snake`).

Beyond the 1986 set (type codes 1-14), the catalogue holds what the H-, J- and L-series
manual adds (docs/measure-reference.md §4): the IPU counters of CPU (IPUS and, per IPU n of
at most 8, IPU-BUSY-TIME-n, IPU-DISPATCHES-n and IPU-QTIME-n: the ZMS record's IPU array
flattened) and of PROCESS, appended after their 1986 counters so that stored records keep
their positions, and the types SQLPROC (15), SQLSTMT (16), SERVERNET (18, synonym
CONTROLLER), DISKFILE (19), OSSCPU (20) and OSSNS (21) under the manual's descriptor type
numbers. Their rows say how sure the source is (``confidence``: confirmed, inferred or
unknown, measure-reference's vocabulary; empty for the 1986 set). The kind ``elapsed``
(SQLSTMT, SQLPROC) is stored as a delta and rated, as MEASCOM shows it, as % of the interval
(per call is ELAPSED-BUSY-TIME / CALLS, a report's figure).
"""

from __future__ import annotations

import csv
import difflib
import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = [
    "CATALOG_DIR",
    "CONFIDENCE",
    "KINDS",
    "KIND_ACCUMULATING",
    "KIND_BUSY",
    "KIND_CODES",
    "KIND_ELAPSED",
    "KIND_INCREMENTING",
    "KIND_MAXQ",
    "KIND_MAXVALUE",
    "KIND_QBUSY",
    "KIND_QUEUE",
    "KIND_RESPONSE",
    "KIND_SNAPSHOT",
    "TIERS",
    "TIER_UNITS",
    "UNITS",
    "Catalog",
    "CatalogError",
    "CounterDef",
    "EntityDef",
    "TierItem",
    "UnknownCounter",
    "UnknownEntityType",
    "load_catalog",
    "snake",
]

# Kind codes: index into KINDS. Stable; vectorised code may rely on them.
KINDS: tuple[str, ...] = (
    "incrementing",
    "accumulating",
    "busy",
    "queue",
    "qbusy",
    "response",
    "snapshot",
    "maxq",
    "maxvalue",
    "elapsed",
)
(
    KIND_INCREMENTING,
    KIND_ACCUMULATING,
    KIND_BUSY,
    KIND_QUEUE,
    KIND_QBUSY,
    KIND_RESPONSE,
    KIND_SNAPSHOT,
    KIND_MAXQ,
    KIND_MAXVALUE,
    KIND_ELAPSED,
) = range(len(KINDS))
KIND_CODES: dict[str, int] = {k: i for i, k in enumerate(KINDS)}

UNITS: tuple[str, ...] = ("us", "events", "bytes", "pages", "blocks", "length", "samples", "count")
# how sure the source is of a counter's name and kind (counters.csv confidence; measure-reference.md's
# vocabulary). Empty: the 1986 article's set, whose sources the catalogue's history records.
CONFIDENCE: tuple[str, ...] = ("confirmed", "inferred", "unknown")
# what a tier item's value is measured in (tier_items.csv unit; by_type: USERDEF, per counter TYPE)
TIER_UNITS: tuple[str, ...] = ("length", "per_second", "percent", "ratio", "bytes_per_second", "seconds",
                               "by_type")
# the tiers of every entity type with a tier_order, finest first
TIERS: tuple[str, ...] = ("hour", "shift", "month", "year")

CATALOG_DIR = Path(__file__).resolve().parents[1] / "schema" / "catalog"

ENTITY_COLUMNS = ("type_code", "entity", "measure_name", "id_fields", "synonyms", "tier_order", "help")
COUNTER_COLUMNS = ("entity", "counter", "measure_name", "kind", "unit", "max_of", "help")
# optional: a catalogue of an earlier release (tests/fixtures/schema-090) has no such column
COUNTER_OPTIONAL_COLUMNS = ("confidence",)
TIER_ITEM_COLUMNS = ("entity", "item", "enform", "unit", "help")


class CatalogError(ValueError):
    """The catalogue CSV files are malformed (message names file, line and field)."""


class UnknownCounter(KeyError):
    """A counter name is not in the entity's catalogue."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class UnknownEntityType(KeyError):
    """An entity type name or code is not in the catalogue."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def snake(measure_name: str) -> str:
    """Mechanical transform of a MEASURE name: ``CPU-BUSY-TIME`` -> ``cpu_busy_time``."""
    return measure_name.strip().lower().replace("-", "_")


@dataclass(frozen=True, slots=True)
class CounterDef:
    entity: str
    name: str
    measure_name: str
    kind: str
    unit: str
    max_of: str | None
    help: str
    position: int
    confidence: str = ""  # CONFIDENCE, or "" for the 1986 set

    @property
    def kind_code(self) -> int:
        return KIND_CODES[self.kind]


@dataclass(frozen=True, slots=True)
class TierItem:
    """An item the shift, month and year tiers of an entity type keep (tier_items.csv)."""

    entity: str
    item: str
    enform: str  # its ENFORM name (QLEN, DISC BUSY …)
    unit: str  # one of TIER_UNITS
    help: str
    position: int  # 0-based, in the entity's tier_items.csv order (the views' column order)


@dataclass(frozen=True)
class EntityDef:
    code: int
    name: str
    measure_name: str
    id_fields: tuple[str, ...]
    synonyms: tuple[str, ...]
    help: str
    counters: tuple[CounterDef, ...]
    tier_order: int | None = None  # None: interval records only, no tiers
    tier_items: tuple[TierItem, ...] = ()

    @property
    def tiered(self) -> bool:
        """Has the tiers TIERS (measure.<entity>_hour, _shift, _month, _year)."""
        return self.tier_order is not None

    @functools.cached_property
    def _by_name(self) -> dict[str, CounterDef]:
        return {c.name: c for c in self.counters}

    def counter(self, name_or_measure_name: str) -> CounterDef:
        """Look a counter up by snake or MEASURE name, case-insensitively."""
        key = snake(str(name_or_measure_name))
        try:
            return self._by_name[key]
        except KeyError:
            close = difflib.get_close_matches(key, list(self._by_name), n=4, cutoff=0.6)
            hint = (
                "; did you mean " + ", ".join(self._by_name[c].measure_name for c in close) + "?"
                if close
                else f"; known counters: {', '.join(c.measure_name for c in self.counters)}"
            )
            raise UnknownCounter(
                f"unknown counter {name_or_measure_name!r} for entity {self.measure_name}{hint}"
            ) from None

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and snake(name) in self._by_name

    def index(self, name: str) -> int:
        """Position of the counter in the record layout (0-based)."""
        return self.counter(name).position

    @functools.cached_property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.counters)

    @functools.cached_property
    def measure_names(self) -> tuple[str, ...]:
        return tuple(c.measure_name for c in self.counters)

    @functools.cached_property
    def kinds(self) -> np.ndarray:
        """Kind codes (``KIND_*``) in record order, as a read-only ``np.int8`` array."""
        arr = np.array([c.kind_code for c in self.counters], dtype=np.int8)
        arr.flags.writeable = False
        return arr


@dataclass(frozen=True)
class Catalog:
    entities: dict[str, EntityDef]  # by snake name, in type-code order

    def entity(self, x: str | int) -> EntityDef:
        """Look an entity type up by name (any case), synonym (``DISK``) or type code."""
        if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
            for e in self.entities.values():
                if e.code == int(x):
                    return e
        elif isinstance(x, str):
            key = x.strip().lower()
            if key in self.entities:
                return self.entities[key]
            for e in self.entities.values():
                if key in (s.lower() for s in e.synonyms):
                    return e
            if key.isdigit():
                return self.entity(int(key))
        valid = ", ".join(f"{e.measure_name} ({e.code})" for e in self.entities.values())
        raise UnknownEntityType(f"unknown entity type {x!r}; valid entity types: {valid}")

    def __iter__(self):
        return iter(self.entities.values())

    @functools.cached_property
    def tiered(self) -> tuple[EntityDef, ...]:
        """The entity types with tiers, in tier_order."""
        return tuple(sorted((e for e in self.entities.values() if e.tiered),
                            key=lambda e: e.tier_order or 0))  # (a tiered one has its tier_order)

    @functools.cached_property
    def tiered_names(self) -> tuple[str, ...]:
        """Names of the entity types with tiers, in tier_order: cpu, disc, line, process, …"""
        return tuple(e.name for e in self.tiered)

    def counter(self, entity: str | int, name: str) -> CounterDef:
        return self.entity(entity).counter(name)


# ----------------------------------------------------------------------------- loading


def _read_csv(path: Path, columns: tuple[str, ...],
              optional: tuple[str, ...] = ()) -> list[tuple[int, dict[str, str]]]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CatalogError(f"{path}: cannot read catalogue file: {exc}") from None
    reader = csv.DictReader(text.splitlines())
    header = reader.fieldnames or []
    missing = [c for c in columns if c not in header]
    if missing:
        raise CatalogError(
            f"{path}, line 1: missing required column(s) {', '.join(missing)}; "
            f"expected header {','.join(columns)}"
        )
    rows = []
    for row in reader:
        line = reader.line_num
        if not any((v or "").strip() for v in row.values() if isinstance(v, str)):
            continue  # blank line
        if None in row:  # more fields than header
            raise CatalogError(f"{path}, line {line}: too many fields ({row[None]!r} extra)")
        rows.append((line, {k: (row.get(k) or "").strip() for k in (*columns, *optional)}))
    return rows


def _err(path: Path, line: int, fld: str, msg: str) -> CatalogError:
    return CatalogError(f"{path}, line {line}, field '{fld}': {msg}")


def _load(directory: Path) -> Catalog:  # noqa: C901 - the catalogue's checks in file order, each its own error
    ent_path = directory / "entities.csv"
    ctr_path = directory / "counters.csv"

    items_path = directory / "tier_items.csv"

    entities: dict[str, dict] = {}
    codes: set[int] = set()
    tier_orders: dict[int, str] = {}
    lines: dict[str, int] = {}  # entity -> its line in entities.csv
    for line, r in _read_csv(ent_path, ENTITY_COLUMNS):
        try:
            code = int(r["type_code"])
        except ValueError:
            raise _err(ent_path, line, "type_code", f"not an integer: {r['type_code']!r}") from None
        if code in codes:
            raise _err(ent_path, line, "type_code", f"duplicate type code {code}")
        name = r["entity"]
        if not name or name != name.lower() or not name.isidentifier():
            raise _err(ent_path, line, "entity", f"must be a lower-case identifier, got {name!r}")
        if name in entities:
            raise _err(ent_path, line, "entity", f"duplicate entity {name!r}")
        if snake(r["measure_name"]) != name:
            raise _err(
                ent_path, line, "measure_name",
                f"{r['measure_name']!r} does not match entity {name!r} (expected {name.upper()})",
            )
        ids = tuple(s.strip() for s in r["id_fields"].split(";") if s.strip())
        if not ids:
            raise _err(ent_path, line, "id_fields", "at least one identifying field is required")
        for s in ids:
            if not s.isidentifier() or s != s.lower():
                raise _err(ent_path, line, "id_fields", f"{s!r} is not a snake-case field name")
        tier_order = None
        if r["tier_order"]:
            try:
                tier_order = int(r["tier_order"])
            except ValueError:
                tier_order = 0
            if tier_order < 1:
                raise _err(ent_path, line, "tier_order",
                           f"must be a positive integer (or empty: no tiers), got {r['tier_order']!r}")
            if tier_order in tier_orders:
                raise _err(ent_path, line, "tier_order",
                           f"duplicate tier_order {tier_order} (also entity {tier_orders[tier_order]!r})")
            tier_orders[tier_order] = name
        if not r["help"]:
            raise _err(ent_path, line, "help", "help text is required")
        codes.add(code)
        lines[name] = line
        entities[name] = {
            "code": code,
            "name": name,
            "measure_name": r["measure_name"],
            "id_fields": ids,
            "synonyms": tuple(s.strip().upper() for s in r["synonyms"].split(";") if s.strip()),
            "help": r["help"],
            "counters": [],
            "tier_order": tier_order,
            "tier_items": [],
        }

    rows_by_entity: dict[str, list[tuple[int, dict[str, str]]]] = {}
    for line, r in _read_csv(ctr_path, COUNTER_COLUMNS, COUNTER_OPTIONAL_COLUMNS):
        e = r["entity"]
        if e not in entities:
            raise _err(ctr_path, line, "entity", f"unknown entity {e!r} (not in entities.csv)")
        if not r["measure_name"]:
            raise _err(ctr_path, line, "measure_name", "required")
        if r["counter"] != snake(r["measure_name"]):
            raise _err(
                ctr_path, line, "counter",
                f"{r['counter']!r} is not the snake form of {r['measure_name']!r} "
                f"(expected {snake(r['measure_name'])!r})",
            )
        if r["kind"] not in KIND_CODES:
            raise _err(ctr_path, line, "kind", f"unknown kind {r['kind']!r}; valid: {', '.join(KINDS)}")
        if r["unit"] not in UNITS:
            raise _err(ctr_path, line, "unit", f"unknown unit {r['unit']!r}; valid: {', '.join(UNITS)}")
        if not r["help"]:
            raise _err(ctr_path, line, "help", "one-line help text is required")
        if r["confidence"] and r["confidence"] not in CONFIDENCE:
            raise _err(ctr_path, line, "confidence",
                       f"unknown confidence {r['confidence']!r}; valid: {', '.join(CONFIDENCE)} or empty")
        if r["max_of"] and r["kind"] != "maxq":
            raise _err(ctr_path, line, "max_of", "only maxq counters may name a max_of counter")
        rows = rows_by_entity.setdefault(e, [])
        if any(x["counter"] == r["counter"] for _, x in rows):
            raise _err(ctr_path, line, "counter", f"duplicate counter {r['counter']!r} in entity {e!r}")
        rows.append((line, r))

    for e, rows in rows_by_entity.items():
        kinds = {r["counter"]: r["kind"] for _, r in rows}
        for line, r in rows:
            if r["max_of"]:
                target = kinds.get(r["max_of"])
                if target is None:
                    raise _err(ctr_path, line, "max_of", f"{r['max_of']!r} is not a counter of entity {e!r}")
                if target != "queue":
                    raise _err(
                        ctr_path, line, "max_of",
                        f"{r['max_of']!r} is a {target} counter; max_of must name a queue counter",
                    )
        entities[e]["counters"] = [
            CounterDef(
                entity=e,
                name=r["counter"],
                measure_name=r["measure_name"],
                kind=r["kind"],
                unit=r["unit"],
                max_of=r["max_of"] or None,
                help=r["help"],
                position=i,
                confidence=r["confidence"],
            )
            for i, (_, r) in enumerate(rows)
        ]

    for line, r in _read_csv(items_path, TIER_ITEM_COLUMNS):
        e = r["entity"]
        if e not in entities:
            raise _err(items_path, line, "entity", f"unknown entity {e!r} (not in entities.csv)")
        if entities[e]["tier_order"] is None:
            raise _err(items_path, line, "entity",
                       f"entity {e!r} has no tiers (its tier_order in entities.csv is empty)")
        item = r["item"]
        if not item or item != item.lower() or not item.isidentifier():
            raise _err(items_path, line, "item", f"must be a lower-case identifier, got {item!r}")
        items = entities[e]["tier_items"]
        if any(i.item == item for i in items):
            raise _err(items_path, line, "item", f"duplicate item {item!r} of entity {e!r}")
        if not r["enform"]:
            raise _err(items_path, line, "enform", "the ENFORM name is required")
        if r["unit"] not in TIER_UNITS:
            raise _err(items_path, line, "unit", f"unknown unit {r['unit']!r}; valid: {', '.join(TIER_UNITS)}")
        if not r["help"]:
            raise _err(items_path, line, "help", "help text is required")
        items.append(TierItem(entity=e, item=item, enform=r["enform"], unit=r["unit"], help=r["help"],
                              position=len(items)))
    for name, d in entities.items():
        if d["tier_order"] is not None and not d["tier_items"]:
            raise _err(ent_path, lines[name], "tier_order",
                       f"entity {name!r} has tiers but no items in {items_path.name}")

    ordered = sorted(entities.values(), key=lambda d: d["code"])
    return Catalog(
        entities={
            d["name"]: EntityDef(**{**d, "counters": tuple(d["counters"]), "tier_items": tuple(d["tier_items"])})
            for d in ordered
        }
    )


@functools.cache
def _load_cached(directory: Path) -> Catalog:
    return _load(directory)


def load_catalog(path: str | Path | None = None) -> Catalog:
    """Load (and cache) the catalogue from ``path`` (a directory holding the three CSVs).

    Defaults to ``<repo>/schema/catalog``. Raises :class:`CatalogError` naming file, line and
    field for any malformed row.
    """
    directory = Path(path).resolve() if path is not None else CATALOG_DIR
    return _load_cached(directory)


load_catalog.cache_clear = _load_cached.cache_clear  # type: ignore[attr-defined]  # tests reload: a function takes the attribute
