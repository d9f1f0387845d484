"""`measuredb run | api | collector | backfill | health`: the platform's processes.

    measuredb run                 the whole platform (PostgreSQL, schema, collector, API)
    measuredb api                 the REST API alone
    measuredb collector [--node host]   the collector alone (simulated node or this host + MEASURE)
    measuredb backfill --node N --days D [--seed S] [--start T | --end T]   history, as fast as it simulates
                      [--anomalies SCHEDULE [--truth TRUTH.json]]   with injected anomalies (docs/anomalies.md)
                                  (exit 3: the database did not take all of it; see the message)
    measuredb health [--collector]
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
import urllib.request
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated
from zoneinfo import ZoneInfo

import typer

from api.settings import ApiSettings
from api.sizing import cpu_count, database_budget, plan
from cli.common import UserError, connection, console, database, friendly, out
from collector.errors import CollectorConfigError, SpooledDataLeft
from collector.node.topology import NodeFileError
from collector.settings import CollectorSettings
from core.database import describe_url
from core.times import SECOND, now_us, to_ts


@friendly
def api(
    host: Annotated[str | None, typer.Option(help="listen address (MEASUREDB_API_HOST)")] = None,
    port: Annotated[int | None, typer.Option(help="port (MEASUREDB_API_PORT)")] = None,
) -> None:
    """Serve the REST API."""
    # heavy (FastAPI, uvicorn and every route): loaded only by the command that serves
    from api.main import create_app
    from api.serve import run as serve

    settings = ApiSettings()
    if host is not None or port is not None:
        settings = settings.model_copy(update={k: v for k, v in {"host": host, "port": port}.items() if v is not None})
    with database(settings, create=True) as url:
        sizing = plan(cpus=cpu_count(), budget=database_budget(url), workers=settings.workers,
                      pool_size=settings.pool_size, threads=settings.threads)
        out.print(sizing.describe(), markup=False)
        if sizing.over_budget():
            console.print(f"measuredb: warning: {sizing.workers} workers may open "
                          f"{sizing.workers * (2 * sizing.pool_size + 1)} database connections, more than the "
                          f"database has for them; lower MEASUREDB_API_POOL_SIZE or MEASUREDB_API_WORKERS, "
                          "or raise max_connections", markup=False)
        settings = settings.model_copy(update={"workers": sizing.workers, "pool_size": sizing.pool_size,
                                               "threads": sizing.threads})
        if sizing.workers > 1:  # each worker builds its own app from the environment
            os.environ.update(DATABASE_URL=url, MEASUREDB_API_WORKERS=str(sizing.workers),
                              MEASUREDB_API_POOL_SIZE=str(sizing.pool_size),
                              MEASUREDB_API_THREADS=str(sizing.threads))
            serve("api.main:create_app", factory=True, host=settings.host, port=settings.port,
                  workers=sizing.workers, keep_alive_seconds=settings.keep_alive_seconds)
        else:
            serve(create_app(settings, database_url=url), host=settings.host, port=settings.port,
                  keep_alive_seconds=settings.keep_alive_seconds)


@friendly
def collector(
    node: Annotated[str | None, typer.Option(
        help="host (this machine, measured live) or a simulated node (demo, et1-txp, …); "
             "default MEASUREDB_COLLECTOR_NODE")] = None,
) -> None:
    """Run the collector: the node (simulated, or this host) and MEASURE, writing into the database."""
    # heavy (numpy, numba's compiled node): loaded only by the commands that simulate
    from collector.service import run_collector, wait_for_database

    settings = CollectorSettings() if node is None else CollectorSettings(node=node)
    if settings.database_url:  # a service waits for its database (the embedded one we start)
        logging.basicConfig(level=logging.INFO, format="%(asctime)s collector %(levelname)s %(message)s")
        try:
            wait_for_database(settings.database_url, "applying the schema")
        except CollectorConfigError as exc:
            raise UserError(str(exc)) from None
    with database(settings, apply_schema=True) as url:
        try:
            run_collector(settings, url)
        except (CollectorConfigError, NodeFileError) as exc:
            raise UserError(str(exc)) from None


@friendly
def backfill(
    node: Annotated[str, typer.Option(help="shipped node (demo, et1-txp, et1-vlx, rds-txp, rds-vlx, ref16, today) or a node file")] = "demo",
    days: Annotated[int, typer.Option(min=1, max=3660, help="days of history to simulate")] = 7,
    seed: Annotated[int, typer.Option(min=0, help="same seed, same counters")] = 1986,
    start: Annotated[str | None, typer.Option(
        help="first moment simulated, e.g. 2026-03-01 or 2026-03-01T08:00 (the node's local "
             "time unless it carries an offset); default: DAYS before now")] = None,
    end: Annotated[str | None, typer.Option(
        help="end of the window instead (not after now); the window is DAYS long")] = None,
    anomalies: Annotated[Path | None, typer.Option(
        help="anomaly schedule (YAML or JSON, docs/anomalies.md; `measuredb node anomalies` "
             "makes one): the simulated node injects them")] = None,
    truth: Annotated[Path | None, typer.Option(
        help="with --anomalies: write the ground truth (JSON: kind, entity, subject, from, to, "
             "magnitude of every anomaly) to this file")] = None,
) -> None:
    """Fill the database with DAYS of history of NODE, as fast as the simulation runs.

    Every entity under a default measurement (1-minute intervals), with a progress bar.

    With --start or --end the window is fixed: the same node, seed and window store the same
    data in any database (results can be compared across databases and runs). Without them
    the window ends now. A database that already holds the node continues its history: its
    first moment stays, and --start must name it.

    A database outage during the run is waited out (copies spool and replay); if the
    database is still away MEASUREDB_COLLECTOR_OUTAGE_WAIT_SECONDS after the end, the
    command says what is left in the spool and exits with status 3.

    With --anomalies the node injects the schedule's anomalies (a runaway process, a slow
    disc, a line down, dynamic file opens, a load spike) in their windows; --truth records them."""
    settings = CollectorSettings(node=node, backfill_days=days, seed=seed)
    if anomalies is not None:
        settings = settings.model_copy(update={"anomalies": anomalies})
    if truth is not None and settings.anomalies is None:
        raise UserError("--truth records the anomalies of --anomalies: give --anomalies SCHEDULE too")
    if node.split(":", 1)[0] == "host":
        raise UserError("the host node measures this machine as it runs: it has no history to "
                        "backfill (`measuredb collector --node host` measures it live)")
    if start is not None and end is not None:
        raise UserError("give --start or --end, not both (the window is --days long)")
    if settings.anomalies is not None:
        _write_truth(settings, truth)
    if settings.progress == "lines":  # progress (and the time per phase) as log lines, as under `run`
        logging.basicConfig(level=logging.INFO, format="%(asctime)s backfill %(levelname)s %(message)s")
    with database(settings, apply_schema=True) as url:
        _backfill(settings, url, start, end, days)


def _write_truth(settings: CollectorSettings, path: Path | None) -> None:
    """Check the schedule against the node (before anything is simulated) and write its truth."""
    from collector.node.anomalies import load_schedule, truth, write_truth
    from collector.node.topology import load_node

    assert settings.anomalies is not None
    try:
        schedule = load_schedule(settings.anomalies)
        records = truth(schedule, load_node(settings.node))
    except NodeFileError as exc:
        raise UserError(f"{settings.anomalies}: {exc.where}: {exc.why}" if exc.where else str(exc)) from None
    if path is not None:
        try:
            write_truth(records, path)
        except OSError as exc:
            raise UserError(f"--truth {path}: cannot write it: {exc.strerror}") from None


def _backfill(settings: CollectorSettings, url: str, start: str | None, end: str | None, days: int) -> None:
    # heavy (numpy, numba's compiled node): loaded only by the commands that simulate
    from collector.service import Collector

    c = None
    try:
        c = Collector(settings, url)
        window = _backfill_window(start, end, days, c.topology.time_zone, settings)
        state = c.register(epoch_us=window[0] if window else None)
        if window and state.epoch_us != window[0]:
            raise UserError(
                f"the database already holds {c.topology.system_name} simulated from "
                f"{to_ts(state.epoch_us).isoformat()}; a backfill continues that history: use "
                f"--start {to_ts(state.epoch_us).isoformat()} (or no --start), or another database")
        with c.phases("start: rebuild"):
            c.build()
        started = time.monotonic()
        t = now_us()
        until = window[1] if window else t - t % c.node.step_us   # on the grid
        if c.node.now_us >= until:
            c.condense_months()  # what a run killed before its end left (collector/upkeep.py)
            out.print(f"{c.topology.system_name}: nothing to do, copies are stored up to "
                      f"{to_ts(c.node.now_us).isoformat(timespec='seconds')}")
            return
        c.backfill(until, progress="bar" if settings.progress == "auto" else settings.progress)
        with c.phases("end: spool, checkpoint, months, upkeep"):
            c.finish_backfill(settings.outage_wait_seconds)
            c.checkpoint()
            c.condense_months()
            c.upkeep()
        c.log_phases(settings.progress)
        simulated = (c.node.now_us - state.epoch_us) / SECOND
        stored = to_ts(c.writer.durable_until_us).isoformat(timespec="seconds")
        out.print(f"{c.topology.system_name}: {simulated / 86400:.1f} days simulated in "
                  f"{time.monotonic() - started:.0f} s; copies stored up to {stored}")
    except SpooledDataLeft as exc:
        console.print(f"measuredb: {exc}", markup=False)
        raise typer.Exit(3) from None
    except (CollectorConfigError, NodeFileError) as exc:
        raise UserError(str(exc)) from None
    finally:
        if c is not None:
            c.close()


def _backfill_window(start: str | None, end: str | None, days: int, time_zone: str,
                     settings: CollectorSettings) -> tuple[int, int] | None:
    """(first, end) in µs of a fixed backfill window, or None (the window ends now)."""
    if start is not None:
        option, text = "--start", start
    elif end is not None:
        option, text = "--end", end
    else:
        return None
    try:
        at = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UserError(f"{option} {text!r} is not a date or time: write 2026-03-01 or "
                        "2026-03-01T08:00 (local to the node) or 2026-03-01T08:00+00:00") from None
    if at.tzinfo is None:
        at = at.replace(tzinfo=ZoneInfo(time_zone))
    grid = max(settings.step_seconds, settings.interval_seconds)
    first = at if start is not None else at - timedelta(days=days)
    us = int(first.timestamp()) * SECOND + first.microsecond
    if us % (grid * SECOND):
        raise UserError(f"{option} {text} is not on the node's {grid} s grid "
                        "(MEASUREDB_COLLECTOR_STEP_SECONDS / _INTERVAL_SECONDS): choose a whole minute")
    last = us + days * 86_400 * SECOND
    if last > now_us():
        raise UserError(f"the window {first.isoformat()} + {days} days ends in the future; "
                        "a backfill simulates the past (choose an earlier --start or --end)")
    return us, last


@friendly
def health(
    collector_only: Annotated[bool, typer.Option("--collector", help="check only the collector heartbeat")] = False,
    max_age: Annotated[float, typer.Option(help="seconds a heartbeat stays fresh")] = 60.0,
) -> None:
    """Exit 0 when the database answers (and, with --collector, the heartbeat is fresh)."""
    with connection() as conn:
        row = conn.execute(
            "SELECT extract(epoch FROM now() - last_heartbeat_at) FROM measure.schema_info()").fetchone()
    age = None if row is None or row[0] is None else float(row[0])
    if collector_only and (age is None or age > max_age):
        raise UserError(f"no collector heartbeat within {max_age:g} s")
    out.print("ok" if age is None else f"ok (last heartbeat {age:.1f} s ago)")


@friendly
def run(
    api_port: Annotated[int | None, typer.Option(
        min=1, max=65535, help="port of the API; default MEASUREDB_API_PORT (8000)")] = None,
    collector: Annotated[bool, typer.Option(
        "--collector/--no-collector", help="start the collector too (--no-collector: only the database and "
                                           "the API)")] = True,
) -> None:
    """Start the whole platform: PostgreSQL, schema, collector and API. Ctrl-C stops it."""
    settings = CollectorSettings()
    api_settings = ApiSettings()  # read (and checked) here: a bad one stops the start in one line
    if api_port is not None:
        api_settings = api_settings.model_copy(update={"port": api_port})
    started = time.monotonic()
    with database(settings, apply_schema=True) as url:
        _run_platform(settings, url, started, api_settings.host, api_settings.port, not collector)


def _run_platform(settings: CollectorSettings, url: str, started: float, api_host: str, api_port: int,
                  no_collector: bool) -> None:
    # the children read the same environment; only what the command line gave is set for them
    env = dict(os.environ, DATABASE_URL=url, MEASUREDB_API_PORT=str(api_port))
    # the collector's backfill progress as log lines between the platform's own lines
    env.setdefault("MEASUREDB_COLLECTOR_PROGRESS", "lines")
    children: dict[str, subprocess.Popen] = {}
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started with SIGINT ignored
    try:
        if not no_collector:
            children["collector"] = subprocess.Popen([sys.executable, "-m", "cli", "collector"],
                                                     env=env, start_new_session=True)
        # Own sessions: a terminal's Ctrl-C reaches only this process, which then stops the
        # children in order (collector first, so it stores what it measured; database last).
        children["api"] = subprocess.Popen([sys.executable, "-m", "cli", "api"], env=env,
                                           start_new_session=True)
        shown = "127.0.0.1" if api_host in ("0.0.0.0", "::", "") else api_host
        api_url = f"http://{f'[{shown}]' if ':' in shown else shown}:{api_port}"
        _wait_for(api_url + "/health", children["api"], timeout=60)
        data = settings.data_dir.resolve()
        out.print(
            f"[bold]measuredb is running[/] (ready in {time.monotonic() - started:.1f} s)\n"
            f"  API            {api_url}\n"
            f"  API docs       {api_url}/docs\n"
            f"  health         {api_url}/health\n"
            f"  database       {describe_url(url)}\n"
            f"  data folder    {data}\n"
            f"  node           {settings.node} (seed {settings.seed})"
            + ("" if no_collector else "; the collector logs its backfill progress and when live "
               "collection begins; it answers the API meanwhile")
            + "\n"
            "Ctrl-C stops collector, API and the embedded database; the next `make run` reuses the data."
        )
        while not stopping:
            for name, proc in children.items():
                if proc.poll() is not None:
                    raise UserError(f"the {name} stopped unexpectedly (exit status {proc.returncode}); "
                                    "see its messages above")
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        for proc in children.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 20
        for proc in children.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
        console.print("measuredb stopped.")


def _wait_for(url: str, proc: subprocess.Popen, *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise UserError(f"the API exited while starting (status {proc.returncode})")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status in (200, 503):
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise UserError(f"the API did not answer {url} within {timeout:g} s")
