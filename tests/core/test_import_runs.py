"""The command line's way of importing (core/importer.py: rows checked column by column, sent
as runs, _measure.import_store_runs) stores what the row by row way stores (the API's:
measure.import_stage, _measure.import_store's checks of every row): the same runs, the same
tiers, whether a batch is checked by columns or row by row, and whether the runs of an hour
arrive whole or in pieces (RUN_BUFFER_BYTES: joined again)."""

from __future__ import annotations

import io
from datetime import datetime, timedelta

import psycopg
import pytest

from core import importer, schema
from core.importer import csv_rows, import_rows
from tests.core.test_import_export import CPU_HEADER, NY, SYSTEM, ZONE, julian, state
from tests.engine import MODE

MINUTE = 60_000_000
RUNS = ("SELECT m.name, r.entity_id, r.record_at, r.from_at, r.delta_us, r.n, r.closing_kind, r.cpu, r.error,"
        " r.counters, r.nonzero FROM _measure.interval_run r JOIN _measure.measurement m USING (measurement_id)"
        " ORDER BY 1, 2, 4")
INTERVALS = ("SELECT m.name, i.entity_id, i.from_at, i.to_at, i.delta_us, i.cpu, i.error, i.counters"
             " FROM _measure.interval_record i JOIN _measure.measurement m USING (measurement_id) ORDER BY 1, 2, 3")


def _file() -> str:
    """Two CPUs, 09:00-11:59 local of 1-minute intervals in time order, with what breaks a run
    (a missing interval, an ERROR, another measurement), a batch with a blank-padded field (row
    by row) and one with Julian times."""
    lines = [",".join([*CPU_HEADER[:2], "MEASUREMENT", "ERROR", *CPU_HEADER[2:]])]
    start = datetime(2026, 3, 2, 9, 0, tzinfo=NY)
    for m in range(180):
        frm, to = start + timedelta(minutes=m), start + timedelta(minutes=m + 1)
        for cpu in (0, 1):
            if cpu == 1 and m == 70:
                continue  # a gap: two runs in that hour
            f, t = frm.isoformat(), to.isoformat()
            if 100 <= m < 104:  # (the batch of these rows: Julian times)
                f, t = str(julian(f)), str(julian(t))
            meas = "SECOND" if cpu == 0 and 30 <= m < 40 else ""
            error = 1 if cpu == 1 and m == 20 else 0
            cpu_field = f" {cpu}" if m == 150 else str(cpu)  # (that batch: row by row)
            lines.append(",".join(map(str, [SYSTEM, cpu_field, meas, error, f, t, MINUTE, m * 1000, 7 * m, m % 3,
                                            m, 2 * m, cpu, 5])))
    return "\n".join(lines) + "\n"


def _import(url: str, text: str, stage: str) -> importer.ImportResult:
    with psycopg.connect(url) as c:
        res = import_rows(c, csv_rows(io.BytesIO(text.encode())), where="cpu.csv", stage=stage)
        c.commit()
    return res


def _database(fresh_database, suffix: str) -> str:
    url = fresh_database(suffix)
    schema.apply(url, mode=MODE)
    with psycopg.connect(url) as c:
        c.execute("INSERT INTO _measure.system (system_name, system_number, time_zone) VALUES (%s, 7, %s)",
                  (SYSTEM, ZONE))
    return url


def _stored(url: str, query: str) -> list[tuple]:
    with psycopg.connect(url) as c:
        return c.execute(query).fetchall()


def test_runs_from_the_command_line_equal_the_rows_of_the_api(fresh_database, monkeypatch) -> None:
    monkeypatch.setattr(importer, "BATCH_ROWS", 8)  # (batches of 4 minutes: some by columns, some not)
    monkeypatch.setattr(importer, "RUN_FLUSH_ROWS", 50)  # (the hours before the latest sent as they end)
    text = _file()
    rows, whole, pieces = (_database(fresh_database, f"_runs_{k}") for k in ("rows", "whole", "pieces"))
    by_rows = _import(rows, text, "function")
    by_runs = _import(whole, text, "copy")
    assert by_runs.rows == by_rows.rows == by_runs.stored == by_rows.stored == 359
    assert (by_runs.hours, by_runs.measurements) == (by_rows.hours, by_rows.measurements) == (3, ["IMPORT (new)",
                                                                                               "SECOND (new)"])
    assert _stored(whole, RUNS) == _stored(rows, RUNS)
    runs = _stored(whole, RUNS)
    assert [r[5] for r in runs if r[0] == "IMPORT" and r[7] == 1] == [20, 1, 39, 10, 49, 60]
    assert state(whole) == state(rows)
    # runs sent in pieces (at most a few rows held), joined again: the same runs and tiers
    monkeypatch.setattr(importer, "RUN_BUFFER_BYTES", 2_000)
    assert _import(pieces, text, "copy").stored == 359
    assert _stored(pieces, INTERVALS) == _stored(rows, INTERVALS)
    assert _stored(pieces, RUNS) == runs
    assert state(pieces) == state(rows)


@pytest.mark.parametrize("stage", ["copy", "function"])
def test_a_row_repeated_across_batches_is_kept_once_either_way(fresh_database, monkeypatch, stage) -> None:
    monkeypatch.setattr(importer, "BATCH_ROWS", 8)
    monkeypatch.setattr(importer, "RUN_BUFFER_BYTES", 2_000)  # (the repeat arrives in another run)
    url = _database(fresh_database, f"_repeat_{stage}")
    lines = _file().splitlines()
    res = _import(url, "\n".join([*lines, lines[5], lines[300]]) + "\n", stage)
    assert (res.rows, res.stored, res.duplicates) == (361, 359, 2)
    bad = _file().splitlines()
    bad.append(bad[5].replace(",,0,", ",,1,", 1))  # the same interval with another ERROR
    with pytest.raises(importer.ImportFailed) as exc, psycopg.connect(url) as c:
        import_rows(c, csv_rows(io.BytesIO(("\n".join(bad) + "\n").encode())), where="cpu.csv", stage=stage)
    assert [(p.line, p.field) for p in exc.value.problems] == [(361, "FROM-TIMESTAMP")], exc.value.problems
    assert "as line 6 with other values" in exc.value.problems[0].message
