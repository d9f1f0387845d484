"""Instants as the platform counts them: int microseconds since the Unix epoch, UTC (``*_us``).

MEASURE's Julian microsecond timestamps are derived only at the boundary (SQL
``measure.julian_timestamp``; core/importer.py reads them)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import overload

SECOND = 1_000_000
HOUR = 3600 * SECOND


def now_us() -> int:
    return time.time_ns() // 1000


@overload
def to_us(ts: datetime) -> int: ...
@overload
def to_us(ts: None) -> None: ...
@overload
def to_us(ts: datetime | None) -> int | None: ...


def to_us(ts: datetime | None) -> int | None:
    if ts is None:
        return None
    return int(ts.timestamp()) * SECOND + ts.microsecond


def to_ts(us: int) -> datetime:
    return datetime.fromtimestamp(us // SECOND, UTC).replace(microsecond=us % SECOND)
