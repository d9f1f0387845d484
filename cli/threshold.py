"""`measuredb threshold`: the threshold items and values the ENFORM threshold report and the
dashboards check (Figure 9: "each system has its own set").

    measuredb threshold list [--system SYSTEM]
    measuredb threshold set ENTITY ITEM OPERATOR LIMIT [--system SYSTEM] [--shift N] [--off]
    measuredb threshold remove ENTITY ITEM OPERATOR [--system SYSTEM] [--shift N]

Every command is one transaction through core/configuration.py (the same as /admin/thresholds);
a change re-evaluates the stored violations it affects and says on how many hours.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Annotated, Any

import typer

from cli.common import (
    CONFIG_OPTIONS,
    FormatOption,
    UserError,
    check_format,
    connection,
    emit,
    print_lines,
    run,
)
from core import configuration
from core.catalog import load_catalog

TIERED = load_catalog().tiered_names  # the entity types with tiers: what thresholds can check
threshold_app = typer.Typer(no_args_is_help=True,
                            help="List, set or remove thresholds (per entity type, item and shift).")

SYSTEM_OPT = Annotated[str | None, typer.Option("--system", help="the system (default: the defaults of every "
                                                                  "system without its own)")]
SHIFT_OPT = Annotated[int | None, typer.Option("--shift", help="only for the hours of this shift (default: "
                                                                "every shift)")]


def describe_reevaluated(result: dict[str, Any]) -> str:
    r = result["reevaluated"]
    return (f"stored violations re-evaluated on {r['hours']} hour{'s' if r['hours'] != 1 else ''} of "
            f"{r['systems']} system{'s' if r['systems'] != 1 else ''}")


def _shift(shift: int | None) -> str:
    return "every shift" if shift is None else f"shift {shift}"


@threshold_app.command("list")
def threshold_list(system: SYSTEM_OPT = None, output: FormatOption = "text") -> None:
    """The thresholds a system takes (its own, else the defaults), or every stored one."""
    def go() -> None:
        check_format(output)
        with connection() as conn:
            rows = configuration.thresholds(conn, system)
        emit(rows, [("system", "system"), ("entity", "entity"), ("item", "item"), ("operator", "op"),
                    ("limit", "limit"), ("shift", "shift"), ("in_force", "in force"), ("enabled", "enabled"),
                    ("source", "source"), ("help", "help")], output,
             text=lambda r: [r["system"] or "default", r["entity"], r["item"], r["operator"], f"{r['limit']:g}",
                             "every" if r["shift"] is None else str(r["shift"]),
                             "yes" if r["in_force"] else ("off" if not r["enabled"] else "no"), r["source"],
                             r["help"]],
             headings=["system", "entity", "item", "op", "limit", "shift", "in force", "source", "help"])
    run(go, options=CONFIG_OPTIONS)


@threshold_app.command("set")
def threshold_set(
    entity: Annotated[str, typer.Argument(help=f"{', '.join(TIERED[:-1])} or {TIERED[-1]}")],
    item: Annotated[str, typer.Argument(help="a column of measure.<entity>_hour: busy_max, qlen_delt ...")],
    operator: Annotated[str, typer.Argument(help="'>', '>=', '<' or '<='")],
    limit: Annotated[str, typer.Argument(help="the limit (busy % 0-100, queue length, per second ...)")],
    system: SYSTEM_OPT = None,
    shift: SHIFT_OPT = None,
    off: Annotated[bool, typer.Option("--off", help="switch it off (a system's: its default too)")] = False,
    description: Annotated[str | None, typer.Option(help="what it is for")] = None,
) -> None:
    """Set a threshold the threshold report and dashboards check (re-evaluates stored violations)."""
    def go() -> None:
        try:
            value = Decimal(limit)
        except InvalidOperation:
            raise UserError(f"LIMIT: {limit!r} is no number") from None
        with connection() as conn:
            result = configuration.set_threshold(conn, system=system, entity=entity, item=item, operator=operator,
                                                 limit=value, shift=shift, enabled=not off, help=description)
        t = result["threshold"]
        print_lines(f"threshold {t['entity']} {t['item']} {t['operator']} {t['limit']} of "
                    f"{t['system'] or 'the defaults'} ({_shift(t['shift'])})"
                    f" {'set' if t['enabled'] else 'switched off'}", describe_reevaluated(result))
    run(go, options=CONFIG_OPTIONS)


@threshold_app.command("remove")
def threshold_remove(
    entity: Annotated[str, typer.Argument()],
    item: Annotated[str, typer.Argument()],
    operator: Annotated[str, typer.Argument()],
    system: SYSTEM_OPT = None,
    shift: SHIFT_OPT = None,
) -> None:
    """Remove a threshold (of a system: its default holds again)."""
    def go() -> None:
        with connection() as conn:
            result = configuration.remove_threshold(conn, system=system, entity=entity, item=item,
                                                    operator=operator, shift=shift)
        r = result["removed"]
        print_lines(f"threshold {r['entity']} {r['item']} {r['operator']} of {r['system'] or 'the defaults'} "
                    f"({_shift(r['shift'])}) removed", describe_reevaluated(result))
    run(go, options=CONFIG_OPTIONS)
