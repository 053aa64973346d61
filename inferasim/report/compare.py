"""Two replays side by side: each metric, its delta, and per-GPU figures when GPU counts differ."""

from __future__ import annotations

import math
from typing import Any

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
    ("preemptions", "preemptions", False),
    ("gpus", "GPUs", None),
    ("kv_pool_tokens", "KV pool per instance (tokens)", None),
)


def compare_rows(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for key, label, higher in METRICS:
        va, vb = a.get(key), b.get(key)
        if va is None or vb is None:
            continue
        delta = vb - va
        rel = delta / va if isinstance(va, (int, float)) and va not in (0, 0.0) \
            and not math.isnan(va) else float("nan")
        better = None
        if higher is not None and not math.isnan(rel) and delta != 0:
            better = "B" if (delta > 0) == higher else "A"
        rows.append({"metric": key, "label": label, "a": va, "b": vb, "delta": delta,
                     "delta_pct": rel * 100.0, "better": better})
    return rows


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "-"
        return f"{v:,.3f}" if abs(v) < 100 else f"{v:,.1f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def compare_table(rows: list[dict[str, Any]], name_a: str, name_b: str) -> str:
    header = ("metric", f"A: {name_a}", f"B: {name_b}", "B - A", "B vs A", "better")
    body = [(r["label"], _fmt(r["a"]), _fmt(r["b"]), _fmt(r["delta"]),
             "-" if math.isnan(r["delta_pct"]) else f"{r['delta_pct']:+.1f}%", r["better"] or "")
            for r in rows]
    widths = [max(len(str(x[i])) for x in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(str(h).ljust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    for row in body:
        lines.append("  ".join([row[0].ljust(widths[0])]
                               + [str(c).rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]))
    return "\n".join(lines)
