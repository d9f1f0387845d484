"""Property-based run of schemathesis against the app's own OpenAPI schema: no 5xx and no
response that breaks its declared schema. Bounded (few examples per operation); a fake
collector answers control requests so status / active / bump endpoints answer too."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from api.db import build_engine
from tests.api.conftest import make_client
from tests.api.fakes import FakeCollector

ANSWERS = {"status": {"entities": {"cpu": 2}, "cids": 2},
           "read_active": {"entity": "cpu", "at": "2024-05-01T00:00:00+00:00", "records": []},
           "bump_init": {"offset": -1}, "bump": {"bumped": False}}


@pytest.fixture(scope="module")
def api_schema(api_db_url, write_headers):
    app = make_client(api_db_url).app
    settings_ = app.state.settings
    app.state.engine = build_engine(api_db_url, role=settings_.db_role, pool_size=4)
    with FakeCollector(api_db_url) as fc:
        fc.handler = lambda kind, payload: ANSWERS[kind]
        yield schemathesis.openapi.from_asgi("/openapi.json", app)
    app.state.engine.dispose()


def test_api_conforms_to_its_schema(api_schema, write_headers):
    # (schemathesis' pytest plugin does not load under this pytest; drive Hypothesis directly)
    failures, calls, operations = [], [], 0
    for result in api_schema.get_all_operations():
        operation = result.ok()
        operations += 1

        @given(case=operation.as_strategy())
        @settings(max_examples=12, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        def run(case):
            calls.append(case.operation.path)
            case.call_and_validate(headers=write_headers, checks=[
                not_a_server_error, status_code_conformance, content_type_conformance,
                response_schema_conformance])

        try:
            run()
        except Exception as exc:  # noqa: BLE001 - collect every operation's failure
            failures.append(f"{operation.method.upper()} {operation.path}: {exc}")
    assert not failures, "\n\n".join(failures)
    assert operations >= 13 and len(calls) > 5 * operations  # it really ran
