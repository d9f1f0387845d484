"""The reliability suite (pytest -m reliability; part of `make test`): what a caller, a file or
an operator can do to the service, tried against real servers: the API served by uvicorn in a
process of its own (`measuredb api`), a real PostgreSQL that tests may stop and start."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from core import schema as schema_runner
from tests.engine import MODE

REPO = Path(__file__).resolve().parents[2]
SYSTEM = "\\REL"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/reliability/" in str(item.fspath):
            item.add_marker(pytest.mark.reliability)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ApiProcess:
    """`measuredb api` on a free port of 127.0.0.1, in a process of its own."""

    def __init__(self, url: str, tmp: Path, **settings: str) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEASUREDB_")}
        env.update(DATABASE_URL=url, MEASUREDB_DATA_DIR=str(tmp), PYTHONPATH=str(REPO), **settings)
        self.log = (tmp / f"api-{self.port}.log").open("wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "cli", "api", "--port", str(self.port)], cwd=REPO,
                                     env=env, stdout=self.log, stderr=subprocess.STDOUT)
        self.wait_ready()

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"the API exited: {self.output()}"
            try:
                with urllib.request.urlopen(self.base + "/health", timeout=2):
                    return
            except urllib.error.HTTPError:
                return  # 503: up, the database is away
            except OSError:
                time.sleep(0.2)
        raise AssertionError(f"the API did not answer within {timeout} s: {self.output()}")

    def output(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()


@pytest.fixture(scope="module")
def reliability_db(fresh_database) -> str:
    url = fresh_database("_reliability")
    schema_runner.apply(url, mode=MODE)
    with psycopg.connect(url) as c:
        c.execute("INSERT INTO _measure.system (system_name, system_number, time_zone) VALUES (%s, 9, 'UTC')",
                  (SYSTEM,))
    return url


@pytest.fixture
def start_api(reliability_db: str, tmp_path: Path) -> Iterator[Callable[..., ApiProcess]]:
    started: list[ApiProcess] = []

    def start(url: str | None = None, **settings: str) -> ApiProcess:
        api = ApiProcess(url or reliability_db, tmp_path, **settings)
        started.append(api)
        return api

    yield start
    for api in started:
        api.stop()
