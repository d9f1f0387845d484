"""The node's workloads compiled for its kernel (:mod:`collector.node.des`).

:func:`build_streams` turns the workloads into arrival streams and transaction types;
:func:`compile_types` spells the types out into the kernel's tables, once per node: one entry
per stage (every visit of every type, one type after the other: :class:`des.Stages`), per type
(:class:`des.Types`) and per effect row (:class:`des.Effects`: which counter of which entity a
visit bumps, by how much, weighted by what), in the compact counter layout the kernel
accumulates into. The engine adds the node's devices (:class:`des.Devices`) and keeps the
result for its life.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from collector.node import des
from collector.node import workload as wl
from collector.node.hooks import EntityTable
from collector.node.topology import Topology
from collector.node.workload import Stage, Stream, TxnType, WorkloadSpec
from core.catalog import KIND_MAXQ

__all__ = [
    "ENTITIES",
    "KIND_CODE",
    "MODE",
    "R",
    "ROLES",
    "S",
    "SELECTORS",
    "Compiled",
    "build_streams",
    "compile_types",
    "fold_never",
]

# names of the kernel's codes (des.K_*, des.R_*, des.S_*, des.M_*)
KIND_CODE = {
    "cpu": des.K_CPU,
    "disc": des.K_DISC,
    "line_in": des.K_LIN,
    "line_out": des.K_LOUT,
    "net_out": des.K_NOUT,
    "net_in": des.K_NIN,
    "delay": des.K_DELAY,
}
ROLES = [
    "none",
    "tcp",
    "server",
    "linehandler",
    "hls",
    "tmp",
    "pathmon",
    "cmon",
    "dp2",
    "self",
    "other",
]
R = {r: i for i, r in enumerate(ROLES)}
SELECTORS = [
    "proc",
    "cpu",
    "opener",
    "dp2cpu",
    "disc",
    "file",
    "discopen",
    "terminal",
    "line",
    "netline",
    "system",
    "cluster",
    "tmf",
    "tcp",
    "server",
    "linehandler",
    "hls",
    "tcpcpu",
    "x25line",
]
S = {s: i for i, s in enumerate(SELECTORS)}
MODE = {
    "done": des.M_DONE,
    "skipped": des.M_SKIP,
    "svc": des.M_SVC,
    "sys": des.M_SYS,
    "resp": des.M_RESP,
}
# the entities the kernel bumps, in the order of its entity layout
ENTITIES = (
    "cpu",
    "process",
    "file",
    "discopen",
    "disc",
    "line",
    "netline",
    "system",
    "cluster",
    "terminal",
    "tmf",
)
DIST_CODE = {"exp": 0, "const": 1, "uniform": 2, "uniform0": 3}


# ------------------------------------------------------------------------------- streams
def build_streams(
    workloads: list[WorkloadSpec], topo: Topology
) -> tuple[list[Stream], list[TxnType], set[int]]:
    """The arrival streams of the workloads (each workload's own, its batch jobs', its polling
    process's), all their transaction types in stream order, and the indices of the types
    whose CPU demands are per processor already (not scaled by the processor factor)."""
    streams: list[Stream] = []
    types: list[TxnType] = []
    scaled_types: set[int] = set()
    for w in workloads:
        if w.kind == "debitcredit":
            tt = wl.build_debitcredit(w)
            src = f"terminals:{w.terminals}"
        elif w.kind == "rds":
            tt, scaled = wl.build_rds(w, topo.cpu_type)
            if scaled:
                scaled_types.update(range(len(types), len(types) + len(tt)))
            src = f"terminals:{w.terminals}"
        else:
            tt = wl.build_custom(w)
            src = f"process:{w.process}" if w.process else f"terminals:{w.terminals}"
        streams.append(
            Stream(w.name, tt, w.tps, src, w.server_class, w.shape.profile, w.shape.weekday)
        )
        types += tt
        for b in w.batch:
            bt = wl.batch_types(b)
            streams.append(
                Stream(
                    f"batch:{b.process}",
                    [bt],
                    b.blocks_per_s,
                    f"process:{b.process}",
                    None,
                    [1.0] * 24,
                    [1.0] * 7,
                    hours=b.hours,
                    days=frozenset(wl.WEEKDAYS.index(d) for d in b.days),
                )
            )
            types.append(bt)
        pp = w.problems.polling_process
        if pp is not None:
            pt = wl.polling_type()
            streams.append(
                Stream(
                    f"polling:{pp.process}",
                    [pt],
                    pp.busy / 0.005 / topo.cpu_factor,
                    f"process:{pp.process}",
                    None,
                    [1.0] * 24,
                    [1.0] * 7,
                )
            )
            types.append(pt)
    return streams, types, scaled_types


def fold_never(stages: list[Stage]) -> list[Stage]:
    """Drop visits that never happen (probability 0, e.g. reads of a cached file): their
    "skipped" effects (cache hits) move to the preceding visit, which always happens."""
    out: list[Stage] = []
    for s in stages:
        if s.prob == 0.0 and "remote" not in s.flags and out and out[-1].prob == 1.0:
            prev = out[-1]
            moved = tuple((e, sel, c, a, "done") for e, sel, c, a, w in s.effects if w == "skipped")
            if prev.io != s.io:
                moved = tuple(
                    x for x in moved if x[1] not in ("disc", "discopen", "file", "dp2cpu")
                )
            out[-1] = dataclasses.replace(prev, effects=prev.effects + moved)
            continue
        out.append(s)
    return out


# ------------------------------------------------------------------------ compiled types
@dataclass
class Compiled:
    """The transaction types as the kernel and the engine use them."""

    types: list[TxnType]  # their stages with the visits that never happen folded
    typ: np.ndarray  # (types x des.T_*): first stage, stages, flagged stages (-1 none)
    max_len: int  # most stages of a type, + 1
    max_io: int  # most I/O groups of a type (at least 1)
    type_iofile: np.ndarray  # (types x I/O groups): file index, -1 none
    remote_p: np.ndarray  # per type: probability it is a remote (Expand) transaction
    ucols: list[np.ndarray]  # per entity (ENTITIES): the counters some effect row bumps
    ent_nu: np.ndarray  # per entity: how many (the kernel's compact layout)
    kind_of: dict[str, np.ndarray]  # per entity: the kind code of each counter
    maxq_of: dict[str, list[tuple[int, int]]]  # per entity: (max-queue counter, its queue)
    peak_cols: dict[str, int]  # queue counters whose peaks come from the stations' queues
    stages: des.Stages
    ktypes: des.Types
    effects: des.Effects


@dataclass
class _StageCols:
    """One entry per stage of all types."""

    first: list[int]  # per type: its first stage
    count: list[int]  # its number of stages
    kind: np.ndarray
    role: np.ndarray
    anchor: np.ndarray
    mean: np.ndarray
    dist: np.ndarray
    prob: np.ndarray
    remote: np.ndarray
    io: np.ndarray
    nbytes: np.ndarray
    flag: dict[str, np.ndarray]  # "begin", "commit", "reply", "read_done": the stage has it


def compile_types(
    types: list[TxnType],
    scaled_types: set[int],
    topo: Topology,
    tables: dict[str, EntityTable],
    file_index: dict[str, int],
) -> Compiled:
    """Compile the transaction types (folds their never-happening visits in place)."""
    for tt in types:
        tt.stages = fold_never(tt.stages)
    stages = [s for tt in types for s in tt.stages]
    sc = _stage_columns(types, stages, scaled_types, topo.cpu_factor)
    typ = _type_table(sc)
    type_iofile, max_io = _io_files(types, file_index, topo)
    rows = _effect_rows(stages, tables)
    g_of = rows[:, 0].astype(np.int64)
    ef_ent = rows[:, 1].astype(np.int64)
    ef_sel = rows[:, 2].astype(np.int64)
    ef_tab, amt, order = _effect_table(rows)
    ucols = _compact_layout(ef_tab)
    grp = _effect_groups(g_of[order], ef_sel[order], ef_ent[order], len(stages))
    if not np.isfinite(amt).all():
        raise ValueError("effect amounts must be finite numbers")
    maxq_of = _maxq(tables)
    q_sel, q_ent, q_r0, q_r1, g_q0, g_q1 = grp
    return Compiled(
        types=types,
        typ=typ,
        max_len=int(max(sc.count)) + 1,
        max_io=max_io,
        type_iofile=type_iofile,
        remote_p=_remote_p(types),
        ucols=ucols,
        ent_nu=np.array([u.size for u in ucols], dtype=np.int64),
        kind_of={e: tables[e].entity.kinds for e in ENTITIES},
        maxq_of=maxq_of,
        peak_cols=_peak_cols(tables, maxq_of),
        stages=des.Stages(
            kind=_i64(sc.kind),
            io=_i64(sc.io),
            role=_i64(sc.role),
            anchor=_i64(sc.anchor),
            dist=_i64(sc.dist),
            remote=_i64(sc.remote),
            flags=_stage_flags(sc, typ),
            mean=_f64(sc.mean),
            prob=_f64(sc.prob),
            nbytes=_f64(sc.nbytes),
            q0=g_q0,
            q1=g_q1,
        ),
        ktypes=des.Types(first=_i64(typ[:, des.T_FIRST]), n=_i64(typ[:, des.T_N])),
        effects=des.Effects(
            sel=q_sel,
            ent=q_ent,
            r0=q_r0,
            r1=q_r1,
            # (counters, modes and level flags unsigned: the kernel indexes with them)
            ctr=np.ascontiguousarray(ef_tab[:, des.E_CTR], dtype=np.uint64),
            mode=np.ascontiguousarray(ef_tab[:, des.E_MODE], dtype=np.uint64),
            lev=np.ascontiguousarray(ef_tab[:, des.E_LEV], dtype=np.uint64),
            amt=amt,
        ),
    )


def _i64(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.int64)


def _f64(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=float)


def _stage_columns(
    types: list[TxnType], st: list[Stage], scaled_types: set[int], cpu_factor: float
) -> _StageCols:
    """The stages' columns. Mean demands: CPU and delay ms -> µs (CPU scaled by the processor
    factor unless the type's demands are per processor), disc: multiple of the volume's mean
    physical I/O time; lines: computed from bytes and line speed by the kernel."""
    count = [len(tt.stages) for tt in types]
    first = [sum(count[:ti]) for ti in range(len(types))]
    g_type = np.repeat(np.arange(len(types)), count)
    kind = np.array([KIND_CODE[s.kind] for s in st], dtype=np.int64)
    role, anchor = [], []
    for s in st:
        if s.role.startswith("none@"):
            role.append(R["none"])
            anchor.append(R[s.role[5:]])
        else:
            role.append(R[s.role] if s.role else R["none"])
            anchor.append(R[s.role] if s.role else R["none"])
    factor = np.array([1.0 if g_type[g] in scaled_types else cpu_factor for g in range(len(st))])
    mean = np.array([s.ms * (1.0 if s.kind == "disc" else 1000.0) for s in st])
    mean *= np.where(kind == des.K_CPU, factor, 1.0)
    return _StageCols(
        first=first,
        count=count,
        kind=kind,
        role=np.array(role, dtype=np.int64),
        anchor=np.array(anchor, dtype=np.int64),
        mean=mean,
        dist=np.array([DIST_CODE[s.dist] for s in st]),
        prob=np.array([s.prob for s in st]),
        remote=np.array(["remote" in s.flags for s in st]),
        io=np.array([s.io for s in st], dtype=np.int64),
        nbytes=np.array([s.bytes for s in st], dtype=float),
        flag={
            f: np.array([f in s.flags for s in st])
            for f in ("begin", "commit", "reply", "read_done")
        },
    )


def _type_table(sc: _StageCols) -> np.ndarray:
    """(types x des.T_*): first stage, stages, and the stages (counted from the type's first,
    -1 none) that end the read, reply, BEGIN, commit, and the first and last server visits."""
    flag = {f: _first_flag(sc, sc.flag[f]) for f in ("read_done", "reply", "begin", "commit")}
    srv_first, srv_last = _server_visits(sc)
    return np.stack(
        [
            np.array(sc.first, dtype=np.int64),
            np.array(sc.count, dtype=np.int64),
            flag["read_done"],
            flag["reply"],
            flag["begin"],
            flag["commit"],
            srv_first,
            srv_last,
        ],
        axis=1,
    ).astype(np.int64)


def _first_flag(sc: _StageCols, arr: np.ndarray) -> np.ndarray:
    """Per type: its first stage (counted from the type's first) where ``arr``, -1 none."""
    out = np.full(len(sc.first), -1, dtype=np.int64)
    for ti, (f0, n) in enumerate(zip(sc.first, sc.count, strict=True)):
        hits = np.flatnonzero(arr[f0 : f0 + n])
        if hits.size:
            out[ti] = hits[0]
    return out


def _server_visits(sc: _StageCols) -> tuple[np.ndarray, np.ndarray]:
    """Per type: its first and last stage in a server process ($RECEIVE span), -1 none."""
    srv_role = sc.role == R["server"]
    srv_first = np.full(len(sc.first), -1, dtype=np.int64)
    srv_last = np.full(len(sc.first), -1, dtype=np.int64)
    for ti, (f0, n) in enumerate(zip(sc.first, sc.count, strict=True)):
        hits = np.flatnonzero(srv_role[f0 : f0 + n])
        if hits.size:
            srv_first[ti], srv_last[ti] = hits[0], hits[-1]
    return srv_first, srv_last


def _stage_flags(sc: _StageCols, typ: np.ndarray) -> np.ndarray:
    """Per stage its des.SF_* flags, from the type's flagged stages."""
    srv_role = sc.role == R["server"]
    sflags = np.zeros(len(sc.kind), dtype=np.int64)
    for ti, (f0, n_t) in enumerate(zip(sc.first, sc.count, strict=True)):
        for bit, k in (
            (des.SF_RD, typ[ti, des.T_RD]),
            (des.SF_RP, typ[ti, des.T_RP] - 1),
            (des.SF_BG, typ[ti, des.T_BG]),
            (des.SF_CM, typ[ti, des.T_CM]),
            (des.SF_SRV_LAST, typ[ti, des.T_SRV_LAST]),
            (des.SF_SRV_FIRST, typ[ti, des.T_SRV_FIRST]),
            (des.SF_LAST, n_t - 1),
        ):
            if 0 <= k < n_t and (bit != des.SF_SRV_FIRST or srv_role[f0 + k]):
                sflags[f0 + k] |= bit
    return sflags


def _remote_p(types: list[TxnType]) -> np.ndarray:
    out = np.zeros(len(types))
    for ti, tt in enumerate(types):
        out[ti] = max([s.prob for s in tt.stages if "remote" in s.flags] or [0.0])
    return out


def _io_files(
    types: list[TxnType], file_index: dict[str, int], topo: Topology
) -> tuple[np.ndarray, int]:
    """(types x I/O groups) the file index of each I/O group, and the most groups."""
    max_io = max([len(tt.io_files) for tt in types] + [1])
    out = np.full((len(types), max_io), -1, dtype=np.int64)
    for ti, tt in enumerate(types):
        for gi, fname in enumerate(tt.io_files):
            if fname not in file_index:
                raise ValueError(
                    f"transaction type {tt.name}: file {fname} is not defined in "
                    f"node {topo.system_name} ({topo.source}) files:"
                )
            out[ti, gi] = file_index[fname]
    return out, max_io


# ------------------------------------------------------------------------------- effects
def _stage_effects(s: Stage) -> list[tuple[str, str, str, Any, str]]:
    """A stage's effects: its own and those its kind implies (busy and queue time of the
    station, dispatches, the file's busy time …)."""
    eff = list(s.effects)
    k = s.kind
    has_file = s.io >= 0 and k in ("cpu", "disc")
    if k == "cpu":
        eff += [
            ("cpu", "cpu", "CPU-BUSY-TIME", 1, "svc"),
            ("cpu", "cpu", "CPU-QTIME", 1, "sys"),
            ("cpu", "cpu", "DISPATCHES", 1, "done"),
        ]
        if not s.role.startswith("none@") and s.role:
            eff += [
                ("process", "proc", "CPU-BUSY-TIME", 1, "svc"),
                ("process", "proc", "READY-TIME", 1, "sys"),
                ("process", "proc", "DISPATCHES", 1, "done"),
            ]
    elif k == "disc":
        rw = "WRITE" if s.op == "write" else "READ"
        eff += [
            ("disc", "disc", "REQUEST-QTIME", 1, "sys"),
            ("disc", "disc", "DEVICE-QBUSY-TIME", 1, "svc"),
            ("disc", "disc", f"{rw}-QTIME", 1, "sys"),
            ("disc", "disc", f"{rw}-QBUSY-TIME", 1, "svc"),
        ]
    elif k in ("line_in", "line_out"):
        ctr = "READ-BUSY-TIME" if k == "line_in" else "WRITE-BUSY-TIME"
        eff += [("line", "line", ctr, 1, "svc")]
    elif k in ("net_out", "net_in"):
        ctr = "WRITE-BUSY-TIME" if k == "net_out" else "READ-BUSY-TIME"
        eff += [("netline", "netline", ctr, 1, "svc")]
    elif k == "delay" and "remote" in s.flags:
        eff += [
            ("system", "system", "LINK-TIME", 1, "sys"),
            ("cluster", "cluster", "LINK-TIME", 1, "sys"),
        ]
    if has_file:
        eff += [("file", "file", "FILE-BUSY-TIME", 1, "sys")]
    return eff


def _effect_rows(st: list[Stage], tables: dict[str, EntityTable]) -> np.ndarray:
    """One row per effect of a counter the catalogue defines, sorted by stage: (stage,
    entity, selector, counter, amount, mode) as floats."""
    ent_code = {e: i for i, e in enumerate(ENTITIES)}
    rows: list[tuple] = []
    for g, s in enumerate(st):
        for ent, sel, ctr, amount, when in _stage_effects(s):
            ed = tables[ent].entity
            if ctr not in ed or amount == 0:
                continue
            rows.append((g, ent_code[ent], S[sel], ed.index(ctr), float(amount), MODE[when]))
    rows.sort(key=lambda r: r[0])
    return np.array(rows, dtype=float).reshape(-1, 6)


def _effect_table(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The effect rows by stage, selector and entity: (des.E_* columns, amounts, the order
    from ``rows``). A level counts a visit once: of the rows with the same stage, entity,
    selector, counter and a svc or sys mode, the first has the level flag."""
    g_of = rows[:, 0].astype(np.int64)
    ef_ent = rows[:, 1].astype(np.int64)
    ef_sel = rows[:, 2].astype(np.int64)
    ef_ctr = rows[:, 3].astype(np.int64)
    ef_mode = rows[:, 5].astype(np.int64)
    order = np.lexsort((ef_ent, ef_sel, g_of))  # by stage, selector, entity
    lev_flag = np.zeros(order.size, dtype=np.int64)
    seen: set[tuple] = set()
    for j, r in enumerate(order.tolist()):
        key = (int(g_of[r]), int(ef_ent[r]), int(ef_sel[r]), int(ef_ctr[r]), int(ef_mode[r]))
        if key[4] in (des.M_SVC, des.M_SYS) and key not in seen:
            seen.add(key)
            lev_flag[j] = 1
    tab = (
        np.stack([ef_ent[order], ef_sel[order], ef_ctr[order], ef_mode[order], lev_flag], axis=1)
        .astype(np.int64)
        .reshape(-1, 5)
    )
    amt = np.ascontiguousarray(rows[:, 4][order], dtype=float)
    return tab, amt, order


def _compact_layout(ef_tab: np.ndarray) -> list[np.ndarray]:
    """The kernel accumulates into a compact layout: per entity only the counters some effect
    row bumps (a third of the counters), so its working set stays in cache; the engine
    spreads them back to the entity's full counter rows. Returns the used counters per
    entity and rewrites ``ef_tab``'s counters to positions among them."""
    ucols: list[np.ndarray] = []
    for ei in range(len(ENTITIES)):
        used = np.unique(ef_tab[ef_tab[:, des.E_ENT] == ei, des.E_CTR])
        ucols.append(used.astype(np.int64))
        if used.size:
            pos = np.searchsorted(used, ef_tab[:, des.E_CTR])
            sel = ef_tab[:, des.E_ENT] == ei
            ef_tab[sel, des.E_CTR] = pos[sel]
    return ucols


def _effect_groups(g: np.ndarray, sel: np.ndarray, ent: np.ndarray, ng: int) -> tuple:
    """Groups of effect rows (sorted by stage, selector, entity) with one (stage, selector,
    entity): one slot lookup per group. Returns per group its selector, entity and rows
    [r0, r1), per stage its groups [q0, q1) (bounds unsigned: the kernel indexes with them)."""
    gk = np.stack([g, sel, ent], axis=1)
    brk = np.flatnonzero(np.r_[True, (gk[1:] != gk[:-1]).any(axis=1)]) if gk.size else np.zeros(0, np.int64)
    r0 = np.asarray(brk, dtype=np.int64)
    r1 = np.r_[r0[1:], len(g)].astype(np.int64)
    grp = np.stack([gk[r0, 1], gk[r0, 2], r0, r1], axis=1).astype(np.int64)
    grp_n = np.bincount(gk[r0, 0], minlength=ng).astype(np.int64)
    grp_start = np.concatenate([[0], np.cumsum(grp_n)[:-1]]).astype(np.int64)
    return (
        np.ascontiguousarray(grp[:, 0]),
        np.ascontiguousarray(grp[:, 1]),
        np.ascontiguousarray(grp[:, 2], dtype=np.uint64),
        np.ascontiguousarray(grp[:, 3], dtype=np.uint64),
        np.ascontiguousarray(grp_start, dtype=np.uint64),
        np.ascontiguousarray(grp_start + grp_n, dtype=np.uint64),
    )


def _maxq(tables: dict[str, EntityTable]) -> dict[str, list[tuple[int, int]]]:
    """Per entity: (position of each max-queue counter, position of the queue it takes)."""
    out: dict[str, list[tuple[int, int]]] = {}
    for e in ENTITIES:
        ed = tables[e].entity
        out[e] = [
            (c.position, ed.index(c.max_of))
            for c in ed.counters
            if c.kind_code == KIND_MAXQ and c.max_of and c.max_of in ed
        ]
    return out


def _peak_cols(tables: dict[str, EntityTable], maxq_of: dict) -> dict[str, int]:
    """Queue peaks (max-queue twins) that come from the stations: CPU ready lists, disc
    queues. Per entity the column of the queue counter."""
    out: dict[str, int] = {}
    for e, qname in (("cpu", "CPU-QTIME"), ("disc", "REQUEST-QTIME")):
        ed = tables[e].entity
        if qname in ed and any(q == ed.index(qname) for _, q in maxq_of[e]):
            out[e] = ed.index(qname)
    return out
