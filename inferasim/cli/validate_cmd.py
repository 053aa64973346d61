"""``inferasim validate agentx CSV``: replay every rung of measured AgentX ladders with the
engines' defaults and print measured against simulated."""

from __future__ import annotations

import math

import click

from inferasim.config.knobs import Knobs
from inferasim.report import strict_json


@click.group()
def validate() -> None:
    """Replay measurements and set the replay beside them."""


def _fmt(value: float, kind: str) -> str:
    if math.isnan(value):
        return "-"
    return f"{value:.3f}" if kind == "hit" else f"{value:.1f}" if kind == "tok" else f"{value:.2f}"


def _table(rows) -> str:
    head = ["ladder", "conc", "hit meas", "hit sim", "GPU/host/miss sim", "out tok/s meas",
            "sim", "TTFT mean meas", "sim", "TTFT p90 meas", "sim"]
    lines = [head]
    for r in rows:
        parts = "/".join(f"{r[k]:.2f}" for k in ("simulated_first_admission_hit_rate",
                                                  "simulated_host_hit_rate",
                                                  "simulated_miss_rate"))
        lines.append([r["ladder"], str(r["concurrency"]),
                      _fmt(r["measured_prefix_hit_rate"], "hit"),
                      _fmt(r["simulated_prefix_hit_rate"], "hit"), parts,
                      _fmt(r["measured_output_tok_s"], "tok"),
                      _fmt(r["simulated_output_tok_s"], "tok"),
                      _fmt(r["measured_ttft_mean_s"], "s"), _fmt(r["simulated_ttft_mean_s"], "s"),
                      _fmt(r["measured_ttft_p90_s"], "s"), _fmt(r["simulated_ttft_p90_s"], "s")])
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(line, widths, strict=True)))
                     for line in lines)


@validate.command()
@click.argument("csv_path", metavar="CSV", type=click.Path(dir_okay=False))
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a scenario key on every rung, e.g. --set engine.queue_policy=lpm.")
@click.option("--concurrency", "only", default=None, metavar="N1,N2,...",
              help="Replay only these rungs of each ladder.")
@click.option("--ladder", "ladder_filter", default=None, metavar="TEXT",
              help="Replay only ladders whose label contains TEXT (e.g. minimax, sglang).")
@click.option("--trace", default=None, type=click.Path(dir_okay=False),
              help="The AgentX corpus (default: agentx-traces/ beside the CSV's folder).")
@click.option("--jobs", type=int, default=None,
              help="Local worker processes (default: the CPU count; 1 runs in this process).")
@click.option("--json", "as_json", is_flag=True, help="Print the rows and cliffs as JSON.")
def agentx(csv_path, overrides, only, ladder_filter, trace, jobs, as_json):
    """Replay every rung of the measured AgentX ladders in CSV (agentx_dev_ladders.csv)."""
    from inferasim.sweep.executors import make_executor
    from inferasim.sweep.ladder import parse_concurrency, run_replay
    from inferasim.validate.agentx import cliff, compare_row, read_ladders, rung_scenario

    rungs = read_ladders(csv_path, trace)
    wanted = parse_concurrency(only)
    if wanted is not None:
        rungs = [r for r in rungs if r.concurrency in wanted]
    if ladder_filter:
        rungs = [r for r in rungs if ladder_filter.lower() in r.ladder.lower()]
    if not rungs:
        raise click.UsageError("no rung of the file is left to replay by --concurrency/--ladder")
    knobs = Knobs.from_env()
    tasks = [(rung_scenario(rung, overrides), knobs) for rung in rungs]
    summaries: list = [None] * len(tasks)
    with make_executor(jobs) as ex:
        for index, (summary, _) in ex.run(run_replay, tasks):
            summaries[index] = summary
            if not as_json:
                click.echo(f"  replayed {rungs[index].ladder} c{rungs[index].concurrency}",
                           err=True)
    rows = [compare_row(r, s) for r, s in zip(rungs, summaries, strict=True)]
    cliffs = {}
    for label in dict.fromkeys(r["ladder"] for r in rows):
        mine = [r for r in rows if r["ladder"] == label]
        cliffs[label] = {"measured": cliff(mine, "measured"),
                         "simulated": cliff(mine, "simulated")}
    if as_json:
        click.echo(strict_json.dumps({"rows": rows, "cliffs": cliffs}))
        return
    click.echo(_table(rows))
    for label, c in cliffs.items():
        click.echo(f"cliff {label}: measured {_cliff_text(c['measured'])}, "
                   f"simulated {_cliff_text(c['simulated'])}")


def _cliff_text(c) -> str:
    return "none in these rungs" if c is None else f"c{c[0]} -> c{c[1]}"

