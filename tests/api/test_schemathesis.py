"""schemathesis against the app's own OpenAPI document with every check (`schemathesis run
--checks all`: examples, coverage, fuzzing and stateful phases), once with a write token and
once anonymously: 0 failures. Bounded (a few examples per operation, deterministic); a fake
collector answers control requests so status / active / bump endpoints answer too.

positive_data_acceptance wants every schema-valid request accepted. The operations of
:data:`SEMANTIC_422` also answer 422 to some schema-valid requests, for rules that JSON Schema
cannot state in one OpenAPI operation; for them 422 is an expected answer to valid-looking data
(every other check still applies to them, and every other operation gets no such allowance)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from schemathesis.config import SchemathesisConfig
from schemathesis.engine import events

from api.db import build_engine
from tests.api.conftest import make_client
from tests.api.fakes import FakeCollector

pytestmark = pytest.mark.reliability  # the reliability suite (pytest -m reliability)

AT = "2024-05-01T00:00:00+00:00"
ANSWERS = {"status": {"status": {"measurement_id": 1, "name": "M", "state": "running",
                                 "entities": {"cpu": 2}, "counter_space_words": 96, "cids": 2,
                                 "copies_written": 0, "not_allocated": {}},
                      "cpus": {}, "at": AT},
           "read_active": {"entity": "cpu", "at": AT, "records": []},
           "bump_init": {"offset": -1}, "bump": {"bumped": False, "at": AT}}
SEMANTIC_422 = {
    "GET /active/{entity}": "descriptor fields and their values depend on the entity type",
    "GET /measurements/{measurement_id}/counters/{entity}":
        "descriptor fields depend on the entity; at excludes a window; IF takes all three parts; "
        "cursors are opaque",
    "GET /reports/{report}": "each report has its own required parameters and calendar rules",
    "GET /tiers/{entity}/auto": "filters depend on the entity (cpu, volume, process); from ≤ to; "
                                "cursors are opaque",
    "GET /tiers/{entity}/{tier}": "filters depend on the entity and the tier (shift not for hour); "
                                  "from ≤ to; cursors are opaque",
    "POST /meascom": "MEASCOM grammar",
    "POST /admin/systems": "time-zone names (the IANA database), unique names and numbers",
    "PUT /admin/systems/{system}": "time-zone names; a system a collector feeds keeps its name and zone",
    "PUT /admin/systems/{system}/calendar/{effective_from}":
        "shifts of one version may not overlap; whole hours; holiday shift among the shifts",
    "PUT /admin/thresholds": "the item must be a column of the entity's hour view; the shift must exist",
    "PUT /admin/systems/{system}/analysis": "major above minor, with the stored value of the one not given",
    "PUT /admin/analysis/floors/{entity}/{item}": "the entity and item must have a baseline (the stored items)",
    "PUT /admin/analysis/indicators/{indicator}": "the indicator must exist; all weights add up to at most 100",
    "POST /import": "the CSV: its header, rows and values (every bad row is listed)",
    "POST /measurements": "exactly one of contab or meascom; MEASCOM grammar; CONTAB descriptor "
                          "rules; the schedule's order",
    "POST /measurements/{measurement_id}/start": "TO and FOR exclude each other; the schedule's order",
}
ACCEPTED = ["2xx", "3xx", "401", "403", "404", "409", "429", "5xx"]  # schemathesis' default
# negative_data_rejection: schemathesis' default, and 413: a body over the limit (16 KiB without
# a bearer token) is refused before it is read whole, as any other body that breaks a rule
REJECTED = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429", "5xx"]


@pytest.fixture(scope="module")
def app(api_db_url) -> Iterator:
    app = make_client(api_db_url, anonymous_rate_per_second=1_000_000, anonymous_burst=1_000_000).app
    app.state.engine = build_engine(api_db_url, role=app.state.settings.db_role, pool_size=4)
    with FakeCollector(api_db_url) as fc:
        fc.handler = lambda kind, payload: ANSWERS[kind]
        yield app
    app.state.engine.dispose()


def run_all_checks(app, headers: dict[str, str]) -> tuple[int, list[str]]:
    """(test cases run, failures) of every check over every phase."""
    config = SchemathesisConfig.from_dict({
        "headers": headers, "seed": 16,
        "generation": {"max-examples": 4, "deterministic": True, "database": "none"},
        "checks": {"negative_data_rejection": {"expected-statuses": REJECTED}},
        "operations": [{"include-name": name, "checks": {"positive_data_acceptance": {
            "expected-statuses": [*ACCEPTED, "422"]}}} for name in SEMANTIC_422],
    })
    config.projects.get_default().checks.update(included_check_names=["all"])
    schema = schemathesis.openapi.from_asgi("/openapi.json", app, config=config)
    cases, failures = 0, []
    for event in schemathesis.engine.from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished):
            cases += len(event.recorder.cases)
            for case_id, checks in event.recorder.checks.items():
                for check in checks:
                    if check.failure_info is not None:
                        response = event.recorder.interactions[case_id].response
                        failures.append(f"{event.recorder.label}: {check.name}: "
                                        f"{check.failure_info.failure.title} -> "
                                        f"{response.status_code if response else '-'} "
                                        f"{response.content[:300] if response else ''}")
        elif isinstance(event, (events.NonFatalError, events.FatalError)):
            failures.append(f"error: {event}")
    return cases, failures


def test_every_check_passes_with_a_write_token(app, write_headers):
    cases, failures = run_all_checks(app, write_headers)
    assert not failures, "\n".join(sorted(set(failures)))
    assert cases > 400  # it really ran


def test_every_check_passes_anonymously(app):
    cases, failures = run_all_checks(app, {})
    assert not failures, "\n".join(sorted(set(failures)))
    assert cases > 400


def test_the_cli_configuration_allows_exactly_these_422s() -> None:
    """schemathesis.toml (for `schemathesis run --checks all` against a running API) names the
    same operations as SEMANTIC_422, with 422 accepted for valid-looking data and nothing else."""
    import tomllib
    from pathlib import Path

    config = tomllib.loads((Path(__file__).resolve().parents[2] / "schemathesis.toml").read_text())
    got = {op["include-name"]: op["checks"]["positive_data_acceptance"]["expected-statuses"]
           for op in config["operations"]}
    assert set(got) == set(SEMANTIC_422)
    assert config["checks"]["negative_data_rejection"]["expected-statuses"] == REJECTED
    assert all(sorted(statuses) == sorted([*ACCEPTED, "422"]) for statuses in got.values())
