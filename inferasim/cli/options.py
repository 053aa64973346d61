"""Options shared by the commands that take a scenario: one name per concept everywhere.

``--set`` overrides any key; the shortcut flags name the keys replays and sizing read most.
Old spellings (``--des-client-idle-cap-ms``) still work for a release, with one line on
stderr saying what to type instead (docs/cli.md lists every option and its old names).
"""

from __future__ import annotations

import click

from inferasim.config.loader import load_scenario

SCENARIO_FLAG_KEYS = {
    "kv_pool_tokens": "engine.kv_pool_tokens",
    "max_num_seqs": "engine.max_num_seqs",
    "workload_resident_tokens": "workload.resident_tokens",
    "exact_steps": "sim.exact_steps",
    "anchors": "sim.anchors",
    "idle_cap_ms": "workload.idle_cap_ms",
    "des_client_idle_cap_ms": "workload.idle_cap_ms",
    "uncached_prompt_latency_us": "engine.uncached_prompt_latency_us",
    "uncached_prompt_latency_max_tokens": "engine.uncached_prompt_latency_max_tokens",
}

ANCHORS_HELP = ("Calibrate from this anchor folder or file instead of the shipped anchors/; "
                "none = the analytic model alone (sim.anchors).")


def deprecation(old: str, new: str) -> None:
    """One line on stderr: ``old`` still works, ``new`` is its name now."""
    click.echo(f"inferasim: warning: {old} is deprecated and will be removed; use {new}",
               err=True)


def deprecated_alias(new: str):
    """A click callback for a hidden old spelling of ``new``: warns when it is given."""
    def callback(ctx: click.Context, param: click.Parameter, value):
        if value is not None and value != () and value is not False:
            deprecation("/".join(param.opts), new)
        return value
    return callback


def sizing_options(func):
    """Shortcuts for the keys that size the deployment (read by describe and every replay)."""
    func = click.option("--max-num-seqs", type=int, default=None,
                        help="Engine's running-sequence limit (engine.max_num_seqs).")(func)
    func = click.option("--kv-pool-tokens", type=int, default=None,
                        help="The KV pool the engine really allocated (engine.kv_pool_tokens).")(func)
    return func


def replay_options(func):
    """Shortcuts for the keys only a replay reads (run, sweep, compare, ablate, project)."""
    func = click.option("--uncached-prompt-latency-max-tokens", type=click.IntRange(min=0),
                        default=None,
                        help="Uncached prompt tokens charged at most by "
                             "--uncached-prompt-latency-us; 0 = no cap "
                             "(engine.uncached_prompt_latency_max_tokens).")(func)
    func = click.option("--uncached-prompt-latency-us", type=click.FloatRange(min=0),
                        default=None,
                        help="Host time per uncached prompt token, added to TTFT only, us; "
                             "0 = off (engine.uncached_prompt_latency_us).")(func)
    func = click.option("--des-client-idle-cap-ms", type=float, default=None, hidden=True,
                        callback=deprecated_alias("--idle-cap-ms"))(func)
    func = click.option("--idle-cap-ms", type=float, default=None,
                        help="Cap on a lane's idle gap while nothing of it is in flight, ms "
                             "(workload.idle_cap_ms; negative = uncapped).")(func)
    func = click.option("--anchors", type=str, default=None, metavar="PATH|none",
                        help=ANCHORS_HELP)(func)
    func = click.option("--exact-steps", is_flag=True, default=None,
                        help="Simulate every engine step (the reference mode).")(func)
    func = click.option("--workload-resident-tokens", type=int, default=None,
                        help="Length-biased mean resident tokens per session, for `project` "
                             "(workload.resident_tokens).")(func)
    return func


def _repeated_sets(ctx: click.Context, param: click.Parameter, value):
    from inferasim.config.errors import ConfigError
    from inferasim.config.overrides import warn_repeated

    try:
        warn_repeated(list(value))
    except ConfigError:
        pass  # a malformed one is refused, naming it, when the scenario is loaded
    return value


def set_option(func, help_text: str = "Override a scenario key, e.g. --set "
                                      "workload.concurrency=8 (repeatable)."):
    return click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
                        callback=_repeated_sets, help=help_text)(func)


def override_options(func):
    """``--set`` and every shortcut flag, for a command whose scenarios are its own
    arguments (``compare A B``)."""
    return set_option(sizing_options(replay_options(func)))


def scenario_options(func):
    """SCENARIO argument, --set overrides and the scenario-key shortcuts of a replay."""
    func = override_options(func)
    return click.argument("scenario", required=False, type=click.Path(dir_okay=False))(func)


def sizing_scenario_options(func):
    """SCENARIO, --set and the sizing shortcuts: a command that replays nothing (describe)."""
    func = set_option(sizing_options(func))
    return click.argument("scenario", required=False, type=click.Path(dir_okay=False))(func)


def flag_overrides(flags) -> list[str]:
    """The shortcut flags given, as ``key=value`` overrides (applied after ``--set``)."""
    if flags.get("idle_cap_ms") is not None and flags.get("des_client_idle_cap_ms") is not None:
        raise click.UsageError("give --idle-cap-ms only (--des-client-idle-cap-ms is its old "
                               "name)")
    return [f"{SCENARIO_FLAG_KEYS[k]}={str(v).lower() if isinstance(v, bool) else v}"
            for k, v in flags.items() if k in SCENARIO_FLAG_KEYS and v is not None]


def resolve_scenario(scenario, overrides, check_fit: bool = True, replays: bool = False,
                     **flags):
    """The scenario with ``--set`` and the shortcut flags applied. ``replays``: the command
    replays it, which leaves ``--workload-resident-tokens`` unread (a replay admits from its
    requests' own prompts; the closed-form projection reads it), and says so."""
    if replays and flags.get("workload_resident_tokens") is not None:
        click.echo("note: --workload-resident-tokens is read by `inferasim project` only; a "
                   "replay admits from its requests' own prompts", err=True)
    return load_scenario(scenario, list(overrides) + flag_overrides(flags), check_fit=check_fit)


def deployment_title(resolved) -> str:
    """``name: model on N x gpu (topology), engine``: every GPU of the deployment, as the
    per-GPU figures divide by them all (run, project and ablate open with it)."""
    return (f"{resolved.name}: {resolved.model.name} on {resolved.total_gpus} x "
            f"{resolved.gpu.name} ({resolved.topology.kind}), {resolved.engine.name}")
