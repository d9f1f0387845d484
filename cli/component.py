"""`measuredb component`: which process is which component of the transaction-resource report
(ATM article, Table 4: TMF and disc processes, line handlers, PATHWAY TCPs, HLS, application
servers, other).

    measuredb component list [--system SYSTEM] [--format text|csv|json]
    measuredb component set PATTERN COMPONENT [--process-name] [--system SYSTEM] [--priority N]
    measuredb component remove PATTERN [--process-name] [--system SYSTEM]

PATTERN is an SQL LIKE pattern on the program file name ($APPL.%, %.SYSTEM.DP2%), or with
--process-name on the process name ($TCP%). Rows are tried by priority (lowest first); a
system's own rows and the defaults (no --system) together. Through core/configuration.py, the
same as /admin/components.
"""

from __future__ import annotations

from typing import Annotated

import typer

from cli.common import FormatOption, check_format, connection, emit, print_lines, run
from core import configuration

component_app = typer.Typer(no_args_is_help=True,
                            help="List, set or remove which process is which component of the "
                                 "transaction-resource report.")
OPTIONS = {"match_on": "--process-name", "pattern": "PATTERN", "component": "COMPONENT", "priority": "--priority",
           "system": "--system"}
SYSTEM_OPT = Annotated[str | None, typer.Option("--system", help="the system (default: the defaults of every "
                                                                  "system)")]
BY_NAME = Annotated[bool, typer.Option("--process-name", help="match the process name, not the program file name")]


@component_app.command("list")
def component_list(system: SYSTEM_OPT = None, output: FormatOption = "text") -> None:
    """The rows a system takes (its own and the defaults, in the order they are tried), or every one."""
    def go() -> None:
        check_format(output)
        with connection() as conn:
            rows = configuration.components(conn, system)
        emit(rows, [("system", "system"), ("priority", "priority"), ("match_on", "matches"), ("pattern", "pattern"),
                    ("component", "component"), ("source", "source")], output,
             text=lambda r: [r["system"] or "default", str(r["priority"]), r["match_on"], r["pattern"],
                             r["component"], r["source"]])
    run(go, options=OPTIONS)


@component_app.command("set")
def component_set(
    pattern: Annotated[str, typer.Argument(help="SQL LIKE pattern: $APPL.%, %.SYSTEM.DP2%, $TCP%")],
    component: Annotated[str, typer.Argument(help=", ".join(configuration.COMPONENTS))],
    process_name: BY_NAME = False,
    system: SYSTEM_OPT = None,
    priority: Annotated[int, typer.Option(help="rows are tried lowest first")] = 100,
) -> None:
    """Make the processes a pattern matches a component of the transaction-resource report."""
    def go() -> None:
        with connection() as conn:
            r = configuration.set_component(conn, system=system, match_on=_match(process_name), pattern=pattern,
                                            component=component, priority=priority)
        print_lines(f"{r['match_on']} LIKE {r['pattern']} is {r['component']} (priority {r['priority']}) for "
                    f"{r['system'] or 'every system'}")
    run(go, options=OPTIONS)


@component_app.command("remove")
def component_remove(
    pattern: Annotated[str, typer.Argument(help="the pattern of the row")],
    process_name: BY_NAME = False,
    system: SYSTEM_OPT = None,
) -> None:
    """Remove a row (of a system, or a default)."""
    def go() -> None:
        with connection() as conn:
            r = configuration.remove_component(conn, system=system, match_on=_match(process_name), pattern=pattern)
        print_lines(f"component row {r['match_on']} LIKE {r['pattern']} of {r['system'] or 'the defaults'} removed")
    run(go, options=OPTIONS)


def _match(process_name: bool) -> str:
    return "process_name" if process_name else "program_file_name"
