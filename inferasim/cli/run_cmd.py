"""``inferasim run``: replay a scenario end to end and print its summary."""

from __future__ import annotations

import time
from pathlib import Path

import click

from inferasim.cli.metrics_options import metrics_options, parse_percentiles, parse_slo
from inferasim.cli.options import deployment_title, resolve_scenario, scenario_options
from inferasim.cli.progress import replay_bar, wanted
from inferasim.config.errors import ConfigError
from inferasim.config.knobs import Knobs
from inferasim.report import strict_json
from inferasim.report.atomic import atomic_dir, check_out_dir


@click.command()
@scenario_options
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Write requests, occupancy, summary.json and the resolved scenario here.")
@click.option("--format", "out_format", type=click.Choice(["csv", "parquet"]), default="csv",
              help="Format of the request rows in --out.")
@click.option("--stream-rows", is_flag=True,
              help="With --out: write the request rows there as the replay goes, in row "
                   "groups, so memory holds the requests in flight rather than every "
                   "finished one (long traces, fleets); the summary is computed from the "
                   "written rows and equals the in-memory one.")
@metrics_options
def run(scenario, overrides, as_json, out_dir, out_format, stream_rows, percentiles_text,
        slo_text, **flags):
    """Replay SCENARIO (default: scenarios/quickstart.yaml) and print the summary."""
    if stream_rows and out_dir is None:
        raise click.UsageError("--stream-rows writes the rows into the --out folder as the "
                               "replay goes; give --out too")
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
    percentiles, slo = parse_percentiles(percentiles_text), parse_slo(slo_text)
    resolved = resolve_scenario(scenario, overrides, replays=True, **flags)
    knobs = Knobs.from_env()
    bar, on_clock = replay_bar(wanted(as_json))
    if stream_rows:
        result, summary = _replay_streamed(resolved, knobs, bar, on_clock, Path(out_dir),
                                           out_format, percentiles, slo)
    else:
        result, summary = _replay(resolved, knobs, bar, on_clock,
                                  None if out_dir is None else Path(out_dir), out_format,
                                  percentiles, slo)
    if as_json:
        click.echo(strict_json.dumps(summary))
    else:
        from inferasim.report.tables import summary_table

        wl = resolved.workload
        if wl.format == "bailian" or (wl.format == "mooncake" and wl.mooncake_sessions):
            load = "recorded sessions"
        elif wl.format in ("mooncake", "azure"):
            load = "recorded arrivals"
        elif wl.rate is not None and wl.format in ("synthetic", "random"):
            load = f"{wl.rate:g} req/s"
        else:
            load = f"concurrency {wl.concurrency}"
        title = f"{deployment_title(resolved)}, {wl.format} workload, {load}"
        click.echo(summary_table(summary, title))
        from inferasim.sweep.slots import queued_note

        if (queued := queued_note(resolved)) is not None:
            click.echo(queued)
        click.echo(f"(simulated {result.end_s:.0f} s in {summary['wall_s']:.2f} s of wall time)")


def _replay(scenario, knobs, bar, on_clock, out_dir: Path | None, out_format: str,
            percentiles, slo):
    """The replay with its rows in memory, written to ``out_dir`` (if any) at the end."""
    # Imported here, as the other commands do: pandas and the simulator load only when run.
    from inferasim.report.run_report import replay_summary, write_outputs
    from inferasim.serve.simulation import simulate

    started = time.perf_counter()
    with bar:
        result = simulate(scenario, knobs, on_clock=on_clock)
    frame, summary = replay_summary(result, percentiles=percentiles, slo=slo)
    summary["wall_s"] = time.perf_counter() - started
    check_completed(summary, result, scenario)  # before --out: a failed run writes nothing
    if out_dir is not None:
        write_outputs(out_dir, result, frame, summary, out_format)
    return result, summary


def _replay_streamed(scenario, knobs, bar, on_clock, out_dir: Path, out_format: str,
                     percentiles, slo):
    """The replay with its rows streamed into a staging folder that replaces ``out_dir``
    only once the run has completed (a failed or interrupted run leaves it as it was)."""
    from inferasim.report.row_stream import RowStream
    from inferasim.report.run_report import streamed_summary, write_result_files
    from inferasim.serve.simulation import simulate

    with atomic_dir(out_dir) as staging:
        started = time.perf_counter()
        with bar:
            result = simulate(scenario, knobs, on_clock=on_clock,
                              rows=RowStream(staging, out_format))
        summary = streamed_summary(result, percentiles=percentiles, slo=slo)
        summary["wall_s"] = time.perf_counter() - started
        check_completed(summary, result, scenario)
        write_result_files(staging, result, summary)
    return result, summary


def check_completed(summary: dict, result, scenario) -> None:
    """A replay in which no request completed measured nothing: a ConfigError saying why
    (every figure of its summary would be empty or zero, and exit 0 would pass it on)."""
    if summary.get("requests_completed", 1):
        return
    sent, failed = summary.get("requests_sent", 0), summary.get("requests_failed", 0)
    window = f"[{result.window_start_s:g}, {result.horizon_s:g}] s"
    if sent == 0:
        why = (f"no request was sent in the measured window {window} (does the trace end "
               "before workload.warmup_s, or is workload.duration_s too short?)")
    elif failed == sent:
        why = (f"the deployment refused all {sent} requests sent in the measured window "
               f"(the first: {summary.get('requests_failed_example') or 'no reason given'})")
    else:
        why = (f"{sent} requests were sent in the measured window {window} and none finished "
               f"before the replay ended at {result.end_s:g} s")
    raise ConfigError(f"no request completed: {why}", file=scenario.path, key="workload")
