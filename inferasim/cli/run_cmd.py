"""``inferasim run``: replay a scenario end to end and print its summary."""

from __future__ import annotations

import time
from pathlib import Path

import click

from inferasim.cli.options import deployment_title, resolve_scenario, scenario_options
from inferasim.config.knobs import Knobs
from inferasim.report import strict_json
from inferasim.report.atomic import check_out_dir


@click.command()
@scenario_options
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Write requests, occupancy, summary.json and the resolved scenario here.")
@click.option("--format", "out_format", type=click.Choice(["csv", "parquet"]), default="csv",
              help="Format of the request rows in --out.")
def run(scenario, overrides, as_json, out_dir, out_format, **flags):
    """Replay SCENARIO (default: scenarios/quickstart.yaml) and print the summary."""
    # Imported here, as the other commands do: pandas and the simulator load only when run.
    from inferasim.report.run_report import replay_summary, write_outputs
    from inferasim.report.tables import summary_table
    from inferasim.serve.simulation import simulate

    if out_dir is not None:
        check_out_dir(out_dir)  # before the replay: refuse a folder the result would clobber
        if out_format == "parquet":
            try:
                import pyarrow  # noqa: F401
            except ImportError:
                raise click.UsageError("--format parquet needs pyarrow (pip install "
                                       "'inferasim[parquet]')") from None
    elif out_format != "csv":
        raise click.UsageError("--format chooses the format of the rows --out writes; "
                               "give --out too")
    resolved = resolve_scenario(scenario, overrides, replays=True, **flags)
    knobs = Knobs.from_env()
    started = time.perf_counter()
    result = simulate(resolved, knobs)
    frame, summary = replay_summary(result)
    summary["wall_s"] = time.perf_counter() - started
    if out_dir is not None:
        write_outputs(Path(out_dir), result, frame, summary, out_format)
    if as_json:
        click.echo(strict_json.dumps(summary))
    else:
        wl = resolved.workload
        if wl.format == "bailian" or (wl.format == "mooncake" and wl.mooncake_sessions):
            load = "recorded sessions"
        elif wl.format == "mooncake":
            load = "recorded arrivals"
        elif wl.rate is not None and wl.format in ("synthetic", "random"):
            load = f"{wl.rate:g} req/s"
        else:
            load = f"concurrency {wl.concurrency}"
        title = f"{deployment_title(resolved)}, {wl.format} workload, {load}"
        click.echo(summary_table(summary, title))
        click.echo(f"(simulated {result.end_s:.0f} s in {summary['wall_s']:.2f} s of wall time)")
