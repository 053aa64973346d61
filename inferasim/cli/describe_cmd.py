"""``inferasim describe``: the resolved scenario and its derived memory figures."""

from __future__ import annotations

import json

import attrs
import click
import yaml

from inferasim.anchors.acceptance import resolved_with_reading
from inferasim.arch.interconnect import kv_link_plan
from inferasim.arch.layout import context_problem, fit_problem, reservation_problem
from inferasim.arch.memory import GIB, memory_plan
from inferasim.arch.params import param_counts
from inferasim.cli.options import resolve_scenario, sizing_scenario_options
from inferasim.config.errors import ConfigError
from inferasim.config.loader import scenario_to_dict


@click.command()
@sizing_scenario_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def describe(scenario, overrides, as_json, **flags):
    """Show SCENARIO resolved (catalog merged in) with weights, KV bytes and pool size.

    Only the flags that size the deployment apply: the replay's own (--exact-steps,
    --anchors, ...) change nothing a description shows; give them to run."""
    resolved = resolve_scenario(scenario, overrides, check_fit=False, **flags)
    plan = memory_plan(resolved)
    problem = fit_problem(resolved, plan)
    counts = param_counts(resolved.model)
    derived = {
        "weight_bytes_per_gpu": plan.weight_bytes_per_gpu,
        "kv_bytes_per_token": plan.kv_bytes_per_token,
        "kv_bytes_per_token_layer": plan.kv_bytes_per_token_layer,
        "kv_fixed_bytes_per_seq": plan.kv_fixed_bytes_per_seq,
        "kv_window_pool_tokens": plan.kv_window_pool_tokens,
        "kv_budget_bytes_per_gpu": plan.kv_budget_bytes,
        # how the engine's memory rule arrives at it (engine.memory_rule)
        "memory": attrs.asdict(plan.memory) if plan.memory else None,
        "kv_pool_tokens": plan.kv_pool_tokens,
        "kv_pool_from": plan.kv_pool_from,
        "kv_pool_bytes_per_token": plan.kv_pool_bytes_per_token,
        "kv_dtype": resolved.kv_dtype,
        "params_total": counts.total,
        "params_active": counts.active,
        # as run reports it: every GPU of the deployment; one instance's apart
        "gpus": resolved.total_gpus,
        "gpus_per_instance": resolved.gpus_per_instance,
        "fits": problem is None,
        "fit_problem": problem,
        "context_problem": None if problem else context_problem(resolved, plan),
        "reservation_problem": None if problem else reservation_problem(resolved, plan),
    }
    try:
        # what a replay's verify steps emit: the scenario's figure, else the anchors' chain
        _, reading = resolved_with_reading(resolved)
        derived["speculative_acceptance"] = reading.to_dict() if reading else None
        acceptance_line = reading.note() if reading else None
    except ConfigError as exc:
        derived["speculative_acceptance"] = None
        acceptance_line = f"speculative acceptance unresolved: {exc}"
    if resolved.topology.kind == "disaggregated":
        # each pool runs its own layout and engine keys: its pool is what its run allocates
        derived["pools"] = {role: _pool_figures(resolved, role) for role in ("prefill", "decode")}
        # the prefill -> decode link the layout gives, and which fabric it crosses; a link
        # the catalog cannot price is reported as a fit problem is, not raised
        try:
            link = kv_link_plan(resolved)
            derived["kv_link"], derived["kv_link_problem"] = attrs.asdict(link), None
        except ConfigError as exc:
            link, derived["kv_link"], derived["kv_link_problem"] = None, None, str(exc)
    if as_json:
        click.echo(json.dumps({"scenario": scenario_to_dict(resolved), **derived}, default=str))
        return
    click.echo(yaml.safe_dump(scenario_to_dict(resolved), sort_keys=False).rstrip())
    click.echo("---")
    click.echo(f"parameters: {counts.total / 1e9:.1f} B total, {counts.active / 1e9:.1f} B active")
    if acceptance_line:
        click.echo(acceptance_line)
    click.echo(f"weights per GPU: {plan.weight_bytes_per_gpu / GIB:.2f} GiB")
    click.echo(f"KV per token per GPU: {plan.kv_bytes_per_token:,.0f} B "
               f"(per layer before division: {plan.kv_bytes_per_token_layer:,.0f} B, "
               f"{resolved.kv_dtype})")
    if plan.kv_fixed_bytes_per_seq:
        held = (f"each running request holds {plan.kv_window_pool_tokens:,d} tokens of the "
                "pool for it") if plan.kv_window_pool_tokens else \
            "held in the engine's sliding-window pool"
        click.echo(f"bounded KV per sequence per GPU: {plan.kv_fixed_bytes_per_seq / 2**20:.2f} MiB"
                   f" ({held})")
    counted = plan.kv_pool_bytes_per_token
    if counted and counted != plan.kv_bytes_per_token:
        click.echo(f"pool counted at {counted:,.0f} B a token (the sliding-window pool's share "
                   "rides on each full-pool token)")
    if plan.memory:
        m = plan.memory
        terms = ", ".join(f"{name} {value / GIB:.2f}" for name, value in (
            ("weights", m.weight_bytes), *m.kept()) if value)
        click.echo(f"KV budget per GPU ({m.rule}): {m.budget_bytes / GIB:.2f} GiB budget - "
                   f"{terms} = {m.kv_bytes / GIB:.2f} GiB")
    click.echo(f"KV pool: {plan.kv_pool_tokens:,d} tokens ({plan.kv_pool_from})")
    for role, pool in derived.get("pools", {}).items():
        click.echo(f"{role} pool: {pool['instances']} x {pool['gpus_per_instance']} GPUs, "
                   f"weights {pool['weight_bytes_per_gpu'] / GIB:.2f} GiB per GPU, KV pool "
                   f"{pool['kv_pool_tokens']:,d} tokens per instance")
    if derived.get("kv_link"):
        click.echo(link.describe())
    elif derived.get("kv_link_problem"):
        click.echo(f"KV link: {derived['kv_link_problem']}")
    click.echo(f"GPUs: {resolved.total_gpus} in all, {resolved.gpus_per_instance} per instance")
    if problem:
        click.echo(f"does not fit: {problem}")
    else:
        for caveat in ("context_problem", "reservation_problem"):
            if derived.get(caveat):
                click.echo(derived[caveat])


def _pool_figures(resolved, role: str) -> dict:
    from inferasim.config.loader import pool_scenario

    pool = pool_scenario(resolved, role, check_fit=False)
    plan = memory_plan(pool)
    return {"instances": int(getattr(resolved.topology, role).instances),
            "gpus_per_instance": pool.gpus_per_instance,
            "weight_bytes_per_gpu": plan.weight_bytes_per_gpu,
            "kv_pool_tokens": plan.kv_pool_tokens, "fit_problem": fit_problem(pool)}
