"""`measuredb node …`: the simulated node on its own, in memory (no database).

    measuredb node sweep --node et1-txp [--node et1-vlx] [--from 8 --to 40 --steps 9 | --tps 10,20,30]
                         [--workload W] [--seed S] [--minutes M] [--warm-minutes M] [--out PLOT.png]
    measuredb node anomalies --start YYYY-MM-DD [--node N] [--days D] [--count C] [--seed S] [--out FILE]

The sweep runs the node once per offered load (the workload's rate replaced), measures
TERMINAL TRANSACTIONS and RESPONSE-TIME and CPU-BUSY-TIME the way a MEASURE measurement
records them (collector/node/response.py), prints the throughput-versus-response table and
saves the curve (the VLX article's Figure 6) as a PNG beside it. `anomalies` writes a seeded
schedule of anomalies for `measuredb backfill --anomalies` (docs/anomalies.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from collector.node.topology import NodeFileError, node_names
from collector.node.workload import default_workload

node_app = typer.Typer(no_args_is_help=True, help="The simulated node alone, in memory.")
out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


def _loads(tps: str | None, lo: float, hi: float, steps: int) -> list[float]:
    if tps:
        try:
            vals = [float(x) for x in tps.split(",") if x.strip()]
        except ValueError:
            raise typer.BadParameter(f"not a list of numbers: {tps!r}", param_hint="--tps") from None
        if not vals or min(vals) <= 0:
            raise typer.BadParameter("give offered loads > 0", param_hint="--tps")
        return vals
    if not 0 < lo < hi or steps < 2:
        raise typer.BadParameter("need 0 < --from < --to and --steps >= 2")
    return [round(float(x), 3) for x in np.linspace(lo, hi, steps)]


@node_app.command("sweep")
def sweep_command(
    node: Annotated[list[str], typer.Option("--node", help=f"node(s): {', '.join(node_names())}")],
    workload: Annotated[
        str | None, typer.Option(help="workload name or file; default: the node's own")
    ] = None,
    tps: Annotated[
        str | None, typer.Option(help="offered loads, comma-separated (tps); overrides --from/--to")
    ] = None,
    lo: Annotated[float, typer.Option("--from", help="lowest offered load (tps)")] = 8.0,
    hi: Annotated[float, typer.Option("--to", help="highest offered load (tps)")] = 40.0,
    steps: Annotated[int, typer.Option(help="offered loads from --from to --to")] = 9,
    seed: Annotated[int, typer.Option(help="random seed (same for every point)")] = 2026,
    minutes: Annotated[float, typer.Option(help="measured minutes per point")] = 30.0,
    warm_minutes: Annotated[float, typer.Option(help="unmeasured warm-up minutes per point")] = 10.0,
    out_path: Annotated[
        Path | None, typer.Option("--out", help="PNG file (default: sweep-NODE[-NODE].png)")
    ] = None,
) -> None:
    """Throughput versus response time over a range of offered load: a table per node and a plot.

    Figure 6 of "NonStop VLX Performance": one PNG plot of every node."""
    # heavy (numba's compiled node, matplotlib): loaded only by the command that runs the node
    from collector.node.response import measure_response, plot_sweep

    loads = _loads(tps, lo, hi, steps)
    if minutes <= 0 or warm_minutes < 0:
        raise typer.BadParameter("--minutes must be > 0 and --warm-minutes >= 0")
    curves = {}
    for name in node:
        wl = workload or default_workload(name)
        pts = []
        try:
            with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                          TimeElapsedColumn(), console=err, transient=True) as bar:
                task = bar.add_task(f"{name}: simulating {warm_minutes + minutes:g} minutes per load", total=len(loads))
                for load in loads:
                    pts.append(measure_response(name, wl, tps=load, seed=seed, warm_s=warm_minutes * 60,
                                                run_s=minutes * 60))
                    bar.advance(task)
        except NodeFileError as exc:
            err.print(f"measuredb: {exc}", markup=False)
            raise typer.Exit(2) from None
        curves[name] = pts
        table = Table(title=f"{name} ({wl}): {minutes:g} measured minutes per point, seed {seed}")
        for col in ("offered tps", "tps", "CPU %", "avg s", "95 % s", "97 % s", "transactions"):
            table.add_column(col, justify="right")
        table.caption = "* saturated: completed < 95 % of the offered load (left out of the plot)"
        for p in pts:
            table.add_row(
                f"{p.offered_tps:g}" + (" *" if p.saturated else ""),
                f"{p.tps:.2f}",
                f"{p.cpu_percent:.1f}",
                f"{p.response_avg_s:.2f}",
                f"{p.response_p95_s:.2f}",
                f"{p.response_p97_s:.2f}",
                f"{p.transactions:,}",
            )
        out.print(table)
    path = out_path or Path(f"sweep-{'-'.join(node)}.png")
    plot_sweep(curves, path)
    out.print(f"plot: {path}", markup=False)


@node_app.command("anomalies")
def anomalies_command(
    start: Annotated[str, typer.Option(help="first day of the anomalous week (YYYY-MM-DD, the node's local days)")],
    node: Annotated[str, typer.Option(help=f"node: {', '.join(node_names())} or a node file")] = "demo",
    workload: Annotated[str | None, typer.Option(help="workload name or file; default: the node's own")] = None,
    days: Annotated[int, typer.Option(min=1, max=366, help="days the anomalies fall in")] = 7,
    count: Annotated[int, typer.Option(min=1, max=500, help="how many anomalies")] = 12,
    seed: Annotated[int, typer.Option(min=0, help="same seed, same schedule")] = 1,
    out_path: Annotated[Path, typer.Option("--out", help="schedule file to write (YAML)")] = Path("anomalies.yaml"),
) -> None:
    """A seeded schedule of anomalies for `measuredb backfill --anomalies` (docs/anomalies.md).

    The five kinds in turn, whole-hour starts, 1-3 hours each, never two at once."""
    import datetime as dt

    import yaml

    from collector.node.anomalies import batch_hours, generate
    from collector.node.topology import load_node
    from collector.node.workload import load_workload

    try:
        first = dt.date.fromisoformat(start)
    except ValueError:
        raise typer.BadParameter(f"{start!r} is not a date (YYYY-MM-DD)", param_hint="--start") from None
    try:
        topo = load_node(node)
        wl = load_workload(workload or default_workload(node))
        sched = generate(topo, first, days=days, count=count, seed=seed, batch_hours=batch_hours([wl]))
    except (NodeFileError, ValueError) as exc:
        err.print(f"measuredb: {exc}", markup=False)
        raise typer.Exit(2) from None
    out_path.write_text(yaml.safe_dump(sched.model_dump(mode="json", exclude_none=True), sort_keys=False),
                        encoding="utf-8")
    out.print(f"{len(sched.anomalies)} anomalies from {first} over {days} days: {out_path}", markup=False)
