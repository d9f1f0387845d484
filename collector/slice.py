"""A slice: everything the collector writes in one transaction (entities, interval runs, extra
copies, measurement events, the watermark), and its file form in the spool.

A spool file holds data only, never code (the collector replays it while the database was
away; anyone who could write the spool folder must not be able to make it run anything):

    MDBSLICE  (8 bytes)  version (u16)  header length (u32)  header (JSON, UTF-8)
    the runs' bytes, then the extras' bytes (their lengths in the header)
    SHA-256 of everything before it (32 bytes)

:func:`decode` checks the magic, the version, every length against the bytes actually there,
the checksum, and every field's type before a :class:`Slice` is made; anything else is a
:class:`SpoolFileError` saying what, and the file is quarantined unread (collector/sink.py).
"""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass, field
from typing import Any, TypeGuard

MAGIC = b"MDBSLICE"
VERSION = 1
_HEAD = struct.Struct(">8sHI")  # magic, version, header length
_SUM = 32


class SpoolFileError(ValueError):
    """A spool file that is not a slice this code wrote: what is wrong with it."""


@dataclass
class Slice:
    """Everything to write for times ≤ until_us (one transaction)."""

    until_us: int
    entities: list[tuple[int, int, str, str, int, int]] = field(default_factory=list)
    runs: list[bytes] = field(default_factory=list)
    extras: list[bytes] = field(default_factory=list)
    n_runs: int = 0
    n_intervals: int = 0
    n_extras: int = 0
    from_min_us: int | None = None   # earliest and latest FROM-TIMESTAMP of its intervals
    from_max_us: int | None = None
    pack_hours: list[int] = field(default_factory=list)  # hours (µs) other slices also write to
    # (event, measurement id, at_us, usage per entity type at stop or None)
    control: list[tuple[str, int, int, dict | None]] = field(default_factory=list)

    def empty(self) -> bool:
        return not (self.entities or self.runs or self.extras or self.control)


def encode(sl: Slice) -> bytes:
    """The slice's file form (see the module's documentation)."""
    header = json.dumps({
        "until_us": sl.until_us, "entities": [list(e) for e in sl.entities],
        "runs": [len(b) for b in sl.runs], "extras": [len(b) for b in sl.extras],
        "n_runs": sl.n_runs, "n_intervals": sl.n_intervals, "n_extras": sl.n_extras,
        "from_min_us": sl.from_min_us, "from_max_us": sl.from_max_us, "pack_hours": sl.pack_hours,
        "control": [list(c) for c in sl.control],
    }, separators=(",", ":")).encode()
    body = b"".join([_HEAD.pack(MAGIC, VERSION, len(header)), header, *sl.runs, *sl.extras])
    return body + hashlib.sha256(body).digest()


def decode(data: bytes) -> Slice:
    """The slice a file form holds; SpoolFileError for anything this code did not write."""
    if len(data) < _HEAD.size + _SUM:
        raise SpoolFileError(f"{len(data)} bytes: too short for a slice")
    magic, version, n_header = _HEAD.unpack_from(data)
    if magic != MAGIC:
        raise SpoolFileError("not a measuredb slice (no MDBSLICE mark at its start)")
    if version != VERSION:
        raise SpoolFileError(f"a slice of format version {version}; this collector reads version {VERSION}")
    body, checksum = data[:-_SUM], data[-_SUM:]
    if hashlib.sha256(body).digest() != checksum:
        raise SpoolFileError("its checksum does not match: the file was cut short or changed")
    start = _HEAD.size + n_header
    if start > len(body):
        raise SpoolFileError(f"its header claims {n_header} bytes, more than the file holds")
    try:
        h = json.loads(body[_HEAD.size:start])
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SpoolFileError(f"its header is not JSON ({exc})") from None
    return _slice(h, body, start)


def _slice(h: Any, body: bytes, start: int) -> Slice:
    if not isinstance(h, dict):
        raise SpoolFileError("its header is not an object")
    ints = ("until_us", "n_runs", "n_intervals", "n_extras")
    if not all(_is_int(h.get(k)) for k in ints):
        raise SpoolFileError(f"its header lacks or mistypes one of {', '.join(ints)}")
    for k in ("from_min_us", "from_max_us"):
        if h.get(k) is not None and not _is_int(h[k]):
            raise SpoolFileError(f"its header's {k} is not an integer")
    lengths = h.get("runs"), h.get("extras")
    if not (_sizes(lengths[0]) and _sizes(lengths[1])):
        raise SpoolFileError("its header's run and extra lengths are not lists of sizes")
    if start + sum(lengths[0]) + sum(lengths[1]) != len(body):
        raise SpoolFileError("its runs and extras do not add up to the bytes the file holds")
    blobs, at = [], start
    for n in [*lengths[0], *lengths[1]]:
        blobs.append(body[at:at + n])
        at += n
    entities = h.get("entities")
    if not (isinstance(entities, list) and all(
            isinstance(e, list) and len(e) == 6 and _is_int(e[0]) and _is_int(e[1]) and isinstance(e[2], str)
            and isinstance(e[3], str) and _is_int(e[4]) and _is_int(e[5]) for e in entities)):
        raise SpoolFileError("its header's entities are not (id, type, key, ids, cpu, first seen) rows")
    pack = h.get("pack_hours")
    if not (isinstance(pack, list) and all(_is_int(x) for x in pack)):
        raise SpoolFileError("its header's pack_hours is not a list of hours")
    control = h.get("control")
    if not (isinstance(control, list) and all(
            isinstance(c, list) and len(c) == 4 and isinstance(c[0], str) and _is_int(c[1]) and _is_int(c[2])
            and (c[3] is None or isinstance(c[3], dict)) for c in control)):
        raise SpoolFileError("its header's measurement events are not (event, id, time, usage) rows")
    n_runs = len(lengths[0])
    return Slice(until_us=h["until_us"], entities=[tuple(e) for e in entities],  # 6 checked
                 runs=blobs[:n_runs], extras=blobs[n_runs:], n_runs=h["n_runs"], n_intervals=h["n_intervals"],
                 n_extras=h["n_extras"], from_min_us=h.get("from_min_us"), from_max_us=h.get("from_max_us"),
                 pack_hours=list(pack), control=[tuple(c) for c in control])  # 4 checked


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _sizes(x: Any) -> TypeGuard[list[int]]:
    return isinstance(x, list) and all(_is_int(n) and n >= 0 for n in x)
