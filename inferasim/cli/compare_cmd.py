"""``inferasim compare A.yaml B.yaml``: two deployments on the same workload, side by side."""

from __future__ import annotations

import click

from inferasim.config.knobs import Knobs
from inferasim.config.loader import load_scenario
from inferasim.report import strict_json


@click.command()
@click.argument("scenario_a", type=click.Path(dir_okay=False))
@click.argument("scenario_b", type=click.Path(dir_okay=False))
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override applied to both scenarios (e.g. the workload).")
@click.option("--json", "as_json", is_flag=True, help="Print rows as JSON.")
def compare(scenario_a, scenario_b, overrides, as_json):
    """Replay SCENARIO_A and SCENARIO_B and print every metric with B - A.

    Throughput is also shown per GPU, so deployments of different sizes compare fairly."""
    from inferasim.report.compare import compare_rows, compare_table
    from inferasim.report.run_report import replay_summary
    from inferasim.serve.simulation import simulate

    knobs = Knobs.from_env()
    summaries, names = [], []
    for path in (scenario_a, scenario_b):
        sc = load_scenario(path, list(overrides))
        summaries.append(replay_summary(simulate(sc, knobs))[1])
        names.append(sc.name)
    rows = compare_rows(*summaries)
    if as_json:
        click.echo(strict_json.dumps({"a": names[0], "b": names[1], "rows": rows}))
    else:
        click.echo(compare_table(rows, names[0], names[1]))
