"""The data set of tests/queries/test_analysis.py (\\ANA: 35 days of one measured hour; its
loader, imported from there), with what its exceptions are under the defaults and under one
week learned, for the tests of the analysis settings (`measuredb analysis`,
/admin/systems/{system}/analysis, the configuration document)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import psycopg

_spec = importlib.util.spec_from_file_location("test_analysis", Path(__file__).parent / "queries" / "test_analysis.py")
assert _spec is not None and _spec.loader is not None
queries_test = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(queries_test)

load = queries_test.load
SYSTEM = queries_test.SYSTEM
# (local hour, deviation, severity, weeks learned) with the defaults
# (test_a_constant_history_flags_exactly_its_outlier_hours)
DEFAULT_EXCEPTIONS = [("2024-04-24 10:00:00", 15.0, "major", 3), ("2024-05-01 10:00:00", 15.0, "major", 4),
                      ("2024-05-02 10:00:00", 4.5, "minor", 4)]
# with weeks 1, minor 4, major 20 (test_the_settings_of_a_system_change_what_is_learned)
ONE_WEEK_EXCEPTIONS = [("2024-04-24 10:00:00", 20.0, "minor", 1), ("2024-05-02 10:00:00", 6.0, "minor", 1)]
# 35 stored hours; with one week learned (and with four) the first 7 have nothing to learn from
JUDGED_HOURS = 28


def exceptions(url: str) -> list[tuple]:
    """\\ANA's exceptions as (local hour, deviation, severity, weeks learned)."""
    with psycopg.connect(url) as c:
        return [(r[0], r[8], r[9], r[11]) for r in queries_test.exceptions(c)]


def stored_rows(url: str) -> int:
    """The baseline rows stored (what a rebuild of \\ANA says it stored)."""
    with psycopg.connect(url) as c:
        return c.execute("SELECT count(*) FROM _measure.hour_baseline").fetchone()[0]
