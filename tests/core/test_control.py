"""The control-request protocol (core/control.py) against a real database: the SQL side lists
the same request kinds and error codes as the enums, and requests, answers and refusals make
the round trip through _measure.control_request typed."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import psycopg
import pytest

from core import control
from core.errors import ErrorKind

AT = datetime(2026, 1, 1, 8, 0, 0, 123456, tzinfo=UTC)


def _check_values(conn: psycopg.Connection, constraint: str) -> set[str]:
    """The quoted values a CHECK constraint of _measure.control_request lists."""
    definition = conn.execute(
        "SELECT pg_get_constraintdef(c.oid) FROM pg_constraint c"
        " WHERE c.conrelid = '_measure.control_request'::regclass AND c.conname = %s",
        (constraint,)).fetchone()
    assert definition is not None, f"no constraint {constraint}"
    return set(re.findall(r"'([a-z_]+)'::text", definition[0]))


def _system(conn: psycopg.Connection) -> int:
    return conn.execute("INSERT INTO _measure.system (system_name, system_number, time_zone)"
                        " VALUES ('\\CTLT', 7, 'UTC') RETURNING system_id").fetchone()[0]


def test_the_table_accepts_the_kinds_and_error_codes_of_the_enums(conn) -> None:
    assert _check_values(conn, "control_request_kind_check") == {k.value for k in control.RequestKind}
    assert _check_values(conn, "control_request_error_code_check") == {c.value for c in control.ERROR_CODES}
    assert set(control.ERROR_CODES) == set(ErrorKind)


def test_submit_request_accepts_exactly_the_kinds_of_the_enum(conn) -> None:
    source = conn.execute("SELECT prosrc FROM pg_proc WHERE oid = 'measure.submit_request(smallint, text, jsonb)'"
                          "::regprocedure").fetchone()[0]
    listed = re.search(r"p_kind NOT IN \(([^)]*)\)", source)
    assert listed is not None, "measure.submit_request no longer checks p_kind against a list"
    assert set(re.findall(r"'([a-z_]+)'", listed.group(1))) == {k.value for k in control.RequestKind}
    system_id = _system(conn)
    for kind in control.RequestKind:  # its behaviour: every kind of the enum is taken …
        conn.execute("SELECT measure.submit_request(%s::smallint, %s, '{}'::jsonb)", (system_id, kind.value))
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="unknown request kind"):
        conn.execute("SELECT measure.submit_request(%s::smallint, 'reboot', '{}'::jsonb)", (system_id,))


def test_an_error_answer_has_a_code_and_only_an_error_answer_has_one(conn) -> None:
    system_id = _system(conn)
    rid = control.submit(conn, system_id, control.Status(measurement_id=1))
    for code, error in (("not_found", None), (None, "no code"), ("missing", "not a code")):
        with pytest.raises(psycopg.errors.CheckViolation):
            with conn.transaction():
                conn.execute("UPDATE _measure.control_request SET error_code = %s, error = %s,"
                             " answered_at = now() WHERE request_id = %s", (code, error, rid))


def test_requests_answers_and_refusals_make_the_round_trip(conn) -> None:
    system_id = _system(conn)
    ids = control.UserCounterIds(cpu=2, pin=45, name="REQUESTS")
    requests = [
        control.ReadActive(entity="cpu", descriptor={"cpu": 3}, measurement_id=None),
        control.Status(measurement_id=7),
        control.BumpInit(ids=ids),
        control.Bump(ids=ids, offset=17, op="ADD", value=3),
    ]
    record = control.ActiveRecord(key="cpu=3", ids={"cpu": 3}, cpu=3, record_at=AT,
                                  counters={"CPU-BUSY-TIME": 5}, baseline_at=AT, baseline={"CPU-BUSY-TIME": 1})
    answers = [
        control.ActiveRead(entity="cpu", at=AT, records=[record]),
        control.StatusAnswer(status=control.MeasurementStatus(
            measurement_id=7, name="M", state="running", entities={"cpu": 4}, counter_space_words=96,
            cids=4, copies_written=1, not_allocated={}),
            cpus={"0": control.CpuSpace(cids=4, cid_limit=512, words=96, words_limit=4_000_000)}, at=AT),
        control.BumpInitAnswer(offset=17),
        control.BumpAnswer(bumped=True, at=AT),
    ]
    ids_of = [control.submit(conn, system_id, r) for r in requests]
    pending = control.pending(conn, system_id)
    assert [(rid, kind) for rid, kind, _ in pending] == [(rid, r.kind.value) for rid, r in zip(ids_of, requests, strict=True)]
    for (rid, kind, payload), request in zip(pending, requests, strict=True):
        assert control.parse_request(kind, payload) == request
        assert control.outcome(conn, rid, request) is None            # pending
    for rid, request, answer in zip(ids_of, requests, answers, strict=True):
        control.reply(conn, rid, answer)
        assert control.outcome(conn, rid, request) == answer
    assert control.pending(conn, system_id) == []
    # on the wire: times as isoformat(), the optional process names left out
    wire = conn.execute("SELECT payload FROM _measure.control_request WHERE request_id = %s",
                        (ids_of[2],)).fetchone()[0]
    assert wire == {"ids": {"cpu": 2, "pin": 45, "name": "REQUESTS", "index": 0}}
    wire = conn.execute("SELECT response FROM _measure.control_request WHERE request_id = %s",
                        (ids_of[3],)).fetchone()[0]
    assert wire == {"bumped": True, "at": AT.isoformat()}


def test_a_refusal_and_a_malformed_answer(conn) -> None:
    system_id = _system(conn)
    request = control.Status(measurement_id=1)
    rid = control.submit(conn, system_id, request)
    control.reply(conn, rid, control.Refusal(ErrorKind.NOT_FOUND, "measurement 1 is not known"))
    assert control.outcome(conn, rid, request) == control.Refusal(ErrorKind.NOT_FOUND, "measurement 1 is not known")
    rid = control.submit(conn, system_id, request)
    control.reply(conn, rid, control.BumpInitAnswer(offset=3))      # not a status answer
    with pytest.raises(control.MalformedAnswer, match="status answer is malformed"):
        control.outcome(conn, rid, request)


def test_a_request_of_no_kind_or_without_its_fields_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown request kind 'reboot'"):
        control.parse_request("reboot", {})
    with pytest.raises(ValueError) as info:
        control.parse_request("bump", {"ids": {"cpu": 1}})
    assert control.describe_invalid(info.value).startswith(
        "the request lacks or mistypes a field (ids.pin: Field required; ids.name: Field required; "
        "op: Field required)")
