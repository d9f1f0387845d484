"""Reading dashboards/*.json and the alert rules: every query Grafana would run (no tests here;
used by test_dashboards.py and bench/bench_panels.py)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.dashboards.grafana import MACRO

REPO = Path(__file__).resolve().parents[2]
DASHBOARDS = REPO / "dashboards"
ALERTING = DASHBOARDS / "provisioning" / "alerting"


@dataclass
class Query:
    where: str          # dashboard stem / panel title / refId
    kind: str           # timeseries, table, barchart, annotation, variable, alert
    sql: str
    fmt: str = "table"
    extra: dict[str, Any] = field(default_factory=dict)


def dashboard_files() -> list[Path]:
    return sorted(DASHBOARDS.glob("*.json"))


def iter_panels(dash: dict) -> Iterator[dict]:
    for p in dash.get("panels", []):
        yield p
        yield from p.get("panels", [])  # rows


def queries_of(path: Path) -> list[Query]:
    dash = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for p in iter_panels(dash):
        for t in p.get("targets", []):
            out.append(Query(f"{path.stem}/{p['title']}/{t['refId']}", p["type"], t["rawSql"], t.get("format", "table")))
    for a in dash.get("annotations", {}).get("list", []):
        if "target" in a:
            out.append(Query(f"{path.stem}/annotation {a['name']}", "annotation", a["target"]["rawSql"]))
    for v in dash.get("templating", {}).get("list", []):
        if v["type"] == "query":
            out.append(Query(f"{path.stem}/variable {v['name']}", "variable", v["query"]))
    return out


def alert_rules() -> list[dict]:
    rules = []
    for f in sorted(ALERTING.glob("*.yaml")):
        for g in yaml.safe_load(f.read_text(encoding="utf-8")).get("groups", []):
            rules.extend(g["rules"])
    return rules


def alert_queries() -> list[Query]:
    out = []
    for r in alert_rules():
        for d in r["data"]:
            if d["datasourceUid"] != "__expr__":
                out.append(Query(f"alert {r['uid']}/{d['refId']}", "alert", d["model"]["rawSql"],
                                 d["model"].get("format", "time_series"),
                                 {"range_s": d["relativeTimeRange"]["from"] - d["relativeTimeRange"]["to"]}))
    return out


def macro_calls(sql: str) -> list[tuple[str, str]]:
    return [(m[1], m[2]) for m in MACRO.finditer(sql)]


def macro_problems(sql: str) -> list[str]:
    """Our rules for macro use (grafana-macros.md): no parentheses or nesting inside macro
    arguments, no '1M' (nor any M/y interval: not a calendar unit), $__timeGroupAlias at most
    once, no repeated $__timeGroup text (the alias rule would alias every copy)."""
    problems = []
    for name, args in macro_calls(sql):
        if "(" in args:
            problems.append(f"${name}({args}): parentheses inside a macro argument")
        parts = [a.strip(" ").strip("'") for a in args.split(",")]
        if name.startswith(("__timeGroup", "__unixEpochGroup")) and len(parts) > 1 \
                and re.fullmatch(r"\d+[My]", parts[1]):
            problems.append(f"${name}({args}): '{parts[1]}' depends on the wall clock, not a calendar unit")
    if sql.count("$__timeGroupAlias(") > 1:
        problems.append("$__timeGroupAlias used more than once")
    groups = re.findall(r"\$__timeGroup\([^)]*\)", sql)
    if len(groups) != len(set(groups)):
        problems.append("the same $__timeGroup(...) text appears twice (both would get AS \"time\")")
    if re.search(r"'1M'|,\s*1M\)", sql):
        problems.append("'1M' interval")
    return problems
