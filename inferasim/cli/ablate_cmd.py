"""``inferasim ablate``: the scenario as given and with each --knob or --vary setting, side by side."""

from __future__ import annotations

import click

from inferasim.cli.options import (
    deployment_title,
    flag_overrides,
    resolve_scenario,
    scenario_options,
)
from inferasim.config.knobs import Knobs
from inferasim.report import strict_json


@click.command()
@scenario_options
@click.option("--knob", "settings", multiple=True, metavar="NAME=VALUE",
              help="A knob setting to compare with the base, e.g. INFERASIM_DPA_DECODE_DENSE=1; "
                   "repeatable (each applied alone).")
@click.option("--vary", "varied", multiple=True, metavar="KEY=VALUE[,VALUE...]",
              help="A scenario key to compare with the base, e.g. engine.queue_policy=fcfs, "
                   "or several values of it (engine.queue_policy=lpm,fcfs); repeatable (each "
                   "setting applied alone).")
@click.option("--jobs", type=int, default=None,
              help="Replays run at once (default: the CPU count; 1 runs in this process).")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as one JSON object.")
def ablate(scenario, overrides, settings, varied, jobs, as_json, **flags):
    """Replay SCENARIO as given and with each --knob or --vary setting; print the deltas."""
    from inferasim.sweep.ablate import ablate as run_ablation
    from inferasim.sweep.ablate import (
        ablation_table,
        expand_varied,
        scenario_variant,
        variants,
    )
    from inferasim.sweep.executors import make_executor

    base = Knobs.from_env()
    varied = expand_varied(varied)
    if not varied:
        variants(settings, base)  # reject a bad knob before loading anything
    resolved = resolve_scenario(scenario, overrides, replays=True, **flags)
    scenarios = [scenario_variant(
        text, base, lambda extra: resolve_scenario(
            scenario, [*overrides, *flag_overrides(flags), *extra]))
        for text in varied]
    with make_executor(jobs, tasks=len(settings) + len(varied) + 1) as executor:
        result = run_ablation(resolved, settings, base, executor, scenarios)
    if as_json:
        click.echo(strict_json.dumps(result))
        return
    click.echo(f"{deployment_title(resolved)}, concurrency {resolved.workload.concurrency}")
    click.echo(ablation_table(result))
