"""Generate the Grafana dashboards (dashboards/*.json) and the alert rules
(dashboards/provisioning/alerting/measuredb.yaml) of measuredb.

    .venv/bin/python dashboards/build.py          # rewrite the files
    .venv/bin/python dashboards/build.py --check  # exit 1 if a file is not what it would write

Dashboards are code (style P14): this script is the source, the JSON and YAML are its
output, checked in, provisioned read-only, and tests/dashboards/test_build.py fails when they
differ from a fresh run. Panel SQL reads only the measure.* views and functions (schema/
idempotent/020-tiers.sql, 025-reports.sql, 040-dashboards.sql); the tier (hour, shift, month)
is picked in SQL by measure.<entity>_series / measure.dashboard_tier from $__timeFrom() and
$__timeTo(), never by Grafana. Macro arguments are plain column names (no parentheses, no
commas inside), $__timeGroupAlias appears at most once per query and '1M' never.

The colours of the threshold table use the *default* limits of schema/010-tiers.sql (read
from its INSERT); the limits in force for a system (measure.threshold, editable data) are
what the SQL compares against, listed in the table's `broken` column and drawn as the
`limit` series of the threshold graphs. Alert rules read measure.threshold at evaluation
time, so a changed limit needs no regeneration.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

from core.catalog import load_catalog

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
ALERTING = HERE / "provisioning" / "alerting" / "measuredb.yaml"
DS_TYPE = "grafana-postgresql-datasource"
DS = {"type": DS_TYPE, "uid": "${datasource}"}
ENTITIES = load_catalog().tiered_names  # the entity types with tiers (and thresholds): one alert rule each


def default_thresholds() -> list[tuple[str, str, str, float, str]]:
    """(entity, item, operator, limit, help) of the default thresholds in schema/010-tiers.sql."""
    text = (REPO / "schema" / "010-tiers.sql").read_text(encoding="utf-8")
    block = text.split("INSERT INTO _measure.threshold", 1)[1].split(";", 1)[0]
    rows = re.findall(r"\(NULL, '(\w+)', '(\w+)',\s*'([<>=]+)', (\d+(?:\.\d+)?),\s*'([^']*)'\)", block)
    return [(e, i, op, float(v), h) for e, i, op, v, h in rows]


# ------------------------------------------------------------------ building blocks

def var_query(name: str, label: str, sql: str, *, multi: bool = True, include_all: bool = True,
              description: str = "") -> dict[str, Any]:
    return {
        "name": name, "label": label, "type": "query", "datasource": DS,
        "definition": sql, "query": sql, "refresh": 1, "sort": 0,
        "multi": multi, "includeAll": include_all, "description": description,
        "current": {}, "options": [], "hide": 0,
    }


def var_custom(name: str, label: str, values: list[str], description: str) -> dict[str, Any]:
    return {
        "name": name, "label": label, "type": "custom", "query": ",".join(values),
        "current": {"text": values[0], "value": values[0], "selected": True},
        "options": [{"text": v, "value": v, "selected": i == 0} for i, v in enumerate(values)],
        "multi": False, "includeAll": False, "description": description, "hide": 0,
    }


def var_text(name: str, label: str, default: str, description: str) -> dict[str, Any]:
    return {"name": name, "label": label, "type": "textbox", "query": default,
            "current": {"text": default, "value": default}, "description": description, "hide": 0}


DATASOURCE_VAR = {
    "name": "datasource", "label": "Data source", "type": "datasource", "query": DS_TYPE,
    "current": {"text": "MeasureDB", "value": "measuredb"}, "hide": 0, "refresh": 1,
    "description": "The measuredb PostgreSQL data source (read-only role measure_reader).",
}
SYSTEM_VAR = var_query("system", "System", "SELECT system_name FROM measure.system ORDER BY 1",
                       multi=False, include_all=False, description="The NonStop node (\\NAME).")


def entity_var(name: str, label: str, entity: str, expr: str) -> dict[str, Any]:
    return var_query(
        name, label,
        f"SELECT DISTINCT {expr} FROM measure.entity e JOIN measure.system s ON s.system_id = e.system_id "
        f"WHERE s.system_name = '$system' AND e.entity = '{entity}' ORDER BY 1",
        description=f"Measured {entity} entities of the system.")


CPU_VAR = entity_var("cpu", "CPU", "cpu", "e.cpu")
SHIFT_VAR = var_query(
    "shift", "Shift",
    "SELECT shift_no AS __value, shift_no || ' ' || name AS __text FROM measure.shift "
    "WHERE system_name = '$system' ORDER BY shift_no",
    description="Shifts in force for the system (measure.shift); hours, shifts and months outside them are left out.")
SHIFTS = "ARRAY[$shift]::integer[]"
RANGE = "'$system', $__timeFrom(), $__timeTo()"
# The report panels read whole UTC hours (the record tiers hold hours, days and months; a
# partial hour would come from interval records): the range widened to the hours it touches.
HOURS = "'$system', measure.hour_start($__timeFrom()), measure.hour_end($__timeTo())"


def target(sql: str, fmt: str = "time_series", ref: str = "A") -> dict[str, Any]:
    return {"refId": ref, "datasource": DS, "rawQuery": True, "editorMode": "code",
            "format": fmt, "rawSql": sql.strip()}


class Layout:
    def __init__(self) -> None:
        self.x = 0
        self.y = 0
        self.row_h = 0
        self.next_id = 1

    def place(self, w: int, h: int) -> dict[str, int]:
        if self.x + w > 24:
            self.x, self.y, self.row_h = 0, self.y + self.row_h, 0
        pos = {"h": h, "w": w, "x": self.x, "y": self.y}
        self.x += w
        self.row_h = max(self.row_h, h)
        return pos


def timeseries(lay: Layout, title: str, description: str, unit: str, sql: str, *, w: int = 12,
               h: int = 8, overrides: list | None = None, points: bool = False,
               thresholds: dict | None = None) -> dict[str, Any]:
    custom: dict[str, Any] = {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 0, "spanNulls": False,
                              "showPoints": "always" if points else "auto", "pointSize": 5}
    panel = {
        "id": lay.next_id, "type": "timeseries", "title": title, "description": description,
        "datasource": DS, "gridPos": lay.place(w, h),
        "targets": [target(sql)],
        "fieldConfig": {"defaults": {"unit": unit, "custom": custom,
                                     "thresholds": thresholds or {"mode": "absolute", "steps": [
                                         {"color": "green", "value": None}]}},
                        "overrides": overrides or []},
        "options": {"legend": {"displayMode": "table", "placement": "bottom", "calcs": ["mean", "max"]},
                    "tooltip": {"mode": "multi", "sort": "desc"}},
    }
    lay.next_id += 1
    return panel


def table(lay: Layout, title: str, description: str, unit: str, sql: str, *, w: int = 24, h: int = 9,
          overrides: list | None = None) -> dict[str, Any]:
    panel = {
        "id": lay.next_id, "type": "table", "title": title, "description": description,
        "datasource": DS, "gridPos": lay.place(w, h),
        "targets": [target(sql, "table")],
        "fieldConfig": {"defaults": {"unit": unit, "decimals": 1,
                                     "custom": {"align": "auto", "cellOptions": {"type": "auto"}}},
                        "overrides": overrides or []},
        "options": {"showHeader": True, "cellHeight": "sm"},
    }
    lay.next_id += 1
    return panel


def barchart(lay: Layout, title: str, description: str, unit: str, sql: str, x_field: str,
             exclude: list[str] | None = None, *, w: int = 24, h: int = 9) -> dict[str, Any]:
    """A horizontal bar chart of a table query: one bar per row, labelled by ``x_field``
    (the ``exclude`` columns left out)."""
    panel = {
        "id": lay.next_id, "type": "barchart", "title": title, "description": description,
        "datasource": DS, "gridPos": lay.place(w, h),
        "targets": [target(sql, "table")],
        "fieldConfig": {"defaults": {"unit": unit, "decimals": 2}, "overrides": []},
        "options": {"xField": x_field, "orientation": "horizontal", "showValue": "auto",
                    "legend": {"showLegend": False, "displayMode": "list", "placement": "bottom"},
                    "tooltip": {"mode": "single"}},
        "transformations": [{"id": "organize", "options": {"excludeByName": {
            c: True for c in exclude or []}}}],
    }
    lay.next_id += 1
    return panel


def unit_override(col: str, unit: str, decimals: int | None = None) -> dict[str, Any]:
    props: list[dict[str, Any]] = [{"id": "unit", "value": unit}]
    if decimals is not None:
        props.append({"id": "decimals", "value": decimals})
    return {"matcher": {"id": "byName", "options": col}, "properties": props}


LIMIT_STYLE = {"matcher": {"id": "byRegexp", "options": "^limit.*"}, "properties": [
    {"id": "color", "value": {"mode": "fixed", "fixedColor": "red"}},
    {"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}},
    {"id": "custom.lineWidth", "value": 2}]}


def dashboard(stem: str, title: str, description: str, variables: list[dict], panels: list[dict],
              *, annotations: list[dict] | None = None, time_from: str = "now-7d") -> dict[str, Any]:
    return {
        "uid": f"measuredb-{stem}",
        "title": title,
        "description": description,
        "tags": ["measuredb", "MEASURE"],
        "editable": False,
        "graphTooltip": 1,
        "schemaVersion": 39,
        "version": 1,
        "time": {"from": time_from, "to": "now"},
        "timepicker": {},
        "timezone": "",
        "refresh": "",
        "fiscalYearStartMonth": 0,
        "liveNow": False,
        "links": [{"type": "dashboards", "tags": ["measuredb"], "asDropdown": True, "title": "MEASURE",
                   "includeVars": True, "keepTime": True}],
        "annotations": {"list": [{
            "builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"}, "enable": True,
            "hide": True, "iconColor": "rgba(0, 211, 255, 1)", "name": "Annotations & Alerts",
            "type": "dashboard"}] + (annotations or [])},
        "templating": {"list": [DATASOURCE_VAR, *variables]},
        "panels": panels,
    }


def series_sql(entity: str, column: str, label: str, where: str, top: int | None = None) -> str:
    """One column of measure.<entity>_series (only its item read on the upper tiers); with `top`,
    only the `top` series with the highest average (max columns: maximum) over the range."""
    item = column.rsplit("_", 1)[0]
    if top is None:
        return f"""
SELECT bucket_at AS "time", {label} AS metric, {column} AS value
  FROM measure.{entity}_series({RANGE}, {SHIFTS}, ARRAY['{item}'])
 WHERE {where}
 ORDER BY 1, 2"""
    rank = "max" if column.endswith("_max") else "avg"
    return f"""
WITH s AS MATERIALIZED (
    SELECT bucket_at, {label} AS metric, {column} AS value
      FROM measure.{entity}_series({RANGE}, {SHIFTS}, ARRAY['{item}'])
     WHERE {where}),
top AS (
    SELECT metric FROM s GROUP BY metric ORDER BY {rank}(value) DESC NULLS LAST, metric LIMIT {top})
SELECT s.bucket_at AS "time", s.metric, s.value
  FROM s JOIN top ON top.metric = s.metric
 ORDER BY 1, 2"""


TIER_NOTE = (" Tier by time range (measure.dashboard_tier): hourly values up to 7 days, shift values "
             "up to 92 days, monthly values (the chosen shifts combined, weighted by measured time) beyond.")


def tier_panel(lay: Layout) -> dict[str, Any]:
    return table(lay, "Tier in use", "Which tier the panels read for this time range: hour (≤ 7 days), "
                 "shift (≤ 92 days) or month.", "none",
                 "SELECT measure.dashboard_tier($__timeFrom(), $__timeTo()) AS tier", w=6, h=4)


def series_dashboard(stem: str, title: str, description: str, entity: str, variables: list[dict],
                     label: str, where: str, items: list[tuple[str, str, str, str]],
                     extra: list | None = None, top: int | None = None) -> dict[str, Any]:
    lay = Layout()
    panels = [tier_panel(lay)]
    lay.x = 24  # the tier table sits alone in its row
    for column, ptitle, unit, pdesc in items:
        if top:
            pdesc += (f" The {top} with the highest {'maximum' if column.endswith('_max') else 'average'} over "
                      "the range.")
        panels.append(timeseries(lay, ptitle, pdesc + TIER_NOTE, unit, series_sql(entity, column, label, where, top)))
    for make in extra or []:
        panels.append(make(lay))
    return dashboard(stem, title, description, variables, panels)


# ------------------------------------------------------------------ the dashboards

# Threshold graphs of entity types with many subjects show only the ones with the largest values.
TOP_SUBJECTS = {"process": 10}


def threshold_dashboard() -> dict[str, Any]:
    lay = Layout()
    defaults = default_thresholds()
    cpu_limits = {item: (op, v) for e, item, op, v, _ in defaults if e == "cpu"}
    overrides = []
    for col, (op, v) in cpu_limits.items():
        steps = [{"color": "transparent", "value": None}, {"color": "red", "value": v}] if op.startswith(">") \
            else [{"color": "red", "value": None}, {"color": "transparent", "value": v}]
        overrides.append({"matcher": {"id": "byName", "options": col}, "properties": [
            {"id": "thresholds", "value": {"mode": "absolute", "steps": steps}},
            {"id": "custom.cellOptions", "value": {"type": "color-background", "mode": "basic"}}]})
    for col in ("busy_max", "busy_delt", "ibusy_max", "busy_avg", "ibusy_avg"):
        overrides.append(unit_override(col, "percent", 1))
    overrides += [unit_override("time", "dateTimeAsIso"), unit_override("CPU #", "none", 0),
                  unit_override("shift", "none", 0), unit_override("broken", "string")]
    overrides.append(unit_override("hours", "none", 0))
    panels = health_row(lay)
    panels += [table(lay, "Threshold report (Figure 1)",
                    "ENFORM Figure 1/9: every CPU and hour of the range that breaks at least one CPU "
                    "threshold in force for the system (measure.threshold), with MAX (largest interval "
                    "value), DELT (max - min of the interval values) and AVG (time-weighted) items. Cells "
                    "are red where the default limit is broken; `broken` lists the limits of this system "
                    "that the hour breaks. Queue lengths are average lengths, swaps per second. Past 7 days "
                    "one row per CPU and shift (past 92 days per CPU, month and shift) with at least one "
                    "breaking hour: `hours` = its breaking hours, the items = their largest hourly value in "
                    "it, the AVG columns empty, `broken` = each broken limit with its hours "
                    "(measure.threshold_table; resolved when the hours were condensed).",
                    "short", f"""
SELECT t.bucket_at AS "time", t.cpu AS "CPU #", t.time_of_day AS "time of day", t.shift_no AS shift, t.hours,
       t.qlen_max, t.qlen_delt, t.swap_max, t.busy_max, t.busy_delt, t.ibusy_max,
       t.qlen_avg, t.swap_avg, t.busy_avg, t.ibusy_avg, t.broken
  FROM measure.threshold_table({RANGE}, {SHIFTS}, ARRAY[$cpu]::text[]) t
 ORDER BY t.cpu, t.bucket_at""", h=10, overrides=overrides)]
    units = {"busy": "percent", "qlen": "short", "swap": "short", "pqlen": "short"}
    for entity, item, op, limit, help_ in defaults:
        unit = next((u for k, u in units.items() if item.startswith(k) or f"_{k}" in item), "short")
        if "busy" in item:
            unit = "percent"
        subjects = "ARRAY[$cpu]::text[]" if entity == "cpu" else "NULL"
        top = TOP_SUBJECTS.get(entity)
        label = "'CPU ' || subject" if entity == "cpu" else "subject"
        which = f"the {top} {entity} subjects with the largest values in the range" if top \
            else f"every {entity} subject"
        panels.append(timeseries(
            lay, f"{entity.upper()} {item} (limit {op} {limit:g} by default)" + (f", top {top}" if top else ""),
            f"Hourly {item} (measure.{entity}_hour) of {which}, the largest value per time bucket, and the "
            f"limit in force for the system from measure.threshold (default: {help_}). Up to 7 days the "
            "hourly values; past that the largest hourly value of each shift (past 92 days of each month "
            "and shift), resolved when the hours were condensed (measure.threshold_series).",
            unit, f"""
WITH v AS (
    SELECT $__timeGroupAlias(bucket_at,$__interval), subject,
           CASE WHEN bool_and(operator IN ('<', '<=')) THEN min(value) ELSE max(value) END AS value,
           max(operator || ' ' || limit_value) AS rule, max(limit_value) AS lim
      FROM measure.threshold_series({RANGE}, '{entity}', '{item}', {SHIFTS}, {subjects}, {top or "NULL"}) c
     GROUP BY 1, 2)
SELECT "time", {label} AS metric, value FROM v
UNION ALL
SELECT DISTINCT "time", 'limit ' || rule, lim FROM v
 ORDER BY 1, 2""", w=8, overrides=[LIMIT_STYLE]))
    annotation = {
        "name": "Threshold violations", "enable": True, "hide": False, "iconColor": "red",
        "datasource": DS,
        "target": target(f"""
SELECT a."time", a.timeend, a.text, a.tags
  FROM measure.threshold_annotations({RANGE}, {SHIFTS}) a
 ORDER BY 1""", "table", "Anno"),
    }
    return dashboard("threshold", "MEASURE threshold report",
                     "ENFORM threshold report (Figures 1 and 9) over the hour tier, the threshold items "
                     "with their limits, and every violation as an annotation (one per hour and subject up "
                     "to 7 days, one per shift or month and entity type beyond).",
                     [SYSTEM_VAR, CPU_VAR, SHIFT_VAR], panels, annotations=[annotation])


HEALTH = f"measure.dashboard_health({RANGE})"


def health_row(lay: Layout) -> list[dict[str, Any]]:
    """The health verdict of the range's last measured day (docs/analysis.md): its score and
    each indicator with the figures that decided it."""
    score = {
        "id": lay.next_id, "type": "stat", "title": "Health score (last day)",
        "description": "100 - the weights of the indicators present on the range's last measured day "
                       "(measure.dashboard_health; docs/analysis.md).",
        "datasource": DS, "gridPos": lay.place(4, 7),
        "targets": [target(f"SELECT max(h.score) AS score, max(h.day)::text AS day FROM {HEALTH} h", "table")],
        "fieldConfig": {"defaults": {"unit": "none", "min": 0, "max": 100, "thresholds": {"mode": "absolute", "steps": [
            {"color": "red", "value": None}, {"color": "orange", "value": 50}, {"color": "green", "value": 80}]}},
            "overrides": []},
        "options": {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "/^score$/"}, "colorMode": "background"},
    }
    lay.next_id += 1
    verdict = table(lay, "Health verdict (last day)",
                    "GPA-style indicators of the range's last measured day: problem yes or no, the figures "
                    "that decided it and the recommendation (Table 1 of the application-process article; "
                    "measure.dashboard_health, docs/analysis.md).", "none", f"""
SELECT h.day::text AS day, h.indicator, CASE WHEN h.verdict THEN 'YES' ELSE 'no' END AS problem, h.subject,
       h.evidence, h.action AS recommendation
  FROM {HEALTH} h""", w=20, h=7, overrides=[{"matcher": {"id": "byName", "options": "problem"}, "properties": [
        {"id": "mappings", "value": [{"type": "value", "options": {"YES": {"color": "red", "index": 0}}}]},
        {"id": "custom.cellOptions", "value": {"type": "color-text"}}]}])
    return [score, verdict]


def cpu_trend_dashboard() -> dict[str, Any]:
    lay = Layout()
    days = "measure.local_day('$system', $__timeFrom()), measure.local_day('$system', $__timeTo())"
    month_range = ("v.month >= date_trunc('month', measure.local_day('$system', $__timeFrom()))::date "
                   "AND v.month <= measure.local_day('$system', $__timeTo())")
    capacity_var = var_custom("capacity", "Available capacity %", ["70", "75", "80"],
                              "Available CPU capacity, usually between 70 and 80 % of the total.")
    panels = [
        table(lay, "CPU trend report (Figure 2)",
              "ENFORM Figure 2 (measure.report_cpu_trend): per local day of the range, the hour with the "
              "largest average CPU queue length of any CPU, and the spread over the CPUs in that hour.",
              "short", f"""
SELECT r.day, r.system_name, r.loadid, r.cpu, r.cpu_type, r.os_version, r.qlen_max, r.qlen_delt,
       r.swap_max, r.busy_max, r.busy_delt
  FROM measure.report_cpu_trend('$system', {days}) r
 ORDER BY r.day""", overrides=[unit_override("busy_max", "percent"), unit_override("busy_delt", "percent"),
                              unit_override("cpu", "none", 0), unit_override("day", "string")]),
        timeseries(lay, "Peak-hour CPU busy by month",
                   "BUSY-MAX-M (measure.cpu_month): the busiest hour of each month per CPU, any shift. "
                   "Choose a range of several months to see the trend.", "percent", f"""
SELECT (v.month + time '00:00') AT TIME ZONE s.time_zone AS "time", 'CPU ' || v.cpu AS metric,
       max(v.busy_max) AS value
  FROM measure.cpu_month v JOIN measure.system s ON s.system_id = v.system_id
 WHERE v.system_name = '$system' AND v.cpu IN ($cpu) AND {month_range}
 GROUP BY 1, 2
 ORDER BY 1, 2""", points=True),
        timeseries(lay, "Peak-hour CPU queue length by month",
                   "QLEN-MAX-M (measure.cpu_month): the largest hourly average ready-queue length of each "
                   "month per CPU.", "short", f"""
SELECT (v.month + time '00:00') AT TIME ZONE s.time_zone AS "time", 'CPU ' || v.cpu AS metric,
       max(v.qlen_max) AS value
  FROM measure.cpu_month v JOIN measure.system s ON s.system_id = v.system_id
 WHERE v.system_name = '$system' AND v.cpu IN ($cpu) AND {month_range}
 GROUP BY 1, 2
 ORDER BY 1, 2""", points=True),
        timeseries(lay, "Capacity forecast",
                   "Daily peak-hour busy % per CPU (shift tier), its least-squares trend extended 90 days, "
                   "the ±15 % band around the trend and the available capacity "
                   "(measure.capacity_series). The crossing dates are in the table below.", "percent", f"""
SELECT day_at AS "time", 'CPU ' || subject AS subject, peak_busy, trend_busy, band_low, band_high, capacity
  FROM measure.capacity_series({RANGE}, $capacity, 90)
 WHERE entity = 'cpu' AND subject IN ($cpu)
 ORDER BY 1, 2""", w=24, overrides=[
            {"matcher": {"id": "byRegexp", "options": "^band_.*"}, "properties": [
                {"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [4, 4]}}]},
            {"matcher": {"id": "byRegexp", "options": "^capacity.*"}, "properties": [
                {"id": "color", "value": {"mode": "fixed", "fixedColor": "red"}}]}]),
        table(lay, "Capacity forecast: crossing dates",
              "measure.report_capacity_forecast: per CPU and disc volume, the trend of the daily peak-hour "
              "busy %, the date it crosses the available capacity, and the dates at +15 % (early) and "
              "-15 % (late) of the estimate; busy_if_one_halted spreads the busiest other CPU's load.",
              "percent", f"""
SELECT f.entity, f.subject, f.days, f.peak_busy_first, f.peak_busy_last, f.slope_per_day,
       f.crossing_date, f.crossing_early, f.crossing_late, f.month_peak, f.busy_if_one_halted
  FROM measure.report_capacity_forecast('$system', {days}, $capacity) f
 ORDER BY 1, 2""", overrides=[unit_override("days", "none", 0), unit_override("slope_per_day", "short", 3),
                              unit_override("entity", "string"), unit_override("subject", "string")]),
    ]
    return dashboard("cpu-trend", "MEASURE CPU trend and capacity",
                     "ENFORM CPU trend report (Figure 2), peak-hour busy and queue length over months, and the "
                     "capacity forecast with its ±15 % band.",
                     [SYSTEM_VAR, CPU_VAR, capacity_var], panels, time_from="now-90d")


def cpu_dashboard() -> dict[str, Any]:
    items = [
        ("busy_avg", "CPU busy", "percent", "BUSY: CPU-BUSY-TIME % per CPU (time-weighted)."),
        ("busy_max", "CPU busy, largest value", "percent",
         "BUSY-MAX: the largest interval (hour tier) or hourly (upper tiers) busy % per CPU."),
        ("qlen_avg", "Ready-queue length", "short", "QLEN: CPU-QTIME / DELTA-TIME, average processes ready."),
        ("mqlen_avg", "Memory-manager queue length", "short", "MQLEN: MEM-QTIME / DELTA-TIME."),
        ("swap_avg", "Swaps per second", "short", "SWAP: SWAPS per second."),
        ("ibusy_avg", "Interrupt busy", "percent", "IBUSY: INTR-BUSY-TIME %."),
        ("sbusy_avg", "Send busy", "percent", "SBUSY: SEND-BUSY-TIME %."),
    ]
    return series_dashboard("cpu", "MEASURE CPU", "CPU entity: busy, queues, swaps, interrupt and send busy.",
                            "cpu", [SYSTEM_VAR, CPU_VAR, SHIFT_VAR], "'CPU ' || cpu", "cpu IN ($cpu)", items)


def disc_dashboard() -> dict[str, Any]:
    items = [
        ("busy_avg", "Disc busy", "percent", "DISC BUSY: DEVICE-QBUSY-TIME % per volume, paths folded."),
        ("qlen_avg", "Request queue length", "short", "REQ QLEN: REQUEST-QTIME / DELTA-TIME."),
        ("hit_ratio_avg", "Cache hit ratio", "percentunit", "CACHE-HITS / (CACHE-HITS + CACHE-MISSES)."),
        ("cache_misses_avg", "Cache misses per second", "short", "CACHE-MISSES per second."),
        ("byte_rate_avg", "Transfer rate", "Bps", "(INPUT-BYTES + OUTPUT-BYTES) per second."),
        ("write_busy_avg", "Write busy", "percent", "WRITE-BUSY-TIME %."),
    ]
    return series_dashboard("disc", "MEASURE discs", "DISC entity per volume (paths folded).", "disc",
                            [SYSTEM_VAR, entity_var("volume", "Volume", "disc", "e.ids->>'device_name'"),
                             SHIFT_VAR], "volume", "volume IN ($volume)", items)


def lines_dashboard() -> dict[str, Any]:
    items = [
        ("read_busy_avg", "Line read busy", "percent", "READ-BUSY-TIME % (includes waiting for input)."),
        ("write_busy_avg", "Line write busy", "percent", "WRITE-BUSY-TIME %."),
        ("tps_avg", "Transactions per second", "short", "TRANSACTIONS per second over the line's terminals."),
        ("response_avg", "Average response time", "s", "RESPONSE-TIME / TRANSACTIONS."),
        ("requests_avg", "Requests per second", "short", "REQUESTS per second."),
        ("byte_rate_avg", "Transfer rate", "Bps", "(INPUT-BYTES + OUTPUT-BYTES) per second."),
    ]
    lines_ = f"{RANGE}, {SHIFTS}, ARRAY[$line]::text[]"
    term_note = (" TERMINAL counters of the chosen lines' subdevices: per hour up to 7 days, per shift up to 92 "
                 "days, per month (the chosen shifts combined) beyond; kept when the hours are condensed, so "
                 "ranges older than the ~35 days of interval records work too.")

    def spread(lay: Layout) -> dict[str, Any]:
        return timeseries(
            lay, "Terminal response time across terminals",
            "Per time bucket: the mean response time per transaction over all terminals, the 90th percentile "
            "and the largest of the terminals' own averages (RESPONSE-TIME / TRANSACTIONS, end of read to "
            "start of write; measure.terminal_spread). A high maximum with a low mean points at a few slow "
            "terminals." + term_note, "s", f"""
SELECT bucket_at AS "time", response_seconds_mean AS "mean", response_seconds_p90 AS "90th percentile",
       response_seconds_max AS "slowest terminal"
  FROM measure.terminal_spread({lines_})
 ORDER BY 1""")

    def slowest(lay: Layout) -> dict[str, Any]:
        return timeseries(
            lay, "Slowest terminals: response time",
            "Average response time per transaction of the 5 terminals with the highest average over the "
            "whole range, by line and subdevice (measure.terminal_series)." + term_note, "s", f"""
SELECT bucket_at AS "time", line || ' ' || terminal AS metric, response_seconds_avg AS value
  FROM measure.terminal_series({lines_}, 5)
 ORDER BY 1, 2""")

    def table_(lay: Layout) -> dict[str, Any]:
        return table(
            lay, "Terminals, slowest first",
            "The 25 terminals with the highest average response over the range (measure.terminal_summary): "
            "measured hours, transactions, transactions per second, average response per transaction, the "
            "worst interval average (one interval record), requests and bytes per second over the measured "
            "time." + term_note, "short", f"""
SELECT t.line, t.terminal, t.hours, t.transactions, t.transactions_per_second, t.response_seconds_avg,
       t.response_seconds_max, t.requests_per_second, t.bytes_per_second
  FROM measure.terminal_summary({lines_}, 25) t
 ORDER BY t.response_seconds_avg DESC NULLS LAST, t.line, t.terminal""",
            overrides=[unit_override("hours", "none", 0), unit_override("transactions", "none", 0),
                       unit_override("transactions_per_second", "short", 3),
                       unit_override("response_seconds_avg", "s", 3), unit_override("response_seconds_max", "s", 3),
                       unit_override("requests_per_second", "short", 3), unit_override("bytes_per_second", "Bps"),
                       unit_override("line", "string"), unit_override("terminal", "string")])

    return series_dashboard("lines", "MEASURE lines and terminals",
                            "LINE entity (counters summed over the line's terminals): busy, transactions, "
                            "response time, requests and bytes; TERMINAL entity (the lines' subdevices): "
                            "response time across terminals and the slowest terminals.", "line",
                            [SYSTEM_VAR, entity_var("line", "Line", "line", "e.ids->>'device_name'"), SHIFT_VAR],
                            "line", "line IN ($line)", items, [spread, slowest, table_])


def tmf_dashboard() -> dict[str, Any]:
    items = [
        ("trans_avg", "TMF transactions begun per second", "short", "HOME-TRANS per second per CPU."),
        ("lifetime_avg", "Mean transaction lifetime", "s", "HOME-TRANS-QTIME / HOME-TRANS per CPU."),
    ]
    return series_dashboard("tmf", "MEASURE TMF", "TMF entity per CPU: transaction rate and lifetime.", "tmf",
                            [SYSTEM_VAR, CPU_VAR, SHIFT_VAR], "'CPU ' || cpu", "cpu IN ($cpu)", items)


def process_dashboard() -> dict[str, Any]:
    proc_var = entity_var("process", "Process", "process", "e.ids->>'process_name'")
    min_cpu = var_custom("min_cpu_seconds", "Busy process: CPU seconds above", ["600", "60", "0"],
                         "Busy Process (Figure 2) lists processes with more CPU time than this.")
    max_prio = var_custom("max_priority", "Busy process: priority below", ["200", "150", "255"],
                          "Busy Process (Figure 2) lists processes with a priority below this.")
    label = "process_name || ' (' || cpu || ',' || pin || ')'"
    items = [
        ("busy_avg", "Process busy", "percent", "CPU-BUSY-TIME % of each process."),
        ("pqlen_avg", "$RECEIVE queue length", "short", "PQLEN: RECV-QTIME / DELTA-TIME (Figure 7)."),
        ("vsem_avg", "VSEMs per second", "short", "VSEM: VSEMS per second (Figure 7)."),
    ]
    win = (" Over the interval records whose FROM-TIMESTAMP lies in the time range widened to whole UTC hours,"
           " from the record tiers kept when hours are condensed (months, days and hours; so ranges older"
           " than the ~35 days of interval records work too).")

    def report(title: str, desc: str, unit: str, sql: str, ovr: list) -> Any:
        return lambda lay: table(lay, title, desc + win, unit, sql, overrides=ovr)

    extra = [
        report("Busy process (Figure 2)",
               "Processes with CPU-BUSY-TIME above $min_cpu_seconds s and PRIORITY below $max_priority, "
               "busiest first (measure.report_busy_process).", "s", f"""
SELECT r.program_file_name, r.process_name, r.cpu, r.pin, r.run_seconds, r.cpu_seconds,
       r.cpu_utilization_ratio, r.io_per_second, r.priority
  FROM measure.report_busy_process({HOURS}, $min_cpu_seconds, $max_priority) r""",
               [unit_override("cpu_utilization_ratio", "percentunit"), unit_override("io_per_second", "short"),
                unit_override("cpu", "none", 0), unit_override("pin", "none", 0),
                unit_override("priority", "none", 0)]),
        report("Process activity (Figure 3)",
               "Processes that received and sent messages: CPU seconds per transaction (message received), "
               "I/O per transaction and CPU seconds per I/O (measure.report_process_activity).", "s", f"""
SELECT r.program_file_name, r.process_name, r.cpu, r.pin, r.cpu_seconds_per_trans, r.io_per_trans,
       r.cpu_seconds_per_io
  FROM measure.report_process_activity({HOURS}) r""",
               [unit_override("io_per_trans", "short", 2), unit_override("cpu", "none", 0),
                unit_override("pin", "none", 0), unit_override("cpu_seconds_per_trans", "s", 4),
                unit_override("cpu_seconds_per_io", "s", 4)]),
        report("Process summary (Figure 1)",
               "Per program file: processes started, CPU seconds, messages received and sent "
               "(measure.report_process_summary).", "short", f"""
SELECT r.program_file_name, r.process_count, r.cpu_seconds, r.messages_received, r.messages_sent
  FROM measure.report_process_summary({HOURS}) r""",
               [unit_override("cpu_seconds", "s"), unit_override("process_count", "none", 0)]),
        report("File summary (Figure 6)",
               "Disc FILE opens (DEVICE-TYPE 3, names without #) by file: opens, reads, writes, updates, "
               "deletes, info calls (measure.report_file_summary).", "short", f"""
SELECT r.file_name, r.open_count, r.reads, r.writes, r.updates, r.deletes, r.info_calls
  FROM measure.report_file_summary({HOURS}) r""", [unit_override("open_count", "none", 0)]),
        report("DISCOPEN summary (Figure 7)",
               "Physical disc opens by file: opens, driver input calls, cache hits, writes, block splits, "
               "stalls (measure.report_discopen_summary).", "short", f"""
SELECT r.file_name, r.open_count, r.input_calls, r.cache_hits, r.output_calls, r.block_splits, r.stalls
  FROM measure.report_discopen_summary({HOURS}) r""", [unit_override("open_count", "none", 0)]),
    ]
    return series_dashboard("processes", "MEASURE processes",
                            "PROCESS entity: busy, $RECEIVE queue and VSEMs per process, and the reports of "
                            "'Performance Considerations for Application Processes' (Figures 1-3, 6, 7).",
                            "process", [SYSTEM_VAR, proc_var, SHIFT_VAR, min_cpu, max_prio], label,
                            "process_name IN ($process)", items, extra, top=20)


UC_TOP = 20


def top_of(sql: str, top: int = UC_TOP) -> str:
    """The rows (bucket_at, metric, value) of `sql` for the `top` metrics with the highest average."""
    return f"""
WITH s AS MATERIALIZED ({sql}),
top AS (
    SELECT metric FROM s GROUP BY metric ORDER BY avg(value) DESC NULLS LAST, metric LIMIT {top})
SELECT s.bucket_at AS "time", s.metric, s.value
  FROM s JOIN top ON top.metric = s.metric
 ORDER BY 1, 2"""


def user_counters_dashboard() -> dict[str, Any]:
    lay = Layout()
    proc_var = var_query(
        "process", "Process",
        "SELECT DISTINCT e.ids->>'process_name' FROM measure.entity e JOIN measure.system s "
        "ON s.system_id = e.system_id WHERE s.system_name = '$system' AND e.entity = 'userdef' ORDER BY 1",
        description="Processes with user counters (USERDEF).")

    def counter_var(name: str, label: str, types: str, desc: str) -> dict[str, Any]:
        return var_query(
            name, label,
            "SELECT DISTINCT upper(c->>'name') FROM measure.measurement m, "
            "jsonb_array_elements(m.contab->'counters') c "
            f"WHERE m.system_name = '$system' AND upper(c->>'type') IN ({types}) ORDER BY 1",
            multi=False, include_all=False, description=desc)

    count_var = counter_var("count_counter", "Count counter (ACCUM)", "'ACCUM', 'FACCUM'",
                            "The user counter that counts completed transactions.")
    queue_var = counter_var("queue_counter", "Response counter (QUEUE)", "'QUEUE'",
                            "The QUEUE user counter bumped around each transaction (INCQUEUE/DEQUEUE).")
    panels = [
        tier_panel(lay),
        timeseries(lay, "Throughput", "The count counter per second (ACCUM RATE ON) per process; the "
                   f"{UC_TOP} processes with the highest average over the range." + TIER_NOTE,
                   "short", top_of(f"""
    SELECT bucket_at, process_name || ' ' || counter_name AS metric, sum(value_avg) AS value
      FROM measure.userdef_series({RANGE}, {SHIFTS}, ARRAY['value'])
     WHERE process_name IN ($process) AND counter_name = '$count_counter'
     GROUP BY 1, 2"""), w=24),
        timeseries(lay, "Response time",
                   "Average response per transaction by Little's law: the QUEUE counter's average length "
                   "(transactions in progress) divided by the count counter per second, per process "
                   f"(= queue time / count); the {UC_TOP} processes with the highest average over the range."
                   + TIER_NOTE, "s", top_of(f"""
    SELECT bucket_at, process_name AS metric,
           sum(value_avg) FILTER (WHERE counter_name = '$queue_counter')
           / nullif(sum(value_avg) FILTER (WHERE counter_name = '$count_counter'), 0) AS value
      FROM measure.userdef_series({RANGE}, {SHIFTS}, ARRAY['value'])
     WHERE process_name IN ($process)
     GROUP BY 1, 2"""), w=24),
        timeseries(lay, "All user counters",
                   "User counters of the chosen processes in the unit of their TYPE: ACCUM per second, "
                   f"BUSY %, QUEUE average length; the {UC_TOP} with the highest average over the range."
                   + TIER_NOTE, "short", top_of(f"""
    SELECT bucket_at, process_name || ' ' || counter_name || '[' || counter_index || '] ' || counter_type
           AS metric, value_avg AS value
      FROM measure.userdef_series({RANGE}, {SHIFTS}, ARRAY['value'])
     WHERE process_name IN ($process)"""), w=24),
    ]
    panels[0]["gridPos"] = {"h": 4, "w": 6, "x": 0, "y": 0}
    for i, p in enumerate(panels[1:]):
        p["gridPos"] = {"h": 8, "w": 24, "x": 0, "y": 4 + 8 * i}
    return dashboard("user-counters", "MEASURE user counters",
                     "USERDEF counters: throughput and response time of application transactions.",
                     [SYSTEM_VAR, proc_var, count_var, queue_var, SHIFT_VAR], panels)


def transaction_resource_dashboard() -> dict[str, Any]:
    lay = Layout()
    tx = var_text("txprocess", "Transactions: process (LIKE)", "",
                  "Empty: transactions are the LINE TRANSACTIONS; else the MESSAGES-RECEIVED of the "
                  "processes whose name matches this LIKE pattern (e.g. $SRV%).")
    sql = f"""
SELECT r.component, r.cpu_ms_per_transaction, r.cpu_seconds, r.transactions,
       r.transactions_per_second_per_cpu, r.cpu_utilization_percent, r.response_seconds_avg
  FROM measure.report_transaction_resource({HOURS}, nullif('$txprocess', '')) r"""
    panels = [
        table(lay, "Transaction resource (Table 4)",
              "ATM article Table 4/5: CPU milliseconds per transaction by component (system overhead, "
              "TMF/disc, line handlers, TCP, HLS, servers, other; _measure.component_map), with "
              "transactions, transactions per second per CPU, CPU utilisation and average response "
              "(measure.report_transaction_resource) over the time range widened to whole UTC hours, from "
              "the record tiers kept when hours are condensed.", "ms", sql + "\n ORDER BY 1",
              overrides=[unit_override("cpu_seconds", "s"), unit_override("transactions", "none", 0),
                         unit_override("transactions_per_second_per_cpu", "short", 2),
                         unit_override("cpu_utilization_percent", "percent"),
                         unit_override("response_seconds_avg", "s", 3), unit_override("component", "string")]),
        barchart(lay, "CPU ms per transaction by component", "The components of Table 4 (the total left out).",
                 "ms", sql + "\n WHERE r.component <> 'total'\n ORDER BY 2 DESC", "component",
                 ["cpu_seconds", "transactions", "transactions_per_second_per_cpu", "cpu_utilization_percent",
                  "response_seconds_avg"]),
    ]
    return dashboard("transaction-resource", "MEASURE transaction resource",
                     "Transaction resource (ATM article, Table 4): CPU per transaction by component.",
                     [SYSTEM_VAR, tx], panels, time_from="now-1h")


def sql_ipu_dashboard() -> dict[str, Any]:
    """The H-, J- and L-series types (issue 29): the top SQL statements and the IPU balance of
    each CPU, from the reports on the window's interval records (neither is kept in tiers)."""
    lay = Layout()
    system = var_query(
        "system", "System",
        "SELECT DISTINCT s.system_name FROM measure.system s JOIN measure.entity e "
        "ON e.system_id = s.system_id WHERE e.entity IN ('sqlstmt', 'sqlproc', 'diskfile', 'servernet', "
        "'osscpu', 'ossns') ORDER BY 1",
        multi=False, include_all=False,
        description="Nodes with entities of the H-, J- and L-series catalogue (SQL, OSS, DISKFILE, SERVERNET).")
    top = var_custom("top", "Top statements", ["10", "20", "50"], "How many SQL statements the panels show.")
    stmts = f"""
SELECT s.module_name || ' #' || s.statement_index AS statement, s.program_file_name, s.processes, s.calls,
       s.elapsed_ms_per_call, s.elapsed_seconds, s.records_accessed, s.disc_reads, s.recompiles
  FROM measure.report_sql_statements({RANGE}, NULL, $top) s"""
    ipu = f"""
SELECT b.cpu, b.ipus, b.intervals, b.busy_percent, b.busy_per_ipu_percent, b.ipu_busy_min, b.ipu_busy_max,
       b.ipu_busy_spread, b.busiest_ipu
  FROM measure.report_ipu_balance({RANGE}) b
 ORDER BY 1"""
    per_ipu = f"""
SELECT 'CPU ' || b.cpu || ' IPU ' || (u.k - 1) AS ipu, u.pct AS busy_percent
  FROM measure.report_ipu_balance({RANGE}) b
 CROSS JOIN LATERAL unnest(b.ipu_busy_percent) WITH ORDINALITY u (pct, k)
 ORDER BY b.cpu, u.k"""
    pct = [unit_override(c, "percent") for c in ("busy_percent", "busy_per_ipu_percent", "ipu_busy_min",
                                                 "ipu_busy_max", "ipu_busy_spread")]
    panels = [
        table(lay, "Top SQL statements",
              "SQLSTMT: the statements with the longest elapsed time per call (ELAPSED-BUSY-TIME / CALLS, "
              "the manual's average elapsed time for each call), their calls, elapsed seconds, records "
              "accessed and disc reads, summed over the processes that ran them in the time range "
              "(measure.report_sql_statements on the interval records).", "ms", stmts,
              overrides=[unit_override("statement", "string"), unit_override("program_file_name", "string"),
                         unit_override("processes", "none", 0), unit_override("calls", "none", 0),
                         unit_override("elapsed_seconds", "s"), unit_override("records_accessed", "none", 0),
                         unit_override("disc_reads", "none", 0), unit_override("recompiles", "none", 0)]),
        barchart(lay, "Elapsed ms per call, top SQL statements",
                 "The top statements' average elapsed time per call (the other columns left out).", "ms",
                 stmts, "statement", ["program_file_name", "processes", "calls", "elapsed_seconds",
                                      "records_accessed", "disc_reads", "recompiles"], w=12),
        barchart(lay, "Calls, top SQL statements", "The top statements' calls in the time range.", "none",
                 stmts, "statement", ["program_file_name", "processes", "elapsed_ms_per_call", "elapsed_seconds",
                                      "records_accessed", "disc_reads", "recompiles"], w=12),
        table(lay, "IPU balance",
              "Per CPU: CPU-BUSY-TIME as % of the time range (the sum over its IPUs, up to IPUS x 100 %) and "
              "normalised per IPU (busy / (DELTA-TIME x IPUS), the reference's multi-IPU note), its IPUs' "
              "least and greatest busy %, their spread (points) and the busiest IPU "
              "(measure.report_ipu_balance on the interval records).", "none", ipu, overrides=pct),
        barchart(lay, "Busy % of each IPU", "IPU-BUSY-TIME-n as % of the time range, per CPU and IPU.",
                 "percent", per_ipu, "ipu"),
    ]
    return dashboard("sql-ipu", "MEASURE SQL statements and IPUs",
                     "H-, J- and L-series nodes: top SQL statements (SQLSTMT) and the IPU balance of each CPU.",
                     [system, top], panels, time_from="now-6h")


def baseline_panel(lay: Layout, entity: str, item: str, title: str, unit: str, subjects: str) -> dict[str, Any]:
    return timeseries(
        lay, title, f"Hourly {entity} {item} (the hour tier) with its baseline (the median of the same local "
        "hour of the weeks before, holidays left out) and its minor band, for the chosen subjects "
        "(measure.baseline_series; docs/analysis.md). No band: nothing learned yet (the first week).", unit, f"""
SELECT s.hour_at AS "time", x.metric, x.value
  FROM measure.baseline_series({RANGE}, '{entity}', '{item}', {subjects}) s
 CROSS JOIN LATERAL (VALUES (s.subject, s.value), (s.subject || ' baseline', s.baseline),
                            ('band ' || s.subject || ' low', s.band_low),
                            ('band ' || s.subject || ' high', s.band_high)) x (metric, value)
 ORDER BY 1, 2""", overrides=[BASELINE_STYLE, BAND_STYLE])


BASELINE_STYLE = {"matcher": {"id": "byRegexp", "options": ".* baseline$"}, "properties": [
    {"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}}]}
BAND_STYLE = {"matcher": {"id": "byRegexp", "options": "^band .*"}, "properties": [
    {"id": "color", "value": {"mode": "fixed", "fixedColor": "rgba(128, 128, 128, 0.6)"}},
    {"id": "custom.lineStyle", "value": {"fill": "dot", "dash": [2, 6]}}]}


def exceptions_dashboard() -> dict[str, Any]:
    lay = Layout()
    volume = entity_var("volume", "Volume", "disc", "e.ids->>'device_name'")
    cpus, volumes = "ARRAY[$cpu]::text[]", "ARRAY[$volume]::text[]"
    panels = [
        baseline_panel(lay, "cpu", "busy", "CPU busy against its baseline", "percent", cpus),
        baseline_panel(lay, "cpu", "qlen", "CPU queue against its baseline", "short", cpus),
        baseline_panel(lay, "disc", "busy", "Disc busy against its baseline", "percent", volumes),
        baseline_panel(lay, "disc", "qlen", "Disc queue against its baseline", "short", volumes),
        timeseries(lay, "Exceptions per hour", "Hours, subjects and items outside their band, minor and major, "
                   "every entity (measure.exception_check).", "short", f"""
SELECT $__timeGroupAlias(c.hour_at,$__interval), c.severity AS metric, count(*) AS value
  FROM measure.exception_check({RANGE}) c
 GROUP BY 1, 2
 ORDER BY 1, 2""", w=24, points=True),
        table(lay, "Exceptions", "Every hour, entity, subject and item outside its baseline band "
              "(`measuredb report exceptions`): value, baseline, band, deviation in robust standard "
              "deviations, and how many earlier weeks were learned.", "short", f"""
SELECT e.hour_at AS "time", e.entity, e.subject, e.item, e.value, e.baseline, e.band_low, e.band_high,
       e.deviation, e.severity, e.direction, e.weeks
  FROM measure.report_exceptions({RANGE}, NULL) e
 ORDER BY e.hour_at, e.severity, e.entity, e.subject, e.item""", h=10,
              overrides=[unit_override("time", "dateTimeAsIso"), unit_override("weeks", "none", 0)]),
    ]
    annotation = {
        "name": "Major exceptions", "enable": True, "hide": False, "iconColor": "orange",
        "datasource": DS,
        "target": target(f"""
SELECT e.hour_at AS "time", e.hour_at + INTERVAL '1 hour' AS timeend,
       e.entity || ' ' || e.subject || ' ' || e.item || ': ' || round(e.value::numeric, 2) || ' against '
       || round(e.baseline::numeric, 2) || ' (' || e.direction || ', ' || round(e.deviation::numeric, 1) || ')' AS text,
       e.entity || ',' || e.severity AS tags
  FROM measure.report_exceptions({RANGE}, 'major') e
 ORDER BY 1""", "table", "Anno"),
    }
    return dashboard("exceptions", "MEASURE exceptions against the baseline",
                     "Each hour against its hour-of-week baseline (median and MAD of the last weeks, holidays "
                     "left out; docs/analysis.md): the values with their band, the exceptions, and the major "
                     "ones as annotations.", [SYSTEM_VAR, CPU_VAR, volume], panels, annotations=[annotation])


DASHBOARDS = {
    "exceptions": exceptions_dashboard,
    "threshold": threshold_dashboard,
    "cpu-trend": cpu_trend_dashboard,
    "cpu": cpu_dashboard,
    "disc": disc_dashboard,
    "lines": lines_dashboard,
    "processes": process_dashboard,
    "tmf": tmf_dashboard,
    "user-counters": user_counters_dashboard,
    "transaction-resource": transaction_resource_dashboard,
    "sql-ipu": sql_ipu_dashboard,
}


# ------------------------------------------------------------------ alert rules

def alert_query(entity: str) -> str:
    return f"""
SELECT $__timeTo()::timestamptz AS "time", c.system_name, c.subject,
       count(*) FILTER (WHERE c.broken) AS breaches
  FROM measure.threshold_check(NULL, $__timeFrom(), $__timeTo(), '{entity}') c
 GROUP BY c.system_name, c.subject
 ORDER BY 1, 2, 3""".strip()


EXCEPTION_ALERT = """
SELECT $__timeTo()::timestamptz AS "time", c.system_name, c.entity, c.subject, c.item,
       count(*) FILTER (WHERE c.severity = 'major') AS exceptions
  FROM measure.exception_check(NULL, $__timeFrom(), $__timeTo()) c
 GROUP BY c.system_name, c.entity, c.subject, c.item
 ORDER BY 1, 2, 3, 4, 5""".strip()


def alert_rule(uid: str, title: str, sql: str, labels: dict[str, str], annotations: dict[str, str]) -> dict[str, Any]:
    """A rule over the last two hours: query A (SQL, per system and subject: a count), B its
    maximum, C fires when it is above 0; no data is OK."""
    return {
        "uid": uid,
        "title": title,
        "condition": "C",
        "data": [
            {"refId": "A", "relativeTimeRange": {"from": 7200, "to": 0}, "datasourceUid": "measuredb",
             "model": {"refId": "A", "datasource": {"type": DS_TYPE, "uid": "measuredb"},
                       "rawQuery": True, "editorMode": "code", "format": "time_series",
                       "rawSql": sql, "intervalMs": 60000, "maxDataPoints": 43200}},
            {"refId": "B", "datasourceUid": "__expr__",
             "model": {"refId": "B", "type": "reduce", "expression": "A", "reducer": "max",
                       "settings": {"mode": "dropNN"},
                       "datasource": {"type": "__expr__", "uid": "__expr__"}}},
            {"refId": "C", "datasourceUid": "__expr__",
             "model": {"refId": "C", "type": "threshold", "expression": "B",
                       "conditions": [{"evaluator": {"type": "gt", "params": [0]}}],
                       "datasource": {"type": "__expr__", "uid": "__expr__"}}},
        ],
        "noDataState": "OK",
        "execErrState": "Error",
        "for": "0s",
        "isPaused": False,
        "labels": labels,
        "annotations": annotations,
    }


def alerting() -> dict[str, Any]:
    rules = [alert_rule(
        f"measuredb-threshold-{entity}", f"{entity.upper()} threshold broken", alert_query(entity),
        {"measuredb": "threshold", "entity": entity, "severity": "warning"},
        {"summary": f"{entity.upper()} {{{{ $labels.subject }}}} of {{{{ $labels.system_name }}}} broke "
                    f"{{{{ $values.B }}}} threshold(s) in the last two hours",
         "description": f"Hourly {entity} items (measure.{entity}_hour) of the last two hours checked "
                        "against the thresholds in force (measure.threshold). See the MEASURE "
                        "threshold report dashboard.",
         "__dashboardUid__": "measuredb-threshold"}) for entity in ENTITIES]
    exceptions = [alert_rule(
        "measuredb-exception-major", "Major exception against the baseline", EXCEPTION_ALERT,
        {"measuredb": "exception", "severity": "warning"},
        {"summary": "{{ $labels.entity }} {{ $labels.subject }} {{ $labels.item }} of {{ $labels.system_name }}: "
                    "{{ $values.B }} hour(s) far outside the baseline in the last two hours",
         "description": "Hours of the last two hours beyond the major band of their hour-of-week baseline "
                        "(measure.exception_check; docs/analysis.md). See the MEASURE exceptions dashboard.",
         "__dashboardUid__": "measuredb-exceptions"})]
    return {
        "apiVersion": 1,
        "groups": [{"orgId": 1, "name": "measuredb thresholds", "folder": "MEASURE alerts",
                    "interval": "5m", "rules": rules},
                   {"orgId": 1, "name": "measuredb exceptions", "folder": "MEASURE alerts",
                    "interval": "5m", "rules": exceptions}],
        "contactPoints": [{"orgId": 1, "name": "measuredb placeholder", "receivers": [{
            "uid": "measuredb-placeholder", "type": "webhook", "disableResolveMessage": False,
            "settings": {"url": "http://127.0.0.1:9/measuredb-alerts", "httpMethod": "POST"}}]}],
        "policies": [{"orgId": 1, "receiver": "measuredb placeholder",
                      "group_by": ["grafana_folder", "alertname", "system_name"],
                      "group_wait": "30s", "group_interval": "5m", "repeat_interval": "4h"}],
    }


ALERTING_HEADER = """\
# Grafana unified alerting for measuredb (file provisioning, apiVersion 1, Grafana 11.6).
# GENERATED by dashboards/build.py: edit that script, not this file
# (tests/dashboards/test_build.py fails when they differ).
#
# One rule per entity type. Query A reads the hour tier and the thresholds in force
# (measure.threshold_check over the last two hours, every system) and returns, per system and
# subject, the number of broken thresholds; B takes its maximum, C fires when it is above 0.
# Changing a limit in _measure.threshold needs no change here. No data (no thresholds for the
# entity, or nothing measured) is OK.
#
# Beside them, one rule on the baselines (group "measuredb exceptions"): the hours of the last
# two hours beyond the major band of their hour-of-week baseline (measure.exception_check,
# docs/analysis.md), per system, entity, subject and item; it fires when there is one.
#
# The contact point is a placeholder: a webhook to a closed port on localhost. Replace it
# (e-mail, Slack, PagerDuty ...) in your own provisioning file. The notification policy below
# replaces the organisation's policy tree.
"""


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (the SQL) as literal blocks."""


_Dumper.add_representer(str, lambda d, s: d.represent_scalar(
    "tag:yaml.org,2002:str", s, style="|" if "\n" in s else None))


def render() -> dict[Path, str]:
    out = {HERE / f"{stem}.json": json.dumps(make(), indent=2, ensure_ascii=False) + "\n"
           for stem, make in DASHBOARDS.items()}
    out[ALERTING] = ALERTING_HEADER + yaml.dump(alerting(), Dumper=_Dumper, sort_keys=False,
                                                width=100, allow_unicode=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only compare, write nothing")
    args = parser.parse_args(argv)
    stale = []
    for path, text in render().items():
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        stale.append(path)
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    if args.check and stale:
        print("out of date (run dashboards/build.py): " + ", ".join(str(p.relative_to(REPO)) for p in stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
