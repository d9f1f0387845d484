"""The macro expander (grafana.py) against Grafana's own vectors (grafana-macros.md; macros_test.go
of grafana-postgresql-datasource) and our own cases. No database."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.dashboards.grafana import (
    MacroError,
    TimeRange,
    expand,
    expand_macros,
    format_interval,
    go_float,
    interpolate_variables,
    parse_interval,
    rfc3339nano,
    seconds_to_hms,
)

TR = TimeRange(datetime(2018, 4, 12, 18, 0, tzinfo=UTC), datetime(2018, 4, 12, 18, 5, tzinfo=UTC))
FROM, TO = "'2018-04-12T18:00:00Z'", "'2018-04-12T18:05:00Z'"
NOW = datetime(2024, 2, 10, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(("sql", "plain", "timescale"), [
    ("select $__time(time_column)", 'select time_column AS "time"', None),
    ("select min($__time(time_column))", 'select min(time_column AS "time")', None),
    ("select $__timeEpoch(time_column)", 'select extract(epoch from time_column) as "time"', None),
    ("WHERE $__timeFilter(time_column)",
     f"WHERE time_column BETWEEN {FROM} AND {TO}", None),
    ("select $__timeFrom(), $__timeTo()", f"select {FROM}, {TO}", None),
    ("SELECT $__timeGroup(time_column,'5m'), value",
     'SELECT floor(extract(epoch from time_column)/300)*300 AS "time", value',
     "SELECT time_bucket('300.000s',time_column) AS \"time\", value"),
    ("SELECT $__timeGroup(time_column,'5m') as time, value",
     "SELECT floor(extract(epoch from time_column)/300)*300 as time, value",
     "SELECT time_bucket('300.000s',time_column) as time, value"),
    ("SELECT $__timeGroup(time_column , '5m')",
     "SELECT floor(extract(epoch from time_column)/300)*300",
     "SELECT time_bucket('300.000s',time_column)"),
    ("SELECT $__timeGroup(time_column,'12d')",
     "SELECT floor(extract(epoch from time_column)/1.0368e+06)*1.0368e+06",
     "SELECT time_bucket('1036800.000s',time_column)"),
    ("SELECT $__timeGroup(time_column,'20ms')",
     "SELECT floor(extract(epoch from time_column)/0.02)*0.02",
     "SELECT time_bucket('0.020s',time_column)"),
    ("SELECT $__timeGroup(time_column,5m)",
     "SELECT floor(extract(epoch from time_column)/300)*300",
     "SELECT time_bucket('300.000s',time_column)"),
    ("SELECT $__timeGroupAlias(time_column,'5m')",
     'SELECT floor(extract(epoch from time_column)/300)*300 AS "time"',
     "SELECT time_bucket('300.000s',time_column) AS \"time\""),
    ("SELECT $__timeGroup(time_column,'5m',NULL)",
     "SELECT floor(extract(epoch from time_column)/300)*300",
     "SELECT time_bucket('300.000s',time_column)"),
    ("select $__unixEpochFilter(time)", "select time >= 1523556000 AND time <= 1523556300", None),
    ("select $__unixEpochNanoFilter(time)",
     "select time >= 1523556000000000000 AND time <= 1523556300000000000", None),
    ("select $__unixEpochNanoFrom(), $__unixEpochNanoTo()", "select 1523556000000000000, 1523556300000000000",
     None),
    ("select $__unixEpochFrom(), $__unixEpochTo()", "select 1523556000, 1523556300", None),
    ("SELECT $__unixEpochGroup(time_column+time_adjustment,'5m')",
     "SELECT floor((time_column+time_adjustment)/300)*300", None),
    ("SELECT $__unixEpochGroupAlias(time_column,'5m')",
     'SELECT floor((time_column)/300)*300 AS "time"', None),
    ("$__timeGroup(t,'1h') x $__timeGroup(t,'8h') x $__timeGroup(t,'1d')",
     ("floor(extract(epoch from t)/3600)*3600 x floor(extract(epoch from t)/28800)*28800 x "
     "floor(extract(epoch from t)/86400)*86400"),
     "time_bucket('3600.000s',t) x time_bucket('28800.000s',t) x time_bucket('86400.000s',t)"),
    ("$__timeGroup(t,'1w')", "floor(extract(epoch from t)/604800)*604800", "time_bucket('604800.000s',t)"),
    ("$__timeGroup(t,'30d')", "floor(extract(epoch from t)/2.592e+06)*2.592e+06",
     "time_bucket('2592000.000s',t)"),
])
def test_grafana_vectors(sql: str, plain: str, timescale: str | None) -> None:
    assert expand_macros(sql, TR, timescaledb=False, now=NOW) == plain
    assert expand_macros(sql, TR, timescaledb=True, now=NOW) == (timescale or plain)


def test_time_ranges_before_1970_and_fractions() -> None:
    tr = TimeRange(datetime(1960, 2, 1, 7, 0, 0, 500000, tzinfo=UTC), datetime(1980, 2, 3, 8, 0, tzinfo=UTC))
    assert expand_macros("$__timeFilter(t)", tr) == \
        "t BETWEEN '1960-02-01T07:00:00.5Z' AND '1980-02-03T08:00:00Z'"
    # Go's Unix() is the floor of the seconds; UnixNano is exact
    assert expand_macros("$__unixEpochFilter(t)", tr) == "t >= -312915600 AND t <= 318412800"
    assert expand_macros("$__unixEpochNanoFrom()", tr) == "-312915599500000000"
    assert rfc3339nano(datetime(2018, 4, 12, 18, 0, 0, 120000, tzinfo=UTC)) == "2018-04-12T18:00:00.12Z"


def test_repeated_time_group_gets_alias_everywhere() -> None:
    # grafana-macros.md: the alias check looks at the first occurrence of the same macro text
    out = expand_macros("SELECT $__timeGroup(t,'1h'), avg(v) FROM x GROUP BY $__timeGroup(t,'1h')", TR)
    assert out.count('AS "time"') == 2
    # a space before the comma suppresses the alias
    assert 'AS "time"' not in expand_macros("SELECT $__timeGroup(t,'5m') , v", TR)


def test_nested_parentheses_are_cut_at_the_first_paren() -> None:
    out = expand_macros("WHERE $__timeFilter(date_trunc('hour',t))", TR)
    assert out == f"WHERE date_trunc('hour' BETWEEN {FROM} AND {TO})"


def test_errors() -> None:
    with pytest.raises(MacroError, match="unknown macro __nope"):
        expand_macros("$__nope(t)", TR)
    with pytest.raises(MacroError, match="missing time column argument for macro __timeFilter"):
        expand_macros("$__timeFilter()", TR)
    with pytest.raises(MacroError, match="needs time column and interval"):
        expand_macros("$__timeGroup(t)", TR)
    with pytest.raises(MacroError, match="error parsing interval"):
        expand_macros("$__timeGroup(t,'5x')", TR)
    with pytest.raises(MacroError, match="error parsing fill value"):
        expand_macros("$__timeGroup(t,'5m',zero)", TR)
    assert expand_macros("$__timeFilter", TR) == "$__timeFilter"  # no parentheses: left as text


def test_month_and_year_depend_on_the_wall_clock() -> None:
    feb = datetime(2024, 2, 10, tzinfo=UTC)  # leap February
    mar = datetime(2024, 3, 10, tzinfo=UTC)
    assert parse_interval("1M", feb) == 29 * 86400 * 10**9
    assert parse_interval("1M", mar) == 31 * 86400 * 10**9
    assert parse_interval("1y", feb) == 366 * 86400 * 10**9
    assert parse_interval("1w", feb) == 7 * 86400 * 10**9
    assert parse_interval("1h30m", feb) == 5400 * 10**9
    assert expand_macros("$__timeGroup(t,'1M')", TR, now=feb) != expand_macros("$__timeGroup(t,'1M')", TR, now=mar)


def test_global_interval_variables() -> None:
    assert format_interval(90 * 10**9) == "1m"
    assert format_interval(10**5) == "1ms"
    assert format_interval(400 * 86400 * 10**9) == "1y"
    assert expand_macros("$__interval $__interval_ms", TR, interval_ns=600 * 10**9) == "10m 600000"
    assert go_float(1e6) == "1e+06" and go_float(604800) == "604800"
    assert seconds_to_hms(3600) == "1h" and seconds_to_hms(90) == "1m" and seconds_to_hms(0.02) == "20ms"


def test_template_variables() -> None:
    sql = "WHERE h IN ($host) AND s = '$sys' AND c IN (${host:csv}) AND o = '[[sys]]' AND x = '${sys}'"
    out = interpolate_variables(sql, {"host": ["web01", "o'k"], "sys": "\\DE'MO"})
    assert out == ("WHERE h IN ('web01','o''k') AND s = '\\DE''MO' AND c IN (web01,o'k) "
                   "AND o = '\\DE''MO' AND x = '\\DE''MO'")
    # a single value of a multi-value variable is still quoted
    assert interpolate_variables("IN ($cpu)", {"cpu": "3"}, multi=["cpu"]) == "IN ('3')"
    assert interpolate_variables("$unknown $__timeFrom()", {}) == "$unknown $__timeFrom()"
    out = expand("SELECT ${__from}, ${__to}, $__timeGroupAlias(t,$__interval)", TR, interval_ns=3600 * 10**9)
    assert out == 'SELECT 1523556000000, 1523556300000, floor(extract(epoch from t)/3600)*3600 AS "time"'
