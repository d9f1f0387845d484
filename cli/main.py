"""`measuredb`: the platform's command line (Typer). One module per command group:

    measuredb run | api | collector | backfill | health     cli/services.py
    measuredb schema apply|status                           cli/schema.py
    measuredb report NAME …  |  report schedule …           cli/report.py
    measuredb import FILE …  |  export …                    cli/io.py
    measuredb system …  |  calendar …  |  threshold …       cli/system.py, calendar.py, threshold.py
    measuredb analysis show|set|reset|floor|indicator       cli/analysis.py
    measuredb component …                                   cli/component.py
    measuredb retention show|set|run|log                    cli/retention.py
    measuredb token create|list|revoke                      cli/token.py
    measuredb node sweep --node N … | anomalies --start D    cli/node.py

What they share (one-line errors, the database, printing) is cli/common.py; what they do is
the platform's services in core/ (the same functions the API calls). Bad settings and
unreachable databases end a command with one line naming the setting, never a traceback.
"""

from __future__ import annotations

import typer

from cli import io, services
from cli.analysis import analysis_app
from cli.calendar import calendar_app
from cli.component import component_app
from cli.node import node_app
from cli.report import report_app
from cli.retention import retention_app
from cli.schema import schema_app
from cli.system import system_app
from cli.threshold import threshold_app
from cli.token import token_app

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="measuredb: the platform's command line (MEASURE-compatible performance data).")
for command in (services.run, services.api, services.collector, services.backfill, services.health):
    app.command()(command)
app.command("import")(io.import_command)
app.command("export")(io.export_command)
app.add_typer(schema_app, name="schema")
app.add_typer(report_app, name="report")
app.add_typer(system_app, name="system")
app.add_typer(calendar_app, name="calendar")
app.add_typer(threshold_app, name="threshold")
app.add_typer(analysis_app, name="analysis")
app.add_typer(component_app, name="component")
app.add_typer(retention_app, name="retention")
app.add_typer(token_app, name="token")
app.add_typer(node_app, name="node")


def main() -> None:  # pragma: no cover - console entry
    app()
