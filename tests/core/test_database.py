"""The embedded server: processes starting it together on a new data folder share one server
(with TimescaleDB, the one that preloads it). The test suite's two workers did not: on a fresh
clone one found the server restarting under it, or running without TimescaleDB while the
other held it ("runs without TimescaleDB and is used by another measuredb process")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psycopg

from core.database import start_embedded
from tests.engine import TIMESCALEDB

START = """
import sys, time
from pathlib import Path
from core.database import start_embedded
server = start_embedded(Path(sys.argv[1]), timescaledb=sys.argv[2] == "on")
print(server.url(), flush=True)
time.sleep(3)  # the others start while this one holds the server
server.stop()
"""


def test_processes_starting_a_new_data_folder_together_share_one_server(tmp_path: Path) -> None:
    data = tmp_path / "data"
    starts = [subprocess.Popen([sys.executable, "-c", START, str(data), "on" if TIMESCALEDB else "off"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for _ in range(3)]
    answers = [p.communicate(timeout=300) for p in starts]
    assert [p.returncode for p in starts] == [0, 0, 0], [err[-2000:] for _, err in answers]
    assert len({out.strip() for out, _ in answers}) == 1  # one server, one URL
    server = start_embedded(data, timescaledb=TIMESCALEDB)
    try:
        with psycopg.connect(server.admin_url()) as conn:
            libs = conn.execute("SHOW shared_preload_libraries").fetchone()[0]
        assert ("timescaledb" in libs) == TIMESCALEDB
    finally:
        server.stop()
