"""Anomalies injected into the simulated node on a schedule, with their ground truth.

A schedule is a list of anomalies, each a kind, a subject, a start, a duration and a
magnitude (docs/anomalies.md):

* ``runaway_process``: a process (``subject``) burns ``magnitude`` of a CPU (default 0.9) in
  5 ms bursts at priority ``priority`` (default 190: above the TCPs and servers);
* ``disc_slow``: every physical I/O of a volume (``subject``) takes ``magnitude`` times as long;
* ``line_down``: a line (``subject``) carries nothing: its transactions in flight are aborted
  and its terminals start none;
* ``dynamic_file_opens``: the servers open a scratch file for every transaction (the staged
  problem ``dynamic_file_opens`` of the workload file, switched on for the window);
* ``load_spike``: the terminals' transaction rate times ``magnitude``.

:class:`Injector` applies them to a :class:`collector.node.engine.Node` at step boundaries: an
anomaly is on for the steps that start in [start, start + duration). Everything it changes it
recomputes from the node's own values when the set of active anomalies changes, so a node
with no anomalies, or after the last one ends, runs exactly as without them.
:func:`generate` makes a seeded schedule; :func:`truth` gives what an analysis should find.
"""

from __future__ import annotations

import datetime as dt
import json
import zoneinfo
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from collector.node.topology import NodeFileError, Topology, proc_class
from collector.node.workload import CustomStageSpec, ShapeSpec, WorkloadSpec
from core.catalog import load_catalog

if TYPE_CHECKING:
    from collector.node.engine import Node

__all__ = [
    "INDICATORS",
    "KINDS",
    "Anomaly",
    "Injector",
    "Schedule",
    "Score",
    "generate",
    "load_schedule",
    "matches",
    "per_day",
    "score",
    "truth",
    "write_truth",
]

Kind = Literal["runaway_process", "disc_slow", "line_down", "dynamic_file_opens", "load_spike"]
KINDS: tuple[Kind, ...] = get_args(Kind)
# the health-verdict indicators (core/reports.py `health-verdict`) each kind should turn on
INDICATORS: dict[str, tuple[str, ...]] = {
    "runaway_process": ("busy_high_priority_process", "cpu_over_utilised", "cpu_load_balance"),
    "disc_slow": ("disc_queuing", "disc_over_utilised"),
    "line_down": (),
    "dynamic_file_opens": ("dynamic_file_opens",),
    "load_spike": ("cpu_queuing", "cpu_over_utilised", "line_over_utilised"),
}
DEFAULT_MAGNITUDE = {"runaway_process": 0.9, "disc_slow": 3.0, "line_down": 0.0,
                     "dynamic_file_opens": 1.0, "load_spike": 1.6}  # fmt: skip
RUNAWAY_BURST_MS = 5.0  # CPU per burst of a runaway process (TXP ms, like a polling loop)
MAX_SCHEDULE_BYTES = 1 << 20


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Anomaly(_M):
    kind: Kind
    subject: str | None = None  # process, volume, line or server class; None: the node's own
    start: dt.datetime  # without an offset: the node's local time
    minutes: float = Field(gt=0, le=7 * 24 * 60)
    magnitude: float | None = Field(default=None, ge=0)
    priority: int | None = Field(default=None, ge=1, le=255)  # runaway_process

    @property
    def size(self) -> float:
        return DEFAULT_MAGNITUDE[self.kind] if self.magnitude is None else self.magnitude


class Schedule(_M):
    anomalies: list[Anomaly] = Field(default_factory=list)


def load_schedule(path: str | Path) -> Schedule:
    """A schedule file (YAML or JSON: ``anomalies: [...]``); NodeFileError names what is wrong."""
    p = Path(path)
    try:
        with p.open("rb") as f:
            data = f.read(MAX_SCHEDULE_BYTES + 1)
    except OSError as e:
        raise NodeFileError(p, "", f"cannot read the anomaly schedule: {e.strerror}") from None
    if len(data) > MAX_SCHEDULE_BYTES:
        raise NodeFileError(p, "", f"an anomaly schedule is at most {MAX_SCHEDULE_BYTES} bytes")
    try:
        raw = yaml.safe_load(data.decode("utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise NodeFileError(p, "", f"not valid YAML or JSON: {e}") from None
    try:
        return Schedule.model_validate(raw if raw is not None else {})
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        raise NodeFileError(p, where, err["msg"].removeprefix("Value error, ")) from None


def _utc_us(at: dt.datetime, tz: dt.tzinfo) -> int:
    a = at if at.tzinfo is not None else at.replace(tzinfo=tz)
    return int(a.timestamp()) * 1_000_000 + a.microsecond


def window_us(a: Anomaly, tz: dt.tzinfo) -> tuple[int, int]:
    """[from, to) of an anomaly in µs since the epoch."""
    t0 = _utc_us(a.start, tz)
    return t0, t0 + int(round(a.minutes * 60_000_000))


# ------------------------------------------------------------------------- ground truth
def _subject_check(a: Anomaly, topo: Topology) -> str:
    """The anomaly's subject, checked against the node (NodeFileError: what to write)."""
    where = f"anomaly {a.kind} at {a.start.isoformat()}"
    if a.kind in ("load_spike",):
        return topo.system_name
    if a.kind == "dynamic_file_opens":
        names = [sc["name"] for sc in topo.server_classes]
        if not names:
            raise NodeFileError(topo.source, where, "the node has no PATHWAY server classes")
        if a.subject is None:
            return str(names[0])
        if a.subject not in names:
            raise NodeFileError(topo.source, where,
                                f"server class {a.subject} is not one of {', '.join(names)}")
        return a.subject
    options = {
        "runaway_process": [p.name for p in topo.processes if not p.dynamic],
        "disc_slow": [v["name"] for v in topo.volumes],
        "line_down": [ln["name"] for ln in topo.lines],
    }[a.kind]
    if a.subject is None or a.subject not in options:
        what = {"runaway_process": "process", "disc_slow": "volume", "line_down": "line"}[a.kind]
        shown = ", ".join(options[:12]) + (" …" if len(options) > 12 else "")
        raise NodeFileError(topo.source, where,
                            f"subject {a.subject!r} is not a {what} of {topo.system_name} ({shown})")
    return a.subject


def truth(schedule: Schedule | Sequence[Anomaly], topo: Topology) -> list[dict[str, Any]]:
    """What an analysis should find, one record per anomaly: kind, entity and subject as the
    exceptions report names them, from/to (UTC, ISO), magnitude, the (entity, subject) pairs
    an exception may name to be explained by it ("*": any subject), the indicators it turns on."""
    tz = zoneinfo.ZoneInfo(topo.time_zone)
    out = []
    for a in _items(schedule):
        subject = _subject_check(a, topo)
        t0, t1 = window_us(a, tz)
        targets: list[list[str]]
        if a.kind == "runaway_process":
            p = next(p for p in topo.processes if p.name == subject)
            entity, targets = "process", [["process", subject], ["cpu", str(p.cpu)]]
        elif a.kind == "disc_slow":
            entity, targets = "disc", [["disc", subject]]
        elif a.kind == "line_down":
            ln = next(ln for ln in topo.lines if ln["name"] == subject)
            # its terminals, its line handler, and the CPU of both and of the TCPs they feed
            entity, targets = "line", [["line", subject], ["terminal", f"{subject}*"],
                                       ["process", str(topo.processes[ln["handler"]].name)],
                                       ["cpu", str(ln["cpu"])]]
        elif a.kind == "dynamic_file_opens":
            servers = [p.name for p in topo.processes if p.role == "server" and p.group == subject]
            entity, targets = "process", [["process", s] for s in servers]
        else:
            entity = "system"
            # the whole node's load: any subject of any entity type with tiers, and terminals
            targets = [[e, "*"] for e in dict.fromkeys([*load_catalog().tiered_names, "terminal"])]
        out.append({
            "kind": a.kind,
            "entity": entity,
            "subject": subject,
            "from": _iso(t0),
            "to": _iso(t1),
            "magnitude": a.size,
            "targets": targets,
            "indicators": list(INDICATORS[a.kind]),
        })
    return out


def _iso(us: int) -> str:
    return dt.datetime.fromtimestamp(us / 1e6, tz=dt.UTC).isoformat()


def write_truth(records: list[dict[str, Any]], path: str | Path) -> None:
    Path(path).write_text(json.dumps({"anomalies": records}, indent=1) + "\n", encoding="utf-8")


def _items(schedule: Schedule | Sequence[Anomaly]) -> list[Anomaly]:
    return list(schedule.anomalies if isinstance(schedule, Schedule) else schedule)


# ---------------------------------------------------------------------------- generator
# local hours an anomaly of each kind starts in: the load spike in the shoulders of the day
# (a spike at the peak saturates the CPUs and its backlog outlives the window), the rest in
# business hours
_START_HOURS = {"load_spike": (6, 7, 17, 18, 19)}
_BUSINESS = tuple(range(8, 17))


def generate(topo: Topology, first_day: dt.date, days: int = 7, count: int = 12, seed: int = 1,
             batch_hours: dict[str, list[tuple[int, int, frozenset[int] | None]]] | None = None,
             ) -> Schedule:
    """A seeded schedule of ``count`` anomalies over ``days`` local days from ``first_day``:
    the kinds in turn (each at least once when count ≥ 5), whole-hour starts, 1 to 3 hours
    long, never two at once; subjects drawn from the node (runaway: a batch or user process
    whose own runs, ``batch_hours``, do not cover the window; a line, a data volume)."""
    if count < 1 or days < 1:
        raise ValueError("count and days must be at least 1")
    rng = np.random.default_rng(seed)
    # the node file's own processes (batch: and processes:), not the generated MEASCTLs
    user = [p for p in topo.processes if p.role in ("batch", "other") and not p.dynamic
            and p.program != "$SYSTEM.SYSTEM.MEASCTL"]
    vols = [v["name"] for v in topo.volumes if v["name"] not in ("$SYSTEM",)]
    lines = [ln["name"] for ln in topo.lines]
    taken: list[tuple[int, int]] = []  # (day, hour) slots used, with a free hour after each
    out: list[Anomaly] = []
    kinds = [k for k in KINDS if (k != "line_down" or lines) and (k != "runaway_process" or user)]
    for i in range(count):
        kind = kinds[i % len(kinds)]
        for _ in range(200):
            day = int(rng.integers(0, days))
            hour = int(rng.choice(_START_HOURS.get(kind, _BUSINESS)))
            hours = int(rng.integers(1, 4))
            span = set(range(hour, hour + hours + 1))
            if any(d == day and h in span for d, h in taken):
                continue
            date = first_day + dt.timedelta(days=day)
            subject, priority, mag = _draw(kind, rng, user, vols, lines, date, hour, hours,
                                           batch_hours or {})
            if kind == "runaway_process" and subject is None:
                continue
            break
        else:
            raise ValueError(f"no room for {count} anomalies in {days} days: ask for fewer")
        taken += [(day, h) for h in range(hour - 1, hour + hours + 1)]
        out.append(Anomaly(kind=kind, subject=subject, start=dt.datetime.combine(date, dt.time(hour)),
                           minutes=60.0 * hours, magnitude=mag, priority=priority))
    out.sort(key=lambda a: a.start)
    return Schedule(anomalies=out)


def _draw(kind: Kind, rng: np.random.Generator, user: list, vols: list[str], lines: list[str],
          date: dt.date, hour: int, hours: int, batch_hours: dict) -> tuple[str | None, int | None, float | None]:
    if kind == "runaway_process":
        idle = [p for p in user if not _runs(batch_hours.get(p.name, []), date, hour, hours)]
        if not idle:
            return None, None, None
        p = idle[int(rng.integers(0, len(idle)))]
        return p.name, (190 if p.priority < 190 else None), round(float(rng.uniform(0.7, 0.95)), 2)
    if kind == "disc_slow":
        return vols[int(rng.integers(0, len(vols)))], None, float(rng.choice([3.0, 4.0, 5.0]))
    if kind == "line_down":
        return lines[int(rng.integers(0, len(lines)))], None, None
    if kind == "load_spike":
        return None, None, float(rng.choice([1.5, 1.75, 2.0]))
    return None, None, None


def _runs(spans: list[tuple[int, int, frozenset[int] | None]], date: dt.date, hour: int,
          hours: int) -> bool:
    """Does a batch run (local hours [a, b), weekdays it starts on) touch date's hours?"""
    for a, b, days in spans:
        for h in range(hour, hour + hours):
            inside = (a <= h < b) if a < b else (h >= a or h < b)
            started = date.weekday() - (1 if (a > b and h < b) else 0)
            if inside and (days is None or started % 7 in days):
                return True
    return False


def batch_hours(workloads: Sequence[WorkloadSpec]) -> dict[str, list[tuple[int, int, frozenset[int] | None]]]:
    """Per batch process: the local hours and weekdays its workloads run it."""
    from collector.node.workload import WEEKDAYS

    out: dict[str, list[tuple[int, int, frozenset[int] | None]]] = {}
    for w in workloads:
        for b in w.batch:
            out.setdefault(b.process, []).append(
                (b.hours[0], b.hours[1], frozenset(WEEKDAYS.index(d) for d in b.days)))
    return out


# ----------------------------------------------------------------------------- injector
def runaway_workload(process: str, burst_ms: float = RUNAWAY_BURST_MS) -> WorkloadSpec:
    """The stream of a runaway process: CPU bursts in the process itself, off until its
    window (the injector sets its rate), flat over the day and the week."""
    return WorkloadSpec(
        name=f"anomaly:runaway:{process}",
        kind="custom",
        tps=0.0,
        terminals="none",
        process=process,
        shape=ShapeSpec(profile=[1.0] * 24, weekday=[1.0] * 7, growth_per_month=0.0),
        stages=[CustomStageSpec(kind="cpu", role="self", ms=burst_ms, dist="const")],
    )


class Injector:
    """Applies a schedule to a node (engine hooks: :meth:`attach` before the node compiles its
    workloads, :meth:`step` at the start of every step)."""

    def __init__(self, node: Node, anomalies: list[Anomaly]) -> None:
        self.node = node
        self.items = anomalies
        topo = node.topo
        tz = zoneinfo.ZoneInfo(topo.time_zone)
        self.subjects = [_subject_check(a, topo) for a in anomalies]
        self.windows = [window_us(a, tz) for a in anomalies]
        self.active: frozenset[int] = frozenset()
        self.applied: list[dict[str, Any]] = []  # (index, on, at µs) as they happened
        self._base: dict[str, Any] | None = None

    @classmethod
    def attach(cls, node: Node, anomalies: Schedule | Sequence[Anomaly] | None) -> Injector | None:
        """The injector of a node (None without anomalies); adds the runaway processes' streams
        to ``node.workloads`` (call before the node compiles them)."""
        items = _items(anomalies) if anomalies is not None else []
        if not items:
            return None
        inj = cls(node, items)
        runaway = sorted({s for a, s in zip(items, inj.subjects, strict=True) if a.kind == "runaway_process"})
        node.workloads = list(node.workloads) + [runaway_workload(p) for p in runaway]
        return inj

    def _baseline(self) -> dict[str, Any]:
        """The node's own values of everything an anomaly changes (taken at the first step)."""
        n = self.node
        P = n.tables["process"]
        return {
            "tps": [s.tps for s in n.streams],
            "terms": list(n.stream_terms),
            "vol_service": n.vol_service.copy(),
            "dyn_opens": n.dyn_opens,
            "prio": P.ids["priority"][: n.p_class.size].copy(),
            "cls": n.p_class.copy(),
        }

    def step(self, t0: int) -> None:
        """At the start of the step at t0: switch anomalies on and off."""
        now = frozenset(i for i, (a, b) in enumerate(self.windows) if a <= t0 < b)
        if now == self.active:
            return
        if self._base is None:
            self._base = self._baseline()
        for i in sorted(now ^ self.active):
            self.applied.append({"index": i, "on": i in now, "at_us": t0})
        self.active = now
        self._apply(t0)

    def _apply(self, t0: int) -> None:
        n, base = self.node, self._base
        assert base is not None
        on = [(self.items[i], self.subjects[i]) for i in sorted(self.active)]
        names = [v["name"] for v in n.topo.volumes]
        # discs: service time x magnitude (in place: the kernel's Devices hold this array)
        n.vol_service[:] = base["vol_service"]
        for a, s in on:
            if a.kind == "disc_slow":
                n.vol_service[names.index(s)] *= a.size
        # dynamic file opens
        n.dyn_opens = base["dyn_opens"] or any(a.kind == "dynamic_file_opens" for a, _ in on)
        self._streams(on, base)
        self._runaway(on, base)
        down = [s for a, s in on if a.kind == "line_down"]
        if down:
            self._abort_lines(down)

    def _streams(self, on: list[tuple[Anomaly, str]], base: dict[str, Any]) -> None:
        """Terminal streams: rate x spikes; the terminals of lines that are down start none."""
        n = self.node
        spike = float(np.prod([a.size for a, _ in on if a.kind == "load_spike"] or [1.0]))
        down = {s for a, s in on if a.kind == "line_down"}
        line_of = {ln["name"]: i for i, ln in enumerate(n.topo.lines)}
        down_idx = np.array([line_of[s] for s in down], dtype=np.int64)
        for si, s in enumerate(n.streams):
            if s.name.startswith("anomaly:"):
                continue
            terms = base["terms"][si]
            s.tps = base["tps"][si]
            n.stream_terms[si] = terms
            if not s.source.startswith("terminals:"):
                continue
            s.tps = base["tps"][si] * spike if spike != 1.0 else base["tps"][si]
            if down_idx.size and terms.size:
                keep = ~np.isin(n.term_line[terms], down_idx)
                if not keep.all():
                    n.stream_terms[si] = terms[keep]
                    s.tps = s.tps * float(keep.sum()) / terms.size
                    if not keep.any():
                        n.stream_terms[si] = terms[:0]

    def _runaway(self, on: list[tuple[Anomaly, str]], base: dict[str, Any]) -> None:
        n = self.node
        P = n.tables["process"]
        m = base["prio"].size
        P.ids["priority"][:m] = base["prio"]
        n.p_class[:m] = base["cls"]
        busy: dict[str, float] = {}
        for a, s in on:
            if a.kind == "runaway_process":
                busy[s] = min(1.0, busy.get(s, 0.0) + a.size)
                slot = n._proc_by_name(s)
                prio = 190 if a.priority is None else a.priority
                prio = max(prio, int(base["prio"][slot]))
                P.ids["priority"][slot] = prio
                n.p_class[slot] = proc_class(prio)
        for st in n.streams:
            if st.name.startswith("anomaly:runaway:"):
                proc = st.name.removeprefix("anomaly:runaway:")
                st.tps = busy.get(proc, 0.0) / (RUNAWAY_BURST_MS / 1000.0 * n.topo.cpu_factor)

    def _abort_lines(self, down: list[str]) -> None:
        """A line that goes down loses its transactions in flight (counted as aborted)."""
        n = self.node
        line_of = {ln["name"]: i for i, ln in enumerate(n.topo.lines)}
        idx = np.array([line_of[s] for s in down], dtype=np.int64)
        lines = n.tx["line"]
        hit = (lines >= 0) & np.isin(lines, idx)
        if hit.any():
            n.stats.aborted += int(hit.sum())
            n._keep(~hit)


# ------------------------------------------------------------------------------ scoring
HOUR = dt.timedelta(hours=1)
SLACK = dt.timedelta(hours=1)  # an exception this close to a window is explained by it


def _when(v: Any) -> dt.datetime:
    return v if isinstance(v, dt.datetime) else dt.datetime.fromisoformat(str(v))


def _names(target: list[str], entity: str, subject: str) -> bool:
    e, s = target
    if e != entity:
        return False
    return s == "*" or s == subject or (s.endswith("*") and subject.startswith(s[:-1]))


def matches(record: dict[str, Any], row: dict[str, Any], slack: dt.timedelta = dt.timedelta(0)) -> bool:
    """Does an exception row (hour_at: the hour's start; entity; subject) name one of the
    record's targets in an hour that overlaps its window widened by ``slack``?"""
    lo, hi = _when(record["from"]) - slack, _when(record["to"]) + slack
    at = _when(row["hour_at"])
    if not (at < hi and at + HOUR > lo):
        return False
    return any(_names(t, str(row["entity"]), str(row["subject"])) for t in record["targets"])


@dataclass
class Score:
    anomalies: int
    by_exceptions: int  # anomalies an exception (minor or major) names in its window
    by_indicators: int  # anomalies one of whose indicators is true on a day of the window
    recalled: int  # by either
    exceptions: int  # exceptions over the week
    explained: int  # of them, named by an anomaly's targets within SLACK of its window
    indicators_true: int  # true indicator-days
    indicators_explained: int  # of them, an anomaly that day maps to the indicator
    missed: list[str]  # "kind subject from" of anomalies not recalled

    @property
    def recall(self) -> float:
        return self.recalled / self.anomalies if self.anomalies else 1.0

    @property
    def precision(self) -> float:
        return self.explained / self.exceptions if self.exceptions else 1.0


def _days(record: dict[str, Any], tz: dt.tzinfo) -> set[dt.date]:
    lo, hi = _when(record["from"]).astimezone(tz), (_when(record["to"]) - dt.timedelta(microseconds=1)).astimezone(tz)
    return {lo.date() + dt.timedelta(days=i) for i in range((hi.date() - lo.date()).days + 1)}


def score(records: list[dict[str, Any]], exceptions: list[dict[str, Any]],
          verdicts: list[dict[str, Any]], time_zone: str) -> Score:
    """Precision and recall of an analysis against the truth (:func:`truth` records):
    ``exceptions`` rows as the `exceptions` report gives them (hour_at, entity, subject, …),
    ``verdicts`` rows as `health-verdict` gives them (day, indicator, verdict)."""
    tz = zoneinfo.ZoneInfo(time_zone)
    true_on: dict[dt.date, set[str]] = {}
    for v in verdicts:
        if v["verdict"]:
            day = v["day"] if isinstance(v["day"], dt.date) else dt.date.fromisoformat(str(v["day"]))
            true_on.setdefault(day, set()).add(str(v["indicator"]))
    by_exc = by_ind = recalled = 0
    missed = []
    expected: dict[dt.date, set[str]] = {}
    for r in records:
        days = _days(r, tz)
        for d in days:
            expected.setdefault(d, set()).update(r["indicators"])
        e = any(matches(r, row) for row in exceptions)
        i = any(set(r["indicators"]) & true_on.get(d, set()) for d in days)
        by_exc += e
        by_ind += i
        recalled += e or i
        if not (e or i):
            missed.append(f"{r['kind']} {r['subject']} {r['from']}")
    explained = sum(any(matches(r, row, SLACK) for r in records) for row in exceptions)
    ind_true = sum(len(s) for s in true_on.values())
    ind_expl = sum(len(s & expected.get(d, set())) for d, s in true_on.items())
    return Score(len(records), by_exc, by_ind, recalled, len(exceptions), explained, ind_true,
                 ind_expl, missed)


def per_day(rows: list[dict[str, Any]], time_zone: str, severity: str = "major") -> dict[dt.date, int]:
    """Exceptions of a severity per local day."""
    tz = zoneinfo.ZoneInfo(time_zone)
    out: dict[dt.date, int] = {}
    for row in rows:
        if row["severity"] == severity:
            d = _when(row["hour_at"]).astimezone(tz).date()
            out[d] = out.get(d, 0) + 1
    return out
