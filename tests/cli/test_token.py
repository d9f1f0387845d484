"""`measuredb token create|list|revoke`: the token printed works against the API, the list
never shows a secret, a revoked token stops working, mistakes are one line and exit 2."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator

import psycopg
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from api.main import create_app
from api.settings import ApiSettings
from cli.main import app
from core import schema
from tests.engine import MODE

CONTAB = {"descriptors": [{"type": "CPU"}]}


@pytest.fixture(scope="module")
def token_db(fresh_database) -> str:
    url = fresh_database("_token_cli")
    schema.apply(url, mode=MODE)
    with psycopg.connect(url) as c:
        c.execute("INSERT INTO _measure.system (system_name, system_number, time_zone) VALUES ('\\TOK', 4, 'UTC')")
    return url


@pytest.fixture
def cli(token_db: str, monkeypatch, tmp_path):
    monkeypatch.setenv("DATABASE_URL", token_db)
    monkeypatch.setenv("MEASUREDB_DATA_DIR", str(tmp_path))

    def run(*args: str):
        return CliRunner().invoke(app, ["token", *args])

    with psycopg.connect(token_db) as c:
        c.execute("DELETE FROM _measure.api_token")
    return run


@pytest.fixture(scope="module")
def api(token_db: str) -> Iterator[TestClient]:
    """The API with reads that need a token too."""
    with TestClient(create_app(ApiSettings(require_token_for_reads=True), database_url=token_db)) as c:
        yield c


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


# one line of `token list`: name, scope, state, created, last used (the console expands the
# tabs between them to spaces)
LINE = re.compile(r"(?P<name>\S+)\s+(?P<scope>read|write)\s+(?P<state>active|revoked \d{4}-\d\d-\d\d \d\d:\d\d)"
                  r"\s+created (?P<created>\d{4}-\d\d-\d\d \d\d:\d\d)\s+last used (?P<used>never|\d{4}-\d\d-\d\d \d\d:\d\d)")


def listed(result) -> dict[str, dict[str, str]]:
    out = {}
    for line in result.stdout.splitlines():
        m = LINE.fullmatch(line.rstrip())
        assert m is not None, line
        out[m["name"]] = m.groupdict()
    return out


def test_create_prints_a_token_that_the_api_accepts(cli, api, token_db) -> None:
    result = cli("create", "ci-writer", "--scope", "write")
    assert result.exit_code == 0, result.output
    token = result.stdout.strip()
    assert token.startswith("mdb_") and len(token) > 40 and "\n" not in token
    with psycopg.connect(token_db) as c:
        row = c.execute("SELECT scope, token_sha256, revoked_at FROM _measure.api_token WHERE name = 'ci-writer'"
                        ).fetchone()
    assert (row[0], bytes(row[1]), row[2]) == ("write", hashlib.sha256(token.encode()).digest(), None)
    assert api.get("/catalog/entities").status_code == 401
    assert api.get("/catalog/entities", headers=bearer(token)).status_code == 200
    r = api.post("/measurements", json={"name": "TOKW", "contab": CONTAB}, headers=bearer(token))
    assert r.status_code == 201, r.text


def test_default_scope_is_read_and_a_read_token_cannot_write(cli, api) -> None:
    result = cli("create", "grafana")
    assert result.exit_code == 0, result.output
    token = result.stdout.strip()
    assert api.get("/measurements", headers=bearer(token)).status_code == 200
    r = api.post("/measurements", json={"name": "TOKR", "contab": CONTAB}, headers=bearer(token))
    assert (r.status_code, r.json()["error"]) == (403, "Forbidden")


def test_every_token_is_new(cli) -> None:
    a, b = cli("create", "one").stdout.strip(), cli("create", "two").stdout.strip()
    assert a != b


def test_list_shows_names_scopes_and_use_never_the_token(cli, api) -> None:
    reader = cli("create", "reader").stdout.strip()
    writer = cli("create", "writer", "--scope", "write").stdout.strip()
    result = cli("list")
    assert result.exit_code == 0, result.output
    tokens = listed(result)
    assert [(t["name"], t["scope"], t["state"], t["used"]) for t in tokens.values()] == [
        ("reader", "read", "active", "never"), ("writer", "write", "active", "never")]
    assert reader not in result.output and writer not in result.output
    assert api.get("/measurements", headers=bearer(reader)).status_code == 200
    tokens = listed(cli("list"))
    assert tokens["reader"]["used"] != "never" and tokens["writer"]["used"] == "never"


def test_list_of_no_tokens_prints_nothing(cli) -> None:
    result = cli("list")
    assert (result.exit_code, result.stdout) == (0, "")


def test_revoke_makes_the_token_fail_at_once(cli, api) -> None:
    token = cli("create", "short-lived", "--scope", "write").stdout.strip()
    assert api.get("/measurements", headers=bearer(token)).status_code == 200
    assert api.get("/measurements", headers=bearer(token)).status_code == 200  # remembered by the API now
    result = cli("revoke", "short-lived")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "token short-lived revoked"
    r = api.get("/measurements", headers=bearer(token))
    assert (r.status_code, r.json()["detail"]) == (401, "the bearer token is unknown or revoked")
    r = api.post("/measurements", json={"name": "TOKX", "contab": CONTAB}, headers=bearer(token))
    assert r.status_code == 401
    assert listed(cli("list"))["short-lived"]["state"].startswith("revoked 20")


def test_a_revoked_name_can_be_neither_revoked_again_nor_reused(cli) -> None:
    cli("create", "gone")
    assert cli("revoke", "gone").exit_code == 0
    again = cli("revoke", "gone")
    assert again.exit_code == 2
    assert again.output == "measuredb: no active token named 'gone' (see measuredb token list)\n"
    reuse = cli("create", "gone")
    assert reuse.exit_code == 2
    assert "a token named 'gone' exists already; revoke it or choose another name" in reuse.output


@pytest.mark.parametrize(("args", "message"), [
    (("create", "x", "--scope", "root"), "measuredb: --scope must be read, write or admin, got 'root'\n"),
    (("create", "   "), "measuredb: NAME must be 1-64 characters\n"),
    (("create", "n" * 65), "measuredb: NAME must be 1-64 characters\n"),
    (("revoke", "nobody"), "measuredb: no active token named 'nobody' (see measuredb token list)\n"),
])
def test_mistakes_are_one_line_and_exit_2(cli, token_db, args, message) -> None:
    result = cli(*args)
    assert (result.exit_code, result.output) == (2, message)
    with psycopg.connect(token_db) as c:
        assert c.execute("SELECT count(*) FROM _measure.api_token").fetchone()[0] == 0


def test_missing_arguments_are_usage_errors(cli) -> None:
    assert cli("create").exit_code == 2
    assert cli("revoke").exit_code == 2


def test_an_unreachable_database_is_one_line(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://nobody@127.0.0.1:1/measuredb")
    monkeypatch.setenv("MEASUREDB_DATA_DIR", str(tmp_path))
    for args in (("create", "x"), ("list",), ("revoke", "x")):
        result = CliRunner().invoke(app, ["token", *args])
        assert result.exit_code == 2, args
        assert result.output.startswith("measuredb: ") and result.output.count("\n") == 1, result.output
