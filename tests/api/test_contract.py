"""The API keeps its contract (issue 16, part 5): NUL and undecodable input get a documented
4xx on every endpoint, unsupported methods 405 with Allow, anonymous callers change no row,
anonymous traffic is rate limited, and the docs work without internet."""

from __future__ import annotations

import re

import psycopg
import pytest
from fastapi.routing import APIRoute, iter_route_contexts

from api.contract import NO_NUL
from api.patterns import WORDS
from api.ratelimit import TokenBuckets
from tests.api.conftest import make_client

CONTAB = {"descriptors": [{"type": "CPU"}]}
PATH_VALUES = {"measurement_id": "{mid}", "entity": "cpu", "tier": "hour", "run_id": "1",
               "report": "threshold", "retention_class": "raw", "system": "APIT", "effective_from": "2024-04-06",
               "day": "2024-04-08", "item": "busy", "indicator": "cpu_queuing"}
BODIES = {
    "/measurements": {"name": "CONTRACT", "contab": CONTAB},
    "/measurements/{measurement_id}/start": {}, "/measurements/{measurement_id}/stop": {},
    "/usercounters/bump-init": {"cpu": 1, "pin": 2, "name": "R"},
    "/usercounters/bump": {"cpu": 1, "pin": 2, "name": "R", "op": "INC"},
    "/meascom": {"text": "HELP"}, "/admin/retention/{retention_class}": {"keep_days": 35},
    "/admin/systems": {"name": "CONTR", "number": 99, "time_zone": "UTC"}, "/admin/systems/{system}": {"number": 3},
    "/admin/systems/{system}/calendar/{effective_from}": {"shifts": [{"shift_no": 1, "begin": "00:00", "end": "24:00"}]},
    "/admin/systems/{system}/holidays/{day}": {"name": "x"},
    "/admin/thresholds": {"entity": "cpu", "item": "busy_max", "operator": ">", "limit": 70},
    "/admin/components": {"pattern": "$APPL.%", "component": "server"},
    "/admin/systems/{system}/analysis": {"weeks": 2},
    "/admin/analysis/floors/{entity}/{item}": {"floor": 10},
    "/admin/analysis/indicators/{indicator}": {"limit": 2},
}


@pytest.fixture(scope="module")
def mid(client, write_headers) -> int:
    r = client.post("/measurements", json={"name": "CONTRM", "contab": CONTAB}, headers=write_headers)
    return r.json()["measurement_id"]


def operations(app) -> list[tuple[str, APIRoute]]:
    """(method, route) of every documented operation, as served."""
    return [(method, route) for route in iter_route_contexts(app.routes)
            if isinstance(route.original_route, APIRoute) and route.include_in_schema
            for method in sorted(route.methods)]


def url(route, mid: int, **values: str) -> str:
    return route.path_format.format(**{**PATH_VALUES, **values}).replace("{mid}", str(mid))


def query_names(route) -> list[str]:
    def walk(dependant):
        for field in dependant.query_params:
            model = getattr(field.field_info.annotation, "model_fields", None)
            yield from ((f.alias or n) for n, f in model.items()) if model else (field.alias,)
        for d in dependant.dependencies:
            yield from walk(d)
    return list(walk(route.dependant))


def documented(client, method: str, path: str) -> set[str]:
    return set(client.app.openapi()["paths"][path][method.lower()]["responses"])


def test_every_operation_is_covered(client):
    ops = operations(client.app)
    assert len(ops) == sum(len(p) for p in client.app.openapi()["paths"].values()) >= 26
    assert {route.path_format for _, route in ops if route.body_field is not None} == set(BODIES)


@pytest.mark.parametrize("auth", ["anonymous", "write"])
def test_nul_in_a_query_parameter_is_422(client, mid, write_headers, auth):
    headers = write_headers if auth == "write" else {}
    seen = 0
    for method, route in operations(client.app):
        for name in query_names(route):
            r = client.request(method, url(route, mid), params={name: "a\x00b"}, headers=headers,
                               json=BODIES.get(route.path_format))
            assert (r.status_code, r.json()) == (422, {
                "error": "InvalidInput", "field": name,
                "detail": f"{name}: text cannot hold a NUL character (\\u0000)"}), (method, route.path, name)
            assert "422" in documented(client, method, route.path_format)
            seen += 1
    assert seen > 60


@pytest.mark.parametrize("auth", ["anonymous", "write"])
def test_nul_in_a_path_parameter_is_422(client, mid, write_headers, auth):
    headers = write_headers if auth == "write" else {}
    seen = 0
    for method, route in operations(client.app):
        for name in re.findall(r"{(\w+)}", route.path_format):
            r = client.request(method, url(route, mid, **{name: "a%00b"}), headers=headers,
                               json=BODIES.get(route.path_format))
            assert (r.status_code, r.json()["error"]) == (422, "InvalidInput"), (method, route.path, name)
            assert "\x00" not in r.text
            seen += 1
    assert seen >= 17


@pytest.mark.parametrize("auth", ["anonymous", "write"])
def test_nul_in_a_json_body_is_422(client, mid, write_headers, auth):
    headers = write_headers if auth == "write" else {}
    for method, route in operations(client.app):
        if route.body_field is None:
            continue
        body = {**BODIES[route.path_format], "k\x00": {"v": ["x", "a\x00b"]}}
        r = client.request(method, url(route, mid), json=body, headers=headers)
        assert (r.status_code, r.json()) == (422, {
            "error": "InvalidInput", "field": "k\\u0000",
            "detail": "k\\u0000: text cannot hold a NUL character (\\u0000)"}), route.path
        r = client.request(method, url(route, mid), json={**BODIES[route.path_format], "x": ["a\x00"]},
                           headers=headers)
        assert (r.status_code, r.json()["field"]) == (422, "x.0"), route.path


def test_nul_is_documented_as_invalid(client):
    doc = client.app.openapi()
    params = doc["paths"]["/measurements"]["get"]["parameters"]
    assert next(p for p in params if p["name"] == "name")["schema"]["anyOf"][0]["pattern"] == "^[^\\u0000]*$"
    fields = doc["components"]["schemas"]["EntityDescriptor"]["properties"]["fields"]
    assert fields["propertyNames"] == {"pattern": "^[^\\u0000]*$"}


def test_a_body_that_is_not_utf8_is_a_documented_422(client, mid, write_headers):
    for method, route in operations(client.app):
        if route.body_field is None:
            continue
        r = client.request(method, url(route, mid), content=b'{"name": "\xff\xfe"}', headers={
            **write_headers, "Content-Type": "application/json"})
        assert (r.status_code, r.json()) == (422, {"error": "InvalidInput", "field": "body",
                                                   "detail": "the body is not JSON text in UTF-8"})
        assert "422" in documented(client, method, route.path_format)


def test_numbers_and_times_are_not_coerced(client, mid, write_headers):
    r = client.post(f"/measurements/{mid}/stop", json={"stop_at": 0}, headers=write_headers)
    assert (r.status_code, r.json()["field"]) == (422, "stop_at")
    r = client.post("/usercounters/bump-init", json={"cpu": 1, "pin": False, "name": "R"}, headers=write_headers)
    assert (r.status_code, r.json()["field"]) == (422, "pin")
    r = client.post("/usercounters/bump-init", json={"cpu": "1", "pin": 2, "name": "R"}, headers=write_headers)
    assert (r.status_code, r.json()["field"]) == (422, "cpu")
    r = client.post("/meascom", json={"text": "HELP", "interactive": 1}, headers=write_headers)
    assert (r.status_code, r.json()["field"]) == (422, "interactive")


def test_unsupported_methods_are_405_with_allow(client, mid):
    for path, item in client.app.openapi()["paths"].items():
        target = path.format(**PATH_VALUES).replace("{mid}", str(mid))
        for method in ("OPTIONS", "PATCH"):
            r = client.request(method, target)
            assert (r.status_code, r.json()) == (405, {"error": "MethodNotAllowed",
                                                       "detail": "Method Not Allowed"}), (method, path)
            assert r.headers["allow"] == ", ".join(sorted(m.upper() for m in item)), (method, path)


def test_errors_outside_the_routes_are_error_bodies(client):
    r = client.get("/no/such/path")
    assert (r.status_code, r.json()) == (404, {"error": "NotFound", "detail": "Not Found"})


def test_422_is_documented_as_error_read(client):
    doc = client.app.openapi()
    assert "HTTPValidationError" not in str(doc)
    schemas = doc["components"]["schemas"]
    for path, item in doc["paths"].items():
        for method, op in item.items():
            invalid = op["responses"].get("422")
            if invalid is not None:  # ErrorRead, or an error with more fields (MEASCOM's line …)
                ref = invalid["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
                assert {"error", "detail", "field"} <= set(schemas[ref]["properties"]), (method, path)
    assert doc["paths"]["/measurements/{measurement_id}"]["get"]["responses"]["422"]["content"] == {
        "application/json": {"schema": {"$ref": "#/components/schemas/ErrorRead"}}}


def test_open_reads_say_the_token_is_optional(client):
    doc = client.app.openapi()
    security = {(m, p): op.get("security") for p, item in doc["paths"].items() for m, op in item.items()}
    assert security["get", "/measurements/{measurement_id}"] == [{"HTTPBearer": []}, {}]
    assert security["get", "/active/{entity}"] == [{"HTTPBearer": []}]
    assert security["get", "/measurements/{measurement_id}/status"] == [{"HTTPBearer": []}]
    assert security["post", "/measurements"] == [{"HTTPBearer": []}]
    assert security["get", "/health"] is None
    assert all(m == "get" for (m, p), s in security.items() if s and {} in s)


def _row_counts(url: str) -> dict[str, int]:
    with psycopg.connect(url) as c:
        tables = [r[0] for r in c.execute(
            "SELECT format('%I.%I', table_schema, table_name) FROM information_schema.tables "
            "WHERE table_schema = '_measure' AND table_type = 'BASE TABLE' ORDER BY 1")]
        return {t: c.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}


def test_anonymous_callers_change_no_row(client, api_db_url, mid):
    before = _row_counts(api_db_url)
    statuses = {}
    for method, route in operations(client.app):
        r = client.request(method, url(route, mid), json=BODIES.get(route.path_format))
        statuses[method, route.path_format] = r.status_code
    assert _row_counts(api_db_url) == before
    assert len(before) > 20
    writes = {k: s for k, s in statuses.items() if k[0] != "GET"}
    assert set(writes.values()) == {401} and len(writes) >= 9
    assert statuses["GET", "/active/{entity}"] == statuses["GET", "/measurements/{measurement_id}/status"] == 401
    assert statuses["GET", "/measurements/{measurement_id}"] == 200


def test_anonymous_callers_are_rate_limited(api_db_url, read_headers):
    with make_client(api_db_url, anonymous_rate_per_second=0.01, anonymous_burst=3) as c:
        assert [c.get("/catalog/entities").status_code for _ in range(3)] == [200, 200, 200]
        r = c.get("/catalog/entities")
        assert (r.status_code, r.json()["error"]) == (429, "TooManyRequests")
        assert r.headers["retry-after"] == "100"
        assert "without a bearer token from testclient" in r.json()["detail"]
        assert c.get("/health").status_code == 429  # every path, writes too
        assert c.post("/measurements", json={}).status_code == 429
        assert c.get("/catalog/entities", headers={"Authorization": "Basic eDp5"}).status_code == 429
        assert c.get("/catalog/entities", headers=read_headers).status_code == 200
        assert c.get("/catalog/entities", headers={"Authorization": "Bearer wrong"}).status_code == 401
        doc = c.app.openapi()
        for item in doc["paths"].values():
            for op in item.values():
                limited = op["responses"]["429"]
                assert limited["headers"]["Retry-After"]["required"] is True
                assert limited["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorRead"}
    with make_client(api_db_url, anonymous_rate_per_second=0.01, anonymous_burst=1,
                     anonymous_limit_exempt=["10.0.0.0/8"]) as c:
        assert [c.get("/catalog/entities").status_code for _ in range(2)] == [200, 429]
    with make_client(api_db_url, anonymous_rate_per_second=0) as c:
        assert {c.get("/catalog/entities").status_code for _ in range(150)} == {200}


def test_token_buckets_refill():
    buckets = TokenBuckets(rate=2.0, burst=2)
    assert [buckets.take("a", now=0.0) for _ in range(3)] == [0.0, 0.0, 0.5]
    assert buckets.take("b", now=0.0) == 0.0  # per client
    assert buckets.take("a", now=0.25) == 0.25  # half a token back: a quarter second to go
    assert buckets.take("a", now=0.5) == 0.0
    assert buckets.take("a", now=100.0) == 0.0 and buckets.take("a", now=100.0) == 0.0  # burst caps
    assert buckets.take("a", now=100.0) == 0.5


def test_loopback_is_exempt_by_default(client):
    from api.settings import ApiSettings

    assert ApiSettings().anonymous_limit_exempt == ["127.0.0.1/8", "::1"]
    with pytest.raises(ValueError, match="'localhost' is no address or network"):
        ApiSettings(anonymous_limit_exempt=["localhost"])


@pytest.mark.parametrize(("page", "assets"), [
    ("/docs", ["/docs-assets/swagger-ui.css", "/docs-assets/favicon.png", "/docs-assets/swagger-ui-bundle.js"]),
    ("/redoc", ["/docs-assets/favicon.png", "/docs-assets/redoc.standalone.js"]),
])
def test_docs_work_offline(client, page, assets):
    r = client.get(page)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert re.findall(r'(?:src|href)="([^"]+)"', r.text) == assets
    assert "http://" not in r.text and "https://" not in r.text and "//" not in r.text.replace("<!--", "")
    assert re.findall(r"(?:url: '|spec-url=\")([^'\"]+)", r.text) == ["/openapi.json"]
    types = {".css": "text/css", ".js": "text/javascript", ".png": "image/png"}
    for asset in assets:
        got = client.get(asset)
        assert got.status_code == 200 and len(got.content) > 1000, asset
        assert got.headers["content-type"].startswith(types[asset[asset.rindex("."):]])
    assert client.get("/openapi.json").status_code == 200
    assert client.get("/docs/oauth2-redirect").status_code == 200


def test_the_openapi_states_every_bound_in_json_schema(api_db_url) -> None:
    """A bound pydantic could not place (ge/le on an annotated type inside `X | None`) lands in
    the document as an unknown keyword, and generated clients then send what the API refuses
    (schemathesis found `offset: -28` on POST /usercounters/bump)."""
    doc = make_client(api_db_url).app.openapi()
    bad: list[str] = []

    def walk(node, where: str) -> None:
        if isinstance(node, dict):
            if "type" in node or "anyOf" in node:
                bad.extend(f"{where}.{k}" for k in ("ge", "le", "gt", "lt") if k in node)
            for k, v in node.items():
                walk(v, f"{where}.{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{where}[{i}]")

    walk(doc, "")
    assert bad == []
    offset = doc["components"]["schemas"]["BumpCreate"]["properties"]["offset"]["anyOf"][0]
    assert (offset["minimum"], offset["maximum"]) == (0, 2**31 - 1)


def test_every_pattern_has_words(client):
    """A value that breaks a pattern is answered in words (api/patterns.py), never with the
    regular expression: every pattern of the document has its words (the NUL rule aside)."""
    found: set[str] = set()

    def walk(node) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("pattern"), str):
                found.add(node["pattern"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(client.get("/openapi.json").json())
    assert found - set(WORDS) == {NO_NUL}
    r = client.get("/tiers/cpu/hour", params={"system": "no such!"})
    assert r.status_code == 422 and r.json() == {
        "error": "InvalidInput", "field": "system",
        "detail": "system: 'no such!' is not a system name: a letter and up to 6 letters or digits, "
                  "\\ in front optional (\\DEMO)"}
    r = client.get("/reports/threshold", params={"system": "\\DEMO", "date": "17 Nov"})
    assert r.status_code == 422 and r.json()["detail"] == "date: '17 Nov' is not a date, YYYY-MM-DD (2026-11-17)"
