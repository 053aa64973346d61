"""``inferasim validate agentx CSV``: replay every rung of measured AgentX ladders with the
engines' defaults and print measured against simulated."""

from __future__ import annotations

import math
from pathlib import Path

import attrs
import click

from inferasim.config.knobs import Knobs
from inferasim.report import strict_json


@click.group()
def validate() -> None:
    """Replay measurements and set the replay beside them."""


def _fmt(value: float, kind: str) -> str:
    if math.isnan(value):
        return "-"
    if kind == "kilo":
        return f"{value:,.0f}"
    return f"{value:.3f}" if kind == "hit" else f"{value:.1f}" if kind == "tok" else f"{value:.2f}"


SHARES = (("GPU", "simulated_first_admission_hit_rate"), ("host", "simulated_host_hit_rate"),
          ("storage", "simulated_storage_hit_rate"), ("miss", "simulated_miss_rate"))


def _share_columns(rows) -> list[tuple[str, str]]:
    """The shares the replay's prompt tokens split into at first admission: GPU hits,
    host-tier hits, storage-tier hits where a storage tier served, computed."""
    stored = any(r.get("simulated_storage_hit_rate", 0.0) > 0 for r in rows)
    return [s for s in SHARES if stored or s[0] != "storage"]


def _shares(r, columns) -> str:
    return "/".join(f"{r.get(k, 0.0):.2f}" for _, k in columns)


def _table(rows) -> str:
    columns = _share_columns(rows)
    shares = "/".join(name for name, _ in columns) + " sim"
    head = ["ladder", "conc", "hit meas", "hit sim", shares, "out tok/s meas",
            "sim", "in tok/s meas", "sim", "TTFT mean meas", "sim", "TTFT p90 meas", "sim"]
    lines = [head]
    for r in rows:
        lines.append([r["ladder"], str(r["concurrency"]),
                      _fmt(r["measured_prefix_hit_rate"], "hit"),
                      _fmt(r["simulated_prefix_hit_rate"], "hit"), _shares(r, columns),
                      _fmt(r["measured_output_tok_s"], "tok"),
                      _fmt(r["simulated_output_tok_s"], "tok"),
                      _fmt(r["measured_input_tok_s"], "kilo"),
                      _fmt(r["simulated_input_tok_s"], "kilo"),
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
@click.option("--hold-out", "hold_out", type=click.Choice(["ladder", "none", "rung"]),
              default="ladder", show_default=True,
              help="ladder: price each ladder with every anchor of its own run (deployment "
                   "and build) left out of the store (the shipped anchors hold the ladders), "
                   "as a deployment no anchor measured is priced; none: the store as it is "
                   "(in-sample where "
                   "it holds the ladder); rung: replay each rung below its ladder's measured "
                   "cliff calibrated by its ladder's other rungs alone, and print the median "
                   "error of output tok/s and mean TTFT over them.")
@click.option("--seeds", default=None, metavar="S1,S2,...",
              help="Replay every rung once per workload seed and report each simulated figure "
                   "as its median over them (the lanes' draws of the corpus move a rung at the "
                   "cliff's edge; the range of the hit rate is kept in --json). Default "
                   "1,2,3,4,5, or the one seed a --set workload.seed=N names.")
@click.option("--outputs", type=click.Choice(["matched", "corpus"]), default="matched",
              show_default=True,
              help="matched: scale the corpus's output lengths so that its output per prompt "
                   "token is the measured runs', read from the file's other ladders (the runs "
                   "used another snapshot of the corpus); corpus: replay the outputs as "
                   "recorded.")
@click.option("--json", "as_json", is_flag=True, help="Print the rows and cliffs as JSON.")
@click.option("--markdown", is_flag=True,
              help="Print the table, the cliffs and the scores as Markdown (for docs/).")
def agentx(csv_path, overrides, only, ladder_filter, trace, jobs, hold_out, seeds, outputs,
           as_json, markdown):
    """Replay every rung of the measured AgentX ladders in CSV (agentx_dev_ladders.csv)."""
    import tempfile
    from pathlib import Path

    from inferasim.sweep.executors import make_executor
    from inferasim.sweep.ladder import parse_concurrency, run_replay
    from inferasim.validate.agentx import (
        cliff,
        compare_row,
        corpus_output_ratio,
        expressible_rungs,
        held_out_anchors,
        held_out_errors,
        ladder_held_out_stores,
        ladder_scores,
        matched_output_scales,
        median_row,
        read_ladders,
        rung_recipe,
        rung_scenario,
        with_output_scales,
    )

    seed_list = _seed_list(seeds, overrides)
    every = read_ladders(csv_path, trace)
    rungs = every
    wanted = parse_concurrency(only)
    if wanted is not None:
        rungs = [r for r in rungs if r.concurrency in wanted]
    if ladder_filter:
        rungs = [r for r in rungs if ladder_filter.lower() in r.ladder.lower()]
    if not rungs:
        raise click.UsageError("no rung of the file is left to replay by --concurrency/--ladder")
    rungs = expressible_rungs(rungs, overrides)
    recipes = {}
    for rung in rungs:  # the launch scripts' server arguments each ladder replays with
        path = rung_recipe(rung)
        recipes[rung.ladder] = path.name if path is not None else None
    if not as_json:
        for label, name in recipes.items():
            click.echo(f"  {label}: " + (f"recipe {name}" if name
                                         else "no recipe: the engine's defaults"), err=True)
    scales = {}
    if outputs == "matched":
        scales = matched_output_scales(rungs, lambda r: corpus_output_ratio(r, overrides), every)
        rungs = with_output_scales(rungs, scales)
        if not as_json:
            for label, sc in scales.items():
                click.echo(f"  {label}: outputs x{sc.scale:.2f} ({_scale_text(sc)})", err=True)
    knobs = Knobs.from_env()
    with tempfile.TemporaryDirectory(prefix="inferasim-holdout-") as tmp:
        sets = [tuple(overrides)] * len(rungs)
        if hold_out == "ladder":
            stores, held = ladder_held_out_stores(rungs, overrides, Path(tmp))
            sets = [(*overrides, f"sim.anchors={path}") if path is not None else tuple(overrides)
                    for path in stores]
            if not as_json:
                click.echo(f"  each ladder priced without its own run's anchors (its deployment "
                           f"and build; {held} held out in all)", err=True)
        if hold_out == "rung":
            files = held_out_anchors(rungs, csv_path, Path(tmp), every)
            if not files:
                raise click.UsageError("no rung below its ladder's cliff has another rung of "
                                       "its ladder to be calibrated by")
            rungs = [r for i, r in enumerate(rungs) if i in files]
            sets = [(*overrides, f"sim.anchors={path}") for path in files.values()]
        runs = [(i, seed) for i in range(len(rungs)) for seed in seed_list]
        tasks = [(rung_scenario(rungs[i], sets[i] if seed is None
                                else (*sets[i], f"workload.seed={seed}")), knobs)
                 for i, seed in runs]
        summaries: list = [None] * len(tasks)
        with make_executor(jobs) as ex:
            for index, (summary, _) in ex.run(run_replay, tasks):
                summaries[index] = summary
                if not as_json:
                    rung = rungs[runs[index][0]]
                    seed = "" if runs[index][1] is None else f" seed {runs[index][1]}"
                    click.echo(f"  replayed {rung.ladder} c{rung.concurrency}{seed}", err=True)
    per_rung: list[list] = [[] for _ in rungs]
    for (i, _), summary in zip(runs, summaries, strict=True):
        per_rung[i].append(compare_row(rungs[i], summary))
    rows = [median_row(group) for group in per_rung]
    summaries = [summaries[n] for n, (_, seed) in enumerate(runs) if seed == seed_list[0]]
    if hold_out == "rung":
        for row, summary in zip(rows, summaries, strict=True):
            row["calibration"] = summary.get("calibration", {}).get("mode")
        errors = {"all": held_out_errors(rows)}
        for label in dict.fromkeys(r["ladder"] for r in rows):
            errors[label] = held_out_errors([r for r in rows if r["ladder"] == label])
        if as_json:
            click.echo(strict_json.dumps({"rows": rows, "held_out": errors}))
            return
        click.echo(_table(rows))
        for label, err in errors.items():
            cells = ", ".join(f"{m} {100 * e['median_abs']:.1f}% ({100 * e['median_signed']:+.1f}%)"
                              for m, e in err.items() if e["median_abs"] is not None)
            click.echo(f"held out, {label}: median abs (signed) error: {cells}")
        return
    cliffs = {}
    scores = {"all": ladder_scores(rows)}
    for label in dict.fromkeys(r["ladder"] for r in rows):
        mine = [r for r in rows if r["ladder"] == label]
        cliffs[label] = {"measured": cliff(mine, "measured"),
                         "simulated": cliff(mine, "simulated")}
        scores[label] = ladder_scores(mine)
    if as_json:
        click.echo(strict_json.dumps({"rows": rows, "cliffs": cliffs, "scores": scores,
                                      "hold_out": hold_out, "seeds": seed_list,
                                      "recipes": recipes,
                                      "output_scales": {k: attrs.asdict(v)
                                                        for k, v in scales.items()}}))
        return
    if markdown:
        click.echo(_markdown(rows, cliffs, scores, hold_out, seed_list, scales))
        return
    click.echo(_table(rows))
    for label, c in cliffs.items():
        click.echo(f"cliff {label}: measured {_cliff_text(c['measured'])}, "
                   f"simulated {_cliff_text(c['simulated'])}")
    for label, sc in scores.items():
        click.echo(_score_line(label, sc))
    if seed_list != [None]:
        click.echo(f"each simulated figure the median over seeds {', '.join(map(str, seed_list))}")
    click.echo(_outputs_line(scales))


def _scale_text(sc) -> str:
    text = (f"{sc.source}' output per prompt token {sc.measured:.5f} over the corpus's "
            f"{sc.corpus:.5f}")
    return text if sc.source == "the other ladders" else \
        f"{text}, in sample: the file holds no other ladder"


def _outputs_line(scales) -> str:
    if not scales:
        return "outputs as the corpus recorded them"
    return "outputs matched to the measured runs: " + "; ".join(
        f"{label} x{sc.scale:.2f}" for label, sc in scales.items())


def _markdown(rows, cliffs, scores, hold_out: str, seeds: list[int | None], scales) -> str:
    """The table, cliffs and scores as Markdown, each rung measured beside simulated."""
    columns = _share_columns(rows)
    shares = " / ".join(name for name, _ in columns) + " sim"
    lines = [f"| ladder | conc | hit meas / sim | {shares} | out tok/s meas / sim "
             "| in tok/s meas / sim | TTFT mean meas / sim (s) |", "|---|---:|---|---|---|---|---|"]
    def pair(r, metric: str, kind: str) -> str:
        return f"{_fmt(r[f'measured_{metric}'], kind)} / {_fmt(r[f'simulated_{metric}'], kind)}"

    for r in rows:
        lines.append(f"| {r['ladder']} | {r['concurrency']} | {pair(r, 'prefix_hit_rate', 'hit')} "
                     f"| {_shares(r, columns)} "
                     f"| {pair(r, 'output_tok_s', 'tok')} | {pair(r, 'input_tok_s', 'kilo')} "
                     f"| {pair(r, 'ttft_mean_s', 's')} |")
    lines.append("")
    lines += [f"- cliff, {label}: measured {_cliff_text(c['measured'])}, simulated "
              f"{_cliff_text(c['simulated'])}" for label, c in cliffs.items()]
    lines += [f"- {_score_line(label, sc)}" for label, sc in scores.items()]
    lines.append(f"- priced with `--hold-out {hold_out}`" + (
        "" if seeds == [None] else f", each figure the median over seeds "
                                   f"{', '.join(map(str, seeds))}"))
    lines.append(f"- {_outputs_line(scales)}")
    return "\n".join(lines)


#: The workload seeds a ladder is replayed at by default: one seed's reading of a rung at the
#: cliff's edge is one draw of a wide spread (docs/engines.md, "The AgentX cliff").
DEFAULT_SEEDS = "1,2,3,4,5"


def _seed_list(text: str | None, overrides=()) -> list[int | None]:
    """``--seeds``: the workload seeds; not given, DEFAULT_SEEDS, or [None] (the one seed the
    user's ``--set workload.seed=N`` names)."""
    if text is None:
        if any(o.split("=", 1)[0].strip() == "workload.seed" for o in overrides):
            return [None]
        text = DEFAULT_SEEDS
    if not text.strip():
        raise click.UsageError("--seeds: expected integers separated by commas, got ''")
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise click.UsageError(f"--seeds: expected integers separated by commas, got "
                               f"{text!r}") from None
    if not out or min(out) < 0:
        raise click.UsageError(f"--seeds: expected non-negative integers, got {text!r}")
    return out


def _pct(cell) -> str:
    if cell["median_abs"] is None:
        return "-"
    return f"{100 * cell['median_abs']:.1f}% ({100 * cell['median_signed']:+.1f}%)"


def _rungs(n: int) -> str:
    return f"{n} rung" if n == 1 else f"{n} rungs"


def _score_line(label: str, sc) -> str:
    b, p, h = sc["before_cliff"], sc["past_cliff"], sc["hit_rate"]
    parts = [f"before the cliff ({_rungs(b['rungs'])}) output tok/s {_pct(b['output_tok_s'])}, "
             f"mean TTFT {_pct(b['ttft_mean_s'])}"]
    if p["rungs"]:
        parts.append(f"past it ({_rungs(p['rungs'])}) output within 30% on "
                     f"{p['output_within_30pct']}, "
                     f"mean TTFT within 2x on {p['ttft_within_2x']}, input tok/s "
                     f"{_pct(p['input_tok_s'])}")
    if h["rungs"]:
        parts.append(f"hit rate within 0.05 on {h['within_0.05']} of {h['rungs']}")
    return f"{label}: " + "; ".join(parts) + " (median abs (signed) error)"


def _cliff_text(c) -> str:
    return "none in these rungs" if c is None else f"c{c[0]} -> c{c[1]}"



@validate.command("search")
@click.argument("csv_path", metavar="CSV", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the picks as JSON.")
@click.option("--markdown", is_flag=True, help="Print the table as Markdown (for docs/).")
@click.option("--levels", "how", type=click.Choice(["range", "points"]), default="range",
              show_default=True,
              help="SLA floors along the measured frontier's span, or at its points' percentiles.")
@click.option("--include-disagg", is_flag=True,
              help="Candidates include the disaggregated deployments (Dynamo, mori-sglang) "
                   "measured on each GPU, beside the colocated ones.")
def search_picks(csv_path, as_json, markdown, how, include_disagg):
    """Would the search pick what InferenceMAX measured best? CSV: benchmarks_flat.csv."""
    from inferasim.validate.search import left_out, load_records, picks, points, report

    records = load_records(csv_path, include_disaggregated=include_disagg)
    found = picks(points(records, Knobs.from_env()), how)
    info = report(found, left_out(records))
    if as_json:
        click.echo(strict_json.dumps(info, indent=2))
        return
    head = ["GPU", "ISL/OSL", "floor tok/s/user", "configs", "best measured", "tok/s/GPU",
            "search's pick", "measured tok/s/GPU", "pick/best", "pick meets floor"]
    lines = [head]
    for row in info["rows"]:
        best, pick = row["best_measured"], row["picked"]
        lines.append([row["gpu"], row["shape"], f"{row['interactivity_floor']:.1f}",
                      str(row["candidates"]),
                      "-" if best is None else f"{best['config']} c{best['concurrency']}",
                      "-" if best is None else f"{best['measured_tput']:.0f}",
                      "-" if pick is None else f"{pick['config']} c{pick['concurrency']}",
                      "-" if pick is None else f"{pick['measured_tput']:.0f}",
                      "-" if row["ratio"] is None else f"{row['ratio']:.2f}",
                      "yes" if row["picked_meets_floor"] else "no"])
    if markdown:
        click.echo("| " + " | ".join(head) + " |")
        click.echo("|" + "---|" * len(head))
        for line in lines[1:]:
            click.echo("| " + " | ".join(line) + " |")
    else:
        widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
        click.echo("\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True))
                             for line in lines))
    median = info["median_ratio"]
    click.echo(f"\n{info['within_tolerance']}/{info['picks']} picks within "
               f"{info['tolerance']:.0%} of the best measured; {info['no_pick']} without a "
               f"pick; median pick/best "
               f"{'-' if median is None else f'{median:.3f}'}")
    for row in info["left_out"]:
        click.echo(f"left out, no candidate: {row['anchor']}: {row['why']}")


@validate.command("kernels")
@click.argument("folder", metavar="FOLDER", type=click.Path(file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def kernels(folder: Path, as_json: bool) -> None:
    """The analytic GEMM price against Vidur's operator profiles. FOLDER: Vidur's profiling
    folder (../shared/data/vidur-profiling): median log error by rows and by model, with
    the tile ramp and without it, and the ramp each model's hold-out fits."""
    from inferasim.validate.kernels import fitted_ramp_by_model, kernel_report, read_profiles

    profiles = read_profiles(folder)
    report = kernel_report(profiles)
    held = {part: fitted_ramp_by_model(profiles[part], part) for part, r in report.items()
            if "skipped" not in r}
    if as_json:
        click.echo(strict_json.dumps({"parts": report, "ramp_held_out_by_model": held},
                                     indent=2))
        return
    for part, r in report.items():
        if "skipped" in r:
            click.echo(f"{part}: skipped ({r['skipped']})")
            continue
        click.echo(f"{part}: {r['gemms']} GEMMs; log(measured / predicted), median absolute "
                   f"(signed), with the tile ramp of {r['ramp_rows']:g} rows and without")
        for key in sorted(r["with_ramp"], key=_kernel_row_order):
            a, b = r["with_ramp"][key], r["hard_roofline"][key]
            click.echo(f"  {key:40} {a['n']:>6}  {a['median_abs']:.3f} ({a['median_signed']:+.3f})"
                       f"   {b['median_abs']:.3f} ({b['median_signed']:+.3f})")
        click.echo("  the ramp fitted on the other models, per model held out: "
                   + ", ".join(f"{m} {v:g}" for m, v in held[part].items()))


def _kernel_row_order(key: str) -> tuple:
    kind, _, value = key.partition(" ")
    first = value.lstrip(">").split("-")[0]
    return ({"all": 0, "rows": 1, "model": 2}[kind], int(first) if first.isdigit() else 0,
            value)
