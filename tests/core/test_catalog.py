"""Tests for core.catalog: the MEASURE counter catalogue."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from core.catalog import (
    CATALOG_DIR,
    CONFIDENCE,
    KIND_BUSY,
    KIND_ELAPSED,
    KIND_MAXQ,
    KIND_QUEUE,
    KINDS,
    TIER_UNITS,
    UNITS,
    CatalogError,
    UnknownCounter,
    UnknownEntityType,
    load_catalog,
    snake,
)

ENTITIES_1986 = {
    "CPU": 1, "PROCESS": 2, "PROCESSH": 3, "USERDEF": 4, "FILE": 5, "DISCOPEN": 6, "DISC": 7,
    "DEVICE": 8, "LINE": 9, "NETLINE": 10, "SYSTEM": 11, "CLUSTER": 12, "TERMINAL": 13, "TMF": 14,
}
# the types the manual lists after the 1986 set (H-, J- and L-series), under their descriptor
# type numbers (measure-reference §4.1; 17 OPDISK is D-series only and not catalogued)
ENTITIES_LATER = {"SQLPROC": 15, "SQLSTMT": 16, "SERVERNET": 18, "DISKFILE": 19, "OSSCPU": 20, "OSSNS": 21}


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def test_snake():
    assert snake("CPU-BUSY-TIME") == "cpu_busy_time"
    assert snake(" l2in-bytes ") == "l2in_bytes"


def test_load_is_cached(cat):
    assert load_catalog() is cat
    assert load_catalog(CATALOG_DIR) is cat


def test_every_1986_entity_with_its_code(cat):
    every = {**ENTITIES_1986, **ENTITIES_LATER}
    assert {e.measure_name: e.code for e in cat.entities.values()} == every
    assert [e.code for e in cat.entities.values()] == sorted(every.values())
    assert list(cat.entities) == [m.lower() for m in every]
    for e in cat:
        assert e.counters, f"{e.name} has no counters"
        assert e.help


def test_entity_lookup(cat):
    assert cat.entity("CPU") is cat.entity("cpu") is cat.entity(1) is cat.entity(np.int16(1))
    assert cat.entity("DISK") is cat.entity("disc") is cat.entity(7)
    assert cat.entity("disk").measure_name == "DISC"
    with pytest.raises(UnknownEntityType, match=r"'DSK'.*CPU \(1\).*TMF \(14\)"):
        cat.entity("DSK")
    with pytest.raises(UnknownEntityType, match="99"):
        cat.entity(99)


def test_id_fields(cat):
    assert cat.entity("cpu").id_fields == ("cpu",)
    assert cat.entity("process").id_fields == (
        "cpu", "pin", "process_name", "program_file_name", "priority")
    assert cat.entity("disc").id_fields == ("cpu", "device_name", "pin", "path")
    assert cat.entity("file").id_fields == (
        "opener_cpu", "opener_pin", "file_number", "file_name", "device_type")
    assert cat.entity("terminal").id_fields == ("line_name", "subdev_name")
    assert cat.entity("tmf").id_fields == ("cpu",)


def test_counter_lookup_both_spellings(cat):
    cpu = cat.entity("CPU")
    a = cpu.counter("CPU-BUSY-TIME")
    assert a is cpu.counter("cpu_busy_time") is cpu.counter("Cpu-Busy-Time")
    assert (a.entity, a.name, a.kind, a.unit, a.position) == ("cpu", "cpu_busy_time", "busy", "us", 0)
    assert cpu.index("CPU-QTIME") == 1
    assert cpu.counter("CPU-QLEN-MAX").max_of == "cpu_qtime"
    assert "cpu_busy_time" in cpu and "CPU-QTIME" in cpu and "NOPE" not in cpu
    # the same MEASURE name in two entities
    p = cat.counter("PROCESS", "CPU-BUSY-TIME")
    assert p.entity == "process" and p is not a
    assert cat.entity("disk").counter("DEVICE-QBUSY-TIME").kind == "qbusy"


def test_unknown_counter_lists_close_matches(cat):
    with pytest.raises(UnknownCounter) as ei:
        cat.entity("cpu").counter("CPU-BUSY-TIM")
    assert "CPU-BUSY-TIME" in str(ei.value) and "CPU" in str(ei.value)
    with pytest.raises(UnknownCounter, match="known counters"):
        cat.entity("tmf").counter("zzzzzzzz")


def test_names_and_kinds_arrays(cat):
    cpu = cat.entity("cpu")
    assert cpu.names[:3] == ("cpu_busy_time", "cpu_qtime", "cpu_qlen_max")
    k = cpu.kinds
    assert k.dtype == np.int8 and len(k) == len(cpu.counters)
    assert list(k[:3]) == [KIND_BUSY, KIND_QUEUE, KIND_MAXQ]
    assert not k.flags.writeable
    assert [c.position for c in cpu.counters] == list(range(len(cpu.counters)))


@pytest.mark.parametrize(
    ("entity", "names"),
    [
        ("cpu", ("CPU-BUSY-TIME CPU-QTIME CPU-QLEN-MAX MEM-QTIME MEM-QLEN-MAX DISPATCHES SWAPS "
                "INTR-BUSY-TIME PROCESS-OVHD SEND-BUSY-TIME DISC-IOS CACHE-HITS TRANSACTIONS "
                "RESPONSE-TIME PAGE-REQUESTS PAGE-SCANS")),
        ("process", ("CPU-BUSY-TIME READY-TIME DISPATCHES PAGE-FAULTS MESSAGES-SENT "
                    "MESSAGES-RECEIVED SENT-BYTES RETURNED-BYTES RECEIVED-BYTES REPLY-BYTES "
                    "RECV-QTIME VSEMS CHECKPOINTS INFO-CALLS FILE-OPEN-CALLS BEGIN-TRANS "
                    "ABORT-TRANS LAUNCHES LAUNCH-WAIT-TIME")),
        ("disc", ("REQUESTS REQUEST-QTIME REQUEST-QLEN-MAX READS WRITES INPUT-BYTES OUTPUT-BYTES "
                 "READ-QTIME WRITE-QTIME READ-QBUSY-TIME WRITE-QBUSY-TIME DEVICE-QBUSY-TIME "
                 "READ-BUSY-TIME WRITE-BUSY-TIME SEEK-BUSY-TIME SEEKS CACHE-HITS CACHE-MISSES "
                 "CACHE-FAULTS BLOCK-SPLITS SWAPS REQUESTS-BLOCKED STARTING-FREE-SPACE "
                 "ENDING-FREE-SPACE")),
        ("file", "FILE-BUSY-TIME READS WRITES UPDATES-OR-REPLIES DELETES-OR-WRITEREADS INFO-CALLS"),
        ("discopen", ("DRIVER-INPUT-CALLS DRIVER-OUTPUT-CALLS CACHE-HITS CACHE-WRITE-HITS "
                     "BLOCK-SPLITS REQUESTS-BLOCKED MAX-LOCKWAIT-TIME")),
        ("tmf", "HOME-TRANS HOME-TRANS-QTIME REMOTE-TRANS ABORTING-TRANS TRANS-BACKOUT-QTIME"),
        ("cluster", "SENT RECEIVED SENT-BYTES RECEIVED-BYTES LINK-TIME"),
        ("userdef", "TIME-VALUE MAX-VALUE"),
        ("system", "LINKS LINK-TIME SENT RECEIVED"),
        ("terminal", "REQUESTS TRANSACTIONS RESPONSE-TIME INPUT-BYTES OUTPUT-BYTES"),
    ],
)
def test_legacy_counters_present(cat, entity, names):
    e = cat.entity(entity)
    for n in names.split():
        assert e.counter(n).measure_name == n


def test_catalogue_invariants(cat):
    for e in cat:
        assert len(set(e.names)) == len(e.names)
        for c in e.counters:
            assert c.kind in KINDS and c.unit in UNITS and c.help
            assert c.name == snake(c.measure_name)
            if c.max_of:
                assert c.kind == "maxq" and e.counter(c.max_of).kind == "queue"
            if c.kind in ("busy", "queue", "qbusy", "response", "maxvalue"):
                assert c.unit == "us", c
    assert cat.entity("discopen").counter("MAX-LOCKWAIT-TIME").kind == "maxvalue"
    assert cat.entity("diskfile").counter("MAX-LOCKWAIT-TIME").kind == "maxvalue"
    for e in cat:
        for c in e.counters:
            assert c.confidence in ("", *CONFIDENCE)
            if c.kind == "elapsed":
                assert c.unit == "us" and e.name in ("sqlproc", "sqlstmt"), c
            if e.code > 14:  # every row taken from measure-reference.md says how sure it is
                assert c.confidence, c


def test_the_later_catalogue(cat):
    """The H-, J- and L-series additions: the IPU counters of CPU and PROCESS appended after the
    1986 counters (a stored record keeps its positions), and the new types with their ids."""
    cpu = cat.entity("cpu")
    assert cpu.counter("IPUS").kind == "snapshot"
    assert cpu.names.index("ipus") > cpu.names.index("ending_sds")
    for i in range(8):
        assert [cpu.counter(f"IPU-{n}-{i}").kind for n in ("BUSY-TIME", "DISPATCHES", "QTIME")] == [
            "busy", "incrementing", "queue"]
    assert "IPU-BUSY-TIME-8" not in cpu
    proc = cat.entity("process")
    assert [proc.counter(n).kind for n in ("IPU-SWITCHES", "IPU-NUM", "IPU-NUM-PREV")] == [
        "incrementing", "snapshot", "snapshot"]
    assert proc.names[-3:] == ("ipu_switches", "ipu_num", "ipu_num_prev")
    stmt = cat.entity("SQLSTMT")
    assert stmt.id_fields == ("cpu", "pin", "process_name", "program_file_name", "module_name",
                             "statement_index")
    assert (stmt.counter("CALLS").kind, stmt.counter("ELAPSED-BUSY-TIME").kind) == ("incrementing", "elapsed")
    assert cat.entity("CONTROLLER") is cat.entity("servernet") is cat.entity(18)
    assert cat.entity("diskfile").id_fields == ("cpu", "device_name", "fcb_number", "file_name")
    assert {c.confidence for c in cat.entity("osscpu").counters} == {"unknown"}
    assert KINDS[KIND_ELAPSED] == "elapsed" and KIND_ELAPSED == 9  # codes stable: appended


# ------------------------------------------------------------------ validation errors


@pytest.fixture
def catdir(tmp_path: Path) -> Path:
    d = tmp_path / "catalog"
    shutil.copytree(CATALOG_DIR, d)
    return d


def _edit(path: Path, old: str, new: str) -> int:
    """Replace the first line containing ``old``; return its 1-based line number."""
    lines = path.read_text().splitlines(keepends=True)
    for i, line in enumerate(lines):
        if old in line:
            lines[i] = line.replace(old, new, 1)
            path.write_text("".join(lines))
            return i + 1
    raise AssertionError(old)


def test_temp_copy_loads(catdir):
    assert load_catalog(catdir) is not load_catalog()
    assert load_catalog(catdir).entity("cpu").names == load_catalog().entity("cpu").names


@pytest.mark.parametrize(
    ("file", "old", "new", "field", "text"),
    [
        ("counters.csv", "cpu,cpu_qtime,CPU-QTIME,queue", "cpu,cpu_qtime,CPU-QTIME,qeue",
         "kind", "unknown kind 'qeue'"),
        ("counters.csv", "CPU-QTIME,queue,us", "CPU-QTIME,queue,usec", "unit", "unknown unit"),
        ("counters.csv", "cpu,cpu_qtime,CPU-QTIME", "cpu,cpu_q_time,CPU-QTIME", "counter",
         "expected 'cpu_qtime'"),
        ("counters.csv", "maxq,length,cpu_qtime", "maxq,length,cpu_busy_time", "max_of",
         "must name a queue counter"),
        ("counters.csv", "maxq,length,cpu_qtime", "maxq,length,nope", "max_of",
         "'nope' is not a counter"),
        ("counters.csv", "cpu,swaps,SWAPS", "cpu,dispatches,DISPATCHES", "counter",
         "duplicate counter 'dispatches'"),
        ("counters.csv", "cpu,swaps,SWAPS", "cpux,swaps,SWAPS", "entity", "unknown entity 'cpux'"),
        ("entities.csv", "14,tmf,TMF", "1,tmf,TMF", "type_code", "duplicate type code 1"),
        ("entities.csv", "14,tmf,TMF", "14,tmf,TMX", "measure_name", "'TMX'"),
        ("entities.csv", "14,tmf,TMF,cpu,,6,", "14,tmf,TMF,cpu,,six,", "tier_order", "positive integer"),
        ("entities.csv", "14,tmf,TMF,cpu,,6,", "14,tmf,TMF,cpu,,1,", "tier_order",
         "duplicate tier_order 1 (also entity 'cpu')"),
        ("tier_items.csv", "tmf,trans,TRANS", "terminal,trans,TRANS", "entity", "entity 'terminal' has no tiers"),
        ("tier_items.csv", "tmf,trans,TRANS", "tmfx,trans,TRANS", "entity", "unknown entity 'tmfx'"),
        ("tier_items.csv", "tmf,lifetime,LIFETIME", "tmf,trans,LIFETIME", "item", "duplicate item 'trans'"),
        ("tier_items.csv", "tmf,lifetime,LIFETIME", "tmf,Life-time,LIFETIME", "item", "lower-case identifier"),
        ("tier_items.csv", "tmf,trans,TRANS,per_second", "tmf,trans,TRANS,per_sec", "unit", "unknown unit 'per_sec'"),
        ("tier_items.csv", "tmf,trans,TRANS,", "tmf,trans,,", "enform", "required"),
    ],
)
def test_validation_errors_name_file_line_field(catdir, file, old, new, field, text):
    line = _edit(catdir / file, old, new)
    with pytest.raises(CatalogError) as ei:
        load_catalog(catdir)
    msg = str(ei.value)
    assert f"{file}, line {line}, field '{field}'" in msg
    assert text in msg


def test_unknown_confidence(catdir):
    p = catdir / "counters.csv"
    lines = p.read_text().splitlines()
    lines[3] += "sure"
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(CatalogError, match=r"counters.csv, line 4, field 'confidence': unknown confidence 'sure'"):
        load_catalog(catdir)


def test_missing_help(catdir):
    p = catdir / "counters.csv"
    lines = p.read_text().splitlines()
    lines[3] = lines[3].rsplit(",", 2)[0] + ",,"  # drop help of data line 4 (before its confidence)
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(CatalogError, match=r"counters.csv, line 4, field 'help': .*required"):
        load_catalog(catdir)


def test_missing_column(catdir):
    p = catdir / "counters.csv"
    text = p.read_text()
    p.write_text(text.replace(",max_of,", ",maxof,", 1))
    with pytest.raises(CatalogError, match=r"counters.csv, line 1: missing required column\(s\) max_of"):
        load_catalog(catdir)


def test_tiers_from_the_catalogue(cat):
    assert cat.tiered_names == ("cpu", "disc", "line", "process", "userdef", "tmf")
    assert cat.entity("DISK").tiered and cat.entity("DISK").tier_order == 2
    assert not cat.entity("terminal").tiered and cat.entity("terminal").tier_items == ()
    tmf = cat.entity("tmf").tier_items
    assert [(i.item, i.enform, i.unit, i.position) for i in tmf] == [
        ("trans", "TRANS", "per_second", 0), ("lifetime", "LIFETIME", "seconds", 1)]
    assert all(i.unit in TIER_UNITS and i.help for e in cat.tiered for i in e.tier_items)


def test_a_type_with_tiers_needs_tier_items(catdir):
    p = catdir / "tier_items.csv"
    p.write_text("".join(line for line in p.read_text().splitlines(keepends=True) if not line.startswith("userdef,")))
    line = next(i for i, text in enumerate((catdir / "entities.csv").read_text().splitlines(), 1)
                if text.startswith("4,userdef,"))
    with pytest.raises(CatalogError, match=rf"entities.csv, line {line}, field 'tier_order': entity 'userdef' has "
                                           "tiers but no items in tier_items.csv"):
        load_catalog(catdir)
