"""`measuredb analysis`: the settings of the automatic analysis (docs/analysis.md): per system
how many weeks a baseline learns from and its minor and major bands; per baseline item its
floor and per indicator of the health verdict its limit and weight (every system's).

    measuredb analysis show SYSTEM [--format text|csv|json]
    measuredb analysis set SYSTEM [--weeks N] [--minor X] [--major X] [--relative-floor X]
    measuredb analysis reset SYSTEM
    measuredb analysis floor ENTITY ITEM FLOOR
    measuredb analysis indicator INDICATOR [--limit X] [--weight N]

Every command is one transaction through core/configuration.py (the same as
/admin/systems/{system}/analysis and /admin/analysis/…); a change of what the baselines learn
judges the stored hours again in it and says how many.
"""

from __future__ import annotations

import json
import math
from typing import Annotated, Any

import typer
from rich.table import Table

from cli.common import (
    CONFIG_OPTIONS,
    SYSTEM_ARG_HELP,
    FormatOption,
    UserError,
    check_format,
    connection,
    emit,
    out,
    print_lines,
    run,
    show_table,
)
from core import configuration

analysis_app = typer.Typer(no_args_is_help=True,
                           help="Show or set the automatic analysis's settings: weeks learned, exception bands, "
                                "item floors, health indicators.")

SYSTEM_ARG = Annotated[str, typer.Argument(metavar="SYSTEM", help=SYSTEM_ARG_HELP)]
# the services' field names as these commands name them
OPTIONS = {**CONFIG_OPTIONS, "weeks": "--weeks", "minor": "--minor", "major": "--major",
           "relative_floor": "--relative-floor", "floor": "FLOOR", "indicator": "INDICATOR", "limit": "--limit",
           "weight": "--weight"}


def _number(text: str, name: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UserError(f"{name}: {text!r} is no number") from None
    if not math.isfinite(value):
        raise UserError(f"{name}: {text!r} is no finite number")
    return value


def _g(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def print_change(result: dict[str, Any]) -> None:
    """A system's settings after a change, and what was judged again."""
    print_lines(f"analysis settings of {result['system']}: {describe_settings(result)}", describe_rejudged(result))


def describe_settings(result: dict[str, Any]) -> str:
    return ", ".join(f"{s['setting']} {_g(s['value'])}" + (" (default)" if s["source"] == "default" else
                                                          f" (default {_g(s['default'])})")
                     for s in result["settings"])


def describe_rejudged(result: dict[str, Any]) -> str:
    r = result["rejudged"]
    if not r["systems"]:
        return "what the baselines learn is unchanged or no hour is stored: nothing judged again"
    return (f"baselines rebuilt: {r['hours']} hour{'s' if r['hours'] != 1 else ''} of {r['systems']} "
            f"system{'s' if r['systems'] != 1 else ''} judged again ({r['rows']} rows)")


@analysis_app.command("show")
def analysis_show(system: SYSTEM_ARG, output: FormatOption = "text") -> None:
    """A system's settings with their defaults, and the floors and indicators every system takes.

    csv: the settings; json: all of it, as GET /admin/systems/{system}/analysis answers.
    """
    def go() -> None:
        check_format(output)
        with connection() as conn:
            result = configuration.analysis(conn, system)
        if output == "json":
            out.print_json(json.dumps(result))
            return
        if output == "csv":
            emit(result["settings"], [("setting", "setting"), ("value", "value"), ("default", "default"),
                                      ("source", "source")], output)
            return
        print_lines(f"automatic analysis of {result['system']} (docs/analysis.md)")
        table = Table("setting", "value", "default", "source")
        for s in result["settings"]:
            table.add_row(s["setting"], _g(s["value"]), _g(s["default"]), s["source"])
        show_table(table)
        print_lines("", "baseline items (every system): the smallest half-width of the minor band")
        table = Table("entity", "item", "floor")
        for f in result["floors"]:
            table.add_row(f["entity"], f["item"], _g(f["floor"]))
        show_table(table)
        print_lines("", "health-verdict indicators (every system): the score is 100 minus the weights of those present")
        table = Table("indicator", "limit", "weight", "symptom")
        for i in result["indicators"]:
            table.add_row(i["indicator"], _g(i["limit"]), str(i["weight"]), i["symptom"])
        show_table(table)
    run(go, options=OPTIONS)


@analysis_app.command("set")
def analysis_set(
    system: SYSTEM_ARG,
    weeks: Annotated[int | None, typer.Option(help="the earlier weeks a baseline learns from, 1 to 52")] = None,
    minor: Annotated[str | None, typer.Option(help="the minor band, in robust standard deviations (above 0)")] = None,
    major: Annotated[str | None, typer.Option(help="the major band (above the minor)")] = None,
    relative_floor: Annotated[str | None, typer.Option("--relative-floor",
                                                       help="the smallest band as a share of the median (0 or "
                                                            "more)")] = None,
) -> None:
    """Change some of a system's settings (the others stay); judges its stored hours again."""
    def go() -> None:
        if weeks is None and minor is None and major is None and relative_floor is None:
            raise UserError("give at least one of --weeks, --minor, --major, --relative-floor")
        values = {k: None if v is None else _number(v, f"--{k.replace('_', '-')}")
                  for k, v in (("minor", minor), ("major", major), ("relative_floor", relative_floor))}
        with connection() as conn:
            result = configuration.set_analysis(conn, system, weeks=weeks, **values)
        print_change(result)
    run(go, options=OPTIONS)


@analysis_app.command("reset")
def analysis_reset(system: SYSTEM_ARG) -> None:
    """A system's settings back to the defaults; judges its stored hours again."""
    def go() -> None:
        with connection() as conn:
            result = configuration.reset_analysis(conn, system)
        print_change(result)
    run(go, options=OPTIONS)


@analysis_app.command("floor")
def analysis_floor(
    entity: Annotated[str, typer.Argument(help="cpu, disc, line, process, terminal, userdef or tmf")],
    item: Annotated[str, typer.Argument(help="a baseline item of it: busy, qlen, response ... (analysis show)")],
    floor: Annotated[str, typer.Argument(help="the smallest half-width of its minor band, in the item's unit")],
) -> None:
    """Set a baseline item's floor (every system's); judges every system's stored hours again."""
    def go() -> None:
        value = _number(floor, "FLOOR")
        with connection() as conn:
            result = configuration.set_analysis_floor(conn, entity, item, value)
        f = result["floor"]
        print_lines(f"floor of {f['entity']} {f['item']} set to {_g(f['floor'])}", describe_rejudged(result))
    run(go, options=OPTIONS)


@analysis_app.command("indicator")
def analysis_indicator(
    indicator: Annotated[str, typer.Argument(help="cpu_over_utilised, cpu_queuing ... (analysis show)")],
    limit: Annotated[str | None, typer.Option(help="the limit the indicator checks (0 or more)")] = None,
    weight: Annotated[int | None, typer.Option(help="its weight in the score, 0 to 100 (all add up to at most "
                                                    "100)")] = None,
) -> None:
    """Set a health-verdict indicator's limit or weight (every system's; the verdict reads them when it runs)."""
    def go() -> None:
        if limit is None and weight is None:
            raise UserError("give --limit, --weight or both")
        value = None if limit is None else _number(limit, "--limit")
        with connection() as conn:
            result = configuration.set_analysis_indicator(conn, indicator, limit=value, weight=weight)
        i = result["indicator"]
        print_lines(f"indicator {i['indicator']}: limit {_g(i['limit'])}, weight {i['weight']} "
                    f"(the weights add up to {result['weights']})")
    run(go, options=OPTIONS)
