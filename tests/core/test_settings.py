"""Settings: a bad setting stops start-up with one clear line naming it."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from api.settings import ApiSettings
from cli.main import app
from collector.settings import CollectorSettings
from core.settings import describe_validation_error

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
