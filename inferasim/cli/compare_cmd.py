"""``inferasim compare A.yaml B.yaml``: two deployments on the same workload, side by side."""

from __future__ import annotations

import warnings

import click

from inferasim.cli.options import override_options, resolve_scenario
from inferasim.cli.run_cmd import check_completed
from inferasim.config.errors import ConfigWarning
from inferasim.config.knobs import Knobs
from inferasim.report import strict_json


@click.command()
@click.argument("scenario_a", type=click.Path(dir_okay=False))
@click.argument("scenario_b", type=click.Path(dir_okay=False))
@override_options
@click.option("--price", "price_items", multiple=True, metavar="GPU=USD",
              help="USD per GPU-hour for a part, over the catalog's; repeatable.")
@click.option("--json", "as_json", is_flag=True, help="Print rows as JSON.")
def compare(scenario_a, scenario_b, overrides, price_items, as_json, **flags):
    """Replay SCENARIO_A and SCENARIO_B and print every metric with B - A.

    Throughput is also shown per GPU, so deployments of different sizes compare fairly, and
    priced: cost per million output and total tokens from the GPU-hour price (the catalog's,
    or --price) and energy per token. --set and the shortcut flags apply to both (e.g. the
    workload)."""
    from inferasim.anchors.loading import scenario_store
    from inferasim.report.compare import (
        compare_rows,
        compare_table,
        json_safe,
        money,
        money_notes,
        pool_lines,
        pools,
    )
    from inferasim.report.run_report import replay_summary
    from inferasim.search.economics import busy_share, parse_prices
    from inferasim.serve.simulation import simulate

    prices = parse_prices(price_items)  # refused before anything replays
    knobs = Knobs.from_env()
    scenarios = [resolve_scenario(path, overrides, replays=True, **flags)
                 for path in (scenario_a, scenario_b)]  # both checked before either replays
    differ = workload_differences(*scenarios)
    if differ:
        shown = "; ".join(differ[:4]) + (f"; and {len(differ) - 4} more" if len(differ) > 4
                                         else "")
        warnings.warn(f"A and B replay different workloads ({shown}): B - A compares the "
                      "workloads as well as the deployments; give both the same workload "
                      "(--set workload.KEY=VALUE applies to both)", ConfigWarning, stacklevel=1)
    parts = {sc.gpu.name for sc in scenarios}
    for name in sorted(set(prices) - parts):
        warnings.warn(f"--price {name}: neither scenario runs on {name} "
                      f"(they run on {', '.join(sorted(parts))})", ConfigWarning, stacklevel=1)
    summaries, figures, names, pool_sets = [], [], [], []
    for sc in scenarios:
        result = simulate(sc, knobs)
        summary = replay_summary(result)[1]
        check_completed(summary, result, sc)
        busy = busy_share([e.stats.busy_s for e in result.engines],
                          float(summary.get("window_s") or 0.0))
        figures.append(money(sc, summary, busy, prices, scenario_store(sc)))
        summaries.append({**summary, **figures[-1]})
        names.append(sc.name)
        pool_sets.append(pools(result))
    rows = compare_rows(*summaries)
    if as_json:
        click.echo(strict_json.dumps({"a": names[0], "b": names[1], "rows": rows,
                                      "money": {"a": json_safe(figures[0]),
                                                "b": json_safe(figures[1])},
                                      "pools": {"a": pool_sets[0], "b": pool_sets[1]}}))
    else:
        notes = money_notes(*figures) + pool_lines("A", pool_sets[0]) \
            + pool_lines("B", pool_sets[1])
        click.echo(compare_table(rows, names[0], names[1], notes))


def workload_differences(a, b) -> list[str]:
    """The workload keys on which two resolved scenarios differ, as "key: A vs B"."""
    import attrs

    def flat(spec, prefix="workload"):
        out = {}
        for key, value in attrs.asdict(spec, recurse=False).items():
            if attrs.has(type(value)):
                out.update(flat(value, f"{prefix}.{key}"))
            else:
                out[f"{prefix}.{key}"] = value
        return out

    fa, fb = flat(a.workload), flat(b.workload)
    for f, sc in ((fa, a), (fb, b)):
        if sc.workload.trace:  # each named relative to its own scenario's folder
            from inferasim.workload.trace_path import resolve_trace_path

            f["workload.trace"] = str(resolve_trace_path(sc).resolve())
    return [f"{k}: {fa[k]} vs {fb[k]}" for k in fa if fa[k] != fb[k]]
