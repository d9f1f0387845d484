"""Tests for the MEASCOM parser (collector.meascom.parser)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collector.meascom import ast
from collector.meascom.configure import apply_commands
from collector.meascom.parser import MeascomSyntaxError, parse_script, tokenize
from collector.measure.contab import ContabBuilder

# Figure 3 of "How to Set Up a Performance Data Base with MEASURE and ENFORM" (1986),
# typed as an OBEY file: one command per line, the START command continued by commas,
# the article's margin notes as comments, <n> = 1.
FIGURE_3 = """\
== (Log on with normal user group ID.)
VOLUME $VOL.CPLNWEEK                                 ! Sets subvolume.
ADD CPU *                                            ! Measures all CPUs.
ADD DISC *                                           ! Measures all disks.
ADD LINE *                                           ! Measures all lines.
ADD PROCESS SYSTEM-PROCESSES                         ! Measures all system procedures.
ADD USERDEF $PROGS.SERVER1.*                         ! Adds processes that have response time and
ADD COUNTER RESP-TIME, PROCESS $PROGS.SERVER1.*, QUEUE
ADD COUNTER THROUGHPUT, PROCESS $PROGS.SERVER1.*, ACCUM  ! throughput counters in them.
START MEASUREMENT CPLNDAY1,                          ! Starts the measurement for
FROM 00:05 FOR 24 HOURS,                             ! day <n> of the week. Starts at midnight
INTERVAL 1 HOURS                                     ! for 24 hours. Writes data every hour.
"""

# Figure 4, <jd> = 311.
FIGURE_4 = """\
LIST CPU *, LOADID DT31123, FROM 23:00, FOR 1 HOURS
LIST DISC *, LOADID DT31123, FROM 23:00, FOR 1 HOURS
LIST LINE *, LOADID DT31123, FROM 23:00, FOR 1 HOURS
LIST PROCESS *, LOADID DT31123, FROM 23:00, FOR 1 HOURS
LIST USERDEF *, LOADID DT31123, FROM 23:00, FOR 1 HOURS
"""


def strip_pos(x):
    """Recursively drop line/column so ASTs written differently can be compared."""
    if dataclasses.is_dataclass(x):
        return (type(x).__name__,) + tuple(
            (f.name, strip_pos(getattr(x, f.name))) for f in dataclasses.fields(x)
            if f.name not in ("line", "column", "text"))
    if isinstance(x, (tuple, list)):
        return tuple(strip_pos(v) for v in x)
    if isinstance(x, dict):
        return tuple(sorted((k, strip_pos(v)) for k, v in x.items()))
    return x


def one(text, **kw):
    cmds = parse_script(text, **kw)
    assert len(cmds) == 1
    return cmds[0]


def err(text, **kw) -> MeascomSyntaxError:
    with pytest.raises(MeascomSyntaxError) as ei:
        parse_script(text, **kw)
    return ei.value


# ------------------------------------------------------------------ the 1986 figures


def test_figure_3():
    cmds = parse_script(FIGURE_3)
    assert [type(c).__name__ for c in cmds] == [
        "Volume", "AddEntity", "AddEntity", "AddEntity", "AddEntity", "AddEntity",
        "AddCounter", "AddCounter", "StartMeasurement"]
    vol, cpu, disc, line, proc, udef, resp, thru, start = cmds
    assert (vol.volume, vol.subvol, vol.line, vol.column) == ("$VOL", "CPLNWEEK", 2, 1)
    assert [(c.entity, c.specs[0].form, c.specs[0].fields) for c in (cpu, disc, line)] == [
        ("CPU", "all", {}), ("DISC", "all", {}), ("LINE", "all", {})]
    assert (proc.entity, proc.specs[0].form, proc.specs[0].fields) == (
        "PROCESS", "system_processes", {"pin": "SYSTEM"})
    assert (udef.entity, udef.specs[0].fields) == (
        "USERDEF", {"program_file_name": "$PROGS.SERVER1.*"})
    assert (resp.name, resp.type, resp.array, resp.process.fields, resp.line) == (
        "RESP-TIME", "QUEUE", None, {"program_file_name": "$PROGS.SERVER1.*"}, 8)
    assert (thru.name, thru.type) == ("THROUGHPUT", "ACCUM")
    assert (start.file, start.line, start.column) == ("CPLNDAY1", 10, 1)
    assert start.start == ast.DateTime(
        date=None, time=ast.TimeOfDay(hour=0, minute=5, second=0, line=11, column=6),
        line=11, column=6)
    assert (start.for_.value, start.for_.unit, start.for_.seconds) == (24, "HOURS", 86_400)
    assert (start.for_.line, start.for_.column) == (11, 16)
    assert (start.interval.us, start.interval.line) == (3_600_000_000, 12)
    assert start.to is None and start.options == ()


def test_figure_3_builds_contab():
    c = apply_commands(ContabBuilder(), parse_script(FIGURE_3)).build()
    assert [(d.type, d.fields) for d in c.descriptors] == [
        ("CPU", {}), ("DISC", {}), ("LINE", {}), ("PROCESS", {"pin": "SYSTEM"}),
        ("USERDEF", {"program_file_name": "$PROGS.SERVER1.*"})]
    assert [(x.name, x.type, x.process_spec) for x in c.counters] == [
        ("RESP-TIME", "QUEUE", "$PROGS.SERVER1.*"), ("THROUGHPUT", "ACCUM", "$PROGS.SERVER1.*")]
    assert c.matches("PROCESS", {"cpu": 0, "pin": 5, "priority": 201})
    assert not c.matches("PROCESS", {"cpu": 0, "pin": 5, "priority": 150})


def test_figure_3_comma_between_from_and_for_is_optional():
    with_comma = FIGURE_3.replace("FROM 00:05 FOR", "FROM 00:05, FOR")
    one_line = "START MEASUREMENT CPLNDAY1, FROM 00:05, FOR 24 HOURS, INTERVAL 1 HOURS"
    a = parse_script(FIGURE_3)[-1]
    assert strip_pos(parse_script(with_comma)[-1]) == strip_pos(a) == strip_pos(one(one_line))


def test_figure_4():
    cmds = parse_script(FIGURE_4)
    assert [(c.verb, c.entity, c.specs[0].form, c.loadid) for c in cmds] == [
        ("LIST", e, "all", "DT31123") for e in ("CPU", "DISC", "LINE", "PROCESS", "USERDEF")]
    for i, c in enumerate(cmds, start=1):
        assert (c.line, c.column) == (i, 1)
        assert (c.start.time.hour, c.start.time.minute, c.start.date) == (23, 0, None)
        assert (c.for_.value, c.for_.unit) == (1, "HOURS")
        assert c.to is None and c.by is None and c.if_ is None and c.attrs == ()


def test_figure_4_as_a_complete_conversion_file():
    text = ("ADD MEASUREMENT $VOL.CPLNWEEK.CPLNDAY1\nSET REPORT FORMAT STRUCTURED\n" + FIGURE_4)
    cmds = parse_script(text)
    assert cmds[0] == ast.AddMeasurement(file="$VOL.CPLNWEEK.CPLNDAY1", line=1, column=1)
    assert cmds[1].attrs[0].name == "FORMAT" and cmds[1].attrs[0].value == "STRUCTURED"
    assert len(cmds) == 7


# ------------------------------------------------------------------ lexical rules


def test_comments_blank_lines_and_case():
    text = "\n  == a comment\n\n! another\nadd cpu *   == trailing\nAdd Disk $data1 ! x\n"
    cmds = parse_script(text)
    assert [(c.entity, c.line) for c in cmds] == [("CPU", 5), ("DISC", 6)]
    assert cmds[1].specs[0].fields == {"device_name": "$DATA1"}
    assert parse_script("") == [] and parse_script("== only\n!\n") == []


def test_continuation_comma_and_ampersand():
    a = parse_script("ADD PROCESS $A,\n\n  == comment between\n  $B")
    b = parse_script("ADD PROCESS $A &\n  , $B")
    assert strip_pos(a) == strip_pos(b)
    assert [s.fields for s in a[0].specs] == [{"process_name": "$A"}, {"process_name": "$B"}]
    assert (a[0].specs[1].line, a[0].specs[1].column) == (4, 3)
    assert len(tokenize("EXIT\r\nEXIT\rEXIT")) == 3


# ------------------------------------------------------------------ grammar forms


@pytest.mark.parametrize(
    ("text", "entity", "forms_fields"),
    [
        ("ADD CPU *", "CPU", [("all", {})]),
        ("ADD CPU 0, 1, 15", "CPU", [("cpu", {"cpu": 0}), ("cpu", {"cpu": 1}),
                                     ("cpu", {"cpu": 15})]),
        ("ADD TMF 2", "TMF", [("cpu", {"cpu": 2})]),
        ("ADD PROCESS *", "PROCESS", [("all", {})]),
        ("ADD PROCESS 3,45", "PROCESS", [("cpu_pin", {"cpu": 3, "pin": 45})]),
        ("ADD PROCESS *, 12", "PROCESS", [("cpu_pin", {"cpu": "*", "pin": 12})]),
        ("ADD PROCESS 3, *, $TMP", "PROCESS",
         [("cpu_pin", {"cpu": 3, "pin": "*"}), ("process_name", {"process_name": "$TMP"})]),
        ("ADD PROCESS $TMP (1,*)", "PROCESS",
         [("process_name", {"process_name": "$TMP", "cpu": 1, "pin": "*"})]),
        ("ADD PROCESS billing", "PROCESS", [("program_file", {"program_file_name": "BILLING"})]),
        ("ADD PROCESS data.billing(2,3)", "PROCESS",
         [("program_file", {"program_file_name": "DATA.BILLING", "cpu": 2, "pin": 3})]),
        ("ADD PROCESS $*.*.BILLING", "PROCESS",
         [("program_file", {"program_file_name": "$*.*.BILLING"})]),
        ('ADD PROCESS "/usr/bin/Srv"(0,9)', "PROCESS",
         [("oss_path", {"oss_path": "/usr/bin/Srv", "cpu": 0, "pin": 9})]),
        ("ADD USERDEF $BILL", "USERDEF", [("process_name", {"process_name": "$BILL"})]),
        ("ADD PROCESSH 1,2", "PROCESSH", [("cpu_pin", {"cpu": 1, "pin": 2})]),
        ("ADD FILE $*.*.*", "FILE", [("file", {"file_name": "$*.*.*"})]),
        ("ADD FILE \\WEST.$*.*.*", "FILE", [("file", {"file_name": "\\WEST.$*.*.*"})]),
        ("ADD DISCOPEN $DATA.*.ACCT, *", "DISCOPEN",
         [("file", {"file_name": "$DATA.*.ACCT"}), ("all", {})]),
        ("ADD DISC $DATA1", "DISC", [("device", {"device_name": "$DATA1"})]),
        ("ADD DISK $* (3)", "DISC", [("device", {"device_name": "$*", "cpu": 3})]),
        ("ADD DEVICE $TAPE1", "DEVICE", [("device", {"device_name": "$TAPE1"})]),
        ("ADD LINE $LHL1(2)", "LINE", [("device", {"device_name": "$LHL1", "cpu": 2})]),
        ("ADD NETLINE $X25A", "NETLINE", [("device", {"device_name": "$X25A"})]),
        ("ADD TERMINAL $LN1.#T1", "TERMINAL",
         [("terminal", {"line_name": "$LN1", "subdev_name": "#T1"})]),
        ("ADD TERMINAL $LN1", "TERMINAL", [("terminal", {"line_name": "$LN1"})]),
        ("ADD SYSTEM \\WEST, 4", "SYSTEM", [("remote_system", {"remote_system_name": "\\WEST"}),
                                            ("remote_system", {"remote_system": 4})]),
        ("ADD CLUSTER *", "CLUSTER", [("all", {})]),
        # the H-, J- and L-series types: SQL and OSS name-server processes are specified as
        # processes, OSSCPU and SERVERNET (CONTROLLER) as CPUs, DISKFILE as files
        ("ADD SQLSTMT $APPL.SQL.ORDERS", "SQLSTMT", [("program_file", {"program_file_name": "$APPL.SQL.ORDERS"})]),
        ("ADD SQLPROC 2,40", "SQLPROC", [("cpu_pin", {"cpu": 2, "pin": 40})]),
        ('ADD OSSNS "/usr/sbin/nsd"', "OSSNS", [("oss_path", {"oss_path": "/usr/sbin/nsd"})]),
        ("ADD OSSCPU 3", "OSSCPU", [("cpu", {"cpu": 3})]),
        ("ADD CONTROLLER *", "SERVERNET", [("all", {})]),
        ("ADD SERVERNET 1", "SERVERNET", [("cpu", {"cpu": 1})]),
        ("ADD DISKFILE $DATA.*.ORDERS", "DISKFILE", [("file", {"file_name": "$DATA.*.ORDERS"})]),
    ],
)
def test_add_entity_forms(text, entity, forms_fields):
    c = one(text)
    assert isinstance(c, ast.AddEntity) and c.entity == entity
    assert [(s.form, s.fields) for s in c.specs] == forms_fields
    assert all(s.entity == entity for s in c.specs)


def test_delete_forms():
    c = one("DELETE CPU 6")
    assert isinstance(c, ast.DeleteEntity) and c.specs[0].fields == {"cpu": 6}
    c = one("DELETE COUNTER WAITING, PROCESS BILLING")
    assert (c.name, c.process.fields) == ("WAITING", {"program_file_name": "BILLING"})
    assert one("DELETE COUNTER *") == ast.DeleteCounter(name="*", process=None, line=1, column=1)
    b = apply_commands(ContabBuilder(), parse_script("ADD CPU *\nDELETE CPU 6\nADD DISC $D1\nDELETE DISC $D1"))
    assert [(d.type, d.fields, d.exclude) for d in b.build().descriptors] == [
        ("CPU", {}, False), ("CPU", {"cpu": 6}, True)]


def test_add_counter_forms():
    c = one("ADD COUNTER WAITING, PROCESS BILLING, BUSY, ARRAY 9")
    assert (c.name, c.type, c.array, c.elements) == ("WAITING", "BUSY", 9, 10)
    c = one("add counter t_1, process 3,45, faccum")
    assert (c.name, c.process.fields, c.type) == ("T_1", {"cpu": 3, "pin": 45}, "FACCUM")
    assert one("ADD COUNTER X, PROCESS $A, TCELLQBUSY").type == "TCELLQBUSY"


def test_measurement_commands():
    assert one("ADD MEASUREMENT $PERF.DATA.JUN04").file == "$PERF.DATA.JUN04"
    assert one("STOP MEASUREMENT X") == ast.StopMeasurement(file="X", line=1, column=1)
    assert one("STOP X").file == "X"
    assert one("START MEASSUBSYS") == ast.MeasSubsys(action="START", line=1, column=1)
    assert one("STOP MEASSUBSYS").action == "STOP"
    assert one("INFO MEASUREMENT A, B").files == ("A", "B")
    assert one("INFO /OUT CFG/ X") == ast.InfoMeasurement(files=("X",), out="CFG", line=1,
                                                          column=1)
    assert one("STATUS").target == "MEASSUBSYS"
    assert one("STATUS MEASSUBSYS").target == "MEASSUBSYS"
    s = one("STATUS MEASUREMENT $P.D.F")
    assert (s.target, s.file) == ("MEASUREMENT", "$P.D.F")
    assert one("ASSUME MEASUREMENT $P.D.F").file == "$P.D.F"
    assert one("OBEY $SYSTEM.PERF.STARTUP").file == "$SYSTEM.PERF.STARTUP"
    assert one("OUT $S.#LIST").file == "$S.#LIST"
    assert one("EXIT") == ast.Exit(line=1, column=1)
    assert one("HELP START MEASUREMENT").topic == ("START", "MEASUREMENT")
    assert one("HELP").topic == ()


def test_volume_forms():
    assert (one("VOLUME $DATA").volume, one("VOLUME $DATA").subvol) == ("$DATA", None)
    assert (one("VOLUME sub").volume, one("VOLUME sub").subvol) == (None, "SUB")
    v = one("VOLUME \\WEST.$D.S")
    assert (v.node, v.volume, v.subvol) == ("\\WEST", "$D", "S")
    b = apply_commands(ContabBuilder(default_subvol="$A.B"), 
        parse_script("VOLUME C\nADD PROCESS X\nVOLUME $D\nADD PROCESS Y\nVOLUME $E.F\nADD FILE Z"))
    assert [next(iter(d.fields.values())) for d in b.build().descriptors] == [
        "$A.C.X", "$D.C.Y", "$E.F.Z"]


def test_start_options():
    s = one("START MEASUREMENT $P.D.F, FROM 4 JUN 1986, 00:05, TO JUN 5 1986, 00:05:30, "
            "INTERVAL 15 MINUTES, NOOSS, SQL, FILESIZE 2 GB, NOCOUNTERS")
    assert (s.start.date.day, s.start.date.month, s.start.date.year) == (4, 6, 1986)
    assert (s.to.date.day, s.to.date.year, s.to.time.second) == (5, 1986, 30)
    assert (s.interval.value, s.interval.unit, s.interval.seconds) == (15, "MINUTES", 900)
    assert s.options == ("NOOSS", "SQL", "NOCOUNTERS") and s.filesize == (2, "GB")
    s = one("START MEASUREMENT X, FROM 29 FEB, 01:00, FOR 1 SECOND")
    assert (s.start.date.year, s.for_.unit) == (None, "SECONDS")
    assert one("START X FOR 9999 MINUTE").for_.seconds == 9999 * 60
    assert one("START").file is None


def test_set_report():
    c = one("SET REPORT FORMAT BRIEF, RATE OFF, LOADID DAY1, TOTALS ONLY, ZERO-REPORTS, "
            "STYLE ZMS, DOTS ON, CR-NAME-QUAL QUALIFIED, FROM 23:00, FOR 2 HOURS")
    assert [(a.name, a.value) for a in c.attrs][:8] == [
        ("FORMAT", "BRIEF"), ("RATE", "OFF"), ("LOADID", "DAY1"), ("TOTALS", "ONLY"),
        ("ZERO-REPORTS", "INCLUDE"), ("STYLE", "ZMS"), ("DOTS", "ON"),
        ("CR-NAME-QUAL", "QUALIFIED")]
    assert c.attrs[8].value.time.hour == 23 and c.attrs[9].value.seconds == 7200
    assert [a.value for a in one("SET REPORT FORMAT NORMAL RATE ON").attrs] == ["NORMAL", "ON"]


def test_list_forms():
    c = one("LISTALL DISC $DATA1, $DATA2, BY REQUESTS, IF DEVICE-QBUSY-TIME > 50, RATE OFF")
    assert c.verb == "LISTALL" and [s.fields["device_name"] for s in c.specs] == ["$DATA1",
                                                                                    "$DATA2"]
    assert c.by == "REQUESTS"
    assert c.if_ == ast.Condition(counter="DEVICE-QBUSY-TIME", op=">", value=50, line=1,
                                  column=43)
    assert [(a.name, a.value) for a in c.attrs] == [("RATE", "OFF")]
    for op in ("=", "<>", "<", ">", "<=", ">="):
        assert one(f"LIST CPU *, IF CPU-BUSY-TIME {op} 2.5").if_.op == op
    c = one("LIST PROCESS 3,45, FROM 1 JAN 1990, 10:00, TO 11:00")
    assert c.specs[0].fields == {"cpu": 3, "pin": 45} and c.to.time.hour == 11
    c = one("LISTACTIVE CPU 2, FOR 10 SECONDS")
    assert (c.verb, c.for_.seconds) == ("LISTACTIVE", 10)
    assert one("LIST /OUT RPT/ CPU *").out == "RPT"
    assert one("LIST CPU").specs[0].form == "all"
    assert one("LIST CPU, LOADID X").loadid == "X"
    assert one("LIST PROCESS $*.*.BILLING").specs[0].fields == {
        "program_file_name": "$*.*.BILLING"}


def test_interactive_abbreviations():
    c = one("STAR MEASU X, FR 00:05, FO 2 HOUR, INT 1 MIN", interactive=True)
    assert isinstance(c, ast.StartMeasurement) and c.for_.seconds == 7200
    assert c.interval.unit == "MINUTES"
    assert one("LISTAC CPU *", interactive=True).verb == "LISTACTIVE"
    assert one("AD DISCO *", interactive=True).entity == "DISCOPEN"
    # ambiguous (LIST / LISTALL / LISTACTIVE) and refused in files
    e = err("LI CPU *", interactive=True)
    assert (e.line, e.column, e.word) == (1, 1, "LI")
    assert err("STA MEASUREMENT X", interactive=True).word == "STA"  # START or STATUS
    assert err("STAR MEASUREMENT X").word == "STAR"  # no abbreviations in files
    assert one("STOP MEASS", interactive=True).action == "STOP"
    e = err("ADD PROC 1,2", interactive=True)  # PROCESS or PROCESSH
    assert e.word == "PROC"


# ------------------------------------------------------------------ errors


@pytest.mark.parametrize(
    ("text", "line", "column", "word", "expected", "message"),
    [
        ("START MEASUREMENT X, FRM 00:05", 1, 22, "FRM", ["FROM", "FOR", "TO", "INTERVAL"],
         "line 1, column 22: unexpected 'FRM'; expected FROM, FOR, TO or INTERVAL"),
        ("ADD CPU *\nADD CPU *\nSTART MEASUREMENT X,\n  FROM 00:05 FRO 2 HOURS", 4, 14, "FRO",
         ["FOR", "TO", "INTERVAL", "end of line"],
         "line 4, column 14: unexpected 'FRO'; expected FOR, TO, INTERVAL or end of line"),
        ("ADD CPU *,\n", 1, 11, "", ["a CPU number 0-15 or *"],
         "line 1, column 11: unexpected end of line; expected a CPU number 0-15 or *"),
        ("ADD CPU 16", 1, 9, "16", ["a CPU number 0-15 or *"],
         "line 1, column 9: 16 is out of range; expected a CPU number 0-15 or *"),
        ("ADD", 1, 4, "", ["an entity type", "COUNTER", "MEASUREMENT"],
         ("line 1, column 4: unexpected end of line; expected an entity type, COUNTER or "
         "MEASUREMENT")),
        ("  ADDD CPU *", 1, 3, "ADDD", list(parse_script.__globals__["COMMANDS"]), None),
        ("ADD FILE $SR*", 1, 10, "$SR*", [],
         ("line 1, column 10: invalid volume '$SR*' in '$SR*': use $NAME or $* "
         "(a * may replace a whole element only)")),
        ("ADD COUNTER X, PROCESS $A, ACUM", 1, 28, "ACUM",
         ["ACCUM", "FACCUM", "BUSY", "QUEUE", "QBUSY", "TCELLBUSY", "TCELLQUEUE", "TCELLQBUSY"],
         None),
        ("ADD COUNTER X, PROCESS $A, BUSY, ARRAY 128", 1, 40, "128", ["an ARRAY size 1-127"],
         "line 1, column 40: 128 is out of range; expected an ARRAY size 1-127"),
        ("ADD COUNTER ABCDEFGHIJKLMNOPQ, PROCESS $A, BUSY", 1, 13, "ABCDEFGHIJKLMNOPQ",
         ["a counter name (1-16 characters: a letter, then letters, digits, - or _)"], None),
        ("START X, FOR 10000 HOURS", 1, 14, "10000", ["a duration count 1-9999"], None),
        ("START X, FOR 10 DAYS", 1, 17, "DAYS", ["SECONDS", "MINUTES", "HOURS"], None),
        ("START X, FROM 24:00", 1, 15, "24:00", [],
         "line 1, column 15: invalid time '24:00': hours 0-23, minutes and seconds 0-59"),
        ("START X, FROM 30 FEB, 10:00", 1, 15, "30", [],
         "line 1, column 15: invalid date: FEB has no day 30"),
        ("START X, FROM 1 JAN 1983, 10:00", 1, 21, "1983", ["a year 1984-2047"], None),
        ("START X, FOR 1 HOURS, TO 10:00", 1, 23, "TO", [],
         "line 1, column 23: FOR and TO are mutually exclusive"),
        ("START X, INTERVAL 1 HOURS INTERVAL 2 HOURS", 1, 27, "INTERVAL", [],
         "line 1, column 27: INTERVAL given twice"),
        ("LIST CPU *, BY", 1, 15, "", None, None),
        ("LISTACTIVE CPU *, FROM 10:00", 1, 19, "FROM", [],
         "line 1, column 19: LISTACTIVE takes FOR, not FROM or TO"),
        ("SET REPORT FORMAT CSV", 1, 19, "CSV", ["BRIEF", "NORMAL", "STRUCTURED"], None),
        ("SET FORMAT BRIEF", 1, 5, "FORMAT", ["REPORT"], None),
        ("ADD PROCESS 3", 1, 14, "", ["','"], None),
        ("ADD PROCESS $TMP(1,2", 1, 21, "", ["')'"], None),
        ("ADD PROCESS $TOOLONG", 1, 13, "$TOOLONG", [], None),
        ('ADD PROCESS "/x', 1, 13, '"/x', [], None),
        ("ADD CPU * @", 1, 11, "@", [], "line 1, column 11: unexpected character '@'"),
        ("ADD CPU * EXTRA", 1, 11, "EXTRA", ["end of line"], None),
        ("VOLUME $A.B.C", 1, 8, "$A.B.C", [], None),
        ("ASSUME X", 1, 8, "X", ["MEASUREMENT"], None),
        ("EXIT &x", 1, 6, "&", [], None),
    ],
)
def test_errors(text, line, column, word, expected, message):
    e = err(text)
    assert (e.line, e.column, e.word) == (line, column, word)
    if expected is not None:
        assert e.expected == expected
    if message is not None:
        assert str(e) == message
    assert str(e).startswith(f"line {line}, column {column}: ")


def test_error_in_later_command_rejects_the_whole_file():
    text = FIGURE_3 + "LIST CPU *, FORMAT CSV\n"
    e = err(text)
    assert (e.line, e.word) == (13, "CSV")


# ------------------------------------------------------------------ property tests


def _check_position(e: MeascomSyntaxError, text: str) -> None:
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    assert 1 <= e.line <= len(lines)
    assert 1 <= e.column <= len(lines[e.line - 1]) + 1
    assert str(e).startswith(f"line {e.line}, column {e.column}: ")


_alphabet = st.sampled_from(
    list("ADDCPUSTARTFROM$*.,()!=<>/\"&#\\:-_ 0123456789\n\t") +
    ["ADD ", "DELETE ", "START ", "LIST ", "PROCESS ", "FROM ", "FOR ", "HOURS", "00:05",
     "MEASUREMENT ", "COUNTER ", "SET REPORT ", "==", "é", "\r", "\x0b"])
_random_text = st.lists(_alphabet, max_size=40).map("".join) | st.text(max_size=60)


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(_random_text, st.booleans())
def test_random_text_only_raises_syntax_errors(text, interactive):
    try:
        parse_script(text, interactive=interactive)
    except MeascomSyntaxError as e:
        _check_position(e, text)


_VALID = FIGURE_3 + FIGURE_4 + (
    "START MEASUREMENT $P.D.F, FROM 4 JUN 1986, 00:05, TO JUN 5 1986, 00:05:30\n"
    "ADD PROCESS 3,45, $TMP(1,*), BILL, \"/bin/x\"\nADD COUNTER W, PROCESS $A, BUSY, ARRAY 9\n"
    "LISTALL DISC $D1, IF REQUESTS >= 5, BY READS\nSET REPORT FORMAT NORMAL, RATE ON\n")


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, len(_VALID)), st.integers(0, 3),
                          st.sampled_from(["", ",", "*", " ", "\n", "(", "X", "9", "$", ".",
                                           ":", "!", "99999999999999999999", "&"])),
                min_size=1, max_size=4), st.booleans())
def test_mutated_valid_scripts_only_raise_syntax_errors(edits, interactive):
    text = _VALID
    for pos, cut, ins in edits:
        pos = min(pos, len(text))
        text = text[:pos] + ins + text[pos + cut:]
    try:
        cmds = parse_script(text, interactive=interactive)
    except MeascomSyntaxError as e:
        _check_position(e, text)
    else:
        assert all(isinstance(c, ast.Command) for c in cmds)
