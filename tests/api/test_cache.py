"""The read cache (api/cache.py): hits, exact invalidation on new data, tokens, bounds, and the
database side (schema/idempotent/032-api-cache.sql)."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime, timedelta

import httpx
import psycopg
import pytest

from api.cache import DataListener, ResponseCache, TokenCache, cache_key
from api.main import create_app
from api.settings import ApiSettings
from core.catalog import load_catalog
from tests.api.conftest import make_client
from tests.tokens import create_token

T0 = datetime(2024, 6, 1, tzinfo=UTC)
CPU = load_catalog().entity("cpu")
BUSY = CPU.index("cpu_busy_time")
CPUS = (12, 13)


# ---------------------------------------------------------------- the stores, alone


def test_key_sorts_parameters_by_name_and_keeps_repeated_ones_in_order() -> None:
    a = cache_key("-", "/x", b"counters=b&by=a&counters=a")
    assert a == cache_key("-", "/x", b"by=a&counters=b&counters=a")
    assert a != cache_key("-", "/x", b"by=a&counters=a&counters=b")  # column order differs
    assert a != cache_key("read", "/x", b"by=a&counters=b&counters=a")
    assert cache_key("-", "/x", b"a=%24S1") == cache_key("-", "/x", b"a=$S1")
    assert cache_key("-", "/x", b"") == "- /x"


def test_lru_by_bytes() -> None:
    c = ResponseCache(max_bytes=3 * 1300, max_entry_bytes=2000)
    body = b"x" * 1000
    for k in "abc":
        assert c.put(k, 200, [], body, c.generation)
    assert len(c) == 3
    assert c.get("a") is not None  # a is now the most recently used
    assert c.put("d", 200, [], body, c.generation)
    assert (c.get("b"), len(c), c.evictions) == (None, 3, 1)
    assert c.bytes <= c.max_bytes and all(c.get(k) for k in "acd")
    assert not c.put("big", 200, [], b"x" * 2000, c.generation)  # over max_entry_bytes
    assert c.stats()["hits"] == 4


def test_an_answer_computed_before_a_change_is_not_kept() -> None:
    c = ResponseCache(max_bytes=10_000, max_entry_bytes=10_000)
    before = c.generation
    assert c.put("a", 200, [], b"old", before)
    c.invalidate()
    assert (len(c), c.bytes, c.invalidations) == (0, 0, 1)
    assert not c.put("b", 200, [], b"computed while the data changed", before)
    assert c.put("b", 200, [], b"new", c.generation)


def test_token_cache_ttl_and_changes(monkeypatch) -> None:
    now = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    t = TokenCache(ttl=60)
    t.put(b"h", "read", t.generation)
    assert t.get(b"h") == "read"
    now[0] += 61
    assert t.get(b"h") is None  # asked again after a minute
    gen = t.generation
    t.clear()  # a token changed meanwhile: what was read before is not kept
    t.put(b"h", "write", gen)
    assert t.get(b"h") is None
    t.put(b"h", "write", t.generation)
    assert t.get(b"h") == "write"


# ---------------------------------------------------------------- through the API


def wait_listening(client, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if client.get("/health").json()["cache"]["listening"]:
            return
        time.sleep(0.05)
    raise AssertionError("the read cache never listened")


def cache_stats(client) -> dict:
    return client.get("/health").json()["cache"]


@pytest.fixture(scope="module")
def cached(api_db_url: str):
    with make_client(api_db_url) as c:
        wait_listening(c)
        yield c


class Week:
    """One measurement of CPUs 12 and 13 (other tests use the low ones); add() stores one more
    interval record of each, as a writer slice does."""

    def __init__(self, url: str, system_id: int, name: str) -> None:
        self.url = url
        self.system_id = system_id
        with psycopg.connect(url) as c:
            self.mid = c.execute(
                "INSERT INTO _measure.measurement (system_id, name, contab, start_at, interval_us, state) "
                "VALUES (%s, %s, '{\"descriptors\": [{\"type\": \"CPU\"}]}', %s, 60000000, 'running') "
                "RETURNING measurement_id", (system_id, name, T0)).fetchone()[0]
            for cpu in CPUS:
                c.execute("INSERT INTO _measure.entity (entity_id, system_id, type_code, key, ids, cpu, first_seen_at) "
                          "VALUES (%s, %s, 1, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                          (7000 + cpu, system_id, f"cpu={cpu}", json.dumps({"cpu": cpu}), cpu, T0))
        self.k = 0

    def add(self, busy_percent: int) -> datetime:
        """The next minute of both CPUs, CPU 12 busy_percent % busy; returns its end."""
        frm = T0 + timedelta(minutes=self.k)
        self.k += 1
        with psycopg.connect(self.url) as c:
            for cpu in CPUS:
                counters = [0] * len(CPU.counters)
                counters[BUSY] = busy_percent * 600_000 if cpu == CPUS[0] else 0
                c.execute("INSERT INTO _measure.interval_record (measurement_id, entity_id, record_at, from_at, "
                          "to_at, delta_us, closing_kind, system_id, type_code, cpu, counters) "
                          "VALUES (%s, %s, %s, %s, %s, 60000000, 3, %s, 1, %s, %s)",
                          (self.mid, 7000 + cpu, T0, frm, frm + timedelta(minutes=1), self.system_id, cpu,
                           counters))
        return frm + timedelta(minutes=1)

    def url_latest(self) -> str:
        return f"/measurements/{self.mid}/counters/cpu?counters=cpu_busy_time"


@pytest.fixture(scope="module")
def week(api_db_url: str, system_id: int) -> Week:
    w = Week(api_db_url, system_id, "CACHE1")
    w.add(10)
    return w


def test_a_second_read_is_a_hit_with_the_same_answer(cached, week) -> None:
    url = week.url_latest() + "&ids=cpu:12"
    first = cached.get(url)
    second = cached.get(url)
    assert (first.status_code, second.status_code) == (200, 200)
    assert (first.headers["x-cache"], second.headers["x-cache"]) == ("miss", "hit")
    assert first.content == second.content
    assert second.headers["content-type"] == "application/json"
    assert int(second.headers["content-length"]) == len(second.content)
    # the same query with its parameters in another order is the same answer
    third = cached.get(f"/measurements/{week.mid}/counters/cpu?ids=cpu:12&counters=cpu_busy_time")
    assert third.headers["x-cache"] == "hit" and third.content == first.content


def test_new_data_is_seen_by_the_very_next_read(cached, week) -> None:
    """Write, read, write more, read again: every read right after a commit is the new answer
    (many rounds, no waiting), and the reads in between are hits."""
    for busy in range(20, 60, 2):
        end = week.add(busy)
        fresh = cached.get(week.url_latest())
        assert fresh.headers["x-cache"] == "miss"
        rec = fresh.json()["records"][0]
        assert (rec["to_at"], rec["values"]["cpu_busy_time"]) == (end.isoformat().replace("+00:00", "Z"), busy)
        again = cached.get(week.url_latest())
        assert again.headers["x-cache"] == "hit" and again.content == fresh.content


def test_any_notified_table_empties_the_cache(cached, week, api_db_url) -> None:
    url = week.url_latest()
    cached.get(url)
    assert cached.get(url).headers["x-cache"] == "hit"
    with psycopg.connect(api_db_url) as c:  # a threshold edit changes report answers
        c.execute("UPDATE _measure.threshold SET limit_value = limit_value + 0 WHERE entity = 'cpu'")
    assert cached.get(url).headers["x-cache"] == "miss"


def test_what_is_not_cached(cached, week, fake_collector, read_headers) -> None:
    assert "x-cache" not in cached.get("/health").headers
    fake_collector.handler = lambda kind, payload: {"entity": "cpu", "at": "2024-05-01T00:00:00+00:00",
                                                    "records": []}
    for _ in range(2):  # live counters (MEASREADACTIVE) are never cached
        r = cached.get("/active/cpu", headers=read_headers)
        assert r.status_code == 200 and "x-cache" not in r.headers
    # a tier read whose range ends "now" depends on the clock
    for _ in range(2):
        r = cached.get("/tiers/cpu/auto", params={"from": "2024-06-01T00:00:00Z"})
        assert r.status_code == 200 and "x-cache" not in r.headers
    r = cached.get("/tiers/cpu/auto", params={"from": "2024-06-01T00:00:00Z", "to": "2024-06-02T00:00:00Z"})
    assert r.headers["x-cache"] in ("miss", "hit")
    # errors are answered every time, never kept
    for _ in range(2):
        r = cached.get("/measurements/999999/counters/cpu")
        assert (r.status_code, r.headers["x-cache"]) == (404, "miss")
    # writes go straight through
    assert "x-cache" not in cached.post("/measurements", json={}).headers


def test_counts_are_in_health(cached, week) -> None:
    before = cache_stats(cached)
    url = week.url_latest() + "&rate=false"
    cached.get(url)
    cached.get(url)
    after = cache_stats(cached)
    assert (after["misses"] - before["misses"], after["hits"] - before["hits"]) == (1, 1)
    assert after["stores"] == before["stores"] + 1 and after["entries"] >= 1 and after["bytes"] > 0
    assert after["enabled"] is True and after["listening"] is True


def test_the_cache_is_bounded_in_bytes(api_db_url, week) -> None:
    with make_client(api_db_url, cache_max_bytes=6000) as c:
        wait_listening(c)
        urls = [f"/measurements/{week.mid}/counters/cpu?counters=cpu_busy_time&limit={n}" for n in range(1, 11)]
        for u in urls:
            assert c.get(u).headers["x-cache"] == "miss"
        stats = cache_stats(c)
        assert stats["bytes"] <= 6000 and stats["evictions"] > 0 and stats["entries"] < 10
        assert c.get(urls[-1]).headers["x-cache"] == "hit"
        assert c.get(urls[0]).headers["x-cache"] == "miss"  # the least recently used went first


def test_the_cache_can_be_turned_off(api_db_url, week) -> None:
    with make_client(api_db_url, cache_enabled=False) as c:
        for _ in range(2):
            r = c.get(week.url_latest())
            assert r.status_code == 200 and "x-cache" not in r.headers
        assert c.get("/health").json()["cache"] is None


def test_a_revoked_token_gets_no_cached_answer(api_db_url, week) -> None:
    token = create_token(api_db_url, "cache-revoke", "read")
    other = create_token(api_db_url, "cache-other", "read")
    url = week.url_latest() + "&ids=cpu:13"
    with make_client(api_db_url, require_token_for_reads=True) as c:
        wait_listening(c)
        auth = {"Authorization": f"Bearer {token}"}
        assert c.get(url).status_code == 401
        assert c.get(url, headers=auth).headers["x-cache"] == "miss"  # the token is checked, then kept
        assert c.get(url, headers=auth).headers["x-cache"] == "hit"
        assert c.get(url).status_code == 401  # no token, no cached answer either
        with psycopg.connect(api_db_url) as db:
            db.execute("UPDATE _measure.api_token SET revoked_at = now() WHERE name = 'cache-revoke'")
        r = c.get(url, headers=auth)
        assert (r.status_code, r.json()["detail"]) == (401, "the bearer token is unknown or revoked")
        other_auth = {"Authorization": f"Bearer {other}"}
        assert c.get(url, headers=other_auth).status_code == 200
        assert c.get(url, headers=other_auth).status_code == 200
        assert c.get(url, headers={"Authorization": "Basic abc"}).status_code == 401


def test_losing_the_listen_connection_bypasses_the_cache_until_it_is_back(api_db_url, system_id) -> None:
    w = Week(api_db_url, system_id, "CACHE2")
    w.add(10)
    with make_client(api_db_url) as c:
        wait_listening(c)
        c.get(w.url_latest())
        assert c.get(w.url_latest()).headers["x-cache"] == "hit"
        pid = c.app.state.read_cache.listener._pg.backend_pid
        with psycopg.connect(api_db_url, autocommit=True) as db:
            assert db.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()[0]
        end = w.add(70)  # committed while no one may be listening
        r = c.get(w.url_latest())
        assert r.json()["records"][0]["to_at"] == end.isoformat().replace("+00:00", "Z")
        assert r.headers.get("x-cache") != "hit"
        wait_listening(c)
        c.get(w.url_latest())
        assert c.get(w.url_latest()).headers["x-cache"] == "hit"


def test_identical_concurrent_misses_are_computed_once(api_db_url, week) -> None:
    app = create_app(ApiSettings(control_timeout_seconds=0.5), database_url=api_db_url)
    url = week.url_latest() + "&rate=false&ids=cpu:12"

    async def main() -> list[httpx.Response]:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
                for _ in range(200):
                    if (await http.get("/health")).json()["cache"]["listening"]:
                        break
                    await asyncio.sleep(0.05)
                return await asyncio.gather(*(http.get(url) for _ in range(8)))

    answers = asyncio.run(main())
    assert {r.status_code for r in answers} == {200} and len({r.content for r in answers}) == 1
    how = sorted(r.headers["x-cache"] for r in answers)
    assert how.count("miss") == 1 and how.count("shared") + how.count("hit") == 7, how


def test_sync_reads_every_notification_of_a_commit_that_finished_before_it(api_db_url) -> None:
    """The guarantee itself: a commit, then sync() with no turn of the event loop between (so
    the socket reader cannot have seen the notification): sync has handled it."""
    async def main() -> list[int]:
        seen: list[str] = []
        listener = DataListener(api_db_url, lambda: seen.append("data"), lambda: seen.append("token"))
        listener.start()
        for _ in range(200):
            if listener.listening:
                break
            await asyncio.sleep(0.05)
        counts = []
        with psycopg.connect(api_db_url, autocommit=True) as writer:
            for _ in range(30):
                seen.clear()
                writer.execute("UPDATE _measure.system SET time_zone = time_zone WHERE false")
                assert listener.sync()
                counts.append(seen.count("data"))
                await asyncio.sleep(0)  # the next turn of the loop: the next request needs a new round trip
            writer.execute("UPDATE _measure.api_token SET revoked_at = now() WHERE false")
            seen.clear()
            assert listener.sync() and seen == ["token"]
        await listener.close()
        assert not listener.listening and not listener.sync()
        return counts

    assert asyncio.run(main()) == [1] * 30


# ---------------------------------------------------------------- the database side


def test_every_table_that_answers_come_from_notifies(api_db_url) -> None:
    with psycopg.connect(api_db_url) as c:
        missing = c.execute("""
            SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = '_measure' AND c.relkind IN ('r', 'p') AND NOT c.relispartition
               AND c.relname NOT IN ('collector_heartbeat', 'collector_state', 'control_request')
               AND NOT EXISTS (SELECT 1 FROM pg_trigger t WHERE t.tgrelid = c.oid AND t.tgname = 'api_cache_notify')
        """).fetchall()
        silent = c.execute("""
            SELECT c.relname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
             WHERE t.tgname = 'api_cache_notify'
               AND c.relname IN ('collector_heartbeat', 'collector_state', 'control_request')""").fetchall()
    assert missing == [] and silent == []


def test_one_notification_per_transaction_and_kind(api_db_url, system_id) -> None:
    with psycopg.connect(api_db_url, autocommit=True) as listener, psycopg.connect(api_db_url) as writer:
        listener.execute("LISTEN measuredb_data")
        with writer.transaction():  # a writer slice touches several tables
            writer.execute("SELECT _measure.note_intervals(%s::smallint, %s, %s)",
                           (system_id, T0, T0 + timedelta(hours=1)))
            writer.execute("UPDATE _measure.measurement SET updated_at = now() WHERE false")
            writer.execute("UPDATE _measure.collector_heartbeat SET beat_at = now()")  # not notified
        with writer.transaction():  # recording a token's use is no change to announce
            writer.execute("UPDATE _measure.api_token SET last_used_at = now() WHERE false")
        with writer.transaction():
            writer.execute("UPDATE _measure.api_token SET revoked_at = now() WHERE false")
        got = [n.payload for n in listener.notifies(timeout=1.0)]
    assert got == ["data", "token"]
