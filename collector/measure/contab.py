"""CONTAB: MEASURE's configuration table of a measurement.

A measurement is configured by *entity descriptors* (entity type, identifying fields with
wildcards, exclusion flag) and by *user counter specifications* (ADD COUNTER). MEASCONFIGURE
receives them as a table grouped by ascending entity type, with a header of (offset, count)
per type and a trailer of type 51; :meth:`Contab.header` and :meth:`Contab.entries` give that
layout.

Descriptor fields use the catalogue's snake id-field names (``schema/catalog/entities.csv``).
A field that is absent, ``'*'`` or ``-1`` is a wildcard and is dropped from the canonical form,
so ``{}`` means "every entity of this type". Names are case-insensitive and stored upper case.

Field values (all entity types; only the fields an entity type identifies by are accepted):

* numeric fields (``cpu``, ``pin``, ``opener_cpu`` …): an integer in range, or ``'*'``.
* ``pin`` of PROCESS / USERDEF / PROCESSH may be ``'SYSTEM'`` (MEASURE's PIN −2): all
  **system processes**. Our rule: an entity is a system process when its ids carry
  ``system_process`` and it is true; when the ids do not carry that flag, a process with
  ``priority >= 200`` is a system process.
* ``process_name``: ``$NAME`` (``$`` + letter + ≤4 letters/digits) or ``$*``.
* ``program_file_name`` / ``file_name``: ``[\\node.]$vol.subvol.file`` where any whole element
  may be ``*`` (``$*.*.*``, ``$VOL.*.*``, ``\\*.$*.*.*``); ``$vol`` or ``$*`` alone means every
  file of that volume (stored ``$VOL.*.*``). A ``*`` may replace a whole element only
  (``$SR*`` is invalid). Partial names (``FILE``, ``SUBVOL.FILE``) are expanded by
  :class:`ContabBuilder` from its default volume/subvolume; a descriptor must be complete.
* ``device_name`` / ``line_name``: ``$NAME`` or ``$*``; ``subdev_name``: ``#NAME`` or ``#*``.
* ``remote_system_name`` / ``opener_system_name``: ``\\NAME`` or ``\\*``.
* ``path`` (DISC): ``P`` (primary) or ``B`` (backup).
* ``oss_path`` (PROCESS, USERDEF, PROCESSH): an absolute OSS path, matched exactly.

Inclusion rule (:meth:`Contab.matches`): an entity is measured when some non-exclude
descriptor of its type matches its ids and no exclude descriptor of that type does
(MEASURE's negative type value; MEASCOM says ``ADD CPU *`` then ``DELETE CPU 6``).
"""

from __future__ import annotations

import re
from collections import Counter as _Counter
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from core.catalog import UnknownEntityType, load_catalog
from core.entities import ID_FIELD_RANGES, USER_COUNTER_TYPES

__all__ = [
    "MAX_ELEMENTS_PER_PROCESS",
    "MAX_NAMED_COUNTERS_PER_PROCESS",
    "MAX_TYPE",
    "TRAILER_TYPE",
    "USER_COUNTER_TYPES",
    "CPU_SPEC_TYPES",
    "FILE_SPEC_TYPES",
    "PROCESS_SPEC_TYPES",
    "Contab",
    "ContabBuilder",
    "CounterSpec",
    "DescriptorError",
    "EntityDescriptor",
    "HeaderEntry",
    "check_file_pattern",
    "clean_message",
    "expand_file_name",
    "format_process_spec",
    "is_system_process",
    "normalize_fields",
    "parse_process_spec",
]

TRAILER_TYPE = 51
MAX_TYPE = 24
MAX_NAMED_COUNTERS_PER_PROCESS = 85
MAX_ELEMENTS_PER_PROCESS = 256
MAX_ARRAY = 127
SYSTEM_PRIORITY = 200

FieldValue = str | int

# ------------------------------------------------------------------------ field syntax

# the entity types a MEASCOM spec names like a process (* | cpu,pin | SYSTEM-PROCESSES | $name |
# program file | "oss path" [(cpu,pin)]), like a CPU (* | cpu) and like a file (* | file name);
# the SQL and OSS name-server types of the later manual are specified as processes
PROCESS_SPEC_TYPES = frozenset({"PROCESS", "USERDEF", "PROCESSH", "SQLPROC", "SQLSTMT", "OSSNS"})
CPU_SPEC_TYPES = frozenset({"CPU", "TMF", "OSSCPU", "SERVERNET"})
FILE_SPEC_TYPES = frozenset({"FILE", "DISCOPEN", "DISKFILE"})
_PROCESS_TYPES = PROCESS_SPEC_TYPES
_EXTRA_FIELDS = {t: ("oss_path",) for t in _PROCESS_TYPES}

_ELEM = r"[A-Z][A-Z0-9]{0,7}"
_VOL_RE = re.compile(r"\$(?:[A-Z][A-Z0-9]{0,6}|\*)")
_NODE_RE = re.compile(r"\\(?:[A-Z][A-Z0-9]{0,6}|\*)")
_ELEM_RE = re.compile(rf"(?:{_ELEM}|\*)")
_PROCESS_NAME_RE = re.compile(r"\$(?:[A-Z][A-Z0-9]{0,4}|\*)")
_DEVICE_RE = re.compile(r"\$(?:[A-Z][A-Z0-9]{0,6}|\*)")
_SUBDEV_RE = re.compile(r"#(?:[A-Z][A-Z0-9]{0,6}|\*)")
_COUNTER_NAME_RE = re.compile(r"[A-Z][A-Z0-9_-]{0,15}")
_CODE_SPACES = {"UC", "UCR", "UL", "ULR", "SC", "SCR", "SL", "SLR"}


def clean_message(exc: Exception) -> str:
    """One-line text of a (pydantic) error, without pydantic's framing."""
    if isinstance(exc, ValidationError):
        return "; ".join(str(e["msg"]).removeprefix("Value error, ") for e in exc.errors())
    return getattr(exc, "message", None) or str(exc)


class DescriptorError(ValueError):
    """A descriptor field is invalid. ``field`` names it ('' for the type itself)."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field
        self.message = message


def check_file_pattern(text: str, *, allow_partial: bool = False) -> str:
    """Validate and canonicalise a (wild-carded) Guardian file name; return it upper case.

    ``$VOL`` / ``$*`` become ``$VOL.*.*`` / ``$*.*.*``. With ``allow_partial``, ``FILE`` and
    ``SUBVOL.FILE`` (no volume) are returned as given. Raises ``ValueError`` explaining the rule.
    """
    s = text.strip().upper()
    if not s:
        raise ValueError("empty file name")
    parts = s.split(".")
    node = None
    if parts[0].startswith("\\"):
        node = parts.pop(0)
        if not _NODE_RE.fullmatch(node):
            raise ValueError(f"invalid node name {node!r} in {text!r}: use \\NAME or \\*")
        if not parts:
            raise ValueError(f"file name {text!r} has a node but no volume")
    if parts[0].startswith("$"):
        vol = parts[0]
        if not _VOL_RE.fullmatch(vol):
            raise ValueError(
                f"invalid volume {vol!r} in {text!r}: use $NAME or $* "
                "(a * may replace a whole element only)"
            )
        if len(parts) == 1:
            parts += ["*", "*"]
        elif len(parts) != 3:
            what = "incomplete" if len(parts) < 3 else "too many elements in"
            raise ValueError(
                f"{what} file name {text!r}: give $vol.subvol.file (use * for a whole element)"
            )
    else:
        if node is not None or not allow_partial or len(parts) > 2:
            raise ValueError(
                f"file name {text!r} must be $vol.subvol.file (use * for a whole element)"
                if not allow_partial or node is not None
                else f"invalid file name {text!r}: at most [[$vol.]subvol.]file"
            )
    for p in parts[1:] if parts[0].startswith("$") else parts:
        if not _ELEM_RE.fullmatch(p):
            raise ValueError(
                f"invalid file-name element {p!r} in {text!r}: a letter then up to 7 letters or "
                "digits, or * for the whole element (a * may replace a whole element only)"
            )
    return ".".join(([node] if node else []) + parts)


def expand_file_name(text: str, default_subvol: str) -> str:
    """Qualify a partial file name (``FILE`` or ``SUBVOL.FILE``) with ``$VOL.SUBVOL``."""
    s = check_file_pattern(text, allow_partial=True)
    if s.startswith(("$", "\\")):
        return s
    dvol, _, dsub = default_subvol.strip().upper().partition(".")
    parts = s.split(".")
    full = [dvol, dsub, parts[0]] if len(parts) == 1 else [dvol, *parts]
    return check_file_pattern(".".join(full))


def _match_name(pattern: str, value: Any) -> bool:
    if value is None:
        return False
    v = str(value).strip().upper()
    if pattern.endswith("*") and len(pattern) == 2:  # $*, #*, \*
        return v.startswith(pattern[0])
    return v == pattern


def _match_file(pattern: str, value: Any) -> bool:
    if value is None:
        return False
    v = str(value).strip().upper().split(".")
    p = pattern.split(".")
    pnode = p.pop(0) if p[0].startswith("\\") else None
    vnode = v.pop(0) if v and v[0].startswith("\\") else None
    if pnode is not None and pnode != "\\*" and pnode != vnode:
        return False
    if len(v) != 3:
        return False
    if p[0] != "$*" and p[0] != v[0]:
        return False
    return all(pe == "*" or pe == ve for pe, ve in zip(p[1:], v[1:], strict=True))


def _norm_value(etype: str, name: str, value: Any) -> FieldValue | None:
    """Canonical value of one field, or None for a wildcard. Raises DescriptorError."""
    if isinstance(value, bool):
        raise DescriptorError(name, f"field {name!r} must not be a boolean")
    if isinstance(value, str):
        value = value.strip()
        if value == "*":
            return None
    if name in ID_FIELD_RANGES:
        lo, hi = ID_FIELD_RANGES[name]
        allow_system = name == "pin" and etype in _PROCESS_TYPES
        if allow_system and (value == -2 or (isinstance(value, str) and value.upper() in (
                "SYSTEM", "SYSTEM-PROCESSES", "-2"))):
            return "SYSTEM"
        if isinstance(value, str) and re.fullmatch(r"-?\d+", value):
            value = int(value)
        if value == -1:
            return None
        if not isinstance(value, int) or not lo <= value <= hi:
            extra = ", '*' or 'SYSTEM'" if allow_system else " or '*'"
            raise DescriptorError(name, f"field {name!r} must be an integer {lo}-{hi}{extra}, "
                                        f"got {value!r}")
        return value
    if not isinstance(value, str) or not value:
        raise DescriptorError(name, f"field {name!r} must be a non-empty name, got {value!r}")
    v = value.upper()
    try:
        if name in ("program_file_name", "file_name"):
            return check_file_pattern(v)
    except ValueError as exc:
        raise DescriptorError(name, f"field {name!r}: {exc}") from None
    rules: dict[str, tuple[re.Pattern[str] | set[str], str]] = {
        "process_name": (_PROCESS_NAME_RE, "$NAME ($ + letter + up to 4 letters/digits) or $*"),
        "device_name": (_DEVICE_RE, "$NAME or $*"),
        "line_name": (_DEVICE_RE, "$NAME or $*"),
        "subdev_name": (_SUBDEV_RE, "#NAME or #*"),
        "remote_system_name": (_NODE_RE, "\\NAME or \\*"),
        "opener_system_name": (_NODE_RE, "\\NAME or \\*"),
        "path": ({"P", "B"}, "P (primary) or B (backup)"),
        "name": (_COUNTER_NAME_RE, "a counter name (letter, then letters, digits, - or _)"),
        "code_space": (_CODE_SPACES, ", ".join(sorted(_CODE_SPACES))),
    }
    if name == "oss_path":
        if not value.startswith("/"):
            raise DescriptorError(name, f"field 'oss_path' must be an absolute path, got {value!r}")
        return value  # OSS names are case-sensitive
    if name in ("code_range", "module_name", "adapter_name", "sac_name"):
        return v  # free text: a procedure, an SQL/MX module (CAT.SCH.MOD), a ServerNet adapter or SAC
    rule, what = rules[name]
    ok = v in rule if isinstance(rule, set) else rule.fullmatch(v) is not None
    if not ok:
        raise DescriptorError(name, f"field {name!r} must be {what}, got {value!r}")
    if v in ("$*", "#*", "\\*") and name != "process_name":
        return None  # every device/node has a name: the whole-name wildcard is a plain wildcard
    # process_name '$*' stays: it selects named processes only
    return v


def _entity(etype: Any):
    try:
        return load_catalog().entity(etype)
    except UnknownEntityType as exc:
        raise DescriptorError("", str(exc)) from None


def normalize_fields(etype: str | int, fields: Mapping[str, Any]) -> tuple[str, dict[str, FieldValue]]:
    """Validate a descriptor; return (MEASURE type name, canonical fields). Raises DescriptorError."""
    ent = _entity(etype)
    tname = ent.measure_name
    allowed = ent.id_fields + _EXTRA_FIELDS.get(tname, ())
    out: dict[str, FieldValue] = {}
    for raw_name, value in fields.items():
        name = str(raw_name).strip().lower().replace("-", "_")
        if name not in allowed:
            raise DescriptorError(
                name, f"field {raw_name!r} is not an identifier of {tname}; "
                      f"valid fields: {', '.join(allowed)}")
        v = _norm_value(tname, name, value)
        if v is not None:
            out[name] = v
    return tname, dict(sorted(out.items(), key=lambda kv: allowed.index(kv[0])))


def is_system_process(ids: Mapping[str, Any]) -> bool:
    """Our rule for SYSTEM-PROCESSES: ``ids['system_process']`` if present, else priority ≥ 200."""
    if "system_process" in ids and ids["system_process"] is not None:
        return bool(ids["system_process"])
    pri = ids.get("priority")
    return pri is not None and int(pri) >= SYSTEM_PRIORITY


def _field_matches(name: str, want: FieldValue, ids: Mapping[str, Any]) -> bool:
    if name == "pin" and want == "SYSTEM":
        return is_system_process(ids)
    have = ids.get(name)
    if have is None:
        return False
    if isinstance(want, int):
        try:
            return int(have) == want
        except (TypeError, ValueError):
            return False
    if name in ("program_file_name", "file_name"):
        return _match_file(want, have)
    if name == "oss_path":
        return str(have) == want
    return _match_name(want, have)


# ------------------------------------------------------------------------ process specs

_PAIR = r"\(\s*(\*|\d+)\s*,\s*(\*|\d+)\s*\)"


def parse_process_spec(text: str, *, default_subvol: str | None = None) -> dict[str, FieldValue]:
    """Parse a MEASCOM PROCESS/USERDEF spec into (uncanonicalised) descriptor fields.

    Forms: ``*`` | ``cpu,pin`` | ``SYSTEM-PROCESSES`` | ``$name[(cpu,pin)]`` |
    ``[[$vol.]subvol.]file[(cpu,pin)]`` | ``"oss-path"[(cpu,pin)]``; ``*`` allowed for cpu or pin.
    Partial file names need ``default_subvol`` (``$VOL.SUBVOL``).
    """
    s = text.strip()
    u = s.upper()
    if u == "*":
        return {}
    if u == "SYSTEM-PROCESSES":
        return {"pin": "SYSTEM"}
    m = re.fullmatch(r"(\*|\d+)\s*,\s*(\*|\d+)", s)
    if m:
        return {"cpu": _num(m[1]), "pin": _num(m[2])}
    fields: dict[str, FieldValue] = {}
    m = re.fullmatch(rf"(.*?)\s*{_PAIR}", s)
    if m:
        s = m[1]
        fields.update(cpu=_num(m[2]), pin=_num(m[3]))
    if len(s) >= 2 and s[0] == s[-1] == '"':
        fields["oss_path"] = s[1:-1]
    elif s.startswith("$") and "." not in s:
        fields["process_name"] = s.upper()
    else:
        try:
            name = (expand_file_name(s, default_subvol) if default_subvol
                    else check_file_pattern(s))
        except ValueError as exc:
            raise DescriptorError("program_file_name", f"process spec {text!r}: {exc}") from None
        fields["program_file_name"] = name
    return fields


def _num(s: str) -> FieldValue:
    return "*" if s == "*" else int(s)


def format_process_spec(fields: Mapping[str, FieldValue]) -> str:
    """Inverse of :func:`parse_process_spec` for canonical fields."""
    cpu, pin = fields.get("cpu", "*"), fields.get("pin", "*")
    if pin == "SYSTEM":
        return "SYSTEM-PROCESSES"
    for k in ("process_name", "program_file_name", "oss_path"):
        if k in fields:
            base = f'"{fields[k]}"' if k == "oss_path" else str(fields[k])
            return base if (cpu, pin) == ("*", "*") else f"{base}({cpu},{pin})"
    return "*" if (cpu, pin) == ("*", "*") else f"{cpu},{pin}"


# ------------------------------------------------------------------------ models


class EntityDescriptor(BaseModel):
    """One entity descriptor: type, identifying fields (absent = wildcard), exclusion flag."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: str
    fields: dict[str, FieldValue] = Field(default_factory=dict)
    exclude: bool = False

    @model_validator(mode="before")
    @classmethod
    def _canonical(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "type" in data:
            try:
                t, f = normalize_fields(data["type"], data.get("fields") or {})
            except DescriptorError as exc:
                raise ValueError(f"{_tname(data['type'])} descriptor: {exc.message}") from None
            data = {**data, "type": t, "fields": f}
        return data

    @property
    def type_code(self) -> int:
        return load_catalog().entity(self.type).code

    def matches(self, ids: Mapping[str, Any]) -> bool:
        """True when every non-wildcard field equals (or pattern-matches) the entity's ids."""
        return all(_field_matches(k, v, ids) for k, v in self.fields.items())


def _tname(t: Any) -> str:
    try:
        return load_catalog().entity(t).measure_name
    except (UnknownEntityType, TypeError):
        return str(t)


class CounterSpec(BaseModel):
    """A user-defined counter (ADD COUNTER name, PROCESS spec, type [, ARRAY n]).

    ``process`` holds canonical PROCESS-descriptor fields; a MEASCOM spec string is accepted
    on input (``"$PROGS.SERVER1.*"``, ``"$BILL"``, ``"3,45"``). ``array = n`` gives n+1
    elements (MEASURE's rule); ``None`` is a scalar counter (one element).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    process: dict[str, FieldValue] = Field(default_factory=dict)
    type: Literal["ACCUM", "FACCUM", "BUSY", "QUEUE", "QBUSY"]
    array: int | None = None

    @field_validator("name", mode="before")
    @classmethod
    def _name(cls, v: Any) -> Any:
        if not isinstance(v, str) or not _COUNTER_NAME_RE.fullmatch(v.strip().upper()):
            raise ValueError(
                f"counter name {v!r} must be 1-16 characters: a letter, then letters, "
                "digits, '-' or '_'")
        return v.strip().upper()

    @field_validator("type", mode="before")
    @classmethod
    def _type(cls, v: Any) -> Any:
        if isinstance(v, str) and v.strip().upper() in USER_COUNTER_TYPES:
            return v.strip().upper()
        raise ValueError(f"counter type {v!r} must be one of {', '.join(USER_COUNTER_TYPES)}")

    @field_validator("array", mode="before")
    @classmethod
    def _array(cls, v: Any) -> Any:
        if v is None:
            return v
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_ARRAY:
            raise ValueError(f"ARRAY size {v!r} must be an integer 1-{MAX_ARRAY} "
                             "(ARRAY n gives n+1 elements)")
        return v

    @field_validator("process", mode="before")
    @classmethod
    def _process(cls, v: Any) -> Any:
        try:
            if isinstance(v, str):
                v = parse_process_spec(v)
            if not isinstance(v, Mapping):
                raise ValueError(f"process must be a PROCESS spec or fields, got {v!r}")  # noqa: TRY004 (pydantic wants ValueError)
            _, f = normalize_fields("PROCESS", v)
        except DescriptorError as exc:
            raise ValueError(f"PROCESS spec: {exc.message}") from None
        return f

    @property
    def elements(self) -> int:
        return 1 if self.array is None else self.array + 1

    @property
    def process_spec(self) -> str:
        return format_process_spec(self.process)

    def applies_to(self, ids: Mapping[str, Any]) -> bool:
        return all(_field_matches(k, v, ids) for k, v in self.process.items())


class HeaderEntry(BaseModel):
    """One CONTAB header slot: where the descriptors of one entity type start and how many."""

    model_config = ConfigDict(frozen=True)

    type: str
    type_code: int
    offset: int
    count: int


class Contab(BaseModel):
    """A measurement's configuration: entity descriptors and user counter specs.

    Validation errors name the descriptor (1-based, in list order), its type and the field,
    e.g. ``descriptor 3 (PROCESS): field 'pin' must be an integer 0-65535, '*' or 'SYSTEM'``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    descriptors: list[EntityDescriptor] = Field(default_factory=list)
    counters: list[CounterSpec] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _check_descriptors(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        descs = data.get("descriptors")
        if isinstance(descs, list):
            out = []
            for i, d in enumerate(descs, start=1):
                if isinstance(d, Mapping):
                    if "type" not in d:
                        raise ValueError(f"descriptor {i}: missing 'type'")
                    try:
                        t, f = normalize_fields(d["type"], d.get("fields") or {})
                    except DescriptorError as exc:
                        raise ValueError(f"descriptor {i} ({_tname(d['type'])}): "
                                         f"{exc.message}") from None
                    d = {**d, "type": t, "fields": f}
                out.append(d)
            data = {**data, "descriptors": out}
        ctrs = data.get("counters")
        if isinstance(ctrs, list):
            out = []
            for i, c in enumerate(ctrs, start=1):
                if isinstance(c, Mapping):
                    try:
                        c = CounterSpec.model_validate(c)
                    except ValidationError as exc:  # (pydantic's, a ValueError)
                        msgs = "; ".join(e["msg"].removeprefix("Value error, ")
                                         for e in exc.errors())
                        raise ValueError(f"counter {i} ({c.get('name')!r}): {msgs}") from None
                out.append(c)
            data = {**data, "counters": out}
        return data

    @model_validator(mode="after")
    def _check_limits(self) -> Contab:
        per_process: dict[str, list[CounterSpec]] = {}
        for c in self.counters:
            per_process.setdefault(c.process_spec, []).append(c)
        for spec, cs in per_process.items():
            dup = [n for n, k in _Counter(c.name for c in cs).items() if k > 1]
            if dup:
                raise ValueError(f"counter {dup[0]} is defined twice for PROCESS {spec}")
            if len(cs) > MAX_NAMED_COUNTERS_PER_PROCESS:
                raise ValueError(
                    f"PROCESS {spec} has {len(cs)} named counters; at most "
                    f"{MAX_NAMED_COUNTERS_PER_PROCESS} are allowed per process")
            n = sum(c.elements for c in cs)
            if n > MAX_ELEMENTS_PER_PROCESS:
                raise ValueError(
                    f"PROCESS {spec} has {n} counter elements (ARRAY n counts n+1); at most "
                    f"{MAX_ELEMENTS_PER_PROCESS} are allowed per process (MEASURE error 3251)")
        return self

    # -- table layout --------------------------------------------------------------

    def ordered(self) -> list[EntityDescriptor]:
        """Descriptors grouped by ascending entity type (stable within a type)."""
        return sorted(self.descriptors, key=lambda d: d.type_code)

    def header(self) -> list[HeaderEntry]:
        """Per entity type present: offset (index into :meth:`ordered`) and descriptor count."""
        out: list[HeaderEntry] = []
        for i, d in enumerate(self.ordered()):
            if out and out[-1].type == d.type:
                out[-1] = out[-1].model_copy(update={"count": out[-1].count + 1})
            else:
                out.append(HeaderEntry(type=d.type, type_code=d.type_code, offset=i, count=1))
        return out

    def entries(self) -> list[tuple[int, EntityDescriptor | None]]:
        """The table as MEASCONFIGURE sees it: (signed type, descriptor) …, then (51, None).

        Exclusion descriptors carry the negative type value.
        """
        rows: list[tuple[int, EntityDescriptor | None]] = [
            (-d.type_code if d.exclude else d.type_code, d) for d in self.ordered()
        ]
        rows.append((TRAILER_TYPE, None))
        return rows

    # -- selection -----------------------------------------------------------------

    def descriptors_of(self, entity_type: str | int) -> list[EntityDescriptor]:
        t = load_catalog().entity(entity_type).measure_name
        return [d for d in self.descriptors if d.type == t]

    def matches(self, entity_type: str | int, ids: Mapping[str, Any]) -> bool:
        """Is the entity with these ids measured? (included and not excluded)"""
        ds = self.descriptors_of(entity_type)
        return any(d.matches(ids) for d in ds if not d.exclude) and not any(
            d.matches(ids) for d in ds if d.exclude)

    def counters_for(self, ids: Mapping[str, Any]) -> list[CounterSpec]:
        """User counter specs whose PROCESS spec matches a process's ids."""
        return [c for c in self.counters if c.applies_to(ids)]

    def entity_types(self) -> list[str]:
        return [h.type for h in self.header()]


class ContabBuilder:
    """Build a :class:`Contab` from MEASCOM entity specs, as ADD / DELETE commands do.

    * ``add(type, fields)``: appends an include descriptor (an identical one is not repeated).
    * ``delete(type, fields)``: removes an identical include descriptor if there is one;
      otherwise appends an exclusion descriptor (``DELETE`` after a wildcard ``ADD``).
    * partial file names are qualified with ``default_subvol`` (set by ``VOLUME``).
    """

    def __init__(self, contab: Contab | None = None, *, default_subvol: str = "$SYSTEM.SYSTEM"):
        self.descriptors: list[EntityDescriptor] = list(contab.descriptors) if contab else []
        self.counters: list[CounterSpec] = list(contab.counters) if contab else []
        self.default_subvol = default_subvol.upper()

    def _descriptor(self, etype: str | int, fields: Mapping[str, Any], exclude: bool):
        fields = dict(fields)
        for k in ("program_file_name", "file_name"):
            v = fields.get(k)
            if isinstance(v, str) and v.strip() not in ("*", ""):
                try:
                    fields[k] = expand_file_name(v, self.default_subvol)
                except ValueError as exc:
                    raise DescriptorError(k, f"field {k!r}: {exc}") from None
        t, f = normalize_fields(etype, fields)
        return EntityDescriptor(type=t, fields=f, exclude=exclude)

    def add(self, etype: str | int, fields: Mapping[str, Any] | None = None) -> EntityDescriptor:
        d = self._descriptor(etype, fields or {}, False)
        if d in self.descriptors:
            return d
        # re-adding something previously excluded lifts the exclusion
        ex = d.model_copy(update={"exclude": True})
        if ex in self.descriptors:
            self.descriptors.remove(ex)
            if any(x.type == d.type and not x.exclude and x.matches(d.fields)
                   for x in self.descriptors):
                return d
        self.descriptors.append(d)
        return d

    def delete(self, etype: str | int, fields: Mapping[str, Any] | None = None) -> EntityDescriptor:
        d = self._descriptor(etype, fields or {}, False)
        if d in self.descriptors:
            self.descriptors.remove(d)
            return d
        ex = d.model_copy(update={"exclude": True})
        if ex not in self.descriptors:
            self.descriptors.append(ex)
        return ex

    def add_spec(self, spec: Any) -> list[EntityDescriptor]:
        """Add from a parsed MEASCOM entity spec (anything with ``.entity`` and ``.fields``)."""
        return [self.add(spec.entity, spec.fields)]

    def delete_spec(self, spec: Any) -> list[EntityDescriptor]:
        return [self.delete(spec.entity, spec.fields)]

    def _process_fields(self, process: str | Mapping[str, Any]) -> dict[str, Any]:
        """PROCESS spec text or fields, with a partial program file name qualified."""
        try:
            if isinstance(process, str):
                return parse_process_spec(process, default_subvol=self.default_subvol)
            fields = dict(process)
            v = fields.get("program_file_name")
            if isinstance(v, str) and v.strip() not in ("*", ""):
                fields["program_file_name"] = expand_file_name(v, self.default_subvol)
            return fields
        except DescriptorError as exc:
            raise ValueError(exc.message) from None

    def add_counter(self, name: str, process: str | Mapping[str, Any], type: str,
                    array: int | None = None) -> CounterSpec:
        spec = CounterSpec.model_validate({"name": name, "process": self._process_fields(process),
                                           "type": type, "array": array})
        same = [c for c in self.counters if c.name == spec.name and c.process == spec.process]
        if same:
            raise ValueError(f"counter {spec.name} already exists for PROCESS {spec.process_spec}")
        Contab(counters=[*self.counters, spec])  # enforce the per-process limits now
        self.counters.append(spec)
        return spec

    def delete_counter(self, name: str, process: str | Mapping[str, Any] | None = None) -> int:
        """Remove counters named ``name`` (``*`` = all) for one process spec or for every
        process. Returns how many were removed; none is an error."""
        n = name.strip().upper()
        want = None
        if process is not None:
            want = normalize_fields("PROCESS", self._process_fields(process))[1]
        keep = [c for c in self.counters
                if not ((n == "*" or c.name == n) and (want is None or c.process == want))]
        removed = len(self.counters) - len(keep)
        if not removed:
            raise ValueError(f"no counter {n} to delete")
        self.counters = keep
        return removed

    def build(self) -> Contab:
        return Contab(descriptors=list(self.descriptors), counters=list(self.counters))
