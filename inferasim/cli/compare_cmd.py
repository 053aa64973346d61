"""``inferasim compare A.yaml B.yaml``: two deployments on the same workload, side by side."""

from __future__ import annotations

import click

from inferasim.cli.options import override_options, resolve_scenario
from inferasim.cli.run_cmd import check_completed
from inferasim.config.knobs import Knobs
from inferasim.report import strict_json


@click.command()
@click.argument("scenario_a", type=click.Path(dir_okay=False))
@click.argument("scenario_b", type=click.Path(dir_okay=False))
@override_options
@click.option("--json", "as_json", is_flag=True, help="Print rows as JSON.")
def compare(scenario_a, scenario_b, overrides, as_json, **flags):
    """Replay SCENARIO_A and SCENARIO_B and print every metric with B - A.

    Throughput is also shown per GPU, so deployments of different sizes compare fairly.
    --set and the shortcut flags apply to both (e.g. the workload)."""
    from inferasim.report.compare import compare_rows, compare_table
    from inferasim.report.run_report import replay_summary
    from inferasim.serve.simulation import simulate

    knobs = Knobs.from_env()
    scenarios = [resolve_scenario(path, overrides, replays=True, **flags)
                 for path in (scenario_a, scenario_b)]  # both checked before either replays
    summaries, names = [], []
    for sc in scenarios:
        result = simulate(sc, knobs)
        summary = replay_summary(result)[1]
        check_completed(summary, result, sc)
        summaries.append(summary)
        names.append(sc.name)
    rows = compare_rows(*summaries)
    if as_json:
        click.echo(strict_json.dumps({"a": names[0], "b": names[1], "rows": rows}))
    else:
        click.echo(compare_table(rows, names[0], names[1]))
