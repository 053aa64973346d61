"""``inferasim project``: the closed-form steady-state projection, scored against a replay."""

from __future__ import annotations

import math

import click

from inferasim.cli.options import deployment_title, resolve_scenario, scenario_options
from inferasim.config.knobs import Knobs
from inferasim.report import strict_json

ROWS = (
    ("output_tok_s", "output tok/s", 1.0, "{:.1f}"),
    ("output_tok_s_per_gpu", "output tok/s/GPU", 1.0, "{:.1f}"),
    ("input_tok_s", "input tok/s", 1.0, "{:.0f}"),
    ("ttft_mean_s", "TTFT mean s", 1.0, "{:.3f}"),
    ("itl_mean_ms", "ITL mean ms", 1.0, "{:.2f}"),
    ("tpot_mean_ms", "TPOT mean ms", 1.0, "{:.2f}"),
    ("e2e_mean_s", "E2E mean s", 1.0, "{:.2f}"),
    ("interactivity_tok_s", "tok/s per user", 1.0, "{:.1f}"),
    ("prefix_hit_rate", "prefix hit rate %", 100.0, "{:.1f}"),
    ("host_hit_rate", "host tier hit rate %", 100.0, "{:.1f}"),
)


def _fmt(value, fmt: str, scale: float = 1.0) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-" if value is None else str(value)
    return fmt.format(value * scale)


def _table(projection: dict, scored: dict | None) -> str:
    head = ["metric", "projection"] + (["replay", "difference", "diff %"] if scored else [])
    rows = [head]
    for key, name, scale, fmt in ROWS:
        if key == "host_hit_rate" and not projection.get(key):
            continue  # no host tier, or none used
        row = [name, _fmt(projection.get(key), fmt, scale)]
        if scored:
            s = scored.get(key)
            if s is None:
                row += ["-", "-", "-"]
            else:
                pct = "-" if s["pct"] is None else f"{s['pct']:+.1f}%"
                row += [_fmt(s["replay"], fmt, scale), _fmt(s["diff"], "{:+" + fmt[2:], scale),
                        pct]
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths, strict=True)))
                     for r in rows)


@click.command()
@scenario_options
@click.option("--json", "as_json", is_flag=True, help="Print projection, replay and scores as JSON.")
@click.option("--no-replay", is_flag=True, help="Only the projection (no replay to score it against).")
def project(scenario, overrides, as_json, no_replay, **flags):
    """Project SCENARIO's steady state in closed form and score it against a replay."""
    from inferasim.sweep.projection import project as run_projection
    from inferasim.sweep.projection import project_disaggregated, score

    resolved = resolve_scenario(scenario, overrides, **flags)
    knobs = Knobs.from_env()
    disaggregated = resolved.topology.kind == "disaggregated"
    projection = (project_disaggregated if disaggregated else run_projection)(resolved, knobs)
    replay = scored = None
    if not no_replay:
        from inferasim.report.run_report import replay_summary
        from inferasim.serve.simulation import simulate

        _, replay = replay_summary(simulate(resolved, knobs))
        scored = score(projection, replay)
    if as_json:
        click.echo(strict_json.dumps({"projection": projection, "replay": replay,
                                      "score": scored}))
        return
    wl = projection["workload"]
    load = (f"rate {wl['rate']:.3g} req/s" if wl["rate"] else f"concurrency {wl['concurrency']}")
    click.echo(f"{deployment_title(resolved)}, {load}")
    click.echo(_table(projection, scored))
    sat = projection["saturated"]
    per = (f" per scheduler ({projection['schedulers']} of them)"
           if projection["schedulers"] > 1 else "")
    click.echo(f"steady state{per}: decode batch {projection['decode_batch']:.1f} (cap "
               f"{projection['batch_cap']:.0f}), decode step {projection['decode_step_ms']:.2f} ms, "
               f"prefill share {projection['prefill_share']:.1%}, cache retention "
               f"{projection['cache_retention']:.0%}, frontend {projection['frontend_s']:.3f} s, "
               f"{projection['oracle']} oracle" + (f", saturated ({sat})" if sat else ""))
    if disaggregated:
        click.echo(f"prefill pool: {resolved.topology.prefill.instances} worker(s), capacity "
                   f"{projection['prefill_capacity_rps']:.1f} requests/s, a lone prompt "
                   f"{projection['prefill_span_s'] * 1e3:.1f} ms, its queue "
                   f"{projection['prefill_wait_s'] * 1e3:.1f} ms, KV transfer "
                   f"{projection['kv_transfer_s'] * 1e3:.2f} ms, its cache keeps "
                   f"{projection['prefill_cache_horizon_s']:.0f} s of prompts (LRU)")
    click.echo(f"workload: prompt {wl['prompt_mean']:.0f}, output {wl['output_mean']:.0f}, "
               f"think {wl['think_mean_s']:.1f} s per request, ideal hit {wl['hit_ideal']:.1%} "
               f"({wl['requests_sampled']} requests sampled)")
