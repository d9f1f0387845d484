"""The host node on a fake /proc: exact counter deltas through MEASMON's copies, transient
processes, interpolation of late readings, CPUs going offline, topology from the host."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from collector.measure.contab import ContabBuilder
from collector.measure.copies import IntervalBuilder
from collector.measure.measmon import COPY_ENTITY_STOP, COPY_START, Measmon, Measurement
from collector.node.host import HostNode, host_topology, is_host_node, system_name_for
from collector.node.taskstats import ThreadExit
from core.catalog import load_catalog

S = 1_000_000
T0 = 1_780_000_000 * S      # on every grid
HZ = 100                    # clock ticks per second in the fake /proc
TICK = S // HZ


class FakeHost:
    """A fake procfs/sysfs tree with counters the test sets; a clock the test moves."""

    def __init__(self, root: Path, *, schedstat: bool = True) -> None:
        self.proc, self.sys = root / "proc", root / "sys"
        (self.proc / "net").mkdir(parents=True)
        (self.sys / "block").mkdir(parents=True)
        self.now = T0
        self.cpus = {0: [100, 0, 50, 1000, 5, 2, 3], 1: [10, 0, 5, 2000, 0, 0, 0]}
        self.sched = {0: [5_000_000, 40], 1: [1_000_000, 20]} if schedstat else None
        self.sched_run = {0: 123, 1: 123}     # ns tasks ran on each CPU (rq_cpu_time)
        self.uptime: float | None = None      # seconds since boot at T0 (None: no /proc/uptime)
        self.discs = {"sda": [100, 0, 800, 50, 40, 0, 320, 90, 0, 120, 300],
                      "sda1": [99, 0, 792, 50, 40, 0, 320, 90, 0, 119, 299],
                      "loop0": [0] * 11}
        for d in ("sda", "loop0"):
            (self.sys / "block" / d).mkdir()
        self.nets = {"lo": [500, 5, 0, 500, 5, 0], "eth0": [10_000, 20, 0, 4_000, 10, 0],
                     "ifb0": [0] * 6}
        (self.proc / "cpuinfo").write_text("processor\t: 0\nmodel name\t: Fake CPU @ 3.00GHz\n"
                                           "processor\t: 1\nmodel name\t: Fake CPU @ 3.00GHz\n")
        self.procs: dict[int, dict] = {}
        self.add_process(100, "srv", start=500, utime=100, stime=20, minflt=50, majflt=2,
                         io=(1000, 300, 10, 4), threads={100: (0, 2_000_000, 30), 101: (1, 1_000_000, 10)},
                         exe="/usr/bin/srv")
        self.add_process(2, "kthreadd", start=1, utime=0, stime=1, flags=0x00200000, threads={2: (0, 0, 1)})
        self.write()

    def add_process(self, pid, comm, *, start, utime=0, stime=0, minflt=0, majflt=0, io=(0, 0, 0, 0),
                    threads=None, exe=None, flags=0, nice=0) -> None:
        self.procs[pid] = dict(comm=comm, start=start, utime=utime, stime=stime, minflt=minflt,
                               majflt=majflt, io=list(io), threads=dict(threads or {pid: (0, 0, 0)}),
                               exe=exe, flags=flags, nice=nice)

    def clock(self) -> int:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += round(seconds * S)

    @staticmethod
    def _stat(pid, comm, state, ppid, flags, minflt, majflt, utime, stime, nice, start, cpu) -> str:
        f = [state, ppid, 0, 0, 0, 0, flags, minflt, 0, majflt, 0, utime, stime, 0, 0, 20 + nice, nice,
             1, 0, start, 0, 0] + [0] * 14 + [cpu, 0, 0, 0]
        return f"{pid} ({comm}) " + " ".join(str(x) for x in f) + "\n"

    def write(self) -> None:
        lines = ["cpu  0 0 0 0 0 0 0 0 0 0"]
        lines += [f"cpu{c} " + " ".join(map(str, v + [0, 0, 0])) for c, v in self.cpus.items()]
        (self.proc / "stat").write_text("\n".join(lines) + "\nintr 0\nbtime 1\n")
        sched = self.proc / "schedstat"
        if self.sched is None:
            sched.unlink(missing_ok=True)
        else:
            sched.write_text("version 15\ntimestamp 1\n" + "".join(
                f"cpu{c} 0 0 0 0 0 0 {self.sched_run[c]} {w} {n}\ndomain0 3 0 0 0\n"
                for c, (w, n) in self.sched.items()))
        if self.uptime is not None:
            (self.proc / "uptime").write_text(f"{self.uptime + (self.now - T0) / S:.2f} 0.00\n")
        (self.proc / "diskstats").write_text("".join(
            f"   8       {i} {d} " + " ".join(map(str, v + [0, 0, 0, 0])) + "\n"
            for i, (d, v) in enumerate(self.discs.items())))
        head = "Inter-|   Receive  |  Transmit\n face |bytes packets errs ...\n"
        (self.proc / "net" / "dev").write_text(head + "".join(
            f"{n:>6}: {rb} {rp} {re} 0 0 0 0 0 {tb} {tp} {te} 0 0 0 0 0\n"
            for n, (rb, rp, re, tb, tp, te) in self.nets.items()))
        for d in [p for p in self.proc.iterdir() if p.name.isdigit()]:
            if int(d.name) not in self.procs:
                for f in sorted(d.rglob("*"), key=lambda p: -len(p.parts)):
                    f.unlink() if f.is_file() or f.is_symlink() else f.rmdir()
                d.rmdir()
        for pid, p in self.procs.items():
            d = self.proc / str(pid)
            (d / "task").mkdir(parents=True, exist_ok=True)
            first_cpu = next(iter(p["threads"].values()))[0]
            (d / "stat").write_text(self._stat(pid, p["comm"], "S", 1 if pid != 2 else 0, p["flags"],
                                               p["minflt"], p["majflt"], p["utime"], p["stime"],
                                               p["nice"], p["start"], first_cpu))
            rchar, wchar, syscr, syscw = p["io"]
            (d / "io").write_text(f"rchar: {rchar}\nwchar: {wchar}\nsyscr: {syscr}\nsyscw: {syscw}\n"
                                  "read_bytes: 0\nwrite_bytes: 0\ncancelled_write_bytes: 0\n")
            if p["exe"] and not (d / "exe").is_symlink():
                os.symlink(p["exe"], d / "exe")
            for tid, (cpu, delay, slices, *run) in p["threads"].items():
                t = d / "task" / str(tid)
                t.mkdir(exist_ok=True)
                own = (p["minflt"], p["majflt"]) if tid == pid else (0, 0)   # the main thread's faults
                (t / "stat").write_text(self._stat(tid, p["comm"], "S", 1, 0, *own, 0, 0, 0,
                                                   p["start"] if tid == pid else p["start"] + 1, cpu))
                (t / "schedstat").write_text(f"{run[0] if run else 0} {delay} {slices}\n")


def new_node(fake: FakeHost, **kw) -> HostNode:
    topo = host_topology(proc=fake.proc, etc=fake.proc, hostname="testbox.example.com", env={})
    return HostNode(topo, proc=fake.proc, sys=fake.sys, step_us=S, clock=fake.clock,
                    sleep=fake.sleep, clk_tck=HZ, **kw)


class Recorder:
    """MEASMON with one measurement of everything at 1-s intervals; interval deltas by entity."""

    def __init__(self, node: HostNode) -> None:
        self.catalog = load_catalog()
        self.builder = IntervalBuilder(self.catalog)
        self.copies: list = []
        self.intervals: list = []
        self.node = node
        self.mon = Measmon(node, self.sink, catalog=self.catalog)
        b = ContabBuilder()
        for e in self.catalog.entities:
            b.add(e, None)
        self.mon.add(Measurement(1, "ALL", b.build(), start_us=node.now_us, interval_us=S))

    def sink(self, copy) -> None:
        self.copies.append(copy)
        batch = self.builder.on_copy(copy)
        if batch is not None and len(batch):
            self.intervals.append(batch)

    def delta(self, entity: str, counter: str, *, to_us: int, **ids) -> float:
        """The interval delta of one counter of the entity whose ids match, ending at to_us."""
        table = self.node.tables[entity]
        col = table.entity.index(counter)
        found = []
        for b in self.intervals:
            if b.entity != entity or b.to_us != to_us:
                continue
            for i, slot in enumerate(b.slots.tolist()):
                got = {**table.id_of(slot), "cpu": int(table.cpu[slot])}
                if all(got.get(k) == v for k, v in ids.items()):
                    found.append(int(b.values[i, col]))
        assert len(found) == 1, f"{entity} {ids} at {to_us}: {found}"
        return found[0]


@pytest.fixture
def fake(tmp_path: Path) -> FakeHost:
    return FakeHost(tmp_path)


def test_node_names() -> None:
    assert is_host_node("host") and is_host_node("host:web1") and not is_host_node("demo")
    assert system_name_for("vm") == "\\VM"
    assert system_name_for("db-prod-01.example.com") == "\\DBPRO01"
    assert system_name_for("1box") == "\\H1BOX"
    assert system_name_for("web_server_12") == "\\WEBSE12"
    assert system_name_for("---") == "\\HOST"


def test_topology_comes_from_the_host(fake: FakeHost) -> None:
    (fake.proc / "timezone").write_text("Europe/Amsterdam\n")
    (fake.proc / "machine-id").write_text("0123456789abcdef\n")
    t = host_topology(proc=fake.proc, etc=fake.proc, hostname="testbox.example.com", env={})
    assert (t.system_name, t.time_zone, t.cpu_type, t.n_cpus) == (
        "\\TESTBOX", "Europe/Amsterdam", "Fake CPU @ 3.00GHz", 2)
    assert 0 <= t.system_number <= 254
    assert host_topology(proc=fake.proc, etc=fake.proc, hostname="x", env={"TZ": ":Asia/Tokyo"}).time_zone == "Asia/Tokyo"
    assert host_topology("host:\\MYHOST", proc=fake.proc, etc=fake.proc, env={}).system_name == "\\MYHOST"
    (fake.proc / "timezone").write_text("Not/AZone\n")
    assert host_topology(proc=fake.proc, etc=fake.proc, hostname="x", env={}).time_zone == "UTC"


def test_entities_of_the_first_reading(fake: FakeHost) -> None:
    node = new_node(fake)
    T = node.tables
    assert [T["cpu"].id_of(s)["cpu_type"] for s in range(T["cpu"].n)] == ["Fake CPU @ 3.00GHz"] * 2
    # sda only: sda1 is a partition, loop0 never did any I/O; ifb0 never carried a packet
    assert [T["disc"].id_of(s)["device_name"] for s in range(T["disc"].n)] == ["$SDA"]
    assert T["disc"].id_of(0)["path"] == "P" and T["disc"].cpu[0] == -1
    assert sorted(T["line"].id_of(s)["device_name"] for s in range(T["line"].n)) == ["$ETH0", "$LO"]
    procs = {T["process"].id_of(s)["pin"]: T["process"].id_of(s) for s in range(T["process"].n)}
    assert procs[100] == {"pin": 100, "process_name": "srv", "program_file_name": "/usr/bin/srv", "priority": 20}
    assert procs[2]["program_file_name"] == "[kthreadd]"
    assert node.now_us == T0 and T["process"].alive[: T["process"].n].all()


def test_exact_counter_deltas(fake: FakeHost) -> None:
    node = new_node(fake)
    rec = Recorder(node)
    c0 = fake.cpus[0]
    c0[0] += 50; c0[2] += 10; c0[5] += 5; c0[6] += 5; c0[3] += 30   # user, system, irq, softirq, idle  # noqa: E702
    fake.sched[0] = [5_000_000 + 250_000_000, 40 + 1000]
    fake.sched_run[0] += 600_000_000
    d = fake.discs["sda"]
    d[0] += 10; d[2] += 80; d[3] += 30; d[4] += 5; d[6] += 16; d[7] += 20; d[8] = 3; d[9] += 400; d[10] += 800  # noqa: E702
    fake.nets["eth0"] = [11_000, 30, 1, 6_000, 15, 2]
    p = fake.procs[100]
    p["utime"] += 20; p["stime"] += 5; p["minflt"] += 7; p["majflt"] += 1  # noqa: E702
    p["io"] = [1200, 400, 13, 6]
    p["threads"][100] = (0, 3_000_000, 33)
    p["threads"][101] = (1, 1_500_000, 11)
    fake.write()
    rec.mon.run_until(T0 + S)
    t = T0 + S
    assert rec.delta("cpu", "cpu_busy_time", to_us=t, cpu=0) == 70 * TICK
    assert rec.delta("cpu", "intr_busy_time", to_us=t, cpu=0) == 10 * TICK
    # µs × ready-queue length, the running task counted: run time + run delay
    assert rec.delta("cpu", "cpu_qtime", to_us=t, cpu=0) == 600_000 + 250_000
    assert rec.delta("cpu", "dispatches", to_us=t, cpu=0) == 1000
    assert rec.delta("cpu", "cpu_busy_time", to_us=t, cpu=1) == 0
    kw = {"to_us": t, "device_name": "$SDA"}
    assert rec.delta("disc", "reads", **kw) == 10 and rec.delta("disc", "writes", **kw) == 5
    assert rec.delta("disc", "requests", **kw) == 15
    assert rec.delta("disc", "input_bytes", **kw) == 80 * 512 and rec.delta("disc", "output_bytes", **kw) == 16 * 512
    assert rec.delta("disc", "device_qbusy_time", **kw) == 400_000       # io_ticks ms -> µs busy
    assert rec.delta("disc", "request_qtime", **kw) == 800_000           # µs × queue length
    assert rec.delta("disc", "read_qtime", **kw) == 30_000 and rec.delta("disc", "write_qtime", **kw) == 20_000
    assert rec.delta("disc", "request_qlen_max", **kw) == 3              # in flight at the reading
    kw = {"to_us": t, "device_name": "$ETH0"}
    assert rec.delta("line", "input_bytes", **kw) == 1000 and rec.delta("line", "output_bytes", **kw) == 2000
    assert rec.delta("line", "reads", **kw) == 10 and rec.delta("line", "writes", **kw) == 5
    assert rec.delta("line", "retries", **kw) == 3
    kw = {"to_us": t, "pin": 100}
    assert rec.delta("process", "cpu_busy_time", **kw) == 25 * TICK
    assert rec.delta("process", "ready_time", **kw) == 25 * TICK + 1_000 + 500   # + threads' run delay
    assert rec.delta("process", "dispatches", **kw) == 3 + 1
    assert rec.delta("process", "page_faults", **kw) == 8
    assert rec.delta("process", "messages_sent", **kw) == 5
    assert rec.delta("process", "returned_bytes", **kw) == 200 and rec.delta("process", "sent_bytes", **kw) == 100


def test_processes_come_and_go(fake: FakeHost) -> None:
    node = new_node(fake)
    rec = Recorder(node)
    fake.add_process(200, "job", start=900, utime=3, stime=1, minflt=4, threads={200: (1, 7_000_000, 5)},
                     exe="/opt/job (deleted)")
    fake.write()
    rec.mon.run_until(T0 + S)
    T = node.tables["process"]
    slot = next(s for s in range(T.n) if T.id_of(s)["pin"] == 200)
    assert T.transient[slot] and T.alive[slot] and T.id_of(slot)["program_file_name"] == "/opt/job"
    assert T.cpu[slot] == 1
    starts = [c for c in rec.copies if c.entity == "process" and c.kind == COPY_START and slot in c.slots]
    assert len(starts) == 1 and starts[0].at_us == T0           # started at the step's start
    # a process born since the previous reading counts from its birth
    assert rec.delta("process", "cpu_busy_time", to_us=T0 + S, pin=200) == 4 * TICK
    assert rec.delta("process", "ready_time", to_us=T0 + S, pin=200) == 4 * TICK + 7_000
    # ... and the CPU queue is not charged twice (schedstat gives it)
    assert rec.delta("cpu", "cpu_qtime", to_us=T0 + S, cpu=1) == 0
    del fake.procs[200]
    fake.procs[100]["utime"] += 10
    fake.write()
    rec.mon.run_until(T0 + 2 * S)
    assert not T.alive[slot]
    stops = [c for c in rec.copies if c.entity == "process" and c.kind == COPY_ENTITY_STOP]
    assert [(c.at_us, c.slots.tolist()) for c in stops] == [(T0 + 2 * S, [slot])]
    assert rec.delta("process", "cpu_busy_time", to_us=T0 + 2 * S, pin=200) == 0
    # the PID is used again by another incarnation: a new entity
    fake.add_process(100, "srv", start=1500, utime=1, exe="/usr/bin/srv")
    fake.write()
    rec.mon.run_until(T0 + 3 * S)
    assert sorted(T.id_of(s)["pin"] for s in range(T.n) if T.alive[s]) == [2, 100]
    assert sum(1 for s in range(T.n) if T.id_of(s)["pin"] == 100) == 2
    # the node keeps state for live processes only: rows of ended ones are reused
    state = node._state["process"]
    assert sorted(state.row_of) == [s for s in range(T.n) if T.alive[s]] and state.cap == 16


def test_late_reading_is_interpolated(fake: FakeHost) -> None:
    node = new_node(fake)
    rec = Recorder(node)
    node.sleep = lambda s: fake.sleep(s + 0.5)         # the reading comes 0.5 s after the step
    fake.cpus[0][0] += 150
    fake.write()
    rec.mon.run_until(T0 + S)                          # reading at T0 + 1.5 s
    node.sleep = fake.sleep
    fake.cpus[0][0] += 50
    fake.write()
    rec.mon.run_until(T0 + 2 * S)                      # reading at T0 + 2 s
    assert rec.delta("cpu", "cpu_busy_time", to_us=T0 + S, cpu=0) == 100 * TICK
    assert rec.delta("cpu", "cpu_busy_time", to_us=T0 + 2 * S, cpu=0) == 100 * TICK
    assert node.readings == 3


def test_one_reading_for_several_steps_when_behind(fake: FakeHost) -> None:
    node = new_node(fake)
    rec = Recorder(node)
    fake.now = T0 + 4 * S                              # the collector was held up 4 s
    fake.cpus[0][0] += 400
    fake.write()
    rec.mon.run_until(T0 + 4 * S)
    assert node.readings == 2
    assert [rec.delta("cpu", "cpu_busy_time", to_us=T0 + k * S, cpu=0) for k in (1, 2, 3, 4)] == [100 * TICK] * 4


def test_cpu_queue_from_threads_without_schedstat(tmp_path: Path) -> None:
    fake = FakeHost(tmp_path, schedstat=False)
    node = new_node(fake)
    rec = Recorder(node)
    p = fake.procs[100]
    p["threads"][100] = (0, 2_000_000 + 300_000_000, 30 + 7)   # +300 ms waiting on CPU 0
    p["threads"][101] = (1, 1_000_000 + 100_000_000, 10 + 2)   # +100 ms on CPU 1
    p["threads"][102] = (1, 50_000_000, 4)                     # a new thread on CPU 1
    fake.write()
    rec.mon.run_until(T0 + S)
    assert rec.delta("cpu", "cpu_qtime", to_us=T0 + S, cpu=0) == 300_000
    assert rec.delta("cpu", "cpu_qtime", to_us=T0 + S, cpu=1) == 150_000
    assert rec.delta("cpu", "dispatches", to_us=T0 + S, cpu=1) == 6
    assert rec.delta("process", "ready_time", to_us=T0 + S, pin=100) == 450_000


def test_counter_going_backwards_adds_nothing(fake: FakeHost) -> None:
    node = new_node(fake)
    rec = Recorder(node)
    fake.nets["eth0"][0] = 5          # a driver reset its counters
    fake.write()
    rec.mon.run_until(T0 + S)
    fake.nets["eth0"][0] = 105
    fake.write()
    rec.mon.run_until(T0 + 2 * S)
    assert rec.delta("line", "input_bytes", to_us=T0 + S, device_name="$ETH0") == 0
    assert rec.delta("line", "input_bytes", to_us=T0 + 2 * S, device_name="$ETH0") == 100


def test_cpu_offline_is_a_cpu_failure_and_online_a_reload(fake: FakeHost) -> None:
    node = new_node(fake)
    rec = Recorder(node)
    saved = fake.cpus.pop(1)
    fake.write()
    rec.mon.run_until(T0 + S)
    assert 1 not in rec.mon.measctl and not node.tables["cpu"].alive[1]
    fake.cpus[1] = [x + 100 for x in saved]
    fake.write()
    rec.mon.run_until(T0 + 2 * S)
    fake.cpus[1][0] += 20
    fake.write()
    rec.mon.run_until(T0 + 3 * S)
    assert 1 in rec.mon.measctl
    C = node.tables["cpu"]
    assert C.n == 3 and C.alive.tolist()[:3] == [True, False, True] and C.cpu[2] == 1
    # the reloaded CPU counts from its reload, not from its offline time
    assert rec.delta("cpu", "cpu_busy_time", to_us=T0 + 3 * S, cpu=1) == 20 * TICK


def test_advance_waits_for_real_time(fake: FakeHost) -> None:
    node = new_node(fake)
    slept: list[float] = []
    node.sleep = lambda s: (slept.append(s), fake.sleep(s))
    fake.now = T0 + 250_000
    node.advance(T0 + 3 * S)
    assert slept == pytest.approx([0.75, 1.0, 1.0])
    assert node.now_us == T0 + 3 * S and node.readings == 4


def test_reading_this_machine() -> None:
    """The real /proc: every CPU, a reading in well under a second."""
    if not Path("/proc/stat").exists():
        pytest.skip("no /proc on this system")
    node = HostNode(step_us=S)
    assert node.tables["cpu"].n == node.topo.n_cpus == len(
        [ln for ln in Path("/proc/stat").read_text().splitlines() if ln[:3] == "cpu" and ln[3].isdigit()])
    assert node.tables["process"].n > 0
    pids = {node.tables["process"].id_of(s)["pin"] for s in range(node.tables["process"].n)}
    assert os.getpid() in pids
    assert node.read_cpu_s < 1.0
    assert np.isfinite(node._state["cpu"].cum_cur).all()
    node.close()


SAR = """Linux 6.1.0 (box) \t2026-11-25 \t_x86_64_\t(2 CPU)

12:00:00        CPU      %usr     %nice      %sys   %iowait    %steal      %irq     %soft    %guest    %gnice     %idle
12:00:10        all     50.00      0.00      1.00      2.00      0.00      0.00      0.50      0.00      0.00     46.50

Average:        CPU      %usr     %nice      %sys   %iowait    %steal      %irq     %soft    %guest    %gnice     %idle
Average:        all     50.10      0.00      1.20      2.00      0.10      0.00      0.40      0.00      0.00     46.20
Average:          0     99.00      0.00      0.50      0.00      0.00      0.00      0.10      0.00      0.00      0.40
Average:          1      1.20      0.00      1.90      4.00      0.20      0.00      0.70      0.00      0.00     92.00

Average:      runq-sz  plist-sz   ldavg-1   ldavg-5  ldavg-15   blocked
Average:            2       250      1.50      1.20      1.00         1
"""

IOSTAT = {"sysstat": {"hosts": [{"nodename": "box", "statistics": [
    {"disk": [{"disk_device": "vda", "r/s": 1.0, "w/s": 100.0, "aqu-sz": 1.20, "util": 90.0},
              {"disk_device": "zram0", "r/s": 0.0, "w/s": 0.0, "aqu-sz": 0.0, "util": 0.0}]},
    {"disk": [{"disk_device": "vda", "r/s": 1.0, "w/s": 100.0, "aqu-sz": 1.00, "util": 80.0}]}]}]}}


def test_sysstat_outputs_are_read() -> None:
    import json

    from collector.hostcheck import Comparison, _iostat_averages, _sar_averages

    busy, runq = _sar_averages(SAR)
    assert busy == pytest.approx({0: 99.6, 1: 3.8}) and runq == 2.0
    util, queue = _iostat_averages(json.dumps(IOSTAT))
    assert util == pytest.approx({"vda": 85.0, "zram0": 0.0}) and queue == pytest.approx({"vda": 1.1, "zram0": 0.0})
    cmp = Comparison(10, 6, cpu={0: (99.0, 99.6), 1: (6.0, 3.8)}, util={"vda": (85.5, 85.0)},
                     queue={"vda": (1.25, 1.1)}, cpu_qlen={0: 0.1, 1: 0.0}, runq_sz=2.0, loaded_disc="vda")
    assert cmp.failures() == ["CPU 1: busy 6.00 % (node) vs 3.80 % (sar)",
                              "disc vda: average queue 1.250 (node) vs 1.100 (iostat aqu-sz)"]
    assert "| CPU 0 busy % | 99.00 | 99.60 (sar) | -0.60 pt |" in cmp.markdown()


# ----------------------------------------------------------------- births, exits, the queue

class FakeExits:
    """Thread exit reports handed to the node at its next reading (as taskstats sends them)."""

    def __init__(self) -> None:
        self.queued: list[ThreadExit] = []
        self.lost = 0

    def take(self) -> list[ThreadExit]:
        out, self.queued = self.queued, []
        return out


def exit_of(tid: int, *, tgid: int, start_ticks: int, ended_us: int, cpu: int = 0, last: bool = True,
            run_us: float = 0.0, delay_us: float = 0.0, slices: float = 0.0, faults: float = 0.0,
            io: tuple[float, float, float] = (0.0, 0.0, 0.0), uptime_t0: float = 1000.0) -> ThreadExit:
    """An exit report of a thread that began start_ticks after the fake host's boot."""
    boot_us = T0 - int(uptime_t0 * S)
    start_us = boot_us + start_ticks * TICK
    return ThreadExit(cpu=cpu, tid=tid, tgid=tgid, last_of_process=last, start_s=start_us // S,
                      elapsed_us=ended_us - start_us, seen_us=ended_us, run_us=run_us,
                      delay_us=delay_us, slices=slices, busy_us=run_us, faults=faults,
                      syscalls=io[0], wchar=io[1], rchar=io[2])


def ticks_at(us: int, uptime_t0: float = 1000.0) -> int:
    """The start time (clock ticks after boot) of a process born at wall-clock µs `us`."""
    return round((us - T0) / TICK + uptime_t0 * HZ)


def test_cpu_queue_counts_the_running_task(tmp_path: Path) -> None:
    """Without /proc/schedstat the queue is the threads' run time + run delay (the running
    task is on MEASURE's ready list, as in the simulated node: CPU-QTIME = Σ READY-TIME)."""
    fake = FakeHost(tmp_path, schedstat=False)
    node = new_node(fake)
    rec = Recorder(node)
    p = fake.procs[100]
    p["threads"][100] = (0, 2_000_000 + 300_000_000, 30 + 7, 500_000_000)   # ran 500 ms, waited 300
    fake.write()
    rec.mon.run_until(T0 + S)
    assert rec.delta("cpu", "cpu_qtime", to_us=T0 + S, cpu=0) == 800_000


def test_a_new_process_starts_at_its_birth(fake: FakeHost) -> None:
    """Its first interval begins when it was born, never at the previous sample; one born
    after a step's end (the reading came late) starts in the next step with all it did."""
    fake.uptime = 1000.0
    fake.write()
    node = new_node(fake)
    rec = Recorder(node)
    fake.now = T0 + 400_000
    fake.add_process(300, "early", start=ticks_at(T0 + 400_000), utime=30, threads={300: (1, 0, 1)})
    fake.now = T0 + S + 100_000
    fake.add_process(301, "late", start=ticks_at(T0 + S + 100_000), utime=2, threads={301: (1, 0, 1)})
    fake.write()
    node.sleep = lambda s: None                     # the reading is at T0 + 1.1 s
    rec.mon.run_until(T0 + S)
    T = node.tables["process"]
    slot = {T.id_of(s)["pin"]: s for s in range(T.n)}
    starts = {int(c.slots[0]): c.at_us for c in rec.copies if c.entity == "process" and c.kind == COPY_START
              and T.transient[int(c.slots[0])]}
    assert starts == {slot[300]: T0 + 400_000}      # born at 0.4 s: its record starts there
    # what it did by the reading (1.1 s), spread from its birth: 0.6 of 0.7 s in this step
    assert rec.delta("process", "cpu_busy_time", to_us=T0 + S, pin=300) == pytest.approx(30 * TICK * 6 / 7, abs=1)
    fake.now = T0 + 2 * S
    fake.write()
    rec.mon.run_until(T0 + 2 * S)
    starts = {int(c.slots[0]): c.at_us for c in rec.copies if c.entity == "process" and c.kind == COPY_START
              and T.transient[int(c.slots[0])]}
    assert starts[slot[301]] == T0 + S + 100_000
    assert rec.delta("process", "cpu_busy_time", to_us=T0 + 2 * S, pin=301) == 2 * TICK


def test_an_ended_process_keeps_its_last_step(tmp_path: Path) -> None:
    """Its final counters come from the kernel's exit report (what it did since its last
    reading: run time, run delay, faults, I/O), it stops at its exit, and the CPU it ended on
    gets its queue time (no /proc/schedstat here)."""
    fake = FakeHost(tmp_path, schedstat=False)
    fake.uptime = 1000.0
    exits = FakeExits()
    fake.add_process(200, "job", start=ticks_at(T0 - 5 * S), utime=100, minflt=10, io=(500, 200, 7, 3),
                     threads={200: (1, 1_000_000, 5, 1_000_000_000)})
    fake.write()
    node = new_node(fake, exits=exits)
    rec = Recorder(node)
    fake.now = T0 + S
    p = fake.procs[200]
    p["utime"] += 50; p["threads"][200] = (1, 3_000_000, 9, 1_500_000_000)  # noqa: E702
    fake.write()
    rec.mon.run_until(T0 + S)
    assert rec.delta("process", "cpu_busy_time", to_us=T0 + S, pin=200) == 50 * TICK
    # it runs 300 ms more, waits 100 ms, faults 4 times, reads 1000 bytes, and ends at 1.2 s
    del fake.procs[200]
    fake.now = T0 + 2 * S
    fake.write()
    exits.queued.append(exit_of(200, tgid=200, start_ticks=ticks_at(T0 - 5 * S), ended_us=T0 + 1_200_000,
                                cpu=0, run_us=1_800_000, delay_us=3_000 + 100_000, slices=12, faults=14,
                                io=(7 + 3 + 2, 200, 500 + 1000)))
    rec.mon.run_until(T0 + 2 * S)
    T = node.tables["process"]
    slot = next(s for s in range(T.n) if T.id_of(s)["pin"] == 200)
    stops = [c.at_us for c in rec.copies if c.entity == "process" and c.kind == COPY_ENTITY_STOP
             and slot in c.slots]
    assert stops == [T0 + 1_200_000]
    kw = {"to_us": T0 + 1_200_000, "pin": 200}            # its last interval ends at its exit
    assert rec.delta("process", "cpu_busy_time", **kw) == 300_000
    assert rec.delta("process", "ready_time", **kw) == 400_000
    assert rec.delta("process", "dispatches", **kw) == 3
    assert rec.delta("process", "page_faults", **kw) == 4
    assert rec.delta("process", "returned_bytes", **kw) == 1000
    assert rec.delta("process", "messages_sent", **kw) == 2
    # the CPU it ended on: its run time + run delay since its last reading
    assert rec.delta("cpu", "cpu_qtime", to_us=T0 + 2 * S, cpu=0) == 400_000
    assert node.queue_note is None


def test_queue_note_says_what_is_missed(tmp_path: Path) -> None:
    """No /proc/schedstat and no exit reports: the node says what its queue misses, and how
    much (the share of the CPUs' task time its threads accounted for)."""
    fake = FakeHost(tmp_path, schedstat=False)
    node = new_node(fake, exits=None)
    rec = Recorder(node)
    fake.cpus[0][0] += 100                                # 1 s of task time on CPU 0 …
    p = fake.procs[100]
    p["threads"][100] = (0, 2_000_000, 31, 600_000_000)  # … of which live threads ran 0.6 s
    fake.write()
    rec.mon.run_until(T0 + S)
    assert node.task_time_seen == pytest.approx(0.6)
    assert node.queue_note is not None and "up to about 40 % low" in node.queue_note
    assert "exit reports not asked for" in node.queue_note


def test_cpu_busy_is_at_most_the_time_measured(fake: FakeHost) -> None:
    """/proc/stat counts in ticks: a reading may give a CPU a tick more than the step's length;
    the node carries it to the next step, so no interval holds more busy time than it lasted."""
    node = new_node(fake)
    rec = Recorder(node)
    fake.cpus[0][0] += 101                 # 1.01 s busy in a 1-s step
    fake.write()
    rec.mon.run_until(T0 + S)
    fake.cpus[0][0] += 50
    fake.write()
    rec.mon.run_until(T0 + 2 * S)
    assert rec.delta("cpu", "cpu_busy_time", to_us=T0 + S, cpu=0) == S
    assert rec.delta("cpu", "cpu_busy_time", to_us=T0 + 2 * S, cpu=0) == 51 * TICK
