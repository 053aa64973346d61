"""Ablations: the scenario replayed as given and with each ``--knob`` or ``--vary`` setting.

A ``--knob`` setting is applied alone on top of the base knobs (the environment's, as ``run``
uses), and the knobs are handed to ``simulate(scenario, knobs)`` as a value: nothing touches
``os.environ``. A ``--vary KEY=VALUE`` setting is one more scenario override (say
``engine.queue_policy=fcfs``), applied alone on top of the base scenario, replayed with the
base knobs. Every variant replays the same seed, so a difference is the setting's doing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import attrs

from inferasim.config.errors import ConfigError
from inferasim.config.knobs import Knobs
from inferasim.config.overrides import OVERRIDE_ORIGIN
from inferasim.config.scenario import Scenario
from inferasim.sweep.ladder import knob_values, run_replay


@attrs.frozen
class Variant:
    label: str          # "base" or the NAME=VALUE / KEY=VALUE setting
    knobs: Knobs
    scenario: Scenario | None = None  # a --vary variant's scenario; None: the base one


def variants(settings: Sequence[str], base: Knobs, varied: Sequence[Variant] = ()) -> list[Variant]:
    """The base and one variant per knob setting; a malformed or unknown knob is a
    ConfigError. ``varied`` (scenario variants, ``scenario_variant``) need no knob."""
    if not settings and not varied:
        raise ConfigError("give at least one --knob NAME=VALUE (see 'inferasim knobs') or "
                          "--vary KEY=VALUE (a scenario key)", key="--knob")
    out = [Variant("base", base)]
    for text in settings:
        if "=" not in text:
            raise ConfigError(f"expected NAME=VALUE, got {text!r}", key="--knob")
        name, _, raw = text.partition("=")
        out.append(Variant(f"{name.strip()}={raw.strip()}", base.with_setting(text)))
    return out + list(varied)


def expand_varied(items: Sequence[str]) -> list[str]:
    """``--vary KEY=V1,V2`` as two settings, each applied alone (the comma rule of ``sweep
    --grid`` and ``search --space``); a YAML list or mapping value stays whole."""
    out: list[str] = []
    for text in items:
        key, sep, raw = text.partition("=")
        if sep and "," in raw and not raw.lstrip().startswith(("[", "{")):
            out.extend(f"{key}={v.strip()}" for v in raw.split(","))
        else:
            out.append(text)
    return list(dict.fromkeys(out))


def scenario_variant(text: str, base: Knobs, resolve) -> Variant:
    """A --vary KEY=VALUE variant: ``resolve(extra_overrides)`` loads the scenario with the
    setting applied after the base overrides (a bad key or value is its ConfigError)."""
    if "=" not in text:
        raise ConfigError(f"expected KEY=VALUE, got {text!r}", key="--vary")
    key, _, raw = text.partition("=")
    try:
        scenario = resolve([text])
    except ConfigError as exc:
        if exc.file != OVERRIDE_ORIGIN:
            raise
        # the base overrides resolved already: the setting is what failed
        raise ConfigError(exc.message, file="--vary", key=exc.key) from exc
    return Variant(f"{key.strip()}={raw.strip()}", base, scenario)


def is_metric(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def deltas(base: dict[str, Any], other: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    """Per numeric metric: the base, the variant, the absolute and the relative (%) change."""
    out: dict[str, dict[str, float | None]] = {}
    for key, b in base.items():
        v = other.get(key)
        if not (is_metric(b) and is_metric(v)):
            continue
        diff = float(v) - float(b)
        pct = diff / abs(b) * 100.0 if b and math.isfinite(b) else None
        if pct is not None and not math.isfinite(pct):
            pct = None
        out[key] = {"base": float(b), "value": float(v), "abs": diff, "pct": pct}
    return out


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def ablate(scenario: Scenario, settings: Sequence[str], base: Knobs, executor,
           varied: Sequence[Variant] = ()) -> dict[str, Any]:
    """Replay base and variants on ``executor``; results in the order given (knobs first)."""
    runs = variants(settings, base, varied)
    results: list[Any] = [None] * len(runs)
    tasks = [(v.scenario or scenario, v.knobs) for v in runs]
    for task_scenario, knobs in tasks:
        knobs.check(task_scenario)  # a knob that cannot apply fails before any replay
    for index, result in executor.run(run_replay, tasks):
        results[index] = result
    base_summary, base_wall = results[0]
    out: dict[str, Any] = {"scenario": scenario.name, "base": {
        "knobs": knob_values(base), "summary": base_summary, "wall_s": base_wall}, "variants": []}
    for variant, (summary, wall) in zip(runs[1:], results[1:], strict=True):
        change = deltas(base_summary, summary)
        out["variants"].append({
            "setting": variant.label,
            "knobs": knob_values(variant.knobs),
            "same_knobs_as_base": variant.scenario is None and variant.knobs == base,
            "no_effect": all(_same(d["base"], d["value"]) for d in change.values()),
            "summary": summary,
            "wall_s": wall,
            "delta": change,
        })
    return out


# The metrics the table shows, with their units; --json carries every one.
TABLE_METRICS = (
    ("output_tok_s", "output tok/s"),
    ("output_tok_s_per_gpu", "output tok/s/GPU"),
    ("total_tok_s", "total tok/s"),
    ("ttft_mean_s", "TTFT mean s"),
    ("ttft_p90_s", "TTFT p90 s"),
    ("itl_mean_ms", "ITL mean ms"),
    ("tpot_mean_ms", "TPOT mean ms"),
    ("tpot_p90_ms", "TPOT p90 ms"),
    ("e2e_mean_s", "E2E mean s"),
    ("interactivity_tok_s", "tok/s per user"),
    ("prefix_hit_rate", "prefix hit rate"),
    ("requests_completed", "requests completed"),
    ("engine_steps", "engine steps"),
    ("preemptions", "preemptions"),
)


def _num(value: float | None, signed: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    mag = abs(value)
    fmt = "{:+.4g}" if signed else "{:.4g}"
    if mag >= 1e4:
        fmt = "{:+.0f}" if signed else "{:.0f}"
    return fmt.format(value)


def ablation_table(result: dict[str, Any]) -> str:
    """Base and each setting side by side, each with its absolute and % change."""
    head = ["metric", "base"]
    for var in result["variants"]:
        head += [var["setting"], "delta", "delta %"]
    rows = [head]
    for key, name in TABLE_METRICS:
        if key not in result["base"]["summary"]:
            continue
        row = [name, _num(result["base"]["summary"][key])]
        for var in result["variants"]:
            d = var["delta"].get(key)
            if d is None:
                row += ["-", "-", "-"]
                continue
            pct = "-" if d["pct"] is None else f"{d['pct']:+.1f}%"
            row += [_num(d["value"]), _num(d["abs"], signed=True), pct]
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                       for i, (c, w) in enumerate(zip(r, widths, strict=True))) for r in rows]
    notes = []
    for var in result["variants"]:
        if var["same_knobs_as_base"]:
            notes.append(f"{var['setting']}: the base knobs already have this value")
        elif var["no_effect"]:
            notes.append(f"{var['setting']}: no metric changed (the setting does not act "
                         "on this scenario)")
    return "\n".join(lines + notes)
