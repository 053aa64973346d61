"""``inferasim harvest``: plan, run and parse measurements of the regime a scenario describes."""

from __future__ import annotations

import json
import math
import shlex
import sys
from pathlib import Path

import click

from inferasim.cli.errors import ConfigErrorGroup, named_path
from inferasim.config.errors import ConfigError


@click.group(cls=ConfigErrorGroup)
def harvest() -> None:
    """Measure a scenario's regime on real hardware: plan the commands, run them, parse anchors."""


@harvest.command("plan")
@click.argument("scenario", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", "out", required=True, type=click.Path(file_okay=False),
              callback=named_path, help="Folder for plan.json (harvest run executes there).")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a scenario key (repeatable).")
@click.option("--repeats", default=1, show_default=True, type=int,
              help="Run every probe this many times (each run draws a fresh seed).")
@click.option("--client", type=click.Choice(["vllm-bench", "sglang-bench", "aiperf", "atom-bench",
                                           "trt-bench"]),
              help="Load generator (default: the one the engine's image carries).")
@click.option("--dummy-weights", is_flag=True,
              help="Load dummy weights; a speculative plan then needs the acceptance pinned.")
@click.option("--acceptance-length", type=float,
              help="Pin the mean accepted length per verify step (bonus token included).")
@click.option("--draft-model", help="Draft model path (EAGLE3; DSpark drafts shipped apart).")
@click.option("--model-path", help="Checkpoint path or id to serve (default: the catalog's hf_id).")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=click.IntRange(1, 65535))
@click.option("--trust-remote-code/--no-trust-remote-code", default=True, show_default=True,
              help="Given to the server and to the client (it loads the same tokenizer).")
@click.option("--seed-base", type=click.IntRange(min=0),
              help="First seed (default: derived from the scenario).")
@click.option("--target-isl", type=int, help="Longest prefill probe (default: the workload's ISL).")
@click.option("--json", "as_json", is_flag=True, help="Print the plan JSON instead of commands.")
def plan_cmd(scenario: Path, out: Path, overrides: tuple[str, ...], repeats: int,
             client: str | None, dummy_weights: bool, acceptance_length: float | None,
             draft_model: str | None, model_path: str | None, host: str, port: int,
             trust_remote_code: bool, seed_base: int | None, target_isl: int | None,
             as_json: bool) -> None:
    """Write the server and client commands that measure SCENARIO's regime to OUT/plan.json."""
    from inferasim.config.catalog import DEFAULT_SCENARIO
    from inferasim.config.loader import load_scenario
    from inferasim.harvest.plan import build_plan, render, write_plan

    resolved = load_scenario(scenario, list(overrides), check_fit=False)
    plan = build_plan(resolved, scenario_ref=str(scenario or DEFAULT_SCENARIO), overrides=overrides,
                      repeats=repeats,
                      client=client, dummy_weights=dummy_weights,
                      acceptance_length=acceptance_length, draft_model=draft_model,
                      model_path=model_path, host=host, port=port,
                      trust_remote_code=trust_remote_code, seed_base=seed_base,
                      target_isl=target_isl,
                      generated_by=" ".join(["inferasim harvest", *map(shlex.quote, sys.argv[2:])])
                      if sys.argv[1:2] == ["harvest"] else None)
    path = write_plan(plan, out)
    click.echo(json.dumps(plan, indent=1) if as_json else render(plan))
    click.echo(f"# plan written to {path} ({len(plan['probes'])} probes); run it on the GPU host "
               f"with: inferasim harvest run {out}", err=as_json)


class _Seconds(click.ParamType):
    """A timeout: a finite number of seconds above 0 (click's FloatRange lets NaN through,
    and a NaN or negative wait would skip the waits)."""

    name = "seconds"

    def convert(self, value, param, ctx):
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            self.fail(f"expected a number of seconds, got {value!r}", param, ctx)
        if not math.isfinite(seconds) or seconds <= 0:
            self.fail(f"expected a finite number of seconds above 0, got {value!r}", param, ctx)
        return seconds


_SECONDS = _Seconds()


@harvest.command("run")
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
@click.option("--health-timeout", type=_SECONDS, help="Seconds to wait for the server's health.")
@click.option("--probe-timeout", type=_SECONDS, help="Seconds one probe may take.")
@click.option("--stop-grace", type=_SECONDS, default=15.0, show_default=True,
              help="Seconds between SIGTERM and SIGKILL when stopping the server.")
def run_cmd(folder: Path, health_timeout: float | None, probe_timeout: float | None,
            stop_grace: float) -> None:
    """Run the plan in FOLDER: server up, probes, outputs captured, server always stopped."""
    from inferasim.harvest.run import run_plan

    record = run_plan(folder, health_timeout_s=health_timeout, probe_timeout_s=probe_timeout,
                      stop_grace_s=stop_grace, echo=click.echo)
    ok = sum(1 for p in record["probes"] if p["status"] == "ok")
    click.echo(f"run {record['status']}: {ok}/{len(record['probes'])} probes measured "
               f"(run.json in {folder})")
    if record["status"] != "ok":
        sys.exit(1)


@harvest.command("parse")
@click.argument("folder", type=click.Path(path_type=Path))
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path),
              help="Anchor file to write (default: FOLDER/anchors.json).")
def parse_cmd(folder: Path, out: Path | None) -> None:
    """Anchors from a harvest FOLDER (or any folder of benchmark result files)."""
    from inferasim.anchors.store import write_anchor_file
    from inferasim.harvest.parse import ANCHOR_OUT, parse_path

    result = parse_path(folder)
    for skip in result.skipped:
        click.echo(f"skipped {skip.file}: {skip.reason}")
    if not result.records:
        raise ConfigError("no anchors: no completed measurement in the folder", file=str(folder))
    if out is None:
        out = (folder if folder.is_dir() else folder.parent) / ANCHOR_OUT
    write_anchor_file(out, result.records, generated_by=f"inferasim harvest parse {folder}")
    for r in result.records:
        step, basis = r.decode_step
        reg = r.regime
        click.echo(f"{r.id}: {reg.engine or '?'} {reg.gpu or '?'} spec {reg.spec_method or '?'}"
                   f"{'+' + str(reg.draft_tokens) if reg.draft_tokens else ''} "
                   f"tp{reg.tp} ep{reg.ep} dpa{reg.dp_attention}  isl {r.workload.isl} "
                   f"conc {r.workload.concurrency}  step "
                   f"{'-' if step is None else f'{step * 1e3:.2f} ms'} ({(basis or '-').split(' ')[0]})")
    click.echo(f"{len(result.records)} anchors -> {out}")
