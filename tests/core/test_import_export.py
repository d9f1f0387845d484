"""`measuredb import` / `measuredb export` (core/importer.py, core/exporter.py,
schema/idempotent/055-import.sql): exact tiers from a hand-made file, every bad row reported
and nothing loaded, idempotence, Julian timestamps (also across a DST change), other entity
types, late and old data, and an export of a simulated node imported into an empty database
giving the same tiers, reports and exports byte for byte."""

from __future__ import annotations

import io
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

import psycopg
import pytest
from typer.testing import CliRunner

from cli.main import app
from collector.measure.contab import ContabBuilder
from collector.service import Collector
from collector.settings import CollectorSettings
from core import schema
from core.catalog import load_catalog
from core.exporter import export, plan
from core.importer import (
    JULIAN_UNIX_US,
    ImportFailed,
    csv_rows,
    import_rows,
    interval_header,
    layout_for,
)
from tests.engine import MODE
from tests.snapshot import differences, snapshot

SYSTEM = "\\HAND"
ZONE = "America/New_York"
NY = ZoneInfo(ZONE)
M15 = 900_000_000  # 15 minutes in µs
CAT = load_catalog()


def iso(h: int, m: int, day: int = 2, month: int = 3) -> str:
    return datetime(2026, month, day, h, m, tzinfo=NY).isoformat()


def julian(at: str) -> int:
    """MEASURE's Julian timestamp (local civil time) of an ISO time."""
    local = datetime.fromisoformat(at).astimezone(NY).replace(tzinfo=None)
    return JULIAN_UNIX_US + (local - datetime(1970, 1, 1)) // timedelta(microseconds=1)


CPU_HEADER = ["SYSTEM", "CPU", "FROM-TIMESTAMP", "TO-TIMESTAMP", "DELTA-TIME", "CPU-BUSY-TIME", "CPU-QTIME",
              "SWAPS", "DISPATCHES", "DISC-IOS", "TRANSACTIONS", "RESPONSE-TIME"]
# (cpu, local start h:m, busy, qtime, swaps, dispatches, disc ios, transactions, response µs)
CPU_ROWS = [
    (0, (9, 0), 450_000_000, 900_000_000, 90, 9000, 1800, 100, 50_000_000),
    (0, (9, 15), 225_000_000, 450_000_000, 180, 9000, 900, 100, 150_000_000),
    (0, (9, 30), 900_000_000, 2_700_000_000, 0, 18000, 0, 200, 200_000_000),
    (0, (9, 45), 675_000_000, 1_800_000_000, 90, 0, 900, 0, 0),
    (1, (9, 0), 90_000_000, 0, 0, 0, 0, 0, 0),
    (1, (9, 15), 180_000_000, 0, 0, 0, 0, 0, 0),
]


def cpu_csv(times=lambda at: at, system: str = SYSTEM) -> str:
    lines = [",".join(CPU_HEADER)]
    for cpu, (h, m), *ctr in CPU_ROWS:
        end = datetime(2026, 3, 2, h, m, tzinfo=NY) + timedelta(microseconds=M15)
        frm, to = iso(h, m), end.isoformat()
        lines.append(",".join(map(str, [system, cpu, times(frm), times(to), M15, *ctr])))
    return "\n".join(lines) + "\n"


@pytest.fixture
def env(fresh_database, monkeypatch, tmp_path) -> str:
    url = fresh_database("_import")
    schema.apply(url, mode=MODE)
    with psycopg.connect(url) as c:
        c.execute("INSERT INTO _measure.system (system_name, system_number, time_zone) VALUES (%s, 7, %s)",
                  (SYSTEM, ZONE))
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("MEASUREDB_DATA_DIR", str(tmp_path))
    return url


def run(*args: str):
    return CliRunner().invoke(app, list(args))


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def counts(url: str) -> dict[str, int]:
    with psycopg.connect(url) as c:
        return {t: c.execute(f"SELECT count(*) FROM _measure.{t}").fetchone()[0]
                for t in ("interval_run", "entity", "measurement", "cpu_hour", "tier_shift", "tier_dirty",
                          "month_dirty")}


DAYS = [date(2026, 3, 2)]
WINDOWS = [(datetime(2026, 3, 2, 14, tzinfo=UTC), datetime(2026, 3, 2, 15, tzinfo=UTC))]


def state(url: str, system: str = SYSTEM, days=DAYS, windows=WINDOWS, raw: bool = True):
    with psycopg.connect(url) as c:
        return snapshot(c, system, days, windows, raw=raw)


# ---------------------------------------------------------------- a hand-made CPU file


def test_hand_made_cpu_file_gives_exact_hour_tiers(env: str, tmp_path: Path) -> None:
    path = write(tmp_path, "cpu.csv", cpu_csv())
    out = run("import", path)
    assert out.exit_code == 0, out.output
    assert "6 CPU interval records: 6 stored, 0 already stored" in out.output
    assert "measurement IMPORT (new)" in out.output and "1 hour written" in out.output
    with psycopg.connect(env) as c:
        rows = c.execute(
            "SELECT cpu, hour_at, local_hour, samples, elapsed_seconds, coverage_ratio, busy_avg, busy_max, busy_min,"
            " busy_delt, qlen_avg, qlen_max, qlen_min, swap_avg, swap_max, swap_min, dispatches_per_second,"
            " disc_ios_per_second, transactions, response_seconds_avg, first_from_at, last_to_at"
            " FROM measure.cpu_hour ORDER BY cpu").fetchall()
        h = datetime(2026, 3, 2, 14, tzinfo=UTC)
        D = Decimal
        assert rows == [
            (0, h, datetime(2026, 3, 2, 9), 4, D(3600), D(1), D("62.5"), D(100), D(25), D(75), D("1.625"), D(3),
             D("0.5"), D("0.1"), D("0.2"), D(0), D(10), D(1), 400, D(1), h, h + timedelta(hours=1)),
            (1, h, datetime(2026, 3, 2, 9), 2, D(1800), D("0.5"), D(15), D(20), D(10), D(10), D(0), D(0), D(0),
             D(0), D(0), D(0), D(0), D(0), 0, None, h, h + timedelta(minutes=30)),
        ]
        # the shifts, months and years are current too (the default day shift holds 09:00)
        assert c.execute("SELECT cpu, shift_no, hours, busy_avg FROM measure.cpu_shift ORDER BY cpu").fetchall() == [
            (0, 2, 1, D("62.5")), (1, 2, 1, D(15))]
        assert c.execute("SELECT cpu, month, busy_max FROM measure.cpu_month ORDER BY cpu").fetchall() == [
            (0, date(2026, 3, 1), D("62.5")), (1, date(2026, 3, 1), D(15))]
        assert c.execute("SELECT count(*) FROM _measure.tier_dirty").fetchone() == (0,)
        assert c.execute("SELECT count(*) FROM _measure.month_dirty").fetchone() == (0,)
        # the rows went to a stopped measurement the collector never starts, entities have
        # the collector's ids
        assert c.execute("SELECT name, state, start_at FROM _measure.measurement").fetchall() == [
            ("IMPORT", "stopped", None)]
        from core.entities import entity_id
        sid = c.execute("SELECT system_id FROM _measure.system").fetchone()[0]
        assert c.execute("SELECT entity_id, key, ids, cpu FROM _measure.entity ORDER BY key").fetchall() == [
            (entity_id(sid, 1, "cpu=0"), "cpu=0", {"cpu": 0}, 0),
            (entity_id(sid, 1, "cpu=1"), "cpu=1", {"cpu": 1}, 1)]


def test_importing_again_changes_nothing_also_with_julian_times(env: str, tmp_path: Path) -> None:
    assert run("import", write(tmp_path, "cpu.csv", cpu_csv())).exit_code == 0
    before, n = state(env), counts(env)
    again = run("import", str(tmp_path / "cpu.csv"))
    assert again.exit_code == 0 and "0 stored, 6 already stored" in again.output
    assert state(env) == before and counts(env) == n
    # the same intervals with MEASURE Julian timestamps (local civil time) are the same rows
    jul = cpu_csv(times=lambda at: str(julian(at)))
    assert "212639" in jul.splitlines()[1]
    again = run("import", write(tmp_path, "cpu-julian.csv", jul))
    assert again.exit_code == 0 and "0 stored, 6 already stored" in again.output
    assert state(env) == before and counts(env) == n
    # repeated rows in one file are kept once
    lines = cpu_csv().splitlines()
    out = run("import", write(tmp_path, "twice.csv", "\n".join(lines + lines[1:3]) + "\n"))
    assert out.exit_code == 0 and "2 repeated in the file" in out.output
    assert state(env) == before


def test_a_bad_file_reports_every_bad_row_and_loads_nothing(env: str, tmp_path: Path) -> None:
    assert run("import", write(tmp_path, "cpu.csv", cpu_csv())).exit_code == 0
    before, n = state(env), counts(env)
    good = cpu_csv().splitlines()
    bad = good[:6] + [  # lines 2-6 are stored already: skipped
        f"{SYSTEM},2,{iso(10, 0)},{iso(10, 15)},{M15},1.5,0,0,0,0,0,0",          # 7: not an integer
        f"{SYSTEM},2,2026-03-02T10:15:00,{iso(10, 30)},{M15},1,0,0,0,0,0,0",     # 8: no UTC offset
        f"{SYSTEM},2,{iso(10, 30)},{iso(10, 45)},60000000,1,0,0,0,0,0,0",        # 9: DELTA-TIME
        f"{SYSTEM},2,{iso(11, 0)},{iso(10, 45)},{M15},1,0,0,0,0,0,0",            # 10: TO before FROM
        f"\\NOPE,2,{iso(10, 0)},{iso(10, 15)},{M15},1,0,0,0,0,0,0",             # 11: unknown system
        f"{SYSTEM},2,{iso(11, 0)},{iso(11, 15)},{M15},1,0,0",                    # 12: fields missing
        f"{SYSTEM},16,{iso(11, 0)},{iso(11, 15)},{M15},1,0,0,0,0,0,x",           # 13: CPU, RESPONSE-TIME
        good[6].replace("180000000", "180000001"),                                # 14: differs from stored
        f"{SYSTEM},3,{iso(12, 0)},{iso(12, 15)},{M15},1,0,0,0,0,0,0",            # 15: good …
        f"{SYSTEM},3,{iso(12, 0)},{iso(12, 15)},{M15},2,0,0,0,0,0,0",            # 16: … and this differs
        f"{SYSTEM},3,{iso(12, 5)},{iso(12, 20)},{M15},2,0,0,0,0,0,0",            # 17: overlaps line 15
    ]
    path = write(tmp_path, "bad.csv", "\n".join(bad) + "\n")
    out = run("import", path)
    assert out.exit_code == 2
    text = out.output.replace(path, "bad.csv")
    got = [(int(x.split(":")[1]), x.split(": ")[1]) for x in text.splitlines() if x.startswith("bad.csv:")]
    assert got == [(7, "CPU-BUSY-TIME"), (8, "FROM-TIMESTAMP"), (9, "DELTA-TIME"), (10, "TO-TIMESTAMP"),
                   (11, "SYSTEM"), (12, "row"), (13, "CPU"), (13, "RESPONSE-TIME"), (14, "CPU-BUSY-TIME"),
                   (16, "FROM-TIMESTAMP"), (17, "FROM-TIMESTAMP")], text
    assert "bad.csv:7: CPU-BUSY-TIME: not an integer: '1.5'" in text
    assert "bad.csv:8: FROM-TIMESTAMP: '2026-03-02T10:15:00' has no UTC offset" in text
    assert "bad.csv:9: DELTA-TIME: 60000000 µs, but TO-TIMESTAMP - FROM-TIMESTAMP is 900000000 µs" in text
    assert "bad.csv:10: TO-TIMESTAMP: not after FROM-TIMESTAMP" in text
    assert "bad.csv:11: SYSTEM: unknown system \\NOPE (known: \\HAND)" in text
    assert "bad.csv:12: row: has 8 fields; the header has 12" in text
    assert "bad.csv:13: CPU: 16 is outside 0-15" in text
    assert ("bad.csv:14: CPU-BUSY-TIME: already stored with another value (stored 180000000, file 180000001); "
            "stored data is never overwritten") in text
    assert "bad.csv:16: FROM-TIMESTAMP: the same interval (counter record and FROM-TIMESTAMP) as line 15" in text
    assert "bad.csv:17: FROM-TIMESTAMP: overlaps the interval of line 15" in text
    assert "bad.csv: 10 bad rows; nothing was stored" in " ".join(text.split())
    assert state(env) == before and counts(env) == n
    # the cap: the first lines only, and the count of all
    out = run("import", path, "--max-problems", "2")
    assert out.exit_code == 2 and "10 bad rows (the first 2 listed)" in " ".join(out.output.split())
    assert "bad.csv:8:" in out.output and "bad.csv:9:" not in out.output


def test_bad_headers_name_the_column(env: str, tmp_path: Path) -> None:
    def problems(header: str, *args: str) -> str:
        out = run("import", write(tmp_path, "h.csv", header + "\n"), *args)
        assert out.exit_code == 2
        return " ".join(out.output.split())

    text = problems("SYSTEM,CPU,FROM-TIMESTAMP,TO-TIMESTAMP,CPU-BUSY-TIM", "--entity", "cpu")
    # (the closest first; the IPU counters of the later catalogue may follow)
    assert "h.csv:1: CPU-BUSY-TIM: not a field of CPU interval records; did you mean CPU-BUSY-TIME" in text
    text = problems("SYSTEM,FROM-TIMESTAMP,TO-TIMESTAMP,CPU-BUSY-TIME", "--entity", "cpu")
    assert "h.csv:1: CPU: missing: CPU interval records need it" in text
    text = problems("SYSTEM,CPU,CPU,FROM-TIMESTAMP,TO-TIMESTAMP", "--entity", "cpu")
    assert "CPU: appears twice (columns 2 and 3)" in text
    text = problems("SYSTEM,CPU,FROM-TIMESTAMP,TO-TIMESTAMP")
    assert "fits the interval records of CPU, TMF, OSSCPU: say which" in text
    text = problems("SYSTEM,CPU,FROM-TIMESTAMP,TO-TIMESTAMP,BOGUS")
    assert "fits no entity type's interval records; the closest is CPU" in text and "BOGUS" in text
    assert problems("", "--entity", "cpu").endswith("nothing was stored")
    # names: any case, _ for -, MEASURE's header aliases; the entity type from the header
    lay = layout_for(["system_name", "cpu-num", "From_Timestamp", "TO-TIMESTAMP", "LOADID", "HOME-TRANS"], None, "x")
    assert lay.entity.name == "tmf" and lay.ignored == ["LOADID"]
    assert layout_for(["SYSTEM", "CPU", "PIN", "PROCESS-NAME", "PROGRAM-FILE-NAME", "PRIORITY", "FROM-TIMESTAMP",
                       "TO-TIMESTAMP", "READY-TIME"], None, "x").entity.name == "process"


def test_every_entity_type_has_a_header_import_reads() -> None:
    for ent in CAT:
        header = interval_header(ent)
        assert len(set(header)) == len(header), ent.name
        assert layout_for(header, None, "x").entity is ent


# ---------------------------------------------------------------- other entity types


def test_disc_and_process_files(env: str, tmp_path: Path) -> None:
    disc = ["SYSTEM,CPU,DEVICE-NAME,PIN,PATH,FROM-TIMESTAMP,TO-TIMESTAMP,DELTA-TIME,REQUESTS,REQUEST-QTIME,"
            "DEVICE-QBUSY-TIME,READS,WRITES"]
    proc = ["SYSTEM,CPU,PIN,PROCESS-NAME,PROGRAM-FILE-NAME,PRIORITY,FROM-TIMESTAMP,TO-TIMESTAMP,DELTA-TIME,"
            "CPU-BUSY-TIME,RECV-QTIME,MESSAGES-SENT"]
    for i, m in enumerate((0, 15, 30, 45)):
        f = iso(9, m)
        t = (datetime.fromisoformat(f) + timedelta(minutes=15)).isoformat()
        disc.append(f"{SYSTEM},2,$DATA01,5,P,{f},{t},{M15},{900 * (i + 1)},{M15 * (i + 1)},{M15 // 2},{450 * (i + 1)},10")
        disc.append(f"{SYSTEM},3,$DATA01,5,B,{f},{t},{M15},9,0,{M15 // 10},0,0")
        proc.append(f"{SYSTEM},1,45,$S1,$APPL.ET1.SERVER,150,{f},{t},{M15},{M15 // 4 * (i % 2 + 1)},{M15},30")
        proc.append(f"{SYSTEM},1,46,,$APPL.ET1.BATCH,120,{f},{t},{M15},{M15 // 10},0,0")  # unnamed
    assert run("import", write(tmp_path, "disc.csv", "\n".join(disc) + "\n")).exit_code == 0
    out = run("import", write(tmp_path, "proc.csv", "\n".join(proc) + "\n"))
    assert out.exit_code == 0 and "8 PROCESS interval records: 8 stored" in out.output
    D = Decimal
    with psycopg.connect(env) as c:
        # DISC: paths folded per volume (sums and samples added, elapsed time of the longest path)
        assert c.execute("SELECT volume, samples, busy_avg, qlen_avg, qlen_max, requests_per_second"
                         " FROM measure.disc_hour").fetchall() == [
            ("$DATA01", 8, D(60), D("2.5"), D(4), D(9036) / 3600)]
        assert c.execute("SELECT pin, process_name, program_file_name, priority, samples, busy_avg, busy_max, pqlen_avg"
                         " FROM measure.process_hour ORDER BY pin").fetchall() == [
            (45, "$S1", "$APPL.ET1.SERVER", 150, 4, D("37.5"), D(50), D(1)),
            (46, "", "$APPL.ET1.BATCH", 120, 4, D(10), D(10), D(0))]
        keys = [k for (k,) in c.execute("SELECT key FROM _measure.entity WHERE type_code = 2 ORDER BY key")]
        assert keys == ["cpu=1|pin=45|process_name=$S1|program_file_name=$APPL.ET1.SERVER|priority=150",
                        "cpu=1|pin=46|process_name=|program_file_name=$APPL.ET1.BATCH|priority=120"]


def test_userdef_type_goes_into_the_contab(env: str, tmp_path: Path) -> None:
    head = "SYSTEM,CPU,PIN,PROCESS-NAME,PROGRAM-FILE-NAME,NAME,INDEX,TYPE,FROM-TIMESTAMP,TO-TIMESTAMP,TIME-VALUE"
    rows = [f"{SYSTEM},1,45,$S1,$APPL.ET1.SERVER,WAITING,0,BUSY,{iso(9, 0)},{iso(9, 15)},{M15 // 2}"]
    assert run("import", write(tmp_path, "u.csv", "\n".join([head, *rows]) + "\n")).exit_code == 0
    with psycopg.connect(env) as c:
        assert c.execute("SELECT counter_name, counter_type, value_avg FROM measure.userdef_hour").fetchall() == [
            ("WAITING", "BUSY", Decimal(50))]
        assert c.execute("SELECT contab->'counters' FROM _measure.measurement").fetchone()[0] == [
            {"name": "WAITING", "process": {}, "type": "BUSY", "array": None}]
    other = f"{SYSTEM},1,45,$S1,$APPL.ET1.SERVER,WAITING,0,2,{iso(9, 15)},{iso(9, 30)},1"  # 2 = BUSY: fine
    assert run("import", write(tmp_path, "u2.csv", "\n".join([head, other]) + "\n")).exit_code == 0
    clash = f"{SYSTEM},1,45,$S1,$APPL.ET1.SERVER,WAITING,0,ACCUM,{iso(9, 30)},{iso(9, 45)},1"
    out = run("import", write(tmp_path, "u3.csv", "\n".join([head, clash]) + "\n"))
    assert out.exit_code == 2 and "u3.csv:2: TYPE: the measurement's CONTAB has this counter as BUSY" in out.output


# ---------------------------------------------------------------- time


def test_julian_times_across_the_night_the_clocks_go_back(env: str, tmp_path: Path) -> None:
    # 2026-11-01 in New York: 01:00-02:00 local happens twice (EDT, then EST); 30-minute
    # intervals from 00:00 to 03:00 local are 7 intervals, 3.5 real hours
    start = datetime(2026, 11, 1, 4, 0, tzinfo=UTC)  # 00:00 EDT
    rows_iso, rows_jul = [], []
    for i in range(7):
        f, t = start + timedelta(minutes=30 * i), start + timedelta(minutes=30 * (i + 1))
        fi, ti = f.astimezone(NY).isoformat(), t.astimezone(NY).isoformat()
        rows_iso.append(f"{SYSTEM},0,{fi},{ti},1800000000,{(i + 1) * 100_000_000}")
        rows_jul.append(f"{SYSTEM},0,{julian(fi)},{julian(ti)},1800000000,{(i + 1) * 100_000_000}")
    head = "SYSTEM,CPU,FROM-TIMESTAMP,TO-TIMESTAMP,DELTA-TIME,CPU-BUSY-TIME"
    out = run("import", write(tmp_path, "jul.csv", "\n".join([head, *rows_jul]) + "\n"))
    assert out.exit_code == 0 and "7 stored" in out.output, out.output
    with psycopg.connect(env) as c:
        got = c.execute("SELECT from_at, to_at, counters[1] FROM measure.interval_record ORDER BY from_at").fetchall()
    assert got == [(start + timedelta(minutes=30 * i), start + timedelta(minutes=30 * (i + 1)), (i + 1) * 100_000_000)
                   for i in range(7)]
    again = run("import", write(tmp_path, "iso.csv", "\n".join([head, *rows_iso]) + "\n"))
    assert again.exit_code == 0 and "0 stored, 7 already stored" in again.output
    # the export in Julian form is the file read
    exported = run("export", "--entity", "cpu", "--time-format", "julian")
    assert exported.exit_code == 0
    assert [r.split(",")[3:5] for r in exported.output.splitlines()[1:]] == [r.split(",")[2:4] for r in rows_jul]
    # a wall time the zone skips is a bad row
    gap = f"{SYSTEM},0,{julian('2026-03-08T01:30:00-05:00') + 3_600_000_000},{julian('2026-03-08T03:30:00-04:00')},,1"
    out = run("import", write(tmp_path, "gap.csv", "\n".join([head, gap]) + "\n"))
    assert out.exit_code == 2 and "does not exist in America/New_York" in out.output


def test_late_data_is_recondensed_and_old_data_condensed(env: str, tmp_path: Path) -> None:
    lines = cpu_csv().splitlines()
    assert run("import", write(tmp_path, "a.csv", "\n".join(lines[:2]) + "\n")).exit_code == 0
    with psycopg.connect(env) as c:
        assert c.execute("SELECT samples, busy_avg FROM measure.cpu_hour WHERE cpu = 0").fetchone() == (1, 50)
    assert run("import", write(tmp_path, "b.csv", "\n".join(lines[:1] + lines[2:]) + "\n")).exit_code == 0
    with psycopg.connect(env) as c:  # the hour again, with every interval
        assert c.execute("SELECT samples, busy_avg FROM measure.cpu_hour WHERE cpu = 0").fetchone() == (4, Decimal("62.5"))
        # older than the raw horizon (retention ran): condensed all the same
        c.execute("SELECT _measure.retention_set('raw', '35 days')")
        c.execute("SELECT _measure.retention_run(false, %s, 'test')", (datetime(2026, 6, 1, tzinfo=UTC),))
        assert c.execute("SELECT _measure.raw_horizon() >= '2026-03-03'").fetchone() == (True,)
    old = cpu_csv().replace("2026-03-02", "2026-02-02")
    out = run("import", write(tmp_path, "old.csv", old))
    assert out.exit_code == 0 and "6 stored" in out.output
    with psycopg.connect(env) as c:
        assert c.execute("SELECT cpu, busy_avg FROM measure.cpu_hour WHERE hour_at = '2026-02-02 14:00+00'"
                         " ORDER BY cpu").fetchall() == [(0, Decimal("62.5")), (1, 15)]
        assert c.execute("SELECT busy_avg FROM measure.cpu_month WHERE month = '2026-02-01' AND cpu = 0").fetchone() == (
            Decimal("62.5"),)


def test_create_system_and_measurement_column(env: str, tmp_path: Path) -> None:
    text = cpu_csv(system="\\NEW").replace("SYSTEM,CPU,", "SYSTEM,MEASUREMENT,CPU,")
    text = "\n".join([text.splitlines()[0]] + [r.replace("\\NEW,", "\\NEW,cpln1,", 1) for r in text.splitlines()[1:]]) + "\n"
    path = write(tmp_path, "new.csv", text)
    refused = run("import", path)
    assert refused.exit_code == 2 and "unknown system \\NEW" in refused.output
    assert run("import", path, "--create-system").exit_code == 2  # needs its time zone
    out = run("import", path, "--create-system", "--time-zone", ZONE)
    assert out.exit_code == 0 and "\\NEW, measurement CPLN1 (new)" in out.output
    with psycopg.connect(env) as c:
        assert c.execute("SELECT system_name, time_zone FROM _measure.system ORDER BY 1").fetchall() == [
            ("\\HAND", ZONE), ("\\NEW", ZONE)]
        assert c.execute("SELECT count(*) FROM measure.cpu_hour WHERE system_name = '\\NEW'").fetchone() == (2,)


# ---------------------------------------------------------------- export → import: the same tiers

START = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def _simulated(url: str, tmp: Path) -> None:
    """Two hours of the demo node (seed 5) and a second measurement of CPUs and processes."""
    settings = CollectorSettings(node="demo", seed=5, interval_seconds=60, backfill_days=0, data_dir=tmp,
                                 spool_dir=tmp / "spool")
    col = Collector(settings, url)
    col.register(epoch_us=int(START.timestamp()) * 1_000_000)
    col.build()
    b = ContabBuilder()
    b.add("CPU")
    b.add("PROCESS")
    with psycopg.connect(url) as c:
        c.execute("INSERT INTO _measure.measurement (system_id, name, contab, start_at, stop_at, interval_us, state)"
                  " SELECT system_id, 'CPLN', %s, %s, %s, 300000000, 'scheduled' FROM _measure.system",
                  (b.build().model_dump_json(), START + timedelta(minutes=30), START + timedelta(minutes=90)))
    col.poll_control()
    col.backfill(int((START + timedelta(hours=2)).timestamp()) * 1_000_000)
    col.close()


def _exports(url: str, kind: str, fmt: str = "csv", time_format: str = "iso") -> dict[str, bytes]:
    out = {}
    with psycopg.connect(url) as c:
        ids = [r[0] for r in c.execute("SELECT system_id FROM measure.system")]
        for spec in plan("all", kind):
            buf = io.BytesIO()
            export(c, spec, buf, system_ids=ids, fmt=fmt, time_format=time_format)
            out[spec.filename(fmt)] = buf.getvalue()
    return out


def test_an_export_imported_into_an_empty_database_gives_the_same_tiers(fresh_database, tmp_path, monkeypatch) -> None:
    source, target = fresh_database("_export_a"), fresh_database("_export_b")
    for url in (source, target):
        schema.apply(url, mode=MODE)
    _simulated(source, tmp_path)
    with psycopg.connect(source) as c:
        name, number, zone = c.execute("SELECT system_name, system_number, time_zone FROM _measure.system").fetchone()
    with psycopg.connect(target) as c:   # the system as configured in the source (CPU types too)
        sid = c.execute("INSERT INTO _measure.system (system_name, system_number, time_zone) VALUES (%s, %s, %s)"
                        " RETURNING system_id", (name, number, zone)).fetchone()[0]
        with psycopg.connect(source) as s:
            types = s.execute("SELECT cpu, cpu_type FROM _measure.system_cpu_type").fetchall()
        c.cursor().executemany("INSERT INTO _measure.system_cpu_type (system_id, cpu, cpu_type) VALUES (%s, %s, %s)",
                               [(sid, cpu, t) for cpu, t in types])
    # every entity type's interval records out, through the CLI, into the empty database
    monkeypatch.setenv("MEASUREDB_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("DATABASE_URL", source)
    out = run("export", "--tier", "interval", "-o", str(tmp_path / "out"))
    assert out.exit_code == 0, out.output
    files = sorted((tmp_path / "out").glob("*-interval.csv"))
    assert len(files) == len(list(CAT))
    monkeypatch.setenv("DATABASE_URL", target)
    stored = 0
    for f in files:
        res = run("import", str(f))
        assert res.exit_code == 0, res.output
        stored += int(res.output.split(" stored")[0].rsplit(": ", 1)[-1].replace(",", ""))
    with psycopg.connect(source) as c:
        assert stored == c.execute("SELECT sum(n) FROM _measure.interval_run").fetchone()[0] > 50_000
        assert c.execute("SELECT count(*) FROM _measure.measurement").fetchone() == (2,)
    # every tier, report and dashboard function answers the same, and exports byte for byte
    days = [date(2026, 3, 2)]
    windows = [(START, START + timedelta(hours=2)), (START + timedelta(minutes=40), START + timedelta(minutes=100))]
    a, b = state(source, name, days, windows, raw=False), state(target, name, days, windows, raw=False)
    assert differences(a, b) == []
    assert sum(len(v) for v in a.values()) > 1000 and a["cpu_hour"] and a["process_month"] and a["userdef_year"]
    for kind in ("interval", "hour", "shift", "month", "year"):
        ea, eb = _exports(source, kind), _exports(target, kind)
        assert ea == eb, kind
    assert b"\\DEMO,CPLN," in _exports(source, "interval")["cpu-interval.csv"]
    # and its Parquet form (Julian times) back into the target changes nothing
    pq = _exports(source, "interval", "parquet", "julian")
    for fname, data in pq.items():
        with psycopg.connect(target) as c:
            from core.importer import parquet_rows
            res = import_rows(c, parquet_rows(io.BytesIO(data)), where=fname)
        assert res.stored == 0 and res.unchanged == res.rows, fname
    assert differences(a, state(target, name, days, windows, raw=False)) == []


def test_exports_filter_by_system_entity_and_time(env: str, tmp_path: Path) -> None:
    assert run("import", write(tmp_path, "cpu.csv", cpu_csv())).exit_code == 0
    later = cpu_csv(times=lambda at: (datetime.fromisoformat(at) + timedelta(hours=2)).isoformat())
    assert run("import", write(tmp_path, "later.csv", later)).exit_code == 0
    whole = run("export", "--entity", "cpu")
    assert whole.exit_code == 0 and len(whole.output.splitlines()) == 13
    head = whole.output.splitlines()[0].split(",")
    assert head == interval_header(CAT.entity("cpu"))
    assert whole.output.splitlines()[1].startswith("\\HAND,IMPORT,0,2026-03-02T09:00:00-05:00,2026-03-02T09:15:00-05:00,")
    # FROM in [from, to): local times of the system
    part = run("export", "--system", "hand", "--entity", "CPU", "--from", "2026-03-02T09:15", "--to", "2026-03-02T11:15")
    assert part.exit_code == 0
    assert [r.split(",")[2:4] for r in part.output.splitlines()[1:]] == [
        ["0", iso(9, 15)], ["1", iso(9, 15)], ["0", iso(9, 30)], ["0", iso(9, 45)], ["0", iso(11, 0)], ["1", iso(11, 0)]]
    hours = run("export", "--entity", "cpu", "--tier", "hour", "--from", "2026-03-02T16:30+00:00")
    assert hours.exit_code == 0 and [r.split(",")[:3] for r in hours.output.splitlines()[1:]] == [
        ["\\HAND", "0", "2026-03-02T16:00:00+00:00"], ["\\HAND", "1", "2026-03-02T16:00:00+00:00"]]
    assert run("export", "--entity", "cpu", "--tier", "shift").output.count("\\HAND") == 2
    assert run("export", "--entity", "cpu", "--tier", "month", "--to", "2026-03-01").output.count("\\HAND") == 0
    assert run("export", "--entity", "cpu", "--tier", "year", "--to", "2026-03-01T00:00:01").output.count("\\HAND") == 2
    # parquet to a file; several exports need a folder
    assert run("export", "--entity", "cpu", "--format", "parquet", "-o", str(tmp_path / "c.parquet")).exit_code == 0
    import pyarrow.parquet as pq
    table = pq.read_table(tmp_path / "c.parquet")
    assert table.num_rows == 12 and table.column_names == head
    assert table.column("CPU-BUSY-TIME").to_pylist()[0] == 450_000_000
    again = run("import", str(tmp_path / "c.parquet"))  # read back: nothing new
    assert again.exit_code == 0 and "12 CPU interval records: 0 stored, 12 already stored" in again.output
    refused = run("export", "--entity", "cpu", "--tier", "all")
    assert refused.exit_code == 2 and "give --output FOLDER" in refused.output
    assert "SYSTEM has no tiers" in run("export", "--entity", "system", "--tier", "hour").output
    assert "unknown system" in run("export", "--system", "\\NOPE", "--entity", "cpu").output


def test_import_failure_objects(env: str) -> None:
    with psycopg.connect(env) as c:
        with pytest.raises(ImportFailed) as err:
            import_rows(c, csv_rows(io.BytesIO(b"SYSTEM,CPU\x00\n")), where="nul.csv")
        assert [str(p) for p in err.value.problems] == ["nul.csv:1: file: holds a NUL character"]
        with pytest.raises(ImportFailed) as err:
            import_rows(c, csv_rows(io.BytesIO(cpu_csv().encode() + b"\\HAND,\xff\xfe\n")), where="bin.csv")
        assert [str(p) for p in err.value.problems] == ["bin.csv:8: file: not UTF-8 text (byte 7 of the line)"]


def test_an_export_read_an_hour_at_a_time_equals_the_one_query(env: str, tmp_path: Path) -> None:
    """core.exporter.interval_chunks (one query per system and UTC hour of runs) writes what the
    whole range's one query gives, in its order: two systems, hours apart, a window that
    begins and ends inside runs; Parquet (Arrow's CSV reader) holds the typed query's values."""
    import pyarrow.parquet as pq

    from core.exporter import interval_chunks, interval_query, write_csv
    with psycopg.connect(env) as c:
        c.execute("INSERT INTO _measure.system (system_name, system_number, time_zone) VALUES ('\\ZED', 8, 'UTC')")
    later = cpu_csv(times=lambda at: (datetime.fromisoformat(at) + timedelta(hours=2)).isoformat())
    for name, text in (("a.csv", cpu_csv()), ("b.csv", later), ("c.csv", cpu_csv(system="\\ZED"))):
        assert run("import", write(tmp_path, name, text)).exit_code == 0
    spec = plan("cpu", "interval")[0]
    windows = [(None, None), (datetime.fromisoformat(iso(9, 15)), datetime.fromisoformat(iso(11, 15)))]
    with psycopg.connect(env) as c:
        ids = [r[0] for r in c.execute("SELECT system_id FROM measure.system ORDER BY system_id DESC")]
        for lo, hi in windows:
            chunked, whole = io.BytesIO(), io.BytesIO()
            n = export(c, spec, chunked, system_ids=ids, lo=lo, hi=hi)
            assert write_csv(c, interval_query(spec.entity, ids, lo, hi)[0], whole) == n
            assert chunked.getvalue() == whole.getvalue() and n == (18 if lo is None else 10)
            parquet = io.BytesIO()
            assert export(c, spec, parquet, system_ids=ids, lo=lo, hi=hi, fmt="parquet") == n
            parquet.seek(0)
            # a row group per hour's query (its rows one block), not one per row
            hours = len(list(interval_chunks(c, spec.entity, ids, lo, hi)))
            assert pq.ParquetFile(parquet).metadata.num_row_groups == hours == 3
            typed = c.execute(interval_query(spec.entity, ids, lo, hi, typed=True)[0]).fetchall()
            assert [tuple(r.values()) for r in pq.read_table(parquet).to_pylist()] == typed


def test_the_decoded_export_equals_the_servers_query(fresh_database, tmp_path) -> None:
    """export reads interval records as their runs and decodes and formats them itself
    (core.exporter._read_hour, _hour_csv, _hour_arrays): byte for byte the COPY of
    interval_query, where the server unpacks the runs, and the typed query's values in Parquet,
    for every entity type of the simulated node, ISO and Julian times, the whole range and a
    window cutting runs; with runs edited to hold what the simulation never writes: fewer
    counters than the catalogue and NULL elements (empty fields), the bigint extremes and
    negatives, FROM and TO at fractional seconds, CPU -1, a measurement name and identifying
    fields that CSV must quote (comma, quote, line feed, empty) or that are missing (NULL), and a
    zone 5:45 ahead of UTC."""
    import pyarrow.parquet as pq

    from core.exporter import interval_query, write_csv
    url = fresh_database("_export_decoded")
    schema.apply(url, mode=MODE)
    _simulated(url, tmp_path)
    run_key = "measurement_id, entity_id, record_at, from_at"
    with psycopg.connect(url) as c:
        def one_run(type_code: int, offset: int = 0) -> tuple:
            return c.execute(f"SELECT {run_key} FROM _measure.interval_run WHERE type_code = %s AND n > 3"
                             f" ORDER BY {run_key} OFFSET %s LIMIT 1", (type_code, offset)).fetchone()

        def edit(type_code: int, change: str, offset: int = 0) -> None:
            key = one_run(type_code, offset)
            assert c.execute(f"UPDATE _measure.interval_run SET {change} WHERE ({run_key}) = (%s, %s, %s, %s)",
                             key).rowcount == 1

        edit(1, "counters = counters[:][1:3]")  # CPU: 3 counters of 58
        edit(1, "counters[2][1] = NULL, counters[1][2] = -9223372036854775808, "
                "counters[1][3] = 9223372036854775807, counters[3][4] = -5", 1)
        edit(6, "cpu = -1")  # DISCOPEN: no CPU among its identifying fields
        edit(1, "delta_us = delta_us - 1, from_at = from_at + INTERVAL '0.250001 s'", 2)
        c.execute("UPDATE _measure.measurement SET name = 'C,\"PLN\"' WHERE name = 'CPLN'")
        c.execute("UPDATE _measure.entity SET ids = jsonb_set(ids, '{process_name}', '\"A,\\n\\\"B\\\"\"')"
                  " WHERE entity_id = (SELECT min(entity_id) FROM _measure.entity WHERE type_code = 2)")
        c.execute("UPDATE _measure.entity SET ids = ids - 'program_file_name' || '{\"process_name\": \"\"}'"
                  " WHERE entity_id = (SELECT max(entity_id) FROM _measure.entity WHERE type_code = 2)")
        c.execute("UPDATE _measure.system SET time_zone = 'Asia/Kathmandu'")
        ids = [r[0] for r in c.execute("SELECT system_id FROM measure.system")]
        windows = [(None, None), (START + timedelta(minutes=40, microseconds=250_000), START + timedelta(minutes=100))]
        rows = 0
        for spec in plan("all", "interval"):
            for lo, hi in windows:
                for time_format in ("iso", "julian"):
                    mine, theirs = io.BytesIO(), io.BytesIO()
                    n = export(c, spec, mine, system_ids=ids, lo=lo, hi=hi, time_format=time_format)
                    query = interval_query(spec.entity, ids, lo, hi, time_format=time_format)[0]
                    assert write_csv(c, query, theirs) == n, (spec, lo, time_format)
                    assert mine.getvalue() == theirs.getvalue(), (spec, lo, time_format)
                    parquet = io.BytesIO()
                    assert export(c, spec, parquet, system_ids=ids, lo=lo, hi=hi, fmt="parquet",
                                  time_format=time_format) == n
                    parquet.seek(0)
                    typed = c.execute(interval_query(spec.entity, ids, lo, hi, time_format=time_format,
                                                     typed=True)[0]).fetchall()
                    assert [tuple(r.values()) for r in pq.read_table(parquet).to_pylist()] == typed
                    rows += n
        csv = io.BytesIO()
        export(c, plan("cpu", "interval")[0], csv, system_ids=ids)
    text = csv.getvalue().decode()
    # what the edits put there is in the file (the comparison above covered it)
    assert "-9223372036854775808,9223372036854775807" in text and ",,,,,\n" in text and ":00.250001+05:45" in text
    assert "\"C,\"\"PLN\"\"\"" in text and rows > 50_000
