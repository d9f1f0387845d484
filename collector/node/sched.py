"""Vectorised queueing primitives: many FCFS servers at once, with preemptive priority classes.

All times are int64 microseconds relative to the start of the current step, so arithmetic is
exact and deterministic. A batch of jobs (``server``, ``cls``, ``arr``, ``svc``) is scheduled
in one call:

* Within one class, each server is FCFS and its departures follow Lindley's recursion
  ``D_n = max(A_n, D_{n-1}) + S_n``, computed for all servers at once as
  ``D = C + max.accumulate(A - C_prev)`` over server-major sorted jobs (``C`` = per-server
  cumulative service). Segments are kept apart by adding ``server * BIG`` before the running
  maximum, so one ``np.maximum.accumulate`` serves every server.
* Classes are preemptive-resume priorities (class 0 highest). Class ``k`` only sees the time
  left idle by classes ``0..k-1``: its arrivals are mapped into that *virtual* time axis
  (``V_k = J_{k-1}(... J_0(t))`` with ``J(v) = v - busy_before(v)``), it is scheduled FCFS
  there, and its departures are mapped back through the inverses. Total busy time is
  therefore work-conserving, and high classes never wait for low ones.

The result object answers the questions the counter accounting needs: departure times, how
much of each job's service was done before a time ``W`` (busy split at a step boundary) and
which jobs are executing at ``W``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BIG = np.int64(1) << np.int64(42)  # > any relative time span (≈ 51 days in µs)


@dataclass(slots=True)
class _Level:
    """Busy periods of one class, in that class's virtual time, for the servers it uses."""

    key_end: np.ndarray  # server*BIG + virtual departure, sorted
    key_idle: np.ndarray  # server*BIG + idle-before-start (J at job start), sorted
    start_v: np.ndarray  # virtual service start, same order
    svc: np.ndarray
    c_incl: np.ndarray  # per-server inclusive cumulative service
    server: np.ndarray

    def forward(self, server: np.ndarray, v: np.ndarray) -> np.ndarray:
        """J(v) = v - class busy time before v (on that server)."""
        if self.key_end.size == 0:
            return v
        q = server.astype(np.int64) * BIG
        n = self.key_end.size
        i = np.searchsorted(self.key_end, q + v, side="right") - 1  # last job ended <= v
        ok = i >= 0
        ok[ok] = self.server[i[ok]] == server[ok]
        busy = np.where(ok, self.c_incl[np.maximum(i, 0)], 0)
        j = i + 1  # the next job on this server may be in progress at v
        okj = j < n
        jj = np.minimum(j, n - 1)
        okj &= self.server[jj] == server
        part = np.where(okj, np.clip(v - self.start_v[jj], 0, self.svc[jj]), 0)
        return v - busy - part

    def inverse(self, server: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Smallest v with J(v) >= u: u plus the service of jobs that start before idle u."""
        if self.key_idle.size == 0:
            return u
        q = server.astype(np.int64) * BIG
        i = np.searchsorted(self.key_idle, q + u, side="left") - 1  # last job with J(start) < u
        ok = i >= 0
        ok[ok] = self.server[i[ok]] == server[ok]
        return u + np.where(ok, self.c_incl[np.maximum(i, 0)], 0)


def _segmented_cumsum(x: np.ndarray, seg_start: np.ndarray) -> np.ndarray:
    """Inclusive cumulative sum that restarts where ``seg_start`` is True (x sorted by segment)."""
    c = np.cumsum(x)
    base = np.where(seg_start, c - x, 0)
    base = np.maximum.accumulate(base)  # c is nondecreasing (x >= 0), so the last start wins
    return c - base


def fcfs(server: np.ndarray, arr: np.ndarray, svc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """FCFS departures for many single servers; returns (order, departure in that order).

    ``order`` sorts jobs by (server, arrival, input position)."""
    key = server.astype(np.int64) * BIG + arr
    order = np.argsort(key, kind="stable")
    s = server[order]
    a = arr[order]
    x = svc[order]
    n = s.size
    if n == 0:
        return order, a.copy()
    seg = np.empty(n, dtype=bool)
    seg[0] = True
    np.not_equal(s[1:], s[:-1], out=seg[1:])
    c = _segmented_cumsum(x, seg)
    off = s.astype(np.int64) * BIG
    m = np.maximum.accumulate(a - (c - x) + off) - off
    return order, c + m


@dataclass(slots=True)
class Schedule:
    """Result of :func:`schedule` for one batch of jobs (arrays in input order)."""

    dep: np.ndarray  # real departure time
    svc: np.ndarray
    start_v: np.ndarray  # virtual service start in the job's class axis
    cls: np.ndarray
    server: np.ndarray
    levels: list[_Level]
    n_classes: int

    def virtual_at(self, t: int) -> list[np.ndarray]:
        """Per class k, per job: the job's class-k virtual time at real time ``t``."""
        out = []
        v = np.full(self.server.size, t, dtype=np.int64)
        for k in range(self.n_classes):
            out.append(v)
            if k + 1 < self.n_classes:
                v = self.levels[k].forward(self.server, v)
        return out

    def done_before(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """(service done before real time t, executing-at-t flag) per job."""
        vs = self.virtual_at(t)
        vt = np.choose(self.cls, vs) if self.n_classes > 1 else vs[0]
        done = np.clip(vt - self.start_v, 0, self.svc)
        inside = (vt >= self.start_v) & (vt < self.start_v + self.svc)
        if self.n_classes > 1 and inside.any():
            # preempted jobs are "inside" their own axis too; the executing one has the top class
            top = np.full(int(self.server.max()) + 1, self.n_classes, dtype=np.int64)
            np.minimum.at(top, self.server[inside], self.cls[inside])
            inside &= self.cls == top[self.server]
        return done, inside


def schedule(
    server: np.ndarray, cls: np.ndarray, arr: np.ndarray, svc: np.ndarray, n_classes: int
) -> Schedule:
    """Schedule jobs on single servers with preemptive-resume priority classes (0 = highest).

    ``arr`` may be negative only if the caller means it; carried-over work should arrive at 0.
    """
    n = server.size
    dep = np.empty(n, dtype=np.int64)
    start_v = np.empty(n, dtype=np.int64)
    levels: list[_Level] = []
    empty = np.empty(0, dtype=np.int64)
    idx_by_class = (
        [np.flatnonzero(cls == k) for k in range(n_classes)] if n_classes > 1 else [np.arange(n)]
    )
    for k in range(n_classes):
        idx = idx_by_class[k]
        if levels:  # ties in virtual time must keep real-arrival order
            idx = idx[np.argsort(arr[idx], kind="stable")]
        srv = server[idx]
        a = arr[idx]
        for lv in levels:  # map arrivals into class-k virtual time
            a = lv.forward(srv, a)
        order, d_v = fcfs(srv, a, svc[idx])
        s_sorted = svc[idx][order]
        srv_sorted = srv[order]
        st_v = d_v - s_sorted
        start_v[idx[order]] = st_v
        if k + 1 < n_classes:
            nseg = np.empty(srv_sorted.size, dtype=bool)
            if srv_sorted.size:
                nseg[0] = True
                np.not_equal(srv_sorted[1:], srv_sorted[:-1], out=nseg[1:])
            c_incl = _segmented_cumsum(s_sorted, nseg)
            off = srv_sorted.astype(np.int64) * BIG
            levels.append(
                _Level(
                    key_end=off + d_v,
                    key_idle=off + st_v - (c_incl - s_sorted),
                    start_v=st_v,
                    svc=s_sorted,
                    c_incl=c_incl,
                    server=srv_sorted,
                )
            )
        real = d_v
        for lv in reversed(levels[:k]):
            real = lv.inverse(srv_sorted, real)
        dep[idx[order]] = real
    if n_classes == 1:
        levels = [
            _Level(empty, empty, empty, empty, empty, empty)
        ]  # unused; keeps virtual_at simple
    return Schedule(dep, svc, start_v, cls, server, levels, n_classes)
