"""The API under load as `make run` starts it (issue 27, item 8): 50 keep-alive clients on
reads the read cache cannot answer. Reports requests/s, p50/p99, errors and connections
closed without a response, and what the API logged about them.

Data: the demo node, 7 days backfilled (`measuredb backfill --node demo --start 2026-11-16
--days 7 --seed 1986`, same data on every run) into an embedded server in
MEASUREDB_BENCH_DATA_DIR (default .data/bench-load; made once, reused after). The API is
started by `measuredb run --no-collector` (the collector would first catch up from the
backfill's end to now, which takes the cores the load is measured on) with the settings the
environment gives, i.e. the defaults `make run` uses (workers, pools, cache on); only
the port is chosen.

Scenarios, each for MEASUREDB_BENCH_SECONDS (default 20) with 50 clients (asyncio, one httpx
keep-alive connection each): `tiers`: GET /tiers/cpu/hour with a random CPU, start, length
and page size, so every request is a new URL (X-Cache is counted: the cache answers none);
`mix`: the same tiers reads, /tiers/disc/hour, /tiers/cpu/auto, /measurements and
/catalog/entities/cpu/counters, one of five each; `polling`: the tiers reads in bursts of three
with a pause of 5 s (± 50 ms) between bursts, as dashboards refreshing every 5 s do (httpx
keeps an idle connection 5 s; these clients keep it 60 s, as browsers and Go do). A request
that ends in a connection closed or reset without a response, or in no answer within 30 s,
is an error of its kind; a 503 is counted apart.

MEASUREDB_BENCH_BEFORE=PATH runs the same scenarios first against the code of another
checkout (e.g. a `git worktree` of the base commit, started with its own `cli` package) and
prints both with the ratio, measured in one run.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
CLIENTS = 50
SECONDS = float(os.environ.get("MEASUREDB_BENCH_SECONDS", "20"))
DATA = Path(os.environ.get("MEASUREDB_BENCH_DATA_DIR", REPO / ".data" / "bench-load")).resolve()
START = datetime(2026, 11, 16, tzinfo=UTC)
DAYS = 7
SEED = 20261128
TIMEOUT_S = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env_for(code: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(MEASUREDB_DATA_DIR=str(DATA), PYTHONPATH=str(code), MEASUREDB_COLLECTOR_PROGRESS="off")
    return env


def ensure_data() -> str:
    if (DATA / "bench-load.done").exists():
        return "backfilled by an earlier run"
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "cli", "backfill", "--node", "demo", "--days", str(DAYS),
                    "--start", START.date().isoformat(), "--seed", "1986"],
                   cwd=REPO, env=env_for(REPO), check=True, stdout=subprocess.DEVNULL)
    (DATA / "bench-load.done").write_text("demo, 7 days from 2026-11-16, seed 1986\n")
    return f"backfilled in {time.monotonic() - started:.0f} s"


class Platform:
    """`measuredb run --no-collector` of the code in `code`, its output in a file."""

    def __init__(self, code: Path, log: Path) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = log
        self.log = log.open("wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "cli", "run", "--no-collector",
                                      "--api-port", str(self.port)],
                                     cwd=code, env=env_for(code), stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"bench_load: measuredb run exited: {self.output()[-2000:]}")
            if "measuredb is running" in self.output():
                return
            time.sleep(0.3)
        raise SystemExit(f"bench_load: measuredb run did not start: {self.output()[-2000:]}")

    def output(self) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")

    def workers(self) -> int:
        said = re.search(r"API: (\d+) worker", self.output())
        if said:
            return int(said[1])
        import psutil  # a dev dependency, for code that does not say (before issue 27)

        spawned = [c for c in psutil.Process(self.proc.pid).children(recursive=True)
                   if "multiprocessing" in " ".join(c.cmdline())]
        return max(1, len(spawned) - 1)  # less the resource tracker

    def stop(self) -> None:
        os.killpg(self.proc.pid, signal.SIGINT)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.log.close()


def tiers_url(rng: random.Random, entity: str = "cpu") -> str:
    start = START + timedelta(minutes=10 * rng.randrange(DAYS * 24 * 6))
    length = timedelta(hours=rng.randint(1, 72))
    who = f"cpu={rng.randrange(4)}&" if entity == "cpu" and rng.random() < 0.8 else ""
    return (f"/tiers/{entity}/hour?{who}from={start.isoformat().replace('+00:00', 'Z')}"
            f"&to={(start + length).isoformat().replace('+00:00', 'Z')}&limit={rng.randint(50, 500)}")


def mix_url(rng: random.Random) -> str:
    pick = rng.randrange(5)
    if pick == 0:
        return tiers_url(rng)
    if pick == 1:
        return tiers_url(rng, "disc")
    if pick == 2:
        start = START + timedelta(minutes=rng.randrange(DAYS * 24 * 60))
        return (f"/tiers/cpu/auto?from={start.isoformat().replace('+00:00', 'Z')}"
                f"&to={(start + timedelta(hours=rng.randint(1, 48))).isoformat().replace('+00:00', 'Z')}"
                f"&limit={rng.randint(50, 500)}")
    if pick == 3:
        return f"/measurements?limit={rng.randint(1, 500)}"
    return f"/catalog/entities/cpu/counters?n={rng.randrange(10**9)}"


# name: (URL maker, pause between bursts of three requests or None)
SCENARIOS = {"tiers": (tiers_url, None), "mix": (mix_url, None), "polling": (tiers_url, 5.0)}
_runs = iter(range(10**6))


async def load(base: str, make_url, seconds: float, pause: float | None = None) -> dict:
    rng = random.Random(SEED + next(_runs))  # every run its own URLs (the cache has none of them)
    latencies: list[float] = []
    status: Counter[int] = Counter()
    errors: Counter[str] = Counter()
    cache: Counter[str] = Counter()
    deadline = time.monotonic() + seconds

    async def client() -> None:
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1, keepalive_expiry=60)
        async with httpx.AsyncClient(base_url=base, timeout=TIMEOUT_S, limits=limits) as http:
            sent = 0
            while time.monotonic() < deadline:
                if pause is not None and sent and sent % 3 == 0:
                    await asyncio.sleep(pause + rng.uniform(-0.05, 0.05))
                sent += 1
                url = make_url(rng)
                t = time.perf_counter()
                try:
                    r = await http.get(url)
                except httpx.TimeoutException:
                    errors["timeout"] += 1
                except httpx.RemoteProtocolError:   # closed without (a whole) response
                    errors["closed"] += 1
                except (httpx.ReadError, httpx.WriteError):  # reset
                    errors["reset"] += 1
                except httpx.ConnectError:
                    errors["refused"] += 1
                else:
                    status[r.status_code] += 1
                    cache[r.headers.get("x-cache", "none")] += 1
                    latencies.append(time.perf_counter() - t)

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(CLIENTS)))
    wall = time.perf_counter() - started
    lat = sorted(latencies) or [0.0]
    q = statistics.quantiles(lat, n=100) if len(lat) > 1 else [lat[0]] * 99
    n = sum(status.values())
    return {"n": n + sum(errors.values()), "rps": n / wall, "p50": q[49] * 1e3, "p99": q[98] * 1e3,
            "max": lat[-1] * 1e3, "ok": status[200], "503": status[503],
            "other": n - status[200] - status[503], "errors": dict(errors), "hits": cache["hit"]}


LOGGED = re.compile(r"(reset|closed|timed out|timeout|refused|503|Unavailable|Invalid HTTP|Broken pipe)",
                    re.IGNORECASE)


def measure(code: Path, tmp: Path, label: str) -> dict:
    api = Platform(code, tmp / f"{label}.log")
    try:
        workers = api.workers()
        before = len(api.output().splitlines())
        for make_url, _ in SCENARIOS.values():  # a short warm-up: connections, plans, imports
            asyncio.run(load(api.base, make_url, 2.0))
        out = {"workers": workers}
        for name, (make_url, pause) in SCENARIOS.items():
            seconds = SECONDS if pause is None else max(SECONDS, 6 * pause)
            out[name] = asyncio.run(load(api.base, make_url, seconds, pause))
            print(f"  {label} {name}: {out[name]}", file=sys.stderr, flush=True)
        lines = api.output().splitlines()[before:]
        out["logged"] = [x for x in lines if LOGGED.search(x)]
    finally:
        api.stop()
    return out


def commit(code: Path) -> str:
    r = subprocess.run(["git", "-C", str(code), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return r.stdout.strip() or code.name


def main() -> None:
    data = ensure_data()
    before_code = os.environ.get("MEASUREDB_BENCH_BEFORE")
    load_before = os.getloadavg()[0]
    runs: dict[str, tuple[Path, dict]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-load-") as tmp:
        if before_code:
            runs["before"] = (Path(before_code).resolve(), measure(Path(before_code).resolve(), Path(tmp), "before"))
        runs["after" if before_code else "this"] = (REPO, measure(REPO, Path(tmp), "after"))
    report(runs, data, (load_before, os.getloadavg()[0]))


def report(runs: dict, data: str, load: tuple[float, float]) -> None:
    print(f"### The API under load as `make run` starts it: {CLIENTS} clients, uncached reads (bench_load.py)\n")
    print(f"Data: the demo node, {DAYS} days from {START.date()} (seed 1986; {data}). API: `measuredb run "
          f"--no-collector` with the default settings; server, PostgreSQL and load generator (asyncio, "
          f"{CLIENTS} httpx keep-alive connections, {SECONDS:g} s per scenario after a 2-s warm-up, "
          f"polling {max(SECONDS, 30):g} s) on the same "
          f"{os.cpu_count()} cores. Every tiers URL is new (random CPU, start, length, page size): the read cache "
          f"answers none of them (the mix's /measurements pages and catalogue repeat: its cache hits). Load average (1 min) before the runs {load[0]:.1f}, after {load[1]:.1f}.\n")
    print("| code | workers | scenario | requests | req/s | p50 ms | p99 ms | max ms | 200 | 503 | other | "
          "closed / reset / timeout / refused | cache hits |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    for label, (code, r) in runs.items():
        for name in SCENARIOS:
            s = r[name]
            e = s["errors"]
            print(f"| {label} ({commit(code)}) | {r['workers']} | {name} | {s['n']:,} | {s['rps']:,.0f} "
                  f"| {s['p50']:.0f} | {s['p99']:.0f} | {s['max']:.0f} | {s['ok']:,} | {s['503']:,} | {s['other']:,} "
                  f"| {e.get('closed', 0)} / {e.get('reset', 0)} / {e.get('timeout', 0)} / {e.get('refused', 0)} "
                  f"| {s['hits']} |")
    if "before" in runs and "after" in runs:
        print("\nRatio after / before:\n")
        print("| scenario | req/s | p50 | p99 |")
        print("|---|---:|---:|---:|")
        b, a = runs["before"][1], runs["after"][1]
        for name in SCENARIOS:
            print(f"| {name} | {a[name]['rps'] / b[name]['rps']:.2f} × | {a[name]['p50'] / b[name]['p50']:.2f} × "
                  f"| {a[name]['p99'] / b[name]['p99']:.2f} × |")
    for label, (_, r) in runs.items():
        logged = r["logged"]
        print(f"\nThe API's log ({label}): {len(logged)} lines about resets, timeouts or refusals"
              + (":" if logged else "."))
        for line in logged[:8]:
            print(f"    {line[:200]}")
        if len(logged) > 8:
            print(f"    … {len(logged) - 8} more")


if __name__ == "__main__":
    main()
