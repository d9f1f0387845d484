"""Settings: a bad setting stops start-up with one clear line naming it."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import AliasChoices, ValidationError
from typer.testing import CliRunner

from api.settings import ApiSettings
from cli.main import app
from collector.settings import CollectorSettings
from core.settings import DatabaseSettings, describe_validation_error

pytestmark = pytest.mark.reliability  # the reliability suite (pytest -m reliability)

runner = CliRunner()


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.chdir(tmp_path)  # no stray .env
    for var in ("DATABASE_URL", "MEASUREDB_DATA_DIR", "MEASUREDB_TIMESCALEDB"):
        monkeypatch.delenv(var, raising=False)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql://root@localhost/x", "must start with postgresql://"),
        ("postgresql://u@localhost:port/x", "the port is not a number"),
        ("postgresql://u@localhost:5432", "names no database"),
        ("postgresql:///measuredb", "names no host"),
    ],
)
def test_malformed_database_url_names_the_setting(monkeypatch, url: str, message: str) -> None:
    monkeypatch.setenv("DATABASE_URL", url)
    with pytest.raises(ValidationError) as info:
        CollectorSettings()
    line = describe_validation_error(info.value, CollectorSettings)
    assert line.startswith(f"bad setting DATABASE_URL: {message}")
    assert url not in line  # URLs may hold passwords: never echoed


def test_url_spellings_are_normalised(monkeypatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgres://u:p@db:5432/measuredb")
    assert CollectorSettings().database_url == "postgresql://u:p@db:5432/measuredb"
    monkeypatch.setenv("DATABASE_URL", "postgresql+psycopg://u@db/measuredb")
    assert ApiSettings().database_url == "postgresql://u@db/measuredb"


def test_prefixed_settings_name_their_variable(monkeypatch) -> None:
    monkeypatch.setenv("MEASUREDB_COLLECTOR_SPEED", "-3")
    with pytest.raises(ValidationError) as info:
        CollectorSettings()
    line = describe_validation_error(info.value, CollectorSettings)
    assert line == "bad setting MEASUREDB_COLLECTOR_SPEED: Input should be greater than 0 (got '-3')"


def test_cli_malformed_url_is_one_line_and_exit_2(monkeypatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "mysql://root@localhost/x")
    result = runner.invoke(app, ["schema", "status"])
    assert result.exit_code == 2
    assert result.output.strip() == (
        "measuredb: bad setting DATABASE_URL: must start with postgresql:// "
        "(for example postgresql://user:pass@host:5432/measuredb)"
    )


def test_cli_unreachable_database_is_one_line_and_exit_2(monkeypatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://nobody:secret@127.0.0.1:1/measuredb")
    result = runner.invoke(app, ["schema", "status"])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(
        "measuredb: bad setting DATABASE_URL: cannot connect to postgresql://nobody:***@127.0.0.1:1/measuredb: "
    )
    assert "secret" not in result.output


def test_cli_bad_api_setting(monkeypatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://u@127.0.0.1:1/measuredb")
    monkeypatch.setenv("MEASUREDB_API_PORT", "99999")
    result = runner.invoke(app, ["api"])
    assert result.exit_code == 2
    assert result.output.strip() == (
        "measuredb: bad setting MEASUREDB_API_PORT: Input should be less than or equal to 65535 (got '99999')"
    )


# ---------------------------------------------------------------- every setting, three values

OK, ERR = "ok", "error"
# variable: (class, field, (empty: OK with the value it gives | ERR with a word of the message),
#            wrong value and a word of its message, right value and what it gives)
EVERY_SETTING: dict[str, tuple[type, str, tuple, tuple[str, str], tuple[str, object]]] = {
    "DATABASE_URL": (DatabaseSettings, "database_url", (OK, None), ("mysql://x/y", "postgresql://"),
                     ("postgres://u@db/m", "postgresql://u@db/m")),
    "MEASUREDB_DATA_DIR": (DatabaseSettings, "data_dir", (ERR, "name a folder"), ("/etc/hostname", "is a file"),
                           ("/var/lib/m", Path("/var/lib/m"))),
    "MEASUREDB_TIMESCALEDB": (DatabaseSettings, "timescaledb", (ERR, "'auto', 'on' or 'off'"),
                              ("yes", "'auto', 'on' or 'off'"), ("off", "off")),
    "MEASUREDB_ENGINE": (DatabaseSettings, "engine", (ERR, "'auto', 'citus' or 'postgresql'"),
                         ("mysql", "'auto', 'citus' or 'postgresql'"), ("citus", "citus")),
    "MEASUREDB_COLLECTOR_NODE": (CollectorSettings, "node", (ERR, "at least 1 character"), ("", "at least 1"),
                                 ("ref16", "ref16")),
    "MEASUREDB_COLLECTOR_WORKLOAD": (CollectorSettings, "workload", (OK, None), None, ("rds", "rds")),
    # (read when the node is made: a missing or bad file stops it, tests/cli/test_backfill.py)
    "MEASUREDB_COLLECTOR_ANOMALIES": (CollectorSettings, "anomalies", (OK, None), None,
                                      ("/srv/anomalies.yaml", Path("/srv/anomalies.yaml"))),
    "MEASUREDB_COLLECTOR_SEED": (CollectorSettings, "seed", (ERR, "valid integer"), ("-1", "greater than or equal"),
                                 ("7", 7)),
    "MEASUREDB_COLLECTOR_SPEED": (CollectorSettings, "speed", (ERR, "valid number"), ("0", "greater than 0"),
                                  ("60", 60.0)),
    "MEASUREDB_COLLECTOR_BACKFILL_DAYS": (CollectorSettings, "backfill_days", (ERR, "valid integer"),
                                          ("9999", "less than or equal"), ("0", 0)),
    "MEASUREDB_COLLECTOR_INTERVAL_SECONDS": (CollectorSettings, "interval_seconds", (ERR, "valid integer"),
                                             ("0", "greater than or equal"), ("300", 300)),
    "MEASUREDB_COLLECTOR_STEP_SECONDS": (CollectorSettings, "step_seconds", (ERR, "valid integer"),
                                         ("1.5", "valid integer"), ("1", 1)),
    "MEASUREDB_COLLECTOR_HEARTBEAT_SECONDS": (CollectorSettings, "heartbeat_seconds", (ERR, "valid number"),
                                              ("301", "less than or equal"), ("2.5", 2.5)),
    "MEASUREDB_COLLECTOR_SPOOL_DIR": (CollectorSettings, "spool_dir", (OK, None), ("/etc/hostname", "is a file"),
                                      ("/srv/spool", Path("/srv/spool"))),
    "MEASUREDB_COLLECTOR_SPOOL_MAX_BYTES": (CollectorSettings, "spool_max_bytes", (ERR, "valid integer"),
                                            ("1000", "greater than or equal"), ("1073741824", 1073741824)),
    "MEASUREDB_COLLECTOR_SPOOL_FULL": (CollectorSettings, "spool_full", (ERR, "'pause' or 'drop-oldest'"),
                                       ("drop", "'pause' or 'drop-oldest'"), ("drop-oldest", "drop-oldest")),
    "MEASUREDB_COLLECTOR_OUTAGE_WAIT_SECONDS": (CollectorSettings, "outage_wait_seconds", (ERR, "valid number"),
                                                ("-1", "greater than or equal"), ("0", 0.0)),
    "MEASUREDB_COLLECTOR_PROGRESS": (CollectorSettings, "progress", (ERR, "'auto', 'bar', 'lines' or 'off'"),
                                     ("dots", "'auto', 'bar', 'lines' or 'off'"), ("lines", "lines")),
    "MEASUREDB_COLLECTOR_UPKEEP_SECONDS": (CollectorSettings, "upkeep_seconds", (ERR, "valid number"),
                                           ("1", "greater than or equal"), ("60", 60.0)),
    "MEASUREDB_COLLECTOR_COMPRESS_AFTER_HOURS": (CollectorSettings, "compress_after_hours", (ERR, "valid number"),
                                                 ("x", "valid number"), ("0.5", 0.5)),
    "MEASUREDB_API_HOST": (ApiSettings, "host", (ERR, "at least 1 character"), ("", "at least 1"),
                           ("0.0.0.0", "0.0.0.0")),
    "MEASUREDB_API_PORT": (ApiSettings, "port", (ERR, "valid integer"), ("0", "greater than or equal"),
                           ("8100", 8100)),
    "MEASUREDB_API_DB_ROLE": (ApiSettings, "db_role", (OK, ""), ("Robert'); DROP", "should match pattern"),
                              ("reader_2", "reader_2")),
    "MEASUREDB_API_POOL_SIZE": (ApiSettings, "pool_size", (OK, None), ("0", "greater than or equal"),
                                ("4", 4)),
    "MEASUREDB_API_POOL_TIMEOUT_SECONDS": (ApiSettings, "pool_timeout_seconds", (ERR, "valid number"),
                                           ("0", "greater than 0"), ("2.5", 2.5)),
    "MEASUREDB_API_WORKERS": (ApiSettings, "workers", (OK, None), ("65", "less than or equal"),
                              ("2", 2)),
    "MEASUREDB_API_THREADS": (ApiSettings, "threads", (OK, None), ("0", "greater than or equal"), ("8", 8)),
    "MEASUREDB_API_KEEP_ALIVE_SECONDS": (ApiSettings, "keep_alive_seconds", (ERR, "valid integer"),
                                         ("0", "greater than or equal"), ("75", 75)),
    "MEASUREDB_API_REQUIRE_TOKEN_FOR_READS": (ApiSettings, "require_token_for_reads", (ERR, "valid boolean"),
                                              ("maybe", "valid boolean"), ("true", True)),
    "MEASUREDB_API_CORS_ORIGINS": (ApiSettings, "cors_origins", (OK, []), ("example.com", "is no origin"),
                                   ("http://a.example, https://b.example:8443",
                                    ["http://a.example", "https://b.example:8443"])),
    "MEASUREDB_API_MAX_BODY_BYTES": (ApiSettings, "max_body_bytes", (ERR, "valid integer"),
                                     ("10", "greater than or equal"), ("2048", 2048)),
    "MEASUREDB_API_MAX_IMPORT_BYTES": (ApiSettings, "max_import_bytes", (ERR, "valid integer"),
                                       ("1e3", "valid integer"), ("100000", 100000)),
    "MEASUREDB_API_HEARTBEAT_STALE_SECONDS": (ApiSettings, "heartbeat_stale_seconds", (ERR, "valid number"),
                                              ("0", "greater than 0"), ("90", 90.0)),
    "MEASUREDB_API_CACHE_ENABLED": (ApiSettings, "cache_enabled", (ERR, "valid boolean"), ("2", "valid boolean"),
                                    ("false", False)),
    "MEASUREDB_API_CACHE_MAX_BYTES": (ApiSettings, "cache_max_bytes", (ERR, "valid integer"),
                                      ("-1", "greater than or equal"), ("0", 0)),
    "MEASUREDB_API_CACHE_MAX_ENTRY_BYTES": (ApiSettings, "cache_max_entry_bytes", (ERR, "valid integer"),
                                            ("-1", "greater than or equal"), ("1024", 1024)),
    "MEASUREDB_API_TOKEN_CACHE_SECONDS": (ApiSettings, "token_cache_seconds", (ERR, "valid number"),
                                          ("3601", "less than or equal"), ("0", 0.0)),
    "MEASUREDB_API_CONTROL_TIMEOUT_SECONDS": (ApiSettings, "control_timeout_seconds", (ERR, "valid number"),
                                              ("0", "greater than 0"), ("10", 10.0)),
    "MEASUREDB_API_ANONYMOUS_RATE_PER_SECOND": (ApiSettings, "anonymous_rate_per_second", (ERR, "valid number"),
                                                ("-2", "greater than or equal"), ("0", 0.0)),
    "MEASUREDB_API_ANONYMOUS_BURST": (ApiSettings, "anonymous_burst", (ERR, "valid integer"),
                                      ("0", "greater than or equal"), ("10", 10)),
    "MEASUREDB_API_ANONYMOUS_MAX_BODY_BYTES": (ApiSettings, "anonymous_max_body_bytes", (ERR, "valid integer"),
                                               ("-1", "greater than or equal"), ("0", 0)),
    "MEASUREDB_API_AUTH_FAILURE_RATE_PER_SECOND": (ApiSettings, "auth_failure_rate_per_second",
                                                   (ERR, "valid number"), ("0", "greater than 0"), ("0.5", 0.5)),
    "MEASUREDB_API_AUTH_FAILURE_BURST": (ApiSettings, "auth_failure_burst", (ERR, "valid integer"),
                                         ("0", "greater than or equal"), ("5", 5)),
    "MEASUREDB_API_ANONYMOUS_LIMIT_EXEMPT": (ApiSettings, "anonymous_limit_exempt", (OK, []),
                                             ("10.0.0.0/33", "is no address or network"),
                                             ('["10.0.0.0/8", "::1"]', ["10.0.0.0/8", "::1"])),
}


def _variable(cls: type, name: str) -> str:
    field = cls.model_fields[name]
    alias = field.validation_alias
    if isinstance(alias, AliasChoices):
        return str(alias.choices[0])
    return (cls.model_config.get("env_prefix", "") + name).upper()


def test_the_table_names_every_setting() -> None:
    every = {_variable(cls, name) for cls in (DatabaseSettings, CollectorSettings, ApiSettings)
             for name in cls.model_fields}
    assert every == set(EVERY_SETTING), "add the new setting to EVERY_SETTING with its three values"


def _read(monkeypatch, variable: str, value: str, cls: type, field: str) -> tuple[str, object]:
    monkeypatch.setenv(variable, value)
    try:
        return OK, getattr(cls(), field)
    except ValidationError as exc:
        line = describe_validation_error(exc, cls)
        assert line.startswith(f"bad setting {variable}: ") and "\n" not in line, line
        return ERR, line


@pytest.mark.parametrize("variable", sorted(EVERY_SETTING))
def test_every_setting_empty_wrong_and_right(monkeypatch, variable: str) -> None:
    cls, field, empty, wrong, right = EVERY_SETTING[variable]
    kind, got = _read(monkeypatch, variable, "", cls, field)
    assert kind == empty[0], (variable, got)
    assert (got == empty[1]) if kind == OK else (empty[1] in str(got)), (variable, got)
    if wrong is not None:
        kind, got = _read(monkeypatch, variable, wrong[0], cls, field)
        assert kind == ERR and wrong[1] in str(got), (variable, got)
    kind, got = _read(monkeypatch, variable, right[0], cls, field)
    assert (kind, got) == (OK, right[1]), variable


@pytest.mark.parametrize(("variable", "value", "words"), [
    ("MEASUREDB_API_ANONYMOUS_LIMIT_EXEMPT", "", None),
    ("MEASUREDB_API_ANONYMOUS_LIMIT_EXEMPT", "10.0.0.0/8", None),
    ("MEASUREDB_API_ANONYMOUS_LIMIT_EXEMPT", "nope", "is no address or network"),
    ("MEASUREDB_API_CORS_ORIGINS", "http://example.com", None),
    ("MEASUREDB_API_CORS_ORIGINS", "[not json", "not a JSON list"),
])
def test_list_settings_through_the_command_line(monkeypatch, variable: str, value: str, words: str | None) -> None:
    """`measuredb api` reads its settings first: a bad one is one line naming the variable
    and exit 2; a good one gets as far as the (unreachable) database."""
    monkeypatch.setenv("DATABASE_URL", "postgresql://u@127.0.0.1:1/measuredb")
    monkeypatch.setenv(variable, value)
    result = runner.invoke(app, ["api"])
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    if words is None:
        assert "cannot connect" in result.output, result.output
    else:
        assert result.output.startswith(f"measuredb: bad setting {variable}: ") and words in result.output
