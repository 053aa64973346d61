"""``inferasim search``: the best deployment for a workload under an SLA, within a GPU budget."""

from __future__ import annotations

import os
import time
from pathlib import Path

import click

from inferasim.cli.metrics_options import parse_percentiles
from inferasim.cli.options import flag_overrides, override_options
from inferasim.cli.progress import ProgressBar, wanted
from inferasim.config.errors import ConfigError
from inferasim.config.knobs import Knobs
from inferasim.report import strict_json
from inferasim.report.atomic import check_out_dir


@click.command()
@click.argument("scenario", required=False, type=click.Path(dir_okay=False))
@override_options
@click.option("--gpus", type=int, required=True, help="GPU budget for the whole deployment.")
@click.option("--sla", "sla_items", multiple=True, metavar="KEY=VALUE[,KEY=VALUE]",
              help="Latency targets: ttft_p90_s, ttft_p50_s, tpot_p90_ms, e2e_p90_s, "
                   "interactivity_tok_s (per user, a floor); repeatable.")
@click.option("--objective", default="throughput_per_gpu", show_default=True,
              type=click.Choice(["throughput_per_gpu", "cost_per_mtok", "energy_per_token"]),
              help="What the winner maximises (throughput) or minimises (cost, energy).")
@click.option("--space", "space_items", multiple=True, metavar="KEY=V1,V2",
              help="Narrow the search: engine.name, parallel.tp, parallel.ep, "
                   "parallel.dp_attention, topology.kind, topology.split (xPyD), "
                   "speculative.method, workload.concurrency; any other scenario key adds an axis.")
@click.option("--margin", type=float, default=None,
              help="Stage one prunes what the projection puts past the SLA, or behind the best, "
                   "by more than this fraction (default 0.3).")
@click.option("--audit", type=int, default=None,
              help="Pruned candidates replayed to check they lose (default 3).")
@click.option("--price", "price_items", multiple=True, metavar="GPU=USD",
              help="USD per GPU-hour for a part, over the catalog's; repeatable.")
@click.option("--jobs", type=int, default=None, help="Local worker processes (default: CPUs).")
@click.option("--ray", "ray_address", default=None, metavar="auto|local|ADDRESS",
              help="Replay on a Ray cluster instead of local processes.")
@click.option("--ray-token", type=click.Path(dir_okay=False), default=None,
              help="The token file of a Ray cluster that requires token authentication.")
@click.option("--cache", "cache_dir", type=click.Path(file_okay=False), default=None,
              help="Replays kept by scenario hash (default ~/.cache/inferasim/search): a killed "
                   "search resumes, a second one reuses.")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Write candidates, frontier, winners and the chart here (replaced whole).")
@click.option("--percentiles", "percentiles_text", default=None, metavar="P1,P2,...",
              help="Latency percentiles to report beside the defaults.")
@click.option("--no-plots", is_flag=True, help="Skip the PNG chart.")
@click.option("--json", "as_json", is_flag=True, help="Print search.json instead of the table.")
def search(scenario, overrides, gpus, sla_items, objective, space_items, margin, audit,
           price_items, jobs, ray_address, ray_token, cache_dir, out_dir, percentiles_text,
           no_plots, as_json, **flags):
    """Search the deployments of SCENARIO's model and GPU within --gpus for the best one under
    --sla: every candidate priced in closed form, the promising ones replayed."""
    from inferasim.anchors.loading import scenario_store
    from inferasim.search import report
    from inferasim.search.economics import parse_prices, unpriced_parts
    from inferasim.search.run import DEFAULT_AUDIT, DEFAULT_MARGIN
    from inferasim.search.run import search as run_search
    from inferasim.search.sla import Sla
    from inferasim.search.space import DeploymentResolver, build_space, parse_space
    from inferasim.sweep.executors import make_executor, use_ray_token
    from inferasim.sweep.resume import ResumingExecutor

    check_out_dir(out_dir)
    margin = DEFAULT_MARGIN if margin is None else margin
    audit = DEFAULT_AUDIT if audit is None else audit
    if audit < 0:
        raise ConfigError(f"expected 0 or more, got {audit}", key="--audit")
    sla = Sla.parse(sla_items)
    prices = parse_prices(price_items)
    narrow = parse_space(space_items)
    percentiles = parse_percentiles(percentiles_text)
    knobs = Knobs.from_env()
    resolver = DeploymentResolver(scenario, list(overrides) + flag_overrides(flags))
    space = build_space(resolver, gpus, narrow)
    for cand in space.candidates:
        knobs.check(cand.scenario)
    if objective == "cost_per_mtok":
        missing = unpriced_parts((c.scenario for c in space.candidates), prices)
        if missing:
            raise ConfigError(f"no sourced GPU-hour price for {', '.join(missing)} in the "
                              f"catalog: give one with --price {missing[0]}=USD", key="--price")
    store = scenario_store(resolver.base)
    use_ray_token(ray_token)
    cache = _cache_dir(cache_dir)
    started = time.perf_counter()
    total = len(space.candidates)
    bar = ProgressBar("search", enabled=wanted(as_json))

    def on_projected(n: int) -> None:
        bar.update(0.1 * n / total, f"{n}/{total} candidates projected")

    def on_replayed(n: int, of: int) -> None:
        bar.update(0.1 + 0.9 * n / max(of, 1),
                   f"{total} candidates: {total - of} pruned, {n}/{of} replayed, {of - n} left")

    with bar, ResumingExecutor(make_executor(jobs, ray_address, tasks=total), cache) as ex:
        result = run_search(space.candidates, sla=sla, objective=objective, knobs=knobs,
                            executor=ex, margin=margin, audit=audit, prices=prices, store=store,
                            percentiles=percentiles, on_projected=on_projected,
                            on_replayed=on_replayed)
        executor_name, workers = ex.name, ex.workers
    elapsed = time.perf_counter() - started
    table = report.frame(result, sla)
    info = report.summary(result, sla, objective, margin, gpus, len(space.refused))
    info["space"] = {k: list(v) for k, v in space.axes.items()}
    info["refused"] = [{"deployment": d, "reason": r} for d, r in space.refused]
    info["notes"] = [n for n in (report.refusal_note(result), report.reservation_note(result),
                                 report.price_note(result, prices)) if n]
    trees = {obj: resolver.tree(result.candidates[i].deployment.overrides + (
        (("workload.concurrency", str(result.candidates[i].concurrency)),)
        if result.candidates[i].closed_loop else ()))
             for obj, i in result.best.items() if i is not None}
    for obj, tree in trees.items():
        tree["name"] = f"search-best-{obj}"
        tree["description"] = (f"inferasim search's best for {obj} under {sla.describe()}: "
                               f"{result.candidates[result.best[obj]].label}")
    replays = len(result.records) - result.resumed
    timing = {"wall_s": elapsed, "executor": executor_name, "workers": workers,
              "replays_run": replays, "replays_from_cache": result.resumed}
    written = report.write(out_dir, table, info, trees, result, timing, plots=not no_plots,
                           title=f"{resolver.base.model.name} on {gpus} x {resolver.base.gpu.name}"
                                 f" (SLA {sla.describe()})", base=resolver.base)
    if as_json:
        click.echo(strict_json.dumps(info, indent=2))
        return
    click.echo(report.table_text(table))
    best = info["best"].get(objective)
    if best is None:
        click.echo(f"no replayed candidate meets the SLA ({sla.describe()})")
    else:
        click.echo(f"best for {objective}: #{best['candidate']} {best['deployment']} "
                   f"({best['calibration']}) -> {out_dir}/{best['scenario']}")
        if best["caveat"]:
            click.echo(f"  note: as deployed, {best['caveat']}")
    for note in info["notes"]:
        click.echo(f"note: {note}")
    agree = sum(ok for _, ok, _ in result.audit_agrees)
    click.echo(f"({total} candidates, {len(space.refused)} deployments refused; "
               f"{info['pruned']} pruned at margin {margin:g}"
               + (f", {info['reprieved']} reprieved (the replays confirmed no candidate "
                  "within the margin of the best projected)" if info["reprieved"] else "")
               + (f", {len(info['failed'])} served nothing (search.json: failed)"
                  if info["failed"] else "")
               + ", the replay agrees on "
               f"{agree}/{len(result.audit_agrees)} audited; {len(result.records)} replayed "
               f"({result.resumed} from {cache}) on {executor_name} x{workers} in "
               f"{elapsed:.1f} s; wrote {', '.join(written)} to {out_dir})")


def _cache_dir(given: str | None) -> Path:
    if given is not None:
        return Path(given)
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "inferasim" / "search"
