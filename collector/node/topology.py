"""Node topology as data: YAML node files, validated with pydantic and expanded to flat lists.

A node file is compact (``count:`` expansions, ``cpu: rr`` round-robin placement, server
classes that expand to N processes); :func:`load_node` validates it and returns a
:class:`Topology` with every CPU, volume, line, terminal, Expand link, process and file open
spelled out. Errors are :class:`NodeFileError`, whose message names the file, the key path
(``discs[2].backup_cpu``) and what is wrong.
"""

from __future__ import annotations

import math
import zoneinfo
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

__all__ = [
    "MULTI_IPU_TYPES",
    "NODES_DIR",
    "PROCESSOR_TYPES",
    "NodeFileError",
    "NodeSpec",
    "Proc",
    "Topology",
    "load_node",
    "node_names",
]

NODES_DIR = Path(__file__).resolve().parent / "nodes"

# CPU time a processor needs relative to a NonStop TXP for the same work (TXP = 1.0).
#  VLX: 1/1.64 on DebitCredit (1.49 hardware x 1.1 B30 message system; "NonStop VLX Performance").
#  NONSTOP-II: parallel FASTSORT runs at 30 KB/s on a NonStop II vs 80 KB/s on a TXP (000,
#    FASTSORT article), a CPU-bound linear-time job -> 80/30 = 2.67x the TXP's CPU time.
#  EXT10: "the two-processor NonStop EXT10 together ~ half a VLX" (001) -> one EXT10 CPU is a
#    quarter of a VLX -> 4 x (1/1.64) = 2.44x the TXP's CPU time.
#  NONSTOP-X: one IPU (x86 core) of an L-series NonStop X blade. No published figure relates it
#    to a TXP; docs/measure-reference.md §8 (inferred) says "a modern NonStop core is orders of
#    magnitude faster — pick a per-transaction CPU of a few ms": 1/50 puts DebitCredit's 160
#    TXP ms at 3.2 ms a transaction on one core. Our assumption, to calibrate against a real
#    system's CPU-BUSY %. The factor is per IPU (see MULTI_IPU_TYPES).
PROCESSOR_TYPES: dict[str, float] = {
    "TXP": 1.0,
    "VLX": 1.0 / 1.64,
    "NONSTOP-II": 80.0 / 30.0,
    "EXT10": 4.0 / 1.64,
    "NONSTOP-X": 1.0 / 50.0,
}
CPU_TYPE_CODES = {"NONSTOP-II": 2, "TXP": 3, "VLX": 4, "EXT10": 5, "NONSTOP-X": 10}
# Processor types whose CPUs have several IPUs (cores; ``processor.ipus`` in a node file).
# The engine serves such a CPU as one server with the speed of all its IPUs (the per-IPU
# factor divided by the IPUs); collector/node/later.py spreads its busy time over the IPUs.
MULTI_IPU_TYPES = frozenset({"NONSTOP-X"})


class NodeFileError(ValueError):
    """A node file is invalid: the message names the file, the key path and why."""

    def __init__(self, file: str | Path, where: str, why: str) -> None:
        self.file, self.where, self.why = str(file), where, why
        super().__init__(f"{file}: {where}: {why}" if where else f"{file}: {why}")


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


CpuRef = int | Literal["rr"]


class SystemSpec(_M):
    name: str = Field(pattern=r"^\\[A-Z][A-Z0-9]{0,6}$")
    number: int = Field(ge=0, le=254)
    time_zone: str

    @field_validator("time_zone")
    @classmethod
    def _tz(cls, v: str) -> str:
        try:
            zoneinfo.ZoneInfo(v)
        except Exception:  # noqa: BLE001 - any failure means unknown zone
            raise ValueError(f"unknown IANA time zone {v!r} (e.g. America/Los_Angeles)") from None
        return v


class ProcessorSpec(_M):
    type: str
    cpus: int = Field(ge=2, le=16)
    memory_mb: float = Field(default=8.0, gt=0)
    page_bytes: int = Field(default=2048, gt=0)
    ipus: int = Field(default=1, ge=1, le=8, description="IPUs (cores) per CPU")

    @field_validator("type")
    @classmethod
    def _type(cls, v: str) -> str:
        u = v.upper()
        if u not in PROCESSOR_TYPES:
            raise ValueError(f"unknown processor type {v!r}; valid: {', '.join(PROCESSOR_TYPES)}")
        return u

    @model_validator(mode="after")
    def _ipus(self) -> ProcessorSpec:
        if self.ipus > 1 and self.type not in MULTI_IPU_TYPES:
            raise ValueError(
                f"a {self.type} CPU has one IPU; ipus > 1 needs a multi-core type "
                f"({', '.join(sorted(MULTI_IPU_TYPES))})"
            )
        return self


class DiscSpec(_M):
    volume: str = Field(pattern=r"^\$[A-Z]([A-Z0-9]|\{i\}){0,8}$")
    count: int = Field(default=1, ge=1, le=256)
    primary_cpu: CpuRef = "rr"
    backup_cpu: int | Literal["next"] = "next"
    controller: Literal["3107", "3108"] = "3107"
    cache_mb: float = Field(default=1.6, ge=0)
    block_size: Literal[512, 1024, 2048, 4096] = 2048
    capacity_mb: float = Field(default=500.0, gt=0)
    service_ms: float = Field(default=28.0, gt=0, description="mean physical I/O time")


class LineSpec(_M):
    name: str = Field(pattern=r"^\$[A-Z]([A-Z0-9]|\{i\}){0,8}$")
    count: int = Field(default=1, ge=1, le=512)
    protocol: Literal["X25", "SNA"]
    speed_bps: int = Field(gt=0)
    cpu: CpuRef = "rr"
    terminals: int = Field(default=1, ge=0, le=4096, description="terminals/ATMs per line")
    priority: int = Field(default=200, ge=1, le=255)


class ExpandSpec(_M):
    system: str = Field(pattern=r"^\\[A-Z][A-Z0-9]{0,6}$")
    number: int = Field(ge=0, le=254)
    lines: int = Field(default=1, ge=1, le=8)
    speed_bps: int = Field(default=56000, gt=0)
    cpu: CpuRef = "rr"
    fox: bool = False


class TcpSpec(_M):
    count: int = Field(ge=1, le=512)
    cpu: CpuRef = "rr"
    priority: int = Field(default=170, ge=1, le=255)
    program: str = "$SYSTEM.SYSTEM.PATHTCP2"


_COUNTER_NAME = r"^[A-Za-z][A-Za-z0-9_-]{0,15}$"


class UserCounterSpec(_M):
    """A user-defined counter a server class's program declares (MEASURE USERDEF).

    ``measures``: ``response`` (a QUEUE counter: Σ server response time of completed requests,
    level = requests in flight) or ``transactions`` (ACCUM/FACCUM: completed requests);
    omitted, it follows from the type (QUEUE → response, ACCUM/FACCUM → transactions).
    """

    name: str = Field(pattern=_COUNTER_NAME)
    type: Literal["ACCUM", "FACCUM", "QUEUE"]
    measures: Literal["response", "transactions"] | None = None

    @field_validator("name", "type", mode="before")
    @classmethod
    def _upper(cls, v: Any) -> Any:
        return v.strip().upper() if isinstance(v, str) else v

    def what(self) -> str:
        if self.measures is not None:
            want = "QUEUE" if self.measures == "response" else "ACCUM or FACCUM"
            if (self.type == "QUEUE") != (self.measures == "response"):
                raise ValueError(
                    f"user counter {self.name}: measures {self.measures} needs "
                    f"type {want}, got {self.type}"
                )
            return self.measures
        return "response" if self.type == "QUEUE" else "transactions"


# Figure 3 of "Capacity planning with MEASURE" (1986): a response-time QUEUE counter and a
# THROUGHPUT ACCUM counter in every application server (ADD COUNTER RESP-TIME … QUEUE).
DEFAULT_USER_COUNTERS = (
    UserCounterSpec(name="RESP-TIME", type="QUEUE"),
    UserCounterSpec(name="THROUGHPUT", type="ACCUM"),
)


class SqlStatementSpec(_M):
    """One SQL statement of a server class's module (MEASURE SQLSTMT; collector/node/later.py).

    ``prob``: share of the server's requests that run it; ``weight``: its share of a request's
    server response time (against the other statements the request runs); ``table``: the
    file (a ``files:`` name) whose physical reads it causes; ``rows``/``used``: records it
    examines / uses per call."""

    index: int = Field(ge=1, le=65535)
    name: str = Field(min_length=1, max_length=64)
    table: str
    prob: float = Field(default=1.0, gt=0, le=1)
    weight: float = Field(gt=0)
    rows: int = Field(default=1, ge=0)
    used: int = Field(default=1, ge=0)
    messages: int = Field(default=2, ge=0, description="messages to disc processes per call")
    sorts: int = Field(default=0, ge=0, description="sorts per call")


class SqlModuleSpec(_M):
    """The SQL/MX module a server class's program runs (MEASURE SQLPROC and SQLSTMT)."""

    module: str = Field(min_length=1, max_length=128)
    open_ms: float = Field(default=2.0, ge=0, description="time of one table open at start")
    statements: list[SqlStatementSpec] = Field(min_length=1)


class ServerClassSpec(_M):
    name: str
    program: str
    sql: SqlModuleSpec | None = None
    priority: int = Field(default=150, ge=1, le=255)
    static: int = Field(default=0, ge=0, le=4096)
    static_per_cpu: int = Field(default=0, ge=0, le=256)
    dynamic: int = Field(default=0, ge=0, le=4096)
    cpus: list[int] | Literal["all"] = "all"
    opens: list[str] = Field(default_factory=list)
    user_counters: list[UserCounterSpec] = Field(
        default_factory=lambda: list(DEFAULT_USER_COUNTERS)
    )


class PathwaySpec(_M):
    pathmon_cpu: int = 0
    tcps: TcpSpec
    server_classes: list[ServerClassSpec]


class FileSpec(_M):
    name: str  # SUBVOL.FILE ; partitions live on `volumes`
    type: Literal["key-sequenced", "entry-sequenced", "relative", "unstructured"]
    volumes: list[str] | Literal["all"] = "all"
    record_bytes: int = Field(default=100, gt=0)
    records: int = Field(default=1000, ge=0)
    cached: bool = True


class ProcessSpec(_M):
    name: str = Field(pattern=r"^\$[A-Z]([A-Z0-9]|\{i\}){0,8}$")
    program: str
    cpu: int | Literal["each"] = 0
    priority: int = Field(default=150, ge=1, le=255)
    role: str = "other"
    opens: list[str] = Field(default_factory=list)


class CodeRangeSpec(_M):
    """One code range (procedure) of a program file, with its share of the busy samples."""

    space: Literal["UC", "UCR", "UL", "ULR", "SC", "SCR", "SL", "SLR"]
    range: str = Field(min_length=1, max_length=1024)
    weight: float = Field(gt=0)


# Where a process's CPU time goes when its program file has no code_ranges entry: its own code
# (UC), the system library (SL: file system, message system) and system code (SC).
DEFAULT_CODE_RANGES = (
    CodeRangeSpec(space="UC", range="MAIN", weight=0.10),
    CodeRangeSpec(space="UC", range="PROCESS^REQUEST", weight=0.40),
    CodeRangeSpec(space="UC", range="FORMAT^REPLY", weight=0.10),
    CodeRangeSpec(space="SL", range="FILE^SYSTEM", weight=0.25),
    CodeRangeSpec(space="SC", range="MESSAGE^SYSTEM", weight=0.15),
)


class ProcesshSpec(_M):
    """PROCESSH: program-counter sampling of busy processes."""

    rate_hz: float = Field(default=100.0, gt=0, le=10_000)
    default: list[CodeRangeSpec] = Field(default_factory=lambda: list(DEFAULT_CODE_RANGES))
    programs: dict[str, list[CodeRangeSpec]] = Field(default_factory=dict)


class TapeUserSpec(_M):
    process: str  # a batch (or other) process that reads or writes one tape block per block
    op: Literal["read", "write"]


class TapeSpec(_M):
    """Tape drives (MEASURE DEVICE entities) used by batch jobs, one I/O per block."""

    name: str = Field(pattern=r"^\$[A-Z]([A-Z0-9]|\{i\}){0,8}$")
    count: int = Field(default=1, ge=1, le=64)
    cpu: CpuRef = "rr"
    pin: int | None = Field(default=None, ge=0, le=255)
    block_bytes: int = Field(default=4096, gt=0)
    speed_kbs: float = Field(default=500.0, gt=0, description="streaming transfer rate")
    overhead_ms: float = Field(default=2.0, ge=0, description="per-I/O start/stop overhead")
    users: list[TapeUserSpec] = Field(default_factory=list)


class OssSpec(_M):
    """OSS on the node (MEASURE OSSCPU, OSSNS; collector/node/later.py): processes whose
    program is an OSS pathname (``/…``) are OSS processes; each message one receives makes
    ``lookups_per_message`` pathname resolutions by the name servers."""

    name_servers: list[str] = Field(min_length=1)
    lookups_per_message: float = Field(default=2.0, ge=0)
    name_cache_hit: float = Field(default=0.95, ge=0, le=1)
    inode_cache_hit: float = Field(default=0.90, ge=0, le=1)


class ServerNetSpec(_M):
    """ServerNet/fabric adapters, two (X and Y) per CPU (MEASURE SERVERNET)."""

    fabrics: list[str] = Field(default_factory=lambda: ["X", "Y"], min_length=1, max_length=2)
    mbytes_per_s: float = Field(default=1000.0, gt=0, description="transfer rate")
    overhead_us: float = Field(default=5.0, ge=0, description="per transfer")


class NodeSpec(_M):
    system: SystemSpec
    processor: ProcessorSpec
    discs: list[DiscSpec]
    lines: list[LineSpec] = Field(default_factory=list)
    expand: list[ExpandSpec] = Field(default_factory=list)
    pathway: PathwaySpec | None = None
    files: list[FileSpec] = Field(default_factory=list)
    processes: list[ProcessSpec] = Field(default_factory=list)
    batch: list[ProcessSpec] = Field(default_factory=list)
    processh: ProcesshSpec = Field(default_factory=ProcesshSpec)
    tapes: list[TapeSpec] = Field(default_factory=list)
    oss: OssSpec | None = None
    servernet: ServerNetSpec | None = None


# --------------------------------------------------------------------------- expanded form


@dataclass(slots=True)
class Proc:
    name: str
    program: str
    cpu: int
    priority: int
    role: str  # dp2, dp2-backup, tmp, measctl, cmon, pathmon, tcp, server, linehandler, hls, ...
    group: str = ""  # server class, volume, line … the process belongs to
    dynamic: bool = False
    opens: tuple[str, ...] = ()
    backup_cpu: int = -1


@dataclass
class Topology:
    source: str
    system_name: str
    system_number: int
    time_zone: str
    cpu_type: str
    cpu_factor: float  # per CPU: the per-IPU factor / ipus
    n_cpus: int
    memory_pages: int
    ipus: int = 1
    volumes: list[dict[str, Any]] = field(default_factory=list)
    lines: list[dict[str, Any]] = field(default_factory=list)
    terminals: list[dict[str, Any]] = field(default_factory=list)
    netlines: list[dict[str, Any]] = field(default_factory=list)
    remotes: list[dict[str, Any]] = field(default_factory=list)
    processes: list[Proc] = field(default_factory=list)
    server_classes: list[dict[str, Any]] = field(default_factory=list)
    files: list[dict[str, Any]] = field(default_factory=list)
    partitions: list[dict[str, Any]] = field(default_factory=list)  # (file, volume)
    processh: dict[str, Any] = field(default_factory=dict)  # rate_hz, default, programs
    tapes: list[dict[str, Any]] = field(default_factory=list)
    oss: dict[str, Any] | None = None  # OssSpec as a dict, name_servers checked
    servernet: dict[str, Any] | None = None

    def proc_index(self, name: str) -> int:
        for i, p in enumerate(self.processes):
            if p.name == name:
                return i
        raise KeyError(name)

    def entity_count(self) -> int:
        """Entities a full measurement would cover (static ones; opens counted per partition)."""
        n_opens = sum(len(p.opens) for p in self.processes)
        n_dopen = sum(
            len(self.files_by_name[f]["partitions"]) for p in self.processes for f in p.opens
        )
        return (
            self.n_cpus * 2  # CPU + TMF
            + len(self.processes)
            + 2 * len(self.volumes)  # DISC primary + backup path
            + len(self.lines)
            + len(self.terminals)
            + len(self.netlines)
            + len(self.remotes)
            + n_opens
            + n_dopen
        )

    @property
    def files_by_name(self) -> dict[str, dict[str, Any]]:
        return {f["name"]: f for f in self.files}


def _fmt_loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _expand_name(pattern: str, i: int, count: int) -> str:
    if "{i}" in pattern:
        return pattern.replace("{i}", str(i + 1))
    return pattern if count == 1 else f"{pattern}{i + 1}"


def node_names() -> list[str]:
    return sorted(p.stem for p in NODES_DIR.glob("*.yaml"))


def load_node(name_or_path: str | Path) -> Topology:
    """Load a shipped node by name (``demo``) or a node file by path, validate and expand it."""
    p = Path(name_or_path)
    if not p.suffix and not p.exists():
        p = NODES_DIR / f"{name_or_path}.yaml"
        if not p.exists():
            raise NodeFileError(
                name_or_path, "", f"no such node; shipped nodes: {', '.join(node_names())}"
            )
    try:
        raw = yaml.safe_load(p.read_text())
    except FileNotFoundError:
        raise NodeFileError(p, "", "file not found") from None
    except yaml.YAMLError as e:
        raise NodeFileError(p, "", f"not valid YAML: {e}") from None
    if not isinstance(raw, dict):
        raise NodeFileError(p, "", "a node file must be a mapping with system:, processor:, discs:")
    try:
        spec = NodeSpec.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        msg = err["msg"].removeprefix("Value error, ")
        raise NodeFileError(p, _fmt_loc(err["loc"]), msg) from None
    return expand(spec, str(p))


def expand(spec: NodeSpec, source: str = "<spec>") -> Topology:
    """Check cross references and spell the compact spec out into a :class:`Topology`."""
    return _Expander(spec, source).run()


class _Expander:
    """One expansion of a node spec: the parts in order (discs, system processes, lines,
    Expand, files, PATHWAY, other processes, PROCESSH, tapes), sharing the round-robin CPU
    counter of ``cpu: rr`` placements."""

    def __init__(self, spec: NodeSpec, source: str) -> None:
        self.spec = spec
        self.source = source
        self.ncpu = spec.processor.cpus
        self.rr = 0
        self.volume_names: set[str] = set()
        self.topo = Topology(
            source=source,
            system_name=spec.system.name,
            system_number=spec.system.number,
            time_zone=spec.system.time_zone,
            cpu_type=spec.processor.type,
            cpu_factor=PROCESSOR_TYPES[spec.processor.type] / spec.processor.ipus,
            n_cpus=self.ncpu,
            memory_pages=int(spec.processor.memory_mb * 1024 * 1024 // spec.processor.page_bytes),
            ipus=spec.processor.ipus,
        )
        self.procs = self.topo.processes

    def run(self) -> Topology:
        self.discs()
        self.system_processes()
        self.lines()
        self.expand_links()
        self.files()
        if self.spec.pathway is not None:
            self.pathway(self.spec.pathway)
        self.other_processes()
        self.processh()
        self.tapes()
        self.later()
        return self.topo

    # ---------------------------------------------------------------------------- helpers
    def bad(self, where: str, why: str) -> NodeFileError:
        return NodeFileError(self.source, where, why)

    def cpu_ok(self, v: int, where: str) -> int:
        if not 0 <= v < self.ncpu:
            raise self.bad(where, f"CPU {v} does not exist (this node has CPUs 0..{self.ncpu - 1})")
        return v

    def place(self, cpu: CpuRef, where: str) -> int:
        """A CPU given as a number, or ``rr``: the next CPU round robin."""
        if isinstance(cpu, str):  # "rr"
            c = self.rr % self.ncpu
            self.rr += 1
            return c
        return self.cpu_ok(cpu, where)

    def check_opens(self, opens: list[str], where: str) -> tuple[str, ...]:
        file_names = {f.name for f in self.spec.files}
        for j, o in enumerate(opens):
            if o not in file_names:
                raise self.bad(f"{where}.opens[{j}]", f"file {o} is not defined under files")
        return tuple(opens)

    # ------------------------------------------------------------------------------ parts
    def discs(self) -> None:
        """One DP2 pair (primary, backup) per volume."""
        ncpu, topo, procs = self.ncpu, self.topo, self.procs
        for di, d in enumerate(self.spec.discs):
            for i in range(d.count):
                name = _expand_name(d.volume, i, d.count)
                if name in self.volume_names:
                    raise self.bad(f"discs[{di}].volume", f"volume {name} is defined twice")
                self.volume_names.add(name)
                pc = self.place(d.primary_cpu, f"discs[{di}].primary_cpu")
                bc = (pc + 1) % ncpu if d.backup_cpu == "next" else d.backup_cpu
                self.cpu_ok(bc, f"discs[{di}].backup_cpu")
                if bc == pc:
                    raise self.bad(
                        f"discs[{di}].backup_cpu", "backup CPU must differ from the primary CPU"
                    )
                vi = len(topo.volumes)
                topo.volumes.append(
                    {
                        "name": name,
                        "primary_cpu": pc,
                        "backup_cpu": bc,
                        "controller": d.controller,
                        "cache_bytes": int(d.cache_mb * 1024 * 1024),
                        "block_size": d.block_size,
                        "capacity_bytes": int(d.capacity_mb * 1024 * 1024),
                        "service_us": d.service_ms * 1000.0,
                        "dp2": len(procs),
                    }
                )
                procs.append(Proc(name, "$SYSTEM.SYSTEM.DP2", pc, 220, "dp2", name, backup_cpu=bc))
                topo.volumes[vi]["dp2_backup"] = len(procs)
                procs.append(Proc(name, "$SYSTEM.SYSTEM.DP2", bc, 220, "dp2-backup", name))
        if not topo.volumes:
            raise self.bad("discs", "at least one disc volume ($SYSTEM) is required")

    def system_processes(self) -> None:
        """$TMP, a TMF monitor and a MEASCTL per CPU, $CMON."""
        procs = self.procs
        procs.append(Proc("$TMP", "$SYSTEM.SYSTEM.TMP", 0, 210, "tmp-pair", backup_cpu=1))
        procs.append(Proc("$TMP", "$SYSTEM.SYSTEM.TMP", 1, 210, "tmp-backup"))
        for c in range(self.ncpu):  # TMF work of END TRANSACTION runs in the committing CPU
            procs.append(Proc("$TMF" + str(c), "$SYSTEM.SYSTEM.TMFMON", c, 210, "tmp"))
        for c in range(self.ncpu):
            procs.append(Proc("$MC" + str(c), "$SYSTEM.SYSTEM.MEASCTL", c, 200, "other"))
        procs.append(Proc("$CMON", "$SYSTEM.SYSTEM.CMON", 0, 190, "cmon"))
        self.topo.remotes = []

    def lines(self) -> None:
        """Lines, their terminals, line handlers (+ HLS for SNA)."""
        ncpu, topo, procs = self.ncpu, self.topo, self.procs
        for li, ls in enumerate(self.spec.lines):
            for i in range(ls.count):
                name = _expand_name(ls.name, i, ls.count)
                c = self.place(ls.cpu, f"lines[{li}].cpu")
                handler = len(procs)
                prog = "$SYSTEM.SYSTEM.SNAXLH" if ls.protocol == "SNA" else "$SYSTEM.SYSTEM.X25AM"
                procs.append(
                    Proc(name, prog, c, ls.priority, "linehandler", name, backup_cpu=(c + 1) % ncpu)
                )
                hls = -1
                if ls.protocol == "SNA":
                    hls = len(procs)
                    procs.append(
                        Proc(
                            "$H" + name[1:7], "$SYSTEM.SYSTEM.HLS", c, ls.priority - 10, "hls", name
                        )
                    )
                lidx = len(topo.lines)
                topo.lines.append(
                    {
                        "name": name,
                        "protocol": ls.protocol,
                        "speed_bps": ls.speed_bps,
                        "cpu": c,
                        "handler": handler,
                        "hls": hls,
                        "first_terminal": len(topo.terminals),
                        "n_terminals": ls.terminals,
                    }
                )
                for t in range(ls.terminals):
                    sub = f"#ATM{t + 1}" if ls.protocol == "SNA" else f"#T{t + 1}"
                    topo.terminals.append({"line": lidx, "line_name": name, "subdev_name": sub})

    def expand_links(self) -> None:
        """Remote systems and their Expand lines (one line handler each)."""
        topo, procs = self.topo, self.procs
        for ei, ex in enumerate(self.spec.expand):
            if ex.number == self.spec.system.number:
                raise self.bad(
                    f"expand[{ei}].number", "a remote system cannot have this node's number"
                )
            ri = len(topo.remotes)
            topo.remotes.append(
                {"name": ex.system, "number": ex.number, "fox": ex.fox, "netlines": []}
            )
            for k in range(ex.lines):
                c = self.place(ex.cpu, f"expand[{ei}].cpu")
                nm = f"${'F' if ex.fox else 'X'}{ex.system[1:5]}{k + 1}"[:8]
                h = len(procs)
                procs.append(Proc(nm, "$SYSTEM.SYSTEM.OLLH", c, 200, "netline", ex.system))
                topo.remotes[ri]["netlines"].append(len(topo.netlines))
                topo.netlines.append(
                    {
                        "name": nm,
                        "cpu": c,
                        "speed_bps": (1_000_000 if ex.fox else ex.speed_bps),
                        "remote": ri,
                        "handler": h,
                        "fox": ex.fox,
                    }
                )

    def files(self) -> None:
        """Files and their partitions (one per volume the file lives on)."""
        topo = self.topo
        vol_names = [v["name"] for v in topo.volumes]
        for fi, f in enumerate(self.spec.files):
            vols = vol_names if f.volumes == "all" else f.volumes
            for vj, v in enumerate(vols):
                if v not in vol_names:
                    raise self.bad(
                        f"files[{fi}].volumes[{vj}]", f"volume {v} is not defined under discs"
                    )
            parts = []
            for v in vols:
                parts.append(len(topo.partitions))
                topo.partitions.append(
                    {"file": fi, "volume": vol_names.index(v), "name": f"{v}.{f.name}"}
                )
            topo.files.append(
                {
                    "name": f.name,
                    "type": f.type,
                    "record_bytes": f.record_bytes,
                    "records": f.records,
                    "cached": f.cached,
                    "partitions": parts,
                }
            )

    def pathway(self, pw: PathwaySpec) -> None:
        """PATHMON, the TCPs, the server classes."""
        ncpu, procs = self.ncpu, self.procs
        self.cpu_ok(pw.pathmon_cpu, "pathway.pathmon_cpu")
        procs.append(
            Proc(
                "$PM",
                "$SYSTEM.SYSTEM.PATHMON",
                pw.pathmon_cpu,
                180,
                "pathmon",
                backup_cpu=(pw.pathmon_cpu + 1) % ncpu,
            )
        )
        for i in range(pw.tcps.count):
            c = (i % ncpu) if pw.tcps.cpu == "rr" else self.cpu_ok(pw.tcps.cpu, "pathway.tcps.cpu")
            procs.append(
                Proc(
                    f"$TCP{i + 1}",
                    pw.tcps.program,
                    c,
                    pw.tcps.priority,
                    "tcp",
                    backup_cpu=(c + 1) % ncpu,
                )
            )
        for si, sc in enumerate(pw.server_classes):
            self.server_class(si, sc)

    def server_class(self, si: int, sc: ServerClassSpec) -> None:
        """A server class: its static and dynamic servers, its user counters."""
        procs = self.procs
        where = f"pathway.server_classes[{si}]"
        cpus = list(range(self.ncpu)) if sc.cpus == "all" else sc.cpus
        for j, c in enumerate(cpus):
            self.cpu_ok(c, f"{where}.cpus[{j}]")
        opens = self.check_opens(sc.opens, where)
        n_static = sc.static + sc.static_per_cpu * len(cpus)
        if n_static == 0:
            raise self.bad(f"{where}.static", "a server class needs at least one static server")
        first = len(procs)
        for k in range(n_static + sc.dynamic):
            procs.append(
                Proc(
                    f"$S{si}{k:03d}"[:8] if k < 1000 else f"$S{si}{k}",
                    sc.program,
                    cpus[k % len(cpus)],
                    sc.priority,
                    "server",
                    sc.name,
                    dynamic=k >= n_static,
                    opens=opens,
                )
            )
        self.topo.server_classes.append(
            {
                "name": sc.name,
                "first": first,
                "n_static": n_static,
                "n_dynamic": sc.dynamic,
                "priority": sc.priority,
                "program": sc.program,
                "user_counters": self.user_counters(sc, where),
                "sql": self.sql_module(sc, where),
            }
        )

    def sql_module(self, sc: ServerClassSpec, where: str) -> dict[str, Any] | None:
        if sc.sql is None:
            return None
        file_names = {f.name for f in self.spec.files}
        seen: set[int] = set()
        for j, st in enumerate(sc.sql.statements):
            w = f"{where}.sql.statements[{j}]"
            if st.table not in file_names:
                raise self.bad(f"{w}.table", f"file {st.table} is not defined under files")
            if st.table not in sc.opens:
                raise self.bad(f"{w}.table", f"the server class does not open {st.table}")
            if st.index in seen:
                raise self.bad(f"{w}.index", f"statement index {st.index} is given twice")
            seen.add(st.index)
        return sc.sql.model_dump()

    def user_counters(self, sc: ServerClassSpec, where: str) -> list[dict[str, Any]]:
        seen_uc: set[str] = set()
        ucs = []
        for ui, uc in enumerate(sc.user_counters):
            try:
                what = uc.what()
            except ValueError as exc:
                raise self.bad(f"{where}.user_counters[{ui}]", str(exc)) from None
            if uc.name in seen_uc:
                raise self.bad(
                    f"{where}.user_counters[{ui}].name", f"counter {uc.name} is declared twice"
                )
            seen_uc.add(uc.name)
            ucs.append({"name": uc.name, "type": uc.type, "measures": what})
        return ucs

    def other_processes(self) -> None:
        """The node file's own processes: ``processes:`` and ``batch:`` (``cpu: each``: one
        per CPU)."""
        for key, lst in (("processes", self.spec.processes), ("batch", self.spec.batch)):
            for pi, ps in enumerate(lst):
                cpus = (
                    range(self.ncpu)
                    if ps.cpu == "each"
                    else [self.cpu_ok(ps.cpu, f"{key}[{pi}].cpu")]
                )
                opens = self.check_opens(ps.opens, f"{key}[{pi}]")
                for c in cpus:
                    nm = ps.name.replace("{i}", str(c)) if ps.cpu == "each" else ps.name
                    self.procs.append(
                        Proc(
                            nm,
                            ps.program,
                            c,
                            ps.priority,
                            "batch" if key == "batch" else ps.role,
                            opens=opens,
                        )
                    )

    def processh(self) -> None:
        """PROCESSH sampling (collector/node/extras.py): rate and code ranges."""
        ph = self.spec.processh
        for prog, lst in ph.programs.items():
            if not lst:
                raise self.bad(f"processh.programs.{prog}", "give at least one code range")
        if not ph.default:
            raise self.bad("processh.default", "give at least one code range")
        self.topo.processh = {
            "rate_hz": ph.rate_hz,
            "default": _ranges(ph.default),
            "programs": {k.upper(): _ranges(v) for k, v in ph.programs.items()},
        }

    def tapes(self) -> None:
        """Tape drives (collector/node/extras.py) and the batch processes that use them."""
        topo = self.topo
        proc_names = {p.name for p in self.procs}
        tape_names: set[str] = set()
        for ti, tp in enumerate(self.spec.tapes):
            for ui, u in enumerate(tp.users):
                if u.process not in proc_names:
                    raise self.bad(
                        f"tapes[{ti}].users[{ui}].process",
                        f"process {u.process} is not defined under batch: or processes:",
                    )
            for i in range(tp.count):
                name = _expand_name(tp.name, i, tp.count)
                if name in tape_names or name in self.volume_names:
                    raise self.bad(f"tapes[{ti}].name", f"device {name} is defined twice")
                tape_names.add(name)
                c = self.place(tp.cpu, f"tapes[{ti}].cpu")
                topo.tapes.append(
                    {
                        "name": name,
                        "cpu": c,
                        # the tape's I/O process (not modelled as a PROCESS): PIN 250, 251 … per CPU
                        "pin": tp.pin + i
                        if tp.pin is not None
                        else 250 + sum(1 for x in topo.tapes if x["cpu"] == c),
                        "block_bytes": tp.block_bytes,
                        "service_us": tp.overhead_ms * 1000.0
                        + tp.block_bytes / (tp.speed_kbs * 1024.0) * 1e6,
                        "users": {u.process: u.op for u in tp.users},
                    }
                )


    def later(self) -> None:
        """OSS and ServerNet (collector/node/later.py)."""
        if self.spec.oss is not None:
            names = {p.name for p in self.procs}
            for i, ns in enumerate(self.spec.oss.name_servers):
                if ns not in names:
                    raise self.bad(
                        f"oss.name_servers[{i}]", f"process {ns} is not defined under processes:"
                    )
            self.topo.oss = self.spec.oss.model_dump()
        if self.spec.servernet is not None:
            self.topo.servernet = self.spec.servernet.model_dump()


def _ranges(lst: list[CodeRangeSpec]) -> list[dict[str, Any]]:
    return [{"space": r.space, "range": r.range, "weight": r.weight} for r in lst]


def proc_class(priority: int) -> int:
    """Priority class used by the CPU scheduler: 0 system (>= 180), 1 application, 2 batch (< 120)."""
    return 0 if priority >= 180 else (1 if priority >= 120 else 2)


def ceil_div(a: float, b: float) -> int:
    return math.ceil(a / b)
