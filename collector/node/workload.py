"""Workloads as data: YAML files in ``workloads/`` turned into transaction types made of stages.

A workload file names a *kind* (``debitcredit``, ``rds``, ``custom``), its arrival rate and
shape (daily profile, weekday factors, monthly growth), optional batch/polling streams and
optional staged problems. The kind's builder turns the published per-transaction figures
(calibration.md) into :class:`TxnType` objects: an ordered list of :class:`Stage` visits to
CPUs (by process role), discs, lines and Expand links, each with the counter effects it has.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from collector.node.topology import NodeFileError, _fmt_loc

__all__ = [
    "DEFAULT_WORKLOADS",
    "WORKLOADS_DIR",
    "Stage",
    "Stream",
    "TxnType",
    "WorkloadSpec",
    "default_workload",
    "load_workload",
    "workload_names",
]

WORKLOADS_DIR = Path(__file__).resolve().parent / "workloads"
# Which workload a shipped node (nodes/*.yaml) runs unless MEASUREDB_COLLECTOR_WORKLOAD says
# otherwise
DEFAULT_WORKLOADS = {"demo": "demo", "et1-txp": "et1", "et1-vlx": "et1", "rds-txp": "rds",
                     "rds-vlx": "rds", "ref16": "ref16-day",
                     "today": "today"}


def default_workload(node: str) -> str:
    """The workload a node runs by default: a shipped node's own, else the one of its name."""
    return DEFAULT_WORKLOADS.get(node, node)


# Default daily profile (local hour -> multiplier): three shifts, peak 11:00-17:00.
DEFAULT_PROFILE = [
    0.10,
    0.08,
    0.06,
    0.06,
    0.08,
    0.12,
    0.25,
    0.45,
    0.65,
    0.80,
    0.90,
    1.00,
    1.00,
    1.00,
    1.00,
    1.00,
    1.00,
    0.85,
    0.65,
    0.50,
    0.40,
    0.30,
    0.20,
    0.14,
]
DEFAULT_WEEKDAY = [1.0, 1.0, 1.0, 1.05, 1.15, 0.6, 0.4]  # Mon..Sun
Weekday = Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
WEEKDAYS: tuple[Weekday, ...] = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


# ----------------------------------------------------------------------------- stage model

Effect = tuple[str, str, str, float, str]  # entity, selector, counter, amount, when


@dataclass(slots=True)
class Stage:
    """One visit of a transaction to a resource.

    kind: ``cpu`` (role's process, or ``none@role`` = system overhead on that role's CPU),
    ``disc`` (volume of I/O group ``io``), ``line_in``/``line_out`` (the terminal's line),
    ``net_out``/``net_in`` (Expand link), ``delay`` (no resource).
    ``dist``: exponential, constant, uniform on 0.5-1.5 x mean, or ``uniform0`` on
    0-2 x mean (the wait for a poll that comes round at a fixed interval).
    ``ms`` is the mean demand: CPU ms on a NonStop TXP (scaled by the processor factor unless
    the workload gives per-processor figures), disc: multiple of the volume's mean I/O time,
    delay: ms. ``prob``: probability the visit happens (disc: cache-miss probability).
    """

    kind: str
    role: str = ""
    ms: float = 0.0
    dist: Literal["exp", "const", "uniform", "uniform0"] = "exp"
    prob: float = 1.0
    io: int = -1  # I/O group: file partition chosen once per transaction
    op: Literal["read", "write", ""] = ""
    bytes: int = 0
    data_bytes: int = 0
    flags: tuple[str, ...] = ()  # begin, commit, reply, read_done
    effects: tuple[Effect, ...] = ()
    component: str = ""


@dataclass(slots=True)
class TxnType:
    name: str
    weight: float
    stages: list[Stage]
    io_files: list[str] = field(default_factory=list)  # file name per I/O group
    opener_role: str = "server"


@dataclass(slots=True)
class Stream:
    """An arrival stream: which transaction types, at what rate, from where."""

    name: str
    types: list[TxnType]
    tps: float
    source: str  # "terminals:<protocol>" | "process:<name>"
    server_class: str | None
    profile: list[float]
    weekday: list[float]
    hours: tuple[int, int] | None = None  # active local hours [from, to) for batch
    days: frozenset[int] | None = None  # batch: weekdays (0 = Monday) its runs start on


# ------------------------------------------------------------------------------ YAML model


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ShapeSpec(_M):
    profile: list[float] = Field(default_factory=lambda: list(DEFAULT_PROFILE))
    weekday: list[float] = Field(default_factory=lambda: list(DEFAULT_WEEKDAY))
    growth_per_month: float = Field(default=0.0, ge=-0.5, le=1.0)
    # the day the growth counts from; "start": the first day of the node's simulated history,
    # so a backfill of a window has the same load whenever it runs (Node anchors it)
    growth_epoch: dt.date | Literal["start"] = dt.date(2026, 1, 1)
    growth_max: float | None = Field(default=None, gt=0)  # the growth factor stops here

    @model_validator(mode="after")
    def _lens(self) -> ShapeSpec:
        if len(self.profile) != 24:
            raise ValueError(f"profile needs 24 hourly multipliers, got {len(self.profile)}")
        if len(self.weekday) != 7:
            raise ValueError(f"weekday needs 7 multipliers (Mon..Sun), got {len(self.weekday)}")
        if min(self.profile) < 0 or min(self.weekday) < 0:
            raise ValueError("profile and weekday multipliers must be >= 0")
        return self

    def anchored(self, start: dt.date) -> ShapeSpec:
        """This shape with growth_epoch "start" resolved to the node's first day."""
        if self.growth_epoch != "start":
            return self
        return self.model_copy(update={"growth_epoch": start})


class BatchSpec(_M):
    process: str
    kind: Literal["copy", "sort"]
    blocks_per_s: float = Field(gt=0)
    in_file: str
    out_file: str
    hours: tuple[int, int] = (22, 6)
    # local weekdays a run starts on (a run over midnight belongs to the day it began)
    days: list[Weekday] = Field(
        default_factory=lambda: list(WEEKDAYS), min_length=1
    )


class PollingSpec(_M):
    process: str
    busy: float = Field(default=0.5, gt=0, le=1.0)  # fraction of a CPU it burns


class HotDiscSpec(_M):
    volume: str
    share: float = Field(gt=0, le=1)


class ProblemsSpec(_M):
    polling_process: PollingSpec | None = None
    dynamic_process_creation: bool = False
    batch_priority: int | None = Field(default=None, ge=1, le=255)
    server_ios_multiplier: float = Field(default=1.0, ge=1.0, le=20.0)
    dynamic_file_opens: bool = False
    block_splits: float = Field(default=0.0, ge=0, le=1.0)  # probability per insert
    hot_disc: HotDiscSpec | None = None


class CustomStageSpec(_M):
    kind: Literal["cpu", "disc", "line_in", "line_out", "delay"]
    role: str = ""
    ms: float = Field(default=0.0, ge=0)
    dist: Literal["exp", "const", "uniform"] = "exp"
    prob: float = Field(default=1.0, ge=0, le=1)
    io: int = -1
    op: Literal["read", "write", ""] = ""
    bytes: int = Field(default=0, ge=0)


class WorkloadSpec(_M):
    name: str
    kind: Literal["debitcredit", "rds", "custom"]
    tps: float = Field(ge=0)
    server_class: str | None = None
    terminals: Literal["X25", "SNA", "any", "none"] = "any"
    shape: ShapeSpec = Field(default_factory=ShapeSpec)
    params: dict[str, Any] = Field(default_factory=dict)
    stages: list[CustomStageSpec] = Field(default_factory=list)  # kind: custom
    process: str | None = None  # kind: custom, role "self"
    batch: list[BatchSpec] = Field(default_factory=list)
    problems: ProblemsSpec = Field(default_factory=ProblemsSpec)


def workload_names() -> list[str]:
    return sorted(p.stem for p in WORKLOADS_DIR.glob("*.yaml"))


def load_workload(name_or_path: str | Path | dict) -> WorkloadSpec:
    """Load a shipped workload by name, a workload file by path, or validate a dict."""
    if isinstance(name_or_path, dict):
        src: str | Path = "<dict>"
        raw = name_or_path
    else:
        p = Path(name_or_path)
        if not p.suffix and not p.exists():
            p = WORKLOADS_DIR / f"{name_or_path}.yaml"
        if not p.exists():
            raise NodeFileError(
                name_or_path, "", f"no such workload; shipped: {', '.join(workload_names())}"
            )
        src = p
        try:
            raw = yaml.safe_load(p.read_text())
        except yaml.YAMLError as e:
            raise NodeFileError(p, "", f"not valid YAML: {e}") from None
    try:
        return WorkloadSpec.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        raise NodeFileError(
            src, _fmt_loc(err["loc"]), err["msg"].removeprefix("Value error, ")
        ) from None


# ------------------------------------------------------------------------------- builders

# Counter effects are (entity, selector, MEASURE counter, amount, when) with when in
# "done" (stage completed and happened), "skipped" (stage completed, did not happen: cache hit).


def _msg(sel_from: str, sel_to: str, nbytes: int, reply: int) -> tuple:
    return (
        ("process", sel_from, "MESSAGES-SENT", 1, "done"),
        ("process", sel_from, "SENT-BYTES", nbytes, "done"),
        ("process", sel_from, "RETURNED-BYTES", reply, "done"),
        ("process", sel_to, "MESSAGES-RECEIVED", 1, "done"),
        ("process", sel_to, "RECEIVED-BYTES", nbytes, "done"),
        ("process", sel_to, "REPLY-BYTES", reply, "done"),
    )


def _io_stages(
    io: int,
    op: Literal["read", "write"],
    dp2_ms: float,
    miss: float,
    nbytes: int,
    comp: str,
    insert: bool = False,
    split_p: float = 0.0,
) -> list[Stage]:
    """A file request from the server to the disc process: DP2 CPU, then a physical I/O on a miss."""
    fcount = {"read": "READS", "write": "WRITES"}[op]
    eff: tuple[Effect, ...] = (
        ("disc", "disc", "REQUESTS", 1, "done"),
        ("file", "file", fcount, 1, "done"),
        ("file", "file", "MESSAGES", 1, "done"),
        ("file", "file", "MESSAGE-BYTES", nbytes, "done"),
        ("file", "file", "READ-BYTES" if op == "read" else "WRITE-BYTES", nbytes, "done"),
        ("discopen", "discopen", "REQUESTS", 1, "done"),
        ("process", "opener", "MESSAGES-SENT", 1, "done"),
        ("process", "proc", "MESSAGES-RECEIVED", 1, "done"),
    )
    if op == "write" and not insert:
        eff += (("file", "file", "UPDATES-OR-REPLIES", 1, "done"),)
    st = [Stage("cpu", "dp2", dp2_ms, io=io, op=op, bytes=nbytes, effects=eff, component=comp)]
    phys_r = op == "read"
    disc_eff: tuple[Effect, ...] = (
        ("disc", "disc", "READS" if phys_r else "WRITES", 1 if phys_r else 2, "done"),
        ("disc", "disc", "INPUT-BYTES" if phys_r else "OUTPUT-BYTES", 2048, "done"),
        ("disc", "disc", "CACHE-MISSES", 1, "done"),
        ("disc", "disc", "CACHE-HITS", 1, "skipped"),
        ("cpu", "dp2cpu", "DISC-IOS", 1, "done"),
        ("cpu", "dp2cpu", "CACHE-HITS", 1, "skipped"),
        (
            "discopen",
            "discopen",
            "DRIVER-INPUT-CALLS" if phys_r else "DRIVER-OUTPUT-CALLS",
            1,
            "done",
        ),
        ("discopen", "discopen", "CACHE-HITS" if phys_r else "CACHE-WRITE-HITS", 1, "skipped"),
    )
    if phys_r:
        disc_eff += (("file", "file", "DISC-READS", 1, "done"),)
    st.append(Stage("disc", "", 1.0, dist="uniform", prob=miss, io=io, op=op, effects=disc_eff))
    if insert and split_p > 0:
        st.append(
            Stage(
                "disc",
                "",
                1.0,
                dist="uniform",
                prob=split_p,
                io=io,
                op="write",
                effects=(
                    ("disc", "disc", "BLOCK-SPLITS", 1, "done"),
                    ("disc", "disc", "WRITES", 2, "done"),
                    ("discopen", "discopen", "BLOCK-SPLITS", 1, "done"),
                ),
            )
        )
    return st


def _line(kind: str, nbytes: int, data: int, reply: bool = False, first: bool = False) -> Stage:
    inp = kind == "line_in"
    eff = (
        ("line", "line", "READS" if inp else "WRITES", 1, "done"),
        ("line", "line", "REQUESTS", 1, "done"),
        ("line", "line", "INPUT-BYTES" if inp else "OUTPUT-BYTES", nbytes, "done"),
        ("line", "line", "INPUT-DATA-BYTES" if inp else "OUTPUT-DATA-BYTES", data, "done"),
        ("terminal", "terminal", "READS" if inp else "WRITES", 1, "done"),
        ("terminal", "terminal", "REQUESTS", 1, "done"),
        ("terminal", "terminal", "INPUT-BYTES" if inp else "OUTPUT-BYTES", nbytes, "done"),
    )
    flags = ("reply",) if reply else (("read_done",) if first else ())
    return Stage(
        kind, "", 0.0, dist="const", bytes=nbytes, data_bytes=data, flags=flags, effects=eff
    )


def build_debitcredit(spec: WorkloadSpec) -> list[TxnType]:
    """ENCOMPASS ET1 / DebitCredit (calibration.md): 160 TXP CPU ms per transaction.

    Split of the 160 ms (our assumption; the sources give only the total): X.25 line handler 8,
    TCP 40, server 30, disc processes 48 (4 requests x 12), TMF ($TMP) 14, system overhead 20.
    I/O: account read misses cache (1 physical read), write-behind of the mirrored account
    block (2 physical writes), history/teller/branch hit cache, 0.4 audit-trail writes.
    """
    p: dict[str, Any] = {
        "ms_lh": 4.0,
        "ms_tcp": 20.0,
        "ms_srv": (10.0, 5.0, 15.0),
        "ms_dp2": 12.0,
        "ms_tmp": 14.0,
        "ms_sys": 20.0,
        "remote": 0.15,
        "log_io": 0.4,
        "remote_ms": 40.0,
    }
    p.update(spec.params)
    mult = spec.problems.server_ios_multiplier
    split = spec.problems.block_splits
    st: list[Stage] = [
        _line("line_in", 170, 100, first=True),
        Stage(
            "cpu",
            "linehandler",
            p["ms_lh"],
            component="linehandler",
            effects=_msg("linehandler", "tcp", 100, 0),
        ),
        Stage(
            "cpu",
            "tcp",
            p["ms_tcp"],
            flags=("begin",),
            component="tcp",
            effects=(
                ("process", "tcp", "BEGIN-TRANS", 1, "done"),
                ("tmf", "tmf", "HOME-TRANS", 1, "done"),
            )
            + _msg("tcp", "server", 100, 100),
        ),
        Stage(
            "cpu",
            "none@tcp",
            p["ms_sys"] / 2,
            component="system",
            effects=(("cpu", "cpu", "INTR-BUSY-TIME", 0.5, "svc"),),
        ),
        Stage("cpu", "server", p["ms_srv"][0], component="server"),
    ]
    st += _io_stages(0, "read", p["ms_dp2"], 1.0, 100, "dp2")  # account read (not cached)
    n_extra = round((mult - 1.0) * 4)
    for _ in range(n_extra):  # the "too many I/Os" server: extra (cached) account reads
        st += _io_stages(0, "read", p["ms_dp2"], 0.1, 100, "dp2")
    st.append(Stage("cpu", "server", p["ms_srv"][1], component="server"))
    st += _io_stages(1, "write", p["ms_dp2"], 0.0, 50, "dp2", insert=True, split_p=split)  # history
    st += _io_stages(2, "read", p["ms_dp2"], 0.0, 100, "dp2")  # teller (cached)
    st += _io_stages(3, "read", p["ms_dp2"], 0.0, 100, "dp2")  # branch (cached)
    # 15 % remote branch: a request over Expand to the branch's node and its reply
    net_eff = lambda d: (
        ("netline", "netline", "WRITES" if d == "out" else "READS", 1, "done"),
        ("netline", "netline", "REQUESTS", 1, "done"),
        ("netline", "netline", "L2OUT-BYTES" if d == "out" else "L2IN-BYTES", 230, "done"),
        ("netline", "netline", "U256-BYTES", 1, "done"),
        ("system", "system", "SENT" if d == "out" else "RECEIVED", 1, "done"),
        ("cluster", "cluster", "SENT" if d == "out" else "RECEIVED", 1, "done"),
        ("cluster", "cluster", "SENT-BYTES" if d == "out" else "RECEIVED-BYTES", 200, "done"),
    )
    st.append(
        Stage(
            "net_out",
            "",
            0.0,
            dist="const",
            bytes=230,
            prob=p["remote"],
            flags=("remote",),
            effects=net_eff("out") + (("system", "system", "LINKS", 1, "done"),),
        )
    )
    st.append(Stage("delay", "", p["remote_ms"], prob=p["remote"], flags=("remote",)))
    st.append(
        Stage(
            "net_in",
            "",
            0.0,
            dist="const",
            bytes=230,
            prob=p["remote"],
            flags=("remote",),
            effects=net_eff("in"),
        )
    )
    st.append(
        Stage(
            "cpu",
            "server",
            p["ms_srv"][2],
            component="server",
            effects=(("file", "file", "UPDATES-OR-REPLIES", 0, "done"),),
        )
    )
    st.append(
        Stage(
            "cpu",
            "none@tcp",
            p["ms_sys"] / 2,
            component="system",
            effects=(("cpu", "cpu", "INTR-BUSY-TIME", 0.5, "svc"),),
        )
    )
    st.append(Stage("cpu", "tmp", p["ms_tmp"], flags=("commit",), component="tmf"))
    st.append(
        Stage(
            "disc",
            "",
            1.0,
            dist="uniform",
            prob=p["log_io"],
            io=4,
            op="write",
            effects=(
                ("disc", "disc", "WRITES", 1, "done"),
                ("disc", "disc", "OUTPUT-BYTES", 4096, "done"),
                ("cpu", "dp2cpu", "DISC-IOS", 1, "done"),
            ),
        )
    )
    st.append(
        Stage(
            "cpu", "tcp", p["ms_tcp"], component="tcp", effects=_msg("linehandler", "tcp", 200, 0)
        )
    )
    st.append(Stage("cpu", "linehandler", p["ms_lh"], component="linehandler"))
    st.append(_line("line_out", 270, 200, reply=True))
    # write-behind of the account block (mirrored: 2 physical writes), after the reply
    st.append(
        Stage(
            "disc",
            "",
            1.0,
            dist="uniform",
            prob=1.0,
            io=0,
            op="write",
            effects=(
                ("disc", "disc", "WRITES", 2, "done"),
                ("disc", "disc", "OUTPUT-BYTES", 4096, "done"),
                ("cpu", "dp2cpu", "DISC-IOS", 2, "done"),
                ("discopen", "discopen", "DRIVER-OUTPUT-CALLS", 1, "done"),
            ),
        )
    )
    files = [
        p.get("account", "ET1.ACCOUNT"),
        p.get("history", "ET1.HISTORY"),
        p.get("teller", "ET1.TELLER"),
        p.get("branch", "ET1.BRANCH"),
        p.get("audit", "TMF.AUDIT"),
    ]
    return [TxnType("debitcredit", 1.0, st, files)]


RDS_TXP = {
    "system": 74,
    "tmf_disc": 104,
    "snax": 49,
    "tcp": 154,
    "hls": 49,
    "server": 54,
    "other": 7,
}


def build_rds(spec: WorkloadSpec, cpu_type: str) -> tuple[list[TxnType], bool]:
    """Wells Fargo RDS ATM transaction (Table 4 of the ATM article), per mix type.

    Returns (types, already_scaled): when the workload gives a component table for this node's
    processor type (e.g. the VLX column of Table 4) the figures are used as they are.

    The flow follows the article's Figure 5 and its text (calibration.md, "Response time"):

    1. request: the ATM waits for its poll (SDLC multidrop line, 2 s poll interval: a message
       waits U(0, 2 s) for the next poll of its station), 57 bytes in, SNAX line handler,
       HLS, which hands the request to the TCP (the TCP's read of its terminal ends here);
       the TCP begins the TMF transaction and sends to the servers, which read and update
       the accounts and save the sequence number; the TCP replies to HLS (its write starts:
       the end of the response). A 9-byte SNA positive response follows the request
       (definite response mode).
    2. reply: HLS, line handler, 167 bytes out, the ATM's 9-byte SNA response.
    3. status: after the customer (``customer_ms``) the ATM's 30-byte status waits for its
       poll; the TCP sends it to the log server, which "writes a transaction journal entry
       and updates the ATM cash settlement file" (the last ``log_ios`` I/Os, 2), and "the
       application ends the TMF transaction"; a 9-byte SNA response to the status.

    Response time is the TCP's, as MEASURE defines it for a terminal (end of the read, start
    of the write) and as the article measured it with HLS user exits ("from the point that a
    transaction request was sent to the PATHWAY SCREEN COBOL requester" to "the point that a
    SCREEN COBOL reply was received by HLS"): steps 2 and 3, the polling wait and the line
    times are outside it, as they were in the article ("the steps ... (transaction logging)
    do not contribute to the user-perceived response time").
    """
    comps_by_type = spec.params.get("components", {"TXP": RDS_TXP})
    scaled = cpu_type in comps_by_type
    c = {**RDS_TXP, **comps_by_type.get(cpu_type, comps_by_type.get("TXP", RDS_TXP))}
    mix = spec.params.get(
        "mix", {"withdrawal": [50, 11], "deposit": [25, 9], "transfer": [5, 14], "inquiry": [20, 7]}
    )
    n_avg = sum(w * n for w, n in mix.values()) / sum(w for w, _ in mix.values())
    tmp_ms = 20.0 * c["tmf_disc"] / 104.0
    dp2_ms = (c["tmf_disc"] - tmp_ms) / n_avg
    mult = spec.problems.server_ios_multiplier
    split = spec.problems.block_splits
    cpu_dist = spec.params.get("cpu_dist", "uniform")  # CPU bursts: U(0.5, 1.5) x mean
    # SDLC multidrop polling: a station's message waits for its next poll, U(0, interval)
    poll_ms = float(spec.params.get("poll_interval_ms", 2000.0))
    log_ios = int(spec.params.get("log_ios", 2))

    def poll_wait() -> list[Stage]:
        return [Stage("delay", "", poll_ms / 2, dist="uniform0")] if poll_ms > 0 else []

    def ios(ks: range, n_io: int, n_all: int) -> list[Stage]:
        out: list[Stage] = []
        for k in ks:
            op: Literal["read", "write"] = "write" if k % 3 == 2 else "read"
            out += _io_stages(
                k % 4,
                op,
                dp2_ms * n_io / n_all,
                0.35 if op == "read" else 0.0,
                120,
                "tmf_disc",
                insert=(k % 3 == 2),
                split_p=split,
            )
            if k == 1:  # PIN check: 2 I/Os to the security module
                out.append(Stage("delay", "", 15.0, dist="exp"))
                out.append(Stage("delay", "", 15.0, dist="exp"))
        return out

    types = []
    for name, (w, n_io) in mix.items():
        sx, hl, tc, sv, sy = c["snax"] / 6, c["hls"] / 4, c["tcp"], c["server"], c["system"]
        n_all = round(n_io * mult)
        n_log = min(log_ios, n_all)
        # the log server's I/Os: a journal insert (TXLOG, group 2) and a settlement update
        log = [
            s
            for k in range(n_log)
            for s in _io_stages(
                2 if k == 0 else 3,
                "write",
                dp2_ms * n_io / n_all,
                0.0,
                120,
                "tmf_disc",
                insert=(k == 0),
                split_p=split,
            )
        ]
        st: list[Stage] = poll_wait() + [
            _line("line_in", 66, 57),
            Stage(
                "cpu",
                "linehandler",
                sx,
                dist=cpu_dist,
                component="snax",
                effects=_msg("linehandler", "hls", 57, 0),
            ),
            Stage(
                "cpu",
                "hls",
                hl,
                dist=cpu_dist,
                component="hls",
                flags=("read_done",),
                effects=_msg("hls", "tcp", 57, 0),
            ),
            Stage(
                "cpu",
                "tcp",
                tc * 0.45,
                flags=("begin",),
                dist=cpu_dist,
                component="tcp",
                effects=(
                    ("process", "tcp", "BEGIN-TRANS", 1, "done"),
                    ("tmf", "tmf", "HOME-TRANS", 1, "done"),
                )
                + _msg("tcp", "server", 57, 167),
            ),
            Stage(
                "cpu",
                "none@tcp",
                sy * 0.4,
                dist=cpu_dist,
                component="system",
                effects=(("cpu", "cpu", "INTR-BUSY-TIME", 0.5, "svc"),),
            ),
            Stage("cpu", "linehandler", sx, dist=cpu_dist, component="snax"),
            _line("line_out", 9, 0),
            Stage("cpu", "server", sv * 0.4, dist=cpu_dist, component="server"),
        ]
        st += ios(range(n_all - n_log), n_io, n_all)
        st += [
            Stage("cpu", "server", sv * 0.4, dist=cpu_dist, component="server"),
            Stage(
                "cpu",
                "none@server",
                sy * 0.3,
                dist=cpu_dist,
                component="system",
                effects=(("cpu", "cpu", "INTR-BUSY-TIME", 0.5, "svc"),),
            ),
            Stage("cpu", "tcp", tc * 0.35, dist=cpu_dist, component="tcp"),
            # the TCP's write to HLS starts: the response ends with the TCP's visit above
            Stage("cpu", "hls", hl, dist=cpu_dist, component="hls", flags=("reply",)),
            Stage("cpu", "linehandler", sx, dist=cpu_dist, component="snax"),
            _line("line_out", 176, 167),
            _line("line_in", 9, 0),
            Stage("cpu", "linehandler", sx, dist=cpu_dist, component="snax"),
            Stage("delay", "", spec.params.get("customer_ms", 8000.0), dist="exp"),
        ]
        st += poll_wait() + [
            _line("line_in", 39, 30),
            Stage("cpu", "linehandler", sx, dist=cpu_dist, component="snax"),
            Stage("cpu", "hls", hl, dist=cpu_dist, component="hls"),
            Stage("cpu", "tcp", tc * 0.20, dist=cpu_dist, component="tcp"),
            Stage("cpu", "server", sv * 0.2, dist=cpu_dist, component="server"),
        ]
        st += log
        st += [
            Stage(
                "cpu",
                "none@tcp",
                sy * 0.3,
                dist=cpu_dist,
                component="system",
                effects=(("cpu", "cpu", "INTR-BUSY-TIME", 0.5, "svc"),),
            ),
            Stage("cpu", "tmp", tmp_ms, flags=("commit",), dist=cpu_dist, component="tmf_disc"),
            Stage(
                "disc",
                "",
                1.0,
                dist="uniform",
                prob=0.4,
                io=4,
                op="write",
                effects=(
                    ("disc", "disc", "WRITES", 1, "done"),
                    ("cpu", "dp2cpu", "DISC-IOS", 1, "done"),
                ),
            ),
            Stage("cpu", "other", c["other"], dist=cpu_dist, component="other"),
            Stage("cpu", "hls", hl, dist=cpu_dist, component="hls"),
            Stage("cpu", "linehandler", sx, dist=cpu_dist, component="snax"),
            _line("line_out", 9, 0),
        ]
        files = [
            spec.params.get("files", ["RDS.CARD", "RDS.ACCOUNT", "RDS.TXLOG", "RDS.LIMITS"])[i]
            for i in range(4)
        ] + [spec.params.get("audit", "TMF.AUDIT")]
        types.append(TxnType(name, float(w), st, files))
    return types, scaled


def build_custom(spec: WorkloadSpec) -> list[TxnType]:
    st = [
        Stage(
            s.kind,
            s.role,
            s.ms,
            dist=s.dist,
            prob=s.prob,
            io=s.io,
            op=s.op,
            bytes=s.bytes,
            component=s.role,
        )
        for s in spec.stages
    ]
    return [
        TxnType(
            spec.name,
            1.0,
            st,
            list(spec.params.get("files", [])),
            opener_role="self" if spec.process else "server",
        )
    ]


def batch_types(b: BatchSpec) -> TxnType:
    """Sequential copy (read a block, a little CPU, write a block) or sort (CPU-heavy)."""
    cpu_ms = 6.0 if b.kind == "copy" else 30.0
    st = [
        Stage("cpu", "self", 1.0, component="batch"),
        Stage(
            "cpu",
            "dp2",
            2.0,
            io=0,
            op="read",
            component="batch",
            effects=(
                ("disc", "disc", "REQUESTS", 1, "done"),
                ("file", "file", "READS", 1, "done"),
                ("file", "file", "READ-BYTES", 4096, "done"),
                ("discopen", "discopen", "REQUESTS", 1, "done"),
            ),
        ),
        Stage(
            "disc",
            "",
            0.4,
            dist="uniform",
            io=0,
            op="read",
            effects=(
                ("disc", "disc", "READS", 1, "done"),
                ("disc", "disc", "INPUT-BYTES", 4096, "done"),
                ("disc", "disc", "CACHE-MISSES", 1, "done"),
                ("file", "file", "DISC-READS", 1, "done"),
                ("cpu", "dp2cpu", "DISC-IOS", 1, "done"),
                ("discopen", "discopen", "DRIVER-INPUT-CALLS", 1, "done"),
            ),
        ),
        Stage("cpu", "self", cpu_ms, component="batch"),
        Stage(
            "cpu",
            "dp2",
            2.0,
            io=1,
            op="write",
            component="batch",
            effects=(
                ("disc", "disc", "REQUESTS", 1, "done"),
                ("file", "file", "WRITES", 1, "done"),
                ("file", "file", "WRITE-BYTES", 4096, "done"),
                ("discopen", "discopen", "REQUESTS", 1, "done"),
            ),
        ),
        Stage(
            "disc",
            "",
            0.4,
            dist="uniform",
            io=1,
            op="write",
            effects=(
                ("disc", "disc", "WRITES", 2, "done"),
                ("disc", "disc", "OUTPUT-BYTES", 4096, "done"),
                ("cpu", "dp2cpu", "DISC-IOS", 2, "done"),
                ("discopen", "discopen", "DRIVER-OUTPUT-CALLS", 1, "done"),
            ),
        ),
    ]
    return TxnType(f"batch-{b.kind}", 1.0, st, [b.in_file, b.out_file], opener_role="self")


def polling_type() -> TxnType:
    return TxnType(
        "polling",
        1.0,
        [Stage("cpu", "self", 5.0, dist="const", component="polling")],
        [],
        opener_role="self",
    )


def rate_multiplier(shape: ShapeSpec, local: dt.datetime) -> float:
    """Daily profile x weekday factor x compound monthly growth (whole days since the
    epoch; held at growth_max once reached), at a local time."""
    assert shape.growth_epoch != "start", "anchor the shape first (ShapeSpec.anchored)"
    months = (local.date() - shape.growth_epoch).days / 30.4375
    growth = (1.0 + shape.growth_per_month) ** months
    if shape.growth_max is not None:
        cap = shape.growth_max
        growth = min(growth, cap) if shape.growth_per_month >= 0 else max(growth, cap)
    return (
        float(
            np.interp(
                local.hour + local.minute / 60.0, np.arange(25), shape.profile + shape.profile[:1]
            )
        )
        * shape.weekday[local.weekday()]
        * growth
    )
