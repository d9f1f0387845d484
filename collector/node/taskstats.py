"""Every thread's final counters at its exit, from the kernel's taskstats exit notifications.

A thread that ends between two readings of /proc takes with it what it did since the earlier
one: its run delay and run time (/proc/<pid>/task/<tid>/schedstat), its CPU time, faults and
I/O. Where the kernel has no per-CPU /proc/schedstat that is the CPU queue's only source, and a
process that ends loses its last step. Linux sends the final counters of each exiting thread
(struct taskstats, include/uapi/linux/taskstats.h) over generic netlink to listeners registered
for the CPU it exits on (TASKSTATS_CMD_ATTR_REGISTER_CPUMASK); registering needs CAP_NET_ADMIN
in the initial user and PID namespaces and a kernel with CONFIG_TASKSTATS.

:class:`ExitWatch` registers one socket per CPU (so each exit is known by the CPU it ended
on) with a 4 MiB receive buffer, and a daemon thread drains them every DRAIN_S seconds (in
batches: waking up for each exit would cost ten times more), so the buffers do not overflow
between two readings; :meth:`ExitWatch.take` hands over the exits collected so far. Exits the
kernel could not deliver (a full buffer: ENOBUFS) are counted in ``lost``.
"""

from __future__ import annotations

import errno
import os
import socket
import struct
import threading
import time
from dataclasses import dataclass

__all__ = ["ExitWatch", "ThreadExit", "open_exit_watch", "parse_taskstats"]

NETLINK_GENERIC = 16
GENL_ID_CTRL = 0x10
CTRL_CMD_GETFAMILY = 3
CTRL_ATTR_FAMILY_ID = 1
CTRL_ATTR_FAMILY_NAME = 2
NLMSG_ERROR = 2
NLM_F_REQUEST, NLM_F_ACK = 1, 4
TASKSTATS_CMD_GET = 1
TASKSTATS_CMD_ATTR_REGISTER_CPUMASK = 3
TASKSTATS_TYPE_PID, TASKSTATS_TYPE_TGID, TASKSTATS_TYPE_STATS = 1, 2, 3
TASKSTATS_TYPE_AGGR_PID, TASKSTATS_TYPE_AGGR_TGID = 4, 5
AGROUP = 0x20               # ac_flag: the last thread of its process
RCVBUF = 4 << 20
DRAIN_S = 0.2

# Offsets in struct taskstats (the layout is append-only; version 1 up to ac_majflt, the I/O
# counters from version 4 on, ac_tgid from 11).
_U64 = struct.Struct("=Q")
_U32 = struct.Struct("=I")
OFF = {"cpu_count": 16, "cpu_delay_total": 24, "cpu_run_virtual_total": 72, "ac_flag": 8,
       "ac_pid": 128, "ac_btime": 136, "ac_etime": 144, "ac_utime": 152, "ac_stime": 160,
       "ac_minflt": 168, "ac_majflt": 176, "read_char": 216, "write_char": 224,
       "read_syscalls": 232, "write_syscalls": 240, "ac_tgid": 368}


@dataclass(frozen=True)
class ThreadExit:
    """One thread's counters at its exit (cumulative over its life)."""

    cpu: int               # the CPU it exited on
    tid: int
    tgid: int              # its process (0 where the kernel does not say)
    last_of_process: bool  # the process ended with it
    start_s: int           # wall-clock second it began (ac_btime)
    elapsed_us: int        # its life (ac_etime): it ended elapsed_us after it began
    seen_us: int           # wall-clock µs the notification was read (at or after the exit)
    run_us: float          # time run (sum_exec_runtime)
    delay_us: float        # time runnable but waiting for a CPU (run delay)
    slices: float          # timeslices run
    busy_us: float         # user + system CPU time
    faults: float          # minor + major page faults
    rchar: float
    wchar: float
    syscalls: float        # read + write system calls


def parse_taskstats(body: bytes, cpu: int, seen_us: int = 0) -> ThreadExit | None:
    """A ThreadExit from a struct taskstats (None when too short to hold the run delay)."""
    if len(body) < OFF["ac_majflt"] + 8:
        return None

    def u64(name: str) -> int:
        off = OFF[name]
        return _U64.unpack_from(body, off)[0] if len(body) >= off + 8 else 0

    def u32(name: str) -> int:
        off = OFF[name]
        return _U32.unpack_from(body, off)[0] if len(body) >= off + 4 else 0

    version = struct.unpack_from("=H", body, 0)[0]
    return ThreadExit(
        cpu=cpu, tid=u32("ac_pid"), tgid=u32("ac_tgid") if version >= 11 else 0,
        last_of_process=bool(body[OFF["ac_flag"]] & AGROUP),
        start_s=u32("ac_btime"), elapsed_us=u64("ac_etime"), seen_us=seen_us,
        run_us=u64("cpu_run_virtual_total") / 1000.0, delay_us=u64("cpu_delay_total") / 1000.0,
        slices=float(u64("cpu_count")), busy_us=float(u64("ac_utime") + u64("ac_stime")),
        faults=float(u64("ac_minflt") + u64("ac_majflt")),
        rchar=float(u64("read_char")), wchar=float(u64("write_char")),
        syscalls=float(u64("read_syscalls") + u64("write_syscalls")))


def _attrs(buf: bytes, off: int, end: int):
    while off + 4 <= end:
        length, kind = struct.unpack_from("=HH", buf, off)
        if length < 4:
            return
        yield kind & 0x3FFF, off + 4, off + length
        off += (length + 3) & ~3


def _attr(kind: int, payload: bytes) -> bytes:
    a = struct.pack("=HH", 4 + len(payload), kind) + payload
    return a + b"\0" * (-len(a) % 4)


def _request(sock: socket.socket, family: int, cmd: int, attrs: bytes, flags: int = NLM_F_REQUEST) -> None:
    payload = struct.pack("=BBH", cmd, 1, 0) + attrs
    sock.send(struct.pack("=IHHII", 16 + len(payload), family, flags, 1, 0) + payload)


def _await_ack(sock: socket.socket) -> None:
    """Wait for the kernel's answer to a request (exit notifications before it are dropped:
    nothing has been read yet); raise OSError when it refused."""
    sock.settimeout(2.0)
    while True:
        data = sock.recv(1 << 16)
        off = 0
        while off + 16 <= len(data):
            length, kind = struct.unpack_from("=IH", data, off)
            if kind == NLMSG_ERROR and length >= 20:
                err = -struct.unpack_from("=i", data, off + 16)[0]
                if err:
                    raise OSError(err, os.strerror(err))
                return
            if length < 16:
                break
            off += (length + 3) & ~3


def _family_id() -> int:
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_GENERIC) as s:
        s.bind((0, 0))
        s.settimeout(2.0)
        _request(s, GENL_ID_CTRL, CTRL_CMD_GETFAMILY, _attr(CTRL_ATTR_FAMILY_NAME, b"TASKSTATS\0"))
        data = s.recv(65536)
    length, kind = struct.unpack_from("=IH", data, 0)
    if kind == NLMSG_ERROR:
        err = -struct.unpack_from("=i", data, 16)[0]
        raise OSError(err, "the kernel has no taskstats (CONFIG_TASKSTATS)")
    for k, a, _ in _attrs(data, 20, length):
        if k == CTRL_ATTR_FAMILY_ID:
            return struct.unpack_from("=H", data, a)[0]
    raise OSError(errno.ENOENT, "no taskstats family id")


class ExitWatch:
    """Exit notifications of every thread, per CPU, collected by a daemon thread."""

    def __init__(self, cpus: list[int]) -> None:
        family = _family_id()
        self._socks: dict[int, int] = {}
        self._by_fd: dict[int, tuple[socket.socket, int]] = {}
        try:
            for cpu in cpus:
                s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_GENERIC)
                self._by_fd[s.fileno()] = (s, cpu)
                s.bind((0, 0))
                try:     # beyond net.core.rmem_max: allowed with CAP_NET_ADMIN, as registering
                    s.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_RCVBUFFORCE", 33), RCVBUF)
                except OSError:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
                _request(s, family, TASKSTATS_CMD_GET,
                         _attr(TASKSTATS_CMD_ATTR_REGISTER_CPUMASK, f"{cpu}\0".encode()),
                         NLM_F_REQUEST | NLM_F_ACK)
                _await_ack(s)
                s.setblocking(False)
        except OSError:
            self.close()
            raise
        self._lock = threading.Lock()
        self._drain_lock = threading.Lock()
        self._exits: list[ThreadExit] = []
        self.lost = 0              # notifications the kernel dropped (a full socket buffer)
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="taskstats-exits", daemon=True)
        self._thread.start()

    def take(self) -> list[ThreadExit]:
        """The exits collected since the previous call (after draining what has arrived)."""
        self._drain()
        with self._lock:
            out, self._exits = self._exits, []
        return out

    def cpu_s(self) -> float:
        """CPU seconds the draining thread has used (the overhead figures)."""
        try:
            return time.clock_gettime(time.pthread_getcpuclockid(self._thread.ident or 0))
        except (OSError, AttributeError):
            return 0.0

    def close(self) -> None:
        self._closed = True
        for s, _ in list(self._by_fd.values()):
            s.close()
        self._by_fd.clear()

    def _run(self) -> None:
        while not self._closed:
            time.sleep(DRAIN_S)
            try:
                self._drain()
            except (OSError, ValueError):
                if self._closed:
                    return

    def _drain(self) -> None:
        got: list[ThreadExit] = []
        with self._drain_lock:
            for s, cpu in list(self._by_fd.values()):
                self._recv_all(s, cpu, got)
        if got:
            with self._lock:
                self._exits.extend(got)

    def _recv_all(self, s: socket.socket, cpu: int, got: list[ThreadExit]) -> None:
        if s.fileno() < 0:
            return
        while True:
            try:
                data = s.recv(1 << 16)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.ENOBUFS:
                    self.lost += 1
                    continue
                raise
            got.extend(self._parse(data, cpu, time.time_ns() // 1000))

    @staticmethod
    def _parse(data: bytes, cpu: int, seen_us: int) -> list[ThreadExit]:
        out = []
        off = 0
        while off + 16 <= len(data):
            length, kind = struct.unpack_from("=IH", data, off)
            if length < 16:
                break
            if kind != NLMSG_ERROR:
                for k, a, e in _attrs(data, off + 20, off + length):
                    if k != TASKSTATS_TYPE_AGGR_PID:
                        continue   # AGGR_TGID holds delay sums only: the threads' own suffice
                    for k2, a2, e2 in _attrs(data, a, e):
                        if k2 == TASKSTATS_TYPE_STATS:
                            ex = parse_taskstats(data[a2:e2], cpu, seen_us)
                            if ex is not None:
                                out.append(ex)
            off += (length + 3) & ~3
        return out


def open_exit_watch(cpus: list[int]) -> tuple[ExitWatch | None, str | None]:
    """An ExitWatch, or None and why not (in words, for the docs' "what is missed")."""
    if not hasattr(socket, "AF_NETLINK"):
        return None, "no netlink on this system"
    try:
        return ExitWatch(cpus), None
    except PermissionError:
        return None, ("taskstats needs CAP_NET_ADMIN (run the collector as root or give it "
                      "CAP_NET_ADMIN)")
    except OSError as exc:
        if exc.errno == errno.EINVAL:
            return None, ("taskstats refused: the collector must run in the host's PID and user "
                          "namespaces (a container: pid: host)")
        why = os.strerror(exc.errno) if exc.errno else str(exc)
        return None, f"taskstats exit notifications unavailable ({why})"
