"""Tests for collector.measure.contab: MEASURE's configuration table."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from collector.meascom.configure import apply_commands
from collector.measure.contab import (
    MAX_ELEMENTS_PER_PROCESS,
    MAX_NAMED_COUNTERS_PER_PROCESS,
    TRAILER_TYPE,
    Contab,
    ContabBuilder,
    CounterSpec,
    DescriptorError,
    EntityDescriptor,
    check_file_pattern,
    expand_file_name,
    format_process_spec,
    is_system_process,
    normalize_fields,
    parse_process_spec,
)


def D(type, exclude=False, **fields):
    return EntityDescriptor(type=type, fields=fields, exclude=exclude)


# ------------------------------------------------------------------ descriptors


def test_descriptor_canonical_form():
    d = D("disk", device_name="$data1", cpu="3", pin="*")
    assert (d.type, d.fields, d.exclude) == ("DISC", {"cpu": 3, "device_name": "$DATA1"}, False)
    assert d.type_code == 7
    assert D("CPU", cpu=-1).fields == {} == D(1).fields
    assert D("PROCESS", pin=-2).fields == {"pin": "SYSTEM"}
    assert D("FILE", file_name="$data").fields == {"file_name": "$DATA.*.*"}
    assert D("FILE", file_name="\\sys.$*.*.f").fields == {"file_name": "\\SYS.$*.*.F"}
    assert D("TERMINAL", line_name="$LN1", subdev_name="#*").fields == {"line_name": "$LN1"}
    assert D("PROCESS", process_name="$*").fields == {"process_name": "$*"}  # named only


@pytest.mark.parametrize(
    ("type", "fields", "message"),
    [
        ("PROCESS", {"pin": 70000}, "field 'pin' must be an integer 0-65535, '*' or 'SYSTEM'"),
        ("CPU", {"cpu": 16}, "field 'cpu' must be an integer 0-15 or '*'"),
        ("CPU", {"cpu": True}, "field 'cpu' must not be a boolean"),
        ("DISC", {"pin": "SYSTEM"}, "field 'pin' must be an integer 0-65535 or '*'"),
        ("CPU", {"pin": 3}, "field 'pin' is not an identifier of CPU; valid fields: cpu"),
        ("FILE", {"file_name": "$SR*"}, "a * may replace a whole element only"),
        ("FILE", {"file_name": "$SR8.QU*L.*"}, "a * may replace a whole element only"),
        ("FILE", {"file_name": "$VOL.SUB"}, "incomplete file name"),
        ("FILE", {"file_name": "SUB.FILE"}, "must be $vol.subvol.file"),
        ("DISC", {"device_name": "DATA1"}, "field 'device_name' must be $NAME or $*"),
        ("DISC", {"path": "X"}, "field 'path' must be P (primary) or B (backup)"),
        ("SYSTEM", {"remote_system_name": "NODE"}, "must be \\NAME or \\*"),
        ("PROCESS", {"process_name": "$TOOLONG"}, "field 'process_name' must be $NAME"),
        ("PROCESS", {"oss_path": "bin/x"}, "must be an absolute path"),
    ],
)
def test_descriptor_field_errors(type, fields, message):
    with pytest.raises(DescriptorError) as ei:
        normalize_fields(type, fields)
    assert message in str(ei.value)
    with pytest.raises(ValidationError, match=f"{type} descriptor: .*{re.escape(message[:20])}"):
        EntityDescriptor(type=type, fields=fields)


def test_unknown_type():
    with pytest.raises(ValidationError, match=r"unknown entity type 'DSK'.*CPU \(1\)"):
        EntityDescriptor(type="DSK")


def test_contab_error_names_index_type_and_field():
    data = {"descriptors": [
        {"type": "CPU"}, {"type": "DISC", "fields": {"device_name": "$D1"}},
        {"type": "PROCESS", "fields": {"cpu": 1, "pin": "x"}},
    ]}
    with pytest.raises(ValidationError) as ei:
        Contab.model_validate(data)
    assert ("descriptor 3 (PROCESS): field 'pin' must be an integer 0-65535, '*' or 'SYSTEM', "
            "got 'x'") in str(ei.value)


# ------------------------------------------------------------------ file names


def test_file_patterns():
    assert check_file_pattern("$*") == "$*.*.*"
    assert check_file_pattern("$sr8.qual.*") == "$SR8.QUAL.*"
    assert check_file_pattern("\\*.$*.*.*") == "\\*.$*.*.*"
    assert check_file_pattern("bill", allow_partial=True) == "BILL"
    for bad in ("$SR*", "$*X", "*X.Y", "$A.B.C.D", "\\N", "$A.1B.C", "$A.B.CCCCCCCCC", ""):
        with pytest.raises(ValueError):
            check_file_pattern(bad, allow_partial=True)
    assert expand_file_name("BILLING", "$PERF.DATA") == "$PERF.DATA.BILLING"
    assert expand_file_name("SUB.F", "$PERF.DATA") == "$PERF.SUB.F"
    assert expand_file_name("$X.Y.Z", "$PERF.DATA") == "$X.Y.Z"


# ------------------------------------------------------------------ header / trailer


def test_header_groups_by_ascending_type():
    c = Contab(descriptors=[
        D("DISC"), D("CPU"), D("PROCESS", pin="SYSTEM"), D("CPU", cpu=6, exclude=True),
        D("TMF", cpu=0), D("PROCESS", cpu=3, pin=45),
    ])
    assert [(h.type, h.type_code, h.offset, h.count) for h in c.header()] == [
        ("CPU", 1, 0, 2), ("PROCESS", 2, 2, 2), ("DISC", 7, 4, 1), ("TMF", 14, 5, 1)]
    assert [t for t, _ in c.entries()] == [1, -1, 2, 2, 7, 14, TRAILER_TYPE]
    assert c.entries()[-1] == (51, None)
    assert c.ordered()[1].fields == {"cpu": 6}
    assert c.entity_types() == ["CPU", "PROCESS", "DISC", "TMF"]
    assert Contab().header() == [] and Contab().entries() == [(51, None)]


# ------------------------------------------------------------------ matching


def test_matches_include_and_exclude():
    c = Contab(descriptors=[D("CPU"), D("CPU", cpu=6, exclude=True)])
    assert [cpu for cpu in range(8) if c.matches("cpu", {"cpu": cpu})] == [0, 1, 2, 3, 4, 5, 7]
    assert not c.matches("DISC", {"cpu": 0, "device_name": "$D", "pin": 1, "path": "P"})


def test_matches_process_forms():
    c = Contab(descriptors=[
        D("PROCESS", program_file_name="$PROGS.SERVER1.*"),
        D("PROCESS", process_name="$TMP"),
        D("PROCESS", cpu=2, pin=7),
        D("PROCESS", pin="SYSTEM"),
        D("PROCESS", program_file_name="$PROGS.SERVER1.OLD", exclude=True),
    ])
    base = {"cpu": 0, "pin": 100, "process_name": None, "priority": 150,
            "program_file_name": "$DATA.APP.X"}
    m = lambda **kw: c.matches("PROCESS", {**base, **kw})
    assert not m()
    assert m(program_file_name="$progs.server1.srv")
    assert not m(program_file_name="$PROGS.SERVER1.OLD")
    assert not m(program_file_name="$PROGS.SERVER2.SRV")
    assert m(process_name="$TMP") and not m(process_name="$TMQ")
    assert m(cpu=2, pin=7) and not m(cpu=2, pin=8)
    assert m(priority=200) and not m(priority=199)
    # the explicit flag wins over priority
    assert m(priority=150, system_process=True) and not m(priority=220, system_process=False)


def test_is_system_process():
    assert is_system_process({"priority": 201})
    assert not is_system_process({"priority": 199})
    assert not is_system_process({})
    assert is_system_process({"priority": 1, "system_process": True})


def test_matches_file_disc_terminal_system():
    c = Contab(descriptors=[
        D("FILE", file_name="$DATA.*.ACCOUNT"), D("FILE", file_name="\\REMOTE.$*.*.*"),
        D("DISC", device_name="$DATA1", cpu=2),
        D("TERMINAL", line_name="$LN1", subdev_name="#T1"),
        D("SYSTEM", remote_system_name="\\WEST"),
    ])
    f = lambda n: c.matches("FILE", {"file_name": n})
    assert f("$DATA.BANK.ACCOUNT") and not f("$DATA.BANK.TELLER") and not f("$DAT2.BANK.ACCOUNT")
    assert f("\\REMOTE.$X.Y.Z") and not f("\\OTHER.$X.Y.Z") and not f("$X.Y.Z")
    assert c.matches("DISK", {"cpu": 2, "device_name": "$DATA1", "pin": 5, "path": "B"})
    assert not c.matches("DISC", {"cpu": 3, "device_name": "$DATA1", "pin": 5, "path": "P"})
    assert c.matches("TERMINAL", {"line_name": "$LN1", "subdev_name": "#T1"})
    assert not c.matches("TERMINAL", {"line_name": "$LN1", "subdev_name": "#T2"})
    assert c.matches("SYSTEM", {"remote_system": 4, "remote_system_name": "\\west"})


# ------------------------------------------------------------------ user counters


def test_counter_spec():
    s = CounterSpec(name="resp-time", process="$progs.server1.*", type="queue", array=3)
    assert (s.name, s.type, s.array, s.elements) == ("RESP-TIME", "QUEUE", 3, 4)
    assert s.process == {"program_file_name": "$PROGS.SERVER1.*"}
    assert s.process_spec == "$PROGS.SERVER1.*"
    assert CounterSpec(name="X", process="3,45", type="ACCUM").elements == 1
    assert s.applies_to({"program_file_name": "$PROGS.SERVER1.A", "cpu": 0, "pin": 9})


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"name": "1ABC"}, "counter name '1ABC' must be 1-16 characters"),
        ({"name": "A" * 17}, "must be 1-16 characters"),
        ({"name": "A.B"}, "must be 1-16 characters"),
        ({"type": "TCELLBUSY"}, "counter type 'TCELLBUSY' must be one of ACCUM, FACCUM, BUSY"),
        ({"array": 0}, "ARRAY size 0 must be an integer 1-127 (ARRAY n gives n+1 elements)"),
        ({"array": 128}, "ARRAY size 128 must be an integer 1-127"),
        ({"process": "$SR*.X"}, "a * may replace a whole element only"),
    ],
)
def test_counter_spec_errors(kw, message):
    args = {"name": "OK", "process": "*", "type": "ACCUM", **kw}
    with pytest.raises(ValidationError) as ei:
        CounterSpec(**args)
    assert message in str(ei.value)


def test_process_spec_round_trip():
    for text, fields in [
        ("*", {}), ("3,45", {"cpu": 3, "pin": 45}), ("SYSTEM-PROCESSES", {"pin": "SYSTEM"}),
        ("$TMP", {"process_name": "$TMP"}), ("$TMP(1,*)", {"process_name": "$TMP", "cpu": 1}),
        ("$A.B.C(0,5)", {"program_file_name": "$A.B.C", "cpu": 0, "pin": 5}),
        ('"/bin/x"', {"oss_path": "/bin/x"}),
    ]:
        canon = normalize_fields("PROCESS", parse_process_spec(text))[1]
        assert canon == fields, text
        assert format_process_spec(canon) == text
    assert parse_process_spec("BILL", default_subvol="$P.D") == {"program_file_name": "$P.D.BILL"}


def test_counter_limits():
    proc = "$P.S.F"
    ok = [CounterSpec(name=f"C{i}", process=proc, type="ACCUM") for i in range(85)]
    Contab(counters=ok)
    with pytest.raises(ValidationError, match=f"86 named counters; at most "
                                              f"{MAX_NAMED_COUNTERS_PER_PROCESS}"):
        Contab(counters=[*ok, CounterSpec(name="X", process=proc, type="ACCUM")])
    # other processes have their own budget
    Contab(counters=[*ok, CounterSpec(name="X", process="$P.S.G", type="ACCUM")])
    arrays = [CounterSpec(name=f"A{i}", process=proc, type="BUSY", array=127) for i in range(2)]
    Contab(counters=arrays)  # 2 x 128 = 256 elements
    with pytest.raises(ValidationError, match=f"257 counter elements .* at most "
                                              f"{MAX_ELEMENTS_PER_PROCESS}"):
        Contab(counters=[*arrays, CounterSpec(name="S", process=proc, type="ACCUM")])
    with pytest.raises(ValidationError, match="counter A0 is defined twice"):
        Contab(counters=[arrays[0], arrays[0]])


def test_contab_counter_error_names_counter():
    with pytest.raises(ValidationError, match=r"counter 2 \('bad name'\): counter name"):
        Contab.model_validate({"counters": [
            {"name": "OK", "process": "*", "type": "ACCUM"},
            {"name": "bad name", "process": "*", "type": "ACCUM"}]})


# ------------------------------------------------------------------ JSON


def test_json_round_trip():
    c = Contab(
        descriptors=[D("CPU"), D("CPU", cpu=6, exclude=True), D("USERDEF", process_name="$BILL"),
                     D("DISC", device_name="$DATA1", cpu=2, path="P")],
        counters=[CounterSpec(name="TXNS", process="$BILL", type="ACCUM", array=9)],
    )
    dumped = c.model_dump(mode="json")
    assert dumped["descriptors"][1] == {"type": "CPU", "fields": {"cpu": 6}, "exclude": True}
    assert dumped["counters"][0] == {"name": "TXNS", "process": {"process_name": "$BILL"},
                                     "type": "ACCUM", "array": 9}
    assert Contab.model_validate(dumped) == c
    assert Contab.model_validate_json(c.model_dump_json()) == c


# ------------------------------------------------------------------ builder


def test_builder_add_delete_semantics():
    b = ContabBuilder(default_subvol="$PERF.DATA")
    b.add("CPU", {"cpu": "*"})
    b.add("cpu")  # identical: not repeated
    b.delete("CPU", {"cpu": 6})  # after a wildcard ADD: exclusion
    b.add("PROCESS", {"program_file_name": "BILLING"})
    b.add("DISC", {"device_name": "$DATA1"})
    b.delete("DISC", {"device_name": "$DATA1"})  # identical ADD: removed
    c = b.build()
    assert [(d.type, d.fields, d.exclude) for d in c.descriptors] == [
        ("CPU", {}, False), ("CPU", {"cpu": 6}, True),
        ("PROCESS", {"program_file_name": "$PERF.DATA.BILLING"}, False)]
    b.add("CPU", {"cpu": 6})  # re-adding lifts the exclusion; * already covers it
    assert [(d.fields, d.exclude) for d in b.build().descriptors if d.type == "CPU"] == [({}, False)]


def test_builder_counters():
    b = ContabBuilder(default_subvol="$PERF.DATA")
    b.add_counter("TRANSACTIONS", "BILLING", "ACCUM")
    b.add_counter("WAITING", "BILLING", "busy", array=4)
    with pytest.raises(ValueError, match="counter WAITING already exists for PROCESS "
                                         r"\$PERF\.DATA\.BILLING"):
        b.add_counter("waiting", "$PERF.DATA.BILLING", "BUSY")
    c = b.build()
    assert [(x.name, x.process_spec, x.elements) for x in c.counters] == [
        ("TRANSACTIONS", "$PERF.DATA.BILLING", 1), ("WAITING", "$PERF.DATA.BILLING", 5)]
    assert b.delete_counter("waiting") == 1
    with pytest.raises(ValueError, match="no counter NOPE"):
        b.delete_counter("NOPE")
    for i in range(84):
        b.add_counter(f"C{i}", "BILLING", "ACCUM")
    with pytest.raises(ValueError, match="86 named counters"):
        b.add_counter("ONE-TOO-MANY", "BILLING", "ACCUM")
    assert len(b.build().counters) == 85


def test_builder_apply_is_atomic_and_names_the_line():
    from collector.meascom.configure import ContabCommandError
    from collector.meascom.parser import parse_script

    b = ContabBuilder(default_subvol="$PERF.DATA")
    apply_commands(b, parse_script("ADD CPU *\nADD COUNTER T, PROCESS BILLING, ACCUM"))
    before = b.build()
    bad = parse_script("ADD DISC *\nVOLUME $X.Y\nADD COUNTER T, PROCESS $PERF.DATA.BILLING, BUSY")
    with pytest.raises(ContabCommandError) as ei:
        apply_commands(b, bad)
    assert (ei.value.line, ei.value.column) == (3, 1)
    assert str(ei.value) == ("line 3, column 1: counter T already exists for PROCESS "
                             "$PERF.DATA.BILLING")
    assert b.build() == before and b.default_subvol == "$PERF.DATA"
    with pytest.raises(ContabCommandError, match="counter type 'TCELLBUSY' must be one of"):
        apply_commands(b, parse_script("ADD COUNTER Q, PROCESS $A, TCELLBUSY"))
    apply_commands(b, parse_script("DELETE COUNTER T, PROCESS BILLING"))
    assert b.build().counters == []
    apply_commands(b, parse_script("ADD COUNTER A, PROCESS $X, ACCUM\nADD COUNTER B, PROCESS $X, ACCUM\n"
                         "DELETE COUNTER *"))
    assert b.build().counters == []
