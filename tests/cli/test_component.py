"""`measuredb component` and /admin/components: the process-to-component map of the
transaction-resource report as configuration, through core/configuration.py; the report reads
it when it runs; the component names are one list (core.configuration.COMPONENTS, the SQL
function and the table's check agree)."""

from __future__ import annotations

import csv
import importlib.util
import io
from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

from cli.main import app
from core import configuration
from core import schema as runner
from tests.api.conftest import make_client
from tests.engine import MODE
from tests.tokens import create_token

_spec = importlib.util.spec_from_file_location("test_tiers_data", Path(__file__).parents[1] / "schema" / "test_tiers_data.py")
data = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(data)


@pytest.fixture(scope="module")
def url(fresh_database) -> str:
    u = fresh_database("_components")
    runner.apply(u, mode=MODE)
    with psycopg.connect(u) as c:
        data.load(c)
    return u


@pytest.fixture
def cli(url: str, monkeypatch, tmp_path):
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("MEASUREDB_DATA_DIR", str(tmp_path))
    return lambda *args: CliRunner().invoke(app, list(args))


def table4(cli) -> dict[str, str]:
    r = cli("report", "transaction-resource", "--system", data.SYSTEM, "--date", "2024-03-10",
            "--transaction-process", "$S%", "--format", "csv")
    assert r.exit_code == 0, r.output
    return {row["component"]: row["cpu_seconds"] for row in csv.DictReader(io.StringIO(r.stdout))}


def test_the_names_are_one_list(url: str) -> None:
    with psycopg.connect(url) as c:
        sql = c.execute("SELECT _measure.component_names()").fetchone()[0]
        check = c.execute("SELECT pg_get_constraintdef(oid) FROM pg_constraint"
                          " WHERE conrelid = '_measure.component_map'::regclass AND contype = 'c'"
                          " AND pg_get_constraintdef(oid) LIKE '%component%'").fetchone()[0]
    assert tuple(sql) == configuration.COMPONENTS
    assert all(f"'{name}'" in check for name in configuration.COMPONENTS) and check.count("'") == 2 * len(sql)


def test_set_list_remove_and_the_report_follows(cli) -> None:
    before = table4(cli)
    assert float(before["server"]) > 0
    done = cli("component", "set", "$appl.et1.%", "hls", "--system", "test", "--priority", "5")
    assert done.exit_code == 0, done.output
    assert done.output.strip() == "program_file_name LIKE $APPL.ET1.% is hls (priority 5) for \\TEST"
    listed = cli("component", "list", "--system", "\\TEST", "--format", "json")
    rows = __import__("json").loads(listed.stdout)
    assert rows[0] == {"system": "\\TEST", "priority": 5, "match_on": "program_file_name", "pattern": "$APPL.ET1.%",
                       "component": "hls", "source": "system"}
    assert any(r["source"] == "default" for r in rows)
    after = table4(cli)
    assert float(after["hls"]) == float(before["server"]) + float(before.get("hls", 0))   # the servers moved
    assert cli("component", "remove", "$APPL.ET1.%", "--system", "\\TEST").exit_code == 0
    assert table4(cli) == before
    bad = cli("component", "set", "$X%", "database", "--system", "\\TEST")
    assert bad.exit_code == 2 and "COMPONENT: database is none of tmf_disc, line_handler" in bad.output
    gone = cli("component", "remove", "$NOTHING%", "--process-name")
    assert gone.exit_code == 2 and "the default set has no component row for process_name $NOTHING%" in gone.output


def test_the_api_does_the_same(url: str) -> None:
    admin = {"Authorization": f"Bearer {create_token(url, 'components-admin', 'admin')}"}
    with make_client(url) as c:
        r = c.put("/admin/components", json={"system": "TEST", "pattern": "$TCP%", "match_on": "process_name",
                                             "component": "tcp", "priority": 7}, headers=admin)
        assert r.status_code == 200, r.text
        assert r.json() == {"system": "\\TEST", "match_on": "process_name", "pattern": "$TCP%", "component": "tcp",
                            "priority": 7}
        listed = c.get("/admin/components", params={"system": "TEST"}, headers=admin).json()["items"]
        assert listed[0]["pattern"] == "$TCP%" and listed[0]["source"] == "system"
        r = c.put("/admin/components", json={"pattern": "$X%", "component": "nothing"}, headers=admin)
        assert r.status_code == 422
        r = c.delete("/admin/components", params={"system": "TEST", "match_on": "process_name", "pattern": "$TCP%"},
                     headers=admin)
        assert r.status_code == 200 and r.json()["pattern"] == "$TCP%"
        assert c.get("/admin/components", headers={"Authorization": "Bearer nope"}).status_code == 401
