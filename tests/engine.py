"""The engine the suite runs on: plain PostgreSQL (`make test`) or TimescaleDB
(`make test-timescaledb`: MEASUREDB_TIMESCALEDB=on, an embedded server that preloads it).
Every test that builds a database applies the schema in this mode."""

from __future__ import annotations

import os

TIMESCALEDB = os.environ.get("MEASUREDB_TIMESCALEDB", "").strip().lower() == "on"
MODE = "on" if TIMESCALEDB else "off"
