"""``inferasim sweep``: a concurrency ladder (x a grid of configurations), every rung a replay."""

from __future__ import annotations

import json
import time

import click

from inferasim.cli.metrics_options import metrics_options, parse_percentiles, parse_slo
from inferasim.cli.options import flag_overrides, resolve_scenario, scenario_options
from inferasim.cli.progress import rungs_bar, wanted
from inferasim.config.errors import ConfigError
from inferasim.config.knobs import Knobs
from inferasim.report import strict_json
from inferasim.report.atomic import check_out_dir


def _table(frame, open_loop: frozenset = frozenset()) -> str:
    """The rungs' figures; a rung in ``open_loop`` (a recorded trace's or a rate's load, no
    clients) shows no client count."""
    cols = [("config", "configuration", "{}"), ("concurrency", "conc", "{:d}"),
            ("output_tok_s_per_gpu", "out tok/s/GPU", "{:.1f}"),
            ("interactivity_tok_s", "tok/s/user", "{:.1f}"), ("ttft_mean_s", "TTFT s", "{:.3f}"),
            ("itl_mean_ms", "ITL ms", "{:.1f}"), ("prefix_hit_rate", "hit rate", "{:.1%}"),
            ("requests_completed", "requests", "{:d}")]
    # a KV tier behind the GPU pool: where each rung's prompts came from, as validate agentx
    # shows them (the engine's counter above counts the GPU pool alone)
    for key, head in (("host_hit_rate", "host hit"), ("storage_hit_rate", "storage hit")):
        if key in frame.columns and (frame[key].fillna(0) > 0).any():
            if "first_admission_hit_rate" not in {k for k, _, _ in cols}:
                cols.insert(-1, ("first_admission_hit_rate", "GPU hit", "{:.1%}"))
            cols.insert(-1, (key, head, "{:.1%}"))
    rows = [[head for _, head, _ in cols]]
    for _, rec in frame.iterrows():
        row = []
        for key, _, fmt in cols:
            value = rec[key]
            if key == "concurrency" and rec["rung"] in open_loop:
                row.append("-")
                continue
            try:
                row.append(fmt.format(int(value) if fmt == "{:d}" else value))
            except (TypeError, ValueError):
                row.append(str(value))
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(cols))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                       for i, (c, w) in enumerate(zip(r, widths, strict=True))) for r in rows]
    return "\n".join(lines)


@click.command()
@scenario_options
@click.option("--concurrency", "ladder", default=None, metavar="N1,N2,...",
              help="The concurrency ladder, e.g. 1,2,4,8,16,32,64 (default: the scenario's).")
@click.option("--grid", "grid_items", multiple=True, metavar="KEY=V1,V2",
              help="Also vary a scenario key or an INFERASIM_* knob; repeatable (cartesian product).")
@click.option("--jobs", type=int, default=None,
              help="Local worker processes (default: the CPU count; 1 runs in this process).")
@click.option("--ray", "ray_address", default=None, metavar="ADDRESS",
              help="Run rungs as Ray tasks on an existing cluster (HOST:PORT, ray://HOST:PORT, auto).")
@click.option("--ray-token", type=click.Path(dir_okay=False), default=None,
              help="The token file of a Ray cluster that requires token authentication.")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Write results.csv, results.parquet and the plots here (replaced atomically).")
@click.option("--no-plots", is_flag=True, help="Skip the PNG charts.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the result rows as one JSON list instead of the table.")
@metrics_options
def sweep(scenario, overrides, ladder, grid_items, jobs, ray_address, ray_token, out_dir,
          no_plots, as_json, percentiles_text, slo_text, **flags):
    """Replay SCENARIO at every rung of a concurrency ladder and chart the results.

    Each rung's result is kept in OUT.partial as it finishes: a sweep stopped (Ctrl-C,
    SIGTERM, an error) and run again with the same --out replays only the rungs left."""
    from inferasim.sweep.executors import make_executor, use_ray_token
    from inferasim.sweep.ladder import (
        build_ladder,
        parse_concurrency,
        parse_grid,
        run_ladder,
        write_results,
    )
    from inferasim.sweep.resume import ResumingExecutor, partial_dir

    check_out_dir(out_dir)  # before the ladder runs: refuse a folder it would clobber
    refuse_repeated_rungs(ladder)
    percentiles, slo = parse_percentiles(percentiles_text), parse_slo(slo_text)
    concurrency = parse_concurrency(ladder)
    grid = parse_grid(grid_items)
    base = resolve_scenario(scenario, overrides, replays=True, **flags)
    knobs = Knobs.from_env()
    all_overrides = list(overrides) + flag_overrides(flags)
    rungs = build_ladder(scenario, all_overrides, concurrency, grid, knobs,
                         resolve=lambda path, ovr: resolve_scenario(path, ovr))
    use_ray_token(ray_token)
    started = time.perf_counter()
    partial = partial_dir(out_dir)
    bar, on_done = rungs_bar(len(rungs), wanted(as_json))
    try:
        with ResumingExecutor(make_executor(jobs, ray_address, tasks=len(rungs)),
                              partial) as executor, bar:
            frame = run_ladder(rungs, executor, on_done=on_done, percentiles=percentiles,
                               slo=slo)
    except KeyboardInterrupt:
        kept = executor_kept(partial)
        if kept:
            click.echo(f"\ninferasim: {kept} finished rung(s) kept in {partial}; run the same "
                       "command again to resume", err=True)
        raise
    elapsed = time.perf_counter() - started
    frame.attrs["scenario"] = base.name
    from inferasim.sweep.cliff import cliff_text, kv_cliffs
    from inferasim.sweep.slots import queued_rungs_note

    cliffs = kv_cliffs(frame)
    queued = queued_rungs_note(rungs)
    spec = {"scenario": base.path, "overrides": all_overrides, "concurrency": concurrency,
            "grid": dict(grid), "kv_cliffs": cliffs, "queued_rungs": queued,
            "executor": executor.name,
            "workers": executor.workers, "wall_s": elapsed}
    written = write_results(out_dir, frame, base, plots=not no_plots, sweep_spec=spec)
    executor.store.remove()  # the whole result is in place: the partial rungs are spent
    if as_json:
        # pandas writes numpy numbers as JSON numbers and NaN as null
        click.echo(strict_json.dumps(json.loads(frame.to_json(orient="records"))))
        return
    click.echo(_table(frame, frozenset(
        r.index for r in rungs if not r.scenario.workload.clients_drive_load)))
    for cliff in cliffs:
        click.echo(cliff_text(cliff))
    if queued is not None:
        click.echo(queued)
    resumed = f", {executor.resumed} resumed from {partial}" if executor.resumed else ""
    click.echo(f"({len(rungs)} rungs on {executor.name} x{executor.workers} in {elapsed:.1f} s of "
               f"wall time{resumed}; wrote {', '.join(written)} to {out_dir})")


def executor_kept(partial) -> int:
    from inferasim.sweep.resume import RungStore

    return len(RungStore(partial))


def refuse_repeated_rungs(ladder: str | None) -> None:
    """``--concurrency 4,4`` would run one rung where two were asked for: say so instead."""
    if ladder is None:
        return
    seen: set[object] = set()
    for part in (p.strip() for p in ladder.split(",")):
        rung = int(part) if part.isdigit() else part  # 4 and 04 are one rung
        if part and rung in seen:
            raise ConfigError(f"rung {part} given twice in {ladder!r}; give each concurrency "
                              "once", key="--concurrency")
        seen.add(rung)
