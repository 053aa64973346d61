"""Two replays side by side: each metric, its delta, per-GPU figures and what the tokens cost.

The money rows come from ``search.economics`` (the search's own formulas): the GPU-hour price
(the catalog's or ``--price``) times the deployment's GPUs over its throughput, and the power
model's joules per token. A part without a price prints its cost as unknown, saying why.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from inferasim.anchors.store import AnchorStore
    from inferasim.config.scenario import Scenario

METRICS = (
    # key, label, higher is better
    ("requests_completed", "requests completed", True),
    ("request_throughput", "requests/s", True),
    ("request_goodput", "goodput (requests/s)", True),
    ("output_tok_s", "output tok/s", True),
    ("total_tok_s", "total tok/s", True),
    ("output_tok_s_per_gpu", "output tok/s per GPU", True),
    ("total_tok_s_per_gpu", "total tok/s per GPU", True),
    ("ttft_mean_s", "TTFT mean (s)", False),
    ("ttft_median_s", "TTFT median (s)", False),
    ("ttft_p90_s", "TTFT p90 (s)", False),
    ("ttft_p99_s", "TTFT p99 (s)", False),
    ("ttft_queue_mean_s", "  queue (s)", False),
    ("ttft_prefill_mean_s", "  prefill (s)", False),
    ("kv_transfer_mean_s", "  KV transfer (s)", False),
    ("ttft_decode_wait_mean_s", "  decode admission (s)", False),
    ("itl_mean_ms", "ITL mean (ms)", False),
    ("tpot_mean_ms", "TPOT mean (ms)", False),
    ("tpot_median_ms", "TPOT median (ms)", False),
    ("tpot_p99_ms", "TPOT p99 (ms)", False),
    ("e2e_mean_s", "E2E mean (s)", False),
    ("e2e_p99_s", "E2E p99 (s)", False),
    ("prefix_hit_rate", "prefix hit rate", True),
    ("first_admission_hit_rate", "GPU hit rate at admission", True),
    ("host_hit_rate", "host tier hit rate", True),
    ("storage_hit_rate", "storage tier hit rate", True),
    ("preemptions", "preemptions", False),
    ("gpus", "GPUs", None),
    ("kv_pool_tokens", "KV pool per scheduler (tokens)", None),
    ("price_per_gpu_hour", "price (USD per GPU-hour)", None),
    ("cost_per_mtok_output_usd", "cost per M output tokens (USD)", False),
    ("cost_per_mtok_usd", "cost per M tokens (USD)", False),
    ("joules_per_token", "energy per token (J)", False),
)
MONEY_KEYS = ("price_per_gpu_hour", "cost_per_mtok_output_usd", "cost_per_mtok_usd")
# Figures well below 1 whose differences matter: printed to four significant digits.
FINE = frozenset({"cost_per_mtok_usd", "joules_per_token"})


@attrs.frozen
class Unknown:
    """A figure that cannot be given, and why (printed in place of a number)."""

    reason: str


def money(scenario: Scenario, summary: Mapping[str, Any], busy: float,
          prices: Mapping[str, float], store: AnchorStore | None) -> dict[str, Any]:
    """The cost and energy figures of one replay: ``economics()``'s, plus the cost per output
    token; the price figures are Unknown when the part has no price."""
    from inferasim.search.economics import cost_per_mtok, economics, missing_price

    figures = economics(scenario, summary, busy, prices, store)
    out = {
        "gpu": scenario.gpu.name,
        "price_per_gpu_hour": figures["price_per_gpu_hour"],
        "price_source": figures["price_source"],
        "cost_per_mtok_output_usd": cost_per_mtok(figures["price_per_gpu_hour"],
                                                  scenario.total_gpus,
                                                  float(summary.get("output_tok_s") or 0.0)),
        "cost_per_mtok_usd": figures["cost_per_mtok_usd"],
        "joules_per_token": figures["joules_per_token"],
        "power_w_per_gpu": figures["power_w_per_gpu"],
        "power_source": figures["power_source"],
        "gpu_busy": figures["gpu_busy"],
    }
    why = missing_price(scenario, prices)
    if why is not None:
        out.update({key: Unknown(why) for key in MONEY_KEYS})
    return out


def pools(result) -> list[dict[str, Any]]:
    """Each pool of a replayed deployment (prefill and decode when disaggregated, else the one
    colocated pool): its instances, layout, GPUs, the engines' busy share of the window, a
    KV pool's tokens and how its steps were calibrated."""
    from inferasim.search.economics import busy_share

    sc = result.scenario
    window = max(1e-9, result.horizon_s - result.window_start_s)
    calibration = result.calibration
    if sc.topology.kind == "colocated":
        roles = [("colocated", sc.topology.instances, sc, calibration)]
    else:
        from inferasim.config.loader import pool_scenario

        roles = [(role, getattr(sc.topology, role).instances,
                  pool_scenario(sc, role, check_fit=False),
                  calibration.get("decode_pool", calibration) if role == "decode"
                  else calibration) for role in ("prefill", "decode")]
    out = []
    start = 0   # the topology lists the prefill pool's engines (a rank each) first
    for role, instances, pool_sc, cal in roles:
        par = pool_sc.parallel
        engines = result.engines[start:start + instances * par.dp_attention]
        start += len(engines)
        out.append({
            "pool": role, "instances": instances,
            "layout": f"tp{par.tp} ep{par.ep} dpa{par.dp_attention}",
            "gpus": instances * par.tp,
            "busy": busy_share([e.stats.busy_s for e in engines], window),
            # an instance's: its attention-DP ranks' pools together
            "kv_pool_tokens": sum(e.kv.pool.capacity for e in engines) // instances
            if engines else None,
            "calibration": cal.get("mode"),
        })
    return out


def pool_lines(name: str, entries: list[dict[str, Any]]) -> list[str]:
    lines = []
    for p in entries:
        kv = f", KV pool {p['kv_pool_tokens']:,} tokens an instance" if p["kv_pool_tokens"] \
            else ""
        lines.append(f"{name} {p['pool']} pool: {p['instances']} x {p['layout']} "
                     f"({p['gpus']} GPUs), busy {p['busy']:.0%}{kv}, "
                     f"calibration {p['calibration']}")
    return lines


def compare_rows(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for key, label, higher in METRICS:
        va, vb = a.get(key), b.get(key)
        if va is None or vb is None:
            continue
        unknown = {side: v.reason for side, v in (("a", va), ("b", vb)) if isinstance(v, Unknown)}
        if unknown:
            rows.append({"metric": key, "label": label,
                         "a": None if "a" in unknown else va, "b": None if "b" in unknown else vb,
                         "delta": math.nan, "delta_pct": math.nan, "better": None,
                         "unknown": unknown})
            continue
        delta = vb - va
        # a share of A only where A is more than the table's last digit (0.000 shown): a
        # queue of 0.2 ms is not a base for a percentage
        shown = key in FINE or not isinstance(va, float) or abs(va) >= 5e-4
        rel = delta / va if isinstance(va, (int, float)) and va not in (0, 0.0) \
            and not math.isnan(va) and shown else float("nan")
        better = None
        # which side is better wherever the difference shows in the table
        if higher is not None and not math.isnan(delta) and delta != 0 \
                and (shown or abs(delta) >= 5e-4):
            better = "B" if (delta > 0) == higher else "A"
        rows.append({"metric": key, "label": label, "a": va, "b": vb, "delta": delta,
                     "delta_pct": rel * 100.0, "better": better})
    return rows


def _fmt(v: Any, fine: bool = False) -> str:
    if v is None:
        return "unknown"
    if isinstance(v, float):
        if math.isnan(v):
            return "-"
        if fine and 0 < abs(v) < 1:
            return f"{v:.4g}"
        return f"{v:,.3f}" if abs(v) < 100 else f"{v:,.1f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def money_notes(money_a: Mapping[str, Any], money_b: Mapping[str, Any]) -> list[str]:
    """Lines under the table: where each side's price came from, or why it has none, and
    what its power is."""
    lines = []
    for side, m in (("A", money_a), ("B", money_b)):
        price = m["price_per_gpu_hour"]
        if isinstance(price, Unknown):
            lines.append(f"{side} cost unknown: {price.reason}")
        else:
            lines.append(f"{side} price: {m['gpu']} at {price:.2f} USD per GPU-hour "
                         f"({m['price_source'] or 'no source given'})")
        if math.isnan(m["power_w_per_gpu"]):
            lines.append(f"{side} power unknown: {m['gpu']} has no TDP in the catalog")
        else:
            lines.append(f"{side} power: {m['power_w_per_gpu']:.0f} W per GPU, "
                         f"{m['power_source']} (engines busy {m['gpu_busy']:.0%} of the window)")
    return lines


def compare_table(rows: list[dict[str, Any]], name_a: str, name_b: str,
                  notes: Iterable[str] = ()) -> str:
    header = ("metric", f"A: {name_a}", f"B: {name_b}", "B - A", "B vs A", "better")
    body = [(r["label"], *(_fmt(r[k], r["metric"] in FINE) for k in ("a", "b", "delta")),
             "-" if math.isnan(r["delta_pct"]) else f"{r['delta_pct']:+.1f}%", r["better"] or "")
            for r in rows]
    widths = [max(len(str(x[i])) for x in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(str(h).ljust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    for row in body:
        lines.append("  ".join([row[0].ljust(widths[0])]
                               + [str(c).rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]))
    notes = list(notes)
    if notes:
        lines.append("")
        lines.extend(notes)
    return "\n".join(lines)


def json_safe(figures: Mapping[str, Any]) -> dict[str, Any]:
    """A money dict for --json: an Unknown figure as null with its reason beside it."""
    out: dict[str, Any] = {}
    for key, value in figures.items():
        if isinstance(value, Unknown):
            out[key] = None
            out["unknown"] = value.reason
        else:
            out[key] = value
    return out
