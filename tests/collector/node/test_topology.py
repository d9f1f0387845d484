"""Node files: every shipped node loads; bad files are rejected with file, key path and why."""

from __future__ import annotations

import pytest

from collector.node import NodeFileError, load_node, load_workload, node_names, workload_names
from collector.node.topology import PROCESSOR_TYPES

GOOD = """
system: {name: '\\TEST', number: 3, time_zone: Europe/Amsterdam}
processor: {type: VLX, cpus: 4}
discs:
  - {volume: $SYSTEM, primary_cpu: 0, backup_cpu: 1}
  - {volume: '$DATA{i}', count: 2, primary_cpu: rr}
  - {volume: $LOG, primary_cpu: 2, backup_cpu: 3}
lines: [{name: '$X25{i}', count: 2, protocol: X25, speed_bps: 56000, terminals: 5}]
files: [{name: APP.F, type: key-sequenced, volumes: [$DATA1, $DATA2]}]
pathway:
  tcps: {count: 2}
  server_classes: [{name: SC, program: $A.B.C, static: 3, dynamic: 2, opens: [APP.F]}]
"""


def write(tmp_path, text):
    f = tmp_path / "node.yaml"
    f.write_text(text)
    return f


def test_shipped_nodes_load():
    names = node_names()
    assert {"demo", "et1-txp", "rds-txp", "rds-vlx", "ref16"} <= set(names)
    for n in names:
        t = load_node(n)
        assert 2 <= t.n_cpus <= 16
    ref = load_node("ref16")
    assert ref.n_cpus == 16 and ref.entity_count() >= 2000


def test_shipped_workloads_load():
    for n in workload_names():
        load_workload(n)


def test_expansion(tmp_path):
    t = load_node(write(tmp_path, GOOD))
    assert [v["name"] for v in t.volumes] == ["$SYSTEM", "$DATA1", "$DATA2", "$LOG"]
    assert [v["primary_cpu"] for v in t.volumes] == [0, 0, 1, 2]
    assert [v["backup_cpu"] for v in t.volumes] == [1, 1, 2, 3]
    assert len(t.terminals) == 10
    servers = [p for p in t.processes if p.role == "server"]
    assert len(servers) == 5 and sum(p.dynamic for p in servers) == 2
    assert {p.name for p in t.processes if p.role == "tmp"} == {"$TMF0", "$TMF1", "$TMF2", "$TMF3"}
    assert sum(p.role == "dp2" for p in t.processes) == 4
    assert t.cpu_factor == PROCESSOR_TYPES["VLX"] == pytest.approx(1 / 1.64)


@pytest.mark.parametrize(
    "old,new,where,why",
    [
        ("type: VLX", "type: VAX", "processor.type", "unknown processor type 'VAX'"),
        (
            "{volume: $LOG, primary_cpu: 2, backup_cpu: 3}",
            "{volume: $LOG, primary_cpu: 2, backup_cpu: 7}",
            "discs[2].backup_cpu",
            "CPU 7 does not exist",
        ),
        ("cpus: 4", "cpus: 17", "processor.cpus", "less than or equal to 16"),
        ("speed_bps: 56000", "speed_bps: -5", "lines[0].speed_bps", "greater than 0"),
        (
            "volumes: [$DATA1, $DATA2]",
            "volumes: [$DATA1, $DATA9]",
            "files[0].volumes[1]",
            "$DATA9 is not defined",
        ),
        (
            "opens: [APP.F]",
            "opens: [APP.G]",
            "pathway.server_classes[0].opens[0]",
            "APP.G is not defined",
        ),
        (
            "time_zone: Europe/Amsterdam",
            "time_zone: Mars/Olympus",
            "system.time_zone",
            "unknown IANA time zone",
        ),
        (
            "static: 3,",
            "static: 3, colour: red,",
            "pathway.server_classes[0].colour",
            "Extra inputs",
        ),
    ],
)
def test_bad_node_files(tmp_path, old, new, where, why):
    assert old in GOOD
    f = write(tmp_path, GOOD.replace(old, new))
    with pytest.raises(NodeFileError) as ei:
        load_node(f)
    msg = str(ei.value)
    assert str(f) in msg and where in msg and why in msg, msg
    assert ei.value.where == where


def test_bad_workload(tmp_path):
    f = tmp_path / "w.yaml"
    f.write_text("name: x\nkind: debitcredit\ntps: -3\n")
    with pytest.raises(NodeFileError) as ei:
        load_workload(f)
    assert (
        str(f) in str(ei.value)
        and ei.value.where == "tps"
        and "greater than or equal to 0" in str(ei.value)
    )
    f.write_text("name: x\nkind: debitcredit\ntps: 3\nshape: {profile: [1, 2]}\n")
    with pytest.raises(NodeFileError, match="profile needs 24 hourly multipliers"):
        load_workload(f)


def test_unknown_node_name():
    with pytest.raises(NodeFileError, match="shipped nodes: .*demo"):
        load_node("nosuchnode")
