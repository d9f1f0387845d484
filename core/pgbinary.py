"""PostgreSQL's binary COPY format, as NumPy structured rows (one ``tobytes()`` per block of
rows of one shape): what the collector's writer (collector/sink.py) and ``measuredb import``
(core/importer.py) both send. Times are Unix µs less PG_EPOCH_US; arrays are bigint."""

from __future__ import annotations

from typing import Any

import numpy as np

PG_EPOCH_US = 946_684_800_000_000  # 2000-01-01 UTC, PostgreSQL's binary timestamp origin
INT8_OID = 20
COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + (0).to_bytes(4, "big") + (0).to_bytes(4, "big")
COPY_TRAILER = (-1).to_bytes(2, "big", signed=True)


def array_fields(name: str, dims: tuple[int, ...]) -> list[tuple[Any, ...]]:
    """A bigint array column of fixed shape in binary COPY: length, header, dims, elements."""
    fields: list[tuple[Any, ...]] = [(name + "_len", ">i4"), (name + "_ndim", ">i4"),
                                     (name + "_hasnull", ">i4"), (name + "_oid", ">i4")]
    for d in range(len(dims)):
        fields += [(f"{name}_dim{d}", ">i4"), (f"{name}_lb{d}", ">i4")]
    count = int(np.prod(dims))
    fields.append((name, [("len", ">i4"), ("val", ">i8")], (count,)))
    return fields


def fill_array(rows: np.ndarray, name: str, dims: tuple[int, ...], values: np.ndarray) -> None:
    """Fill the array column `name` (array_fields) of every row with values (rows × dims)."""
    count = int(np.prod(dims))
    rows[name + "_len"] = 12 + 8 * len(dims) + 12 * count
    rows[name + "_ndim"] = len(dims)
    rows[name + "_oid"] = INT8_OID
    for d, size in enumerate(dims):
        rows[f"{name}_dim{d}"] = size
        rows[f"{name}_lb{d}"] = 1
    rows[name]["len"] = 8
    rows[name]["val"] = values.reshape(len(rows), count)
