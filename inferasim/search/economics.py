"""Money and energy of a replayed deployment: cost per million tokens from a GPU-hour price,
joules per token and tokens per second per megawatt from a power per GPU.

Power is the measured board power where an InferenceMAX anchor of the same deployment and load
records it (``Measurements.power_w_per_gpu``), else a modelled draw: the part's TDP times a
fraction that rises from idle to a serving draw with the engine's busy share of the run,

    P = TDP x (IDLE_DRAW + (SERVING_DRAW - IDLE_DRAW) x busy)

docs/search.md gives the reasoning and the hold-out of the serving draw.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from inferasim.anchors.store import AnchorStore
from inferasim.config.errors import ConfigError
from inferasim.config.scenario import Scenario

# Fitted to one data set: the mean of avg_power_w / TDP over the eight InferenceMAX rows that
# record it (all MI355X, 1k/1k, SGLang and ATOM, 4-512 clients: 257-834 W of 1,400 W).
# Leave-one-out over those rows: tests/test_search_economics.py and docs/search.md.
SERVING_DRAW = 0.42
# Assumed, not measured here: an idle accelerator holding its weights draws about a tenth of
# its TDP (H100 SXM boards idle near 70-100 W of 700 W).
IDLE_DRAW = 0.10


def parse_prices(items: tuple[str, ...] | list[str]) -> dict[str, float]:
    """``("mi355x=2.5", ...)`` -> {"mi355x": 2.5}: USD per GPU-hour by catalog part."""
    out: dict[str, float] = {}
    for item in items:
        name, sep, raw = item.partition("=")
        name = name.strip().lower()
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not sep or not name or not math.isfinite(value) or value <= 0:
            raise ConfigError(f"expected GPU=USD_PER_HOUR (e.g. mi355x=2.50), got {item!r}",
                              key="--price")
        out[name] = value
    return out


def price_per_hour(scenario: Scenario, prices: Mapping[str, float]) -> tuple[float | None, str]:
    gpu = scenario.gpu
    if gpu.name in prices:
        return prices[gpu.name], "--price"
    return gpu.price_per_gpu_hour, gpu.price_source or ""


def missing_price(scenario: Scenario, prices: Mapping[str, float]) -> str | None:
    """Why the deployment has no cost (its part has no price, none given), or None."""
    if price_per_hour(scenario, prices)[0] is not None:
        return None
    name = scenario.gpu.name
    return f"no price for {name}: pass --price {name}=USD"


def unpriced_parts(scenarios, prices: Mapping[str, float]) -> list[str]:
    """The parts among ``scenarios`` with no GPU-hour price (neither the catalog's nor one
    in ``prices``), sorted."""
    return sorted({sc.gpu.name for sc in scenarios if missing_price(sc, prices)})


def cost_per_mtok(price_per_gpu_hour: float | None, gpus: int, tok_s: float) -> float:
    """USD per million tokens: ``gpus`` GPU-hours at the price buy ``tok_s x 3600`` tokens
    (NaN when the price or the throughput is unknown)."""
    if not price_per_gpu_hour or not tok_s or tok_s <= 0:
        return math.nan
    return price_per_gpu_hour * gpus / 3600.0 / tok_s * 1e6


def busy_share(busy_s: Sequence[float], window_s: float) -> float:
    """The engines' mean busy fraction of the measured window, at most 1."""
    if not busy_s:
        return 0.0
    return min(1.0, sum(busy_s) / (len(busy_s) * max(window_s, 1e-9)))


def measured_power(scenario: Scenario, store: AnchorStore | None) -> float | None:
    """Board power per GPU an anchor of this very deployment and load measured, if any."""
    if store is None or scenario.topology.kind != "colocated":
        return None
    wl, par = scenario.workload, scenario.parallel
    spec = scenario.speculative.method
    for rec in store:
        reg, w, m = rec.regime, rec.workload, rec.measurements
        if m.power_w_per_gpu is None:
            continue
        if (reg.gpu, reg.engine, reg.tp or 1, reg.ep or 1, reg.dp_attention or 1) != (
                scenario.gpu.name, scenario.engine.name, par.tp, par.ep, par.dp_attention):
            continue
        if (reg.spec_method or "none") != spec or reg.weight_dtype not in (
                None, scenario.model.weight_dtype):
            continue
        if (w.isl, w.osl, w.concurrency) == (wl.isl, wl.osl, wl.concurrency):
            return float(m.power_w_per_gpu)
    return None


def modelled_power(tdp_w: float, busy: float) -> float:
    busy = min(max(busy, 0.0), 1.0)
    return tdp_w * (IDLE_DRAW + (SERVING_DRAW - IDLE_DRAW) * busy)


def economics(scenario: Scenario, summary: Mapping[str, Any], busy: float,
              prices: Mapping[str, float], store: AnchorStore | None) -> dict[str, Any]:
    """Cost and energy figures of one replay (NaN where the price or the TDP is unknown)."""
    gpus = scenario.total_gpus
    tokens = float(summary.get("total_tok_s") or 0.0)
    price, source = price_per_hour(scenario, prices)
    measured = measured_power(scenario, store)
    tdp = scenario.gpu.tdp_w
    if measured is not None:
        power, power_source = measured, "measured"
    elif tdp > 0:
        power, power_source = modelled_power(tdp, busy), "modelled"
    else:
        power, power_source = math.nan, "unknown"
    watts = power * gpus
    cost = cost_per_mtok(price, gpus, tokens)
    return {
        "price_per_gpu_hour": price if price is not None else math.nan,
        "price_source": source,
        "cost_per_mtok_usd": cost,
        "power_w_per_gpu": power,
        "power_source": power_source,
        "gpu_busy": busy,
        "joules_per_token": watts / tokens if tokens > 0 else math.nan,
        "tok_s_per_mw": tokens / watts * 1e6 if watts > 0 else math.nan,
    }
