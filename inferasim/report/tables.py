"""Plain-text tables for the terminal."""

from __future__ import annotations

from typing import Any

SUMMARY_ROWS = (
    ("requests completed", "requests_completed", "{:d}"),
    ("window (s, incl. drain)", "window_s", "{:.1f}"),
    ("requests/s", "request_throughput", "{:.3f}"),
    ("output tok/s", "output_tok_s", "{:.1f}"),
    ("input tok/s", "input_tok_s", "{:.1f}"),
    ("total tok/s", "total_tok_s", "{:.1f}"),
    ("output tok/s per GPU", "output_tok_s_per_gpu", "{:.1f}"),
    ("TTFT mean / median / p99 (s)", ("ttft_mean_s", "ttft_median_s", "ttft_p99_s"), "{:.3f}"),
    ("TPOT mean / median / p99 (ms)", ("tpot_mean_ms", "tpot_median_ms", "tpot_p99_ms"),
     "{:.2f}"),
    ("ITL mean / median / p99 (ms)", ("itl_mean_ms", "itl_median_ms", "itl_p99_ms"), "{:.2f}"),
    ("E2E mean / median / p99 (s)", ("e2e_mean_s", "e2e_median_s", "e2e_p99_s"), "{:.2f}"),
    ("prefix hit rate", "prefix_hit_rate", "{:.1%}"),
    ("first admission: GPU / host / storage hits",
     ("first_admission_hit_rate", "host_hit_rate", "storage_hit_rate"), "{:.1%}"),
    ("KV pool per scheduler (tokens)", "kv_pool_tokens", "{:,d}"),
    ("preemptions", "preemptions", "{:d}"),
    ("evicted tokens", "evictions_tokens", "{:,d}"),
)


def _fmt(fmt: str, value: Any) -> str:
    try:
        return fmt.format(value)
    except (ValueError, TypeError):
        return str(value)


def summary_table(summary: dict[str, Any], title: str) -> str:
    lines = [title, "-" * len(title)]
    width = max(len(label) for label, _, _ in SUMMARY_ROWS)
    for label, key, fmt in SUMMARY_ROWS:
        if isinstance(key, tuple):
            value = " / ".join(_fmt(fmt, summary.get(k, "-")) for k in key)
        else:
            value = _fmt(fmt, summary.get(key, "-"))
        lines.append(f"{label:<{width}}  {value}")
        if key == "requests_completed" and summary.get("requests_failed"):
            lines.append(f"{'requests refused':<{width}}  {summary['requests_failed']:d} "
                         f"(the first: {summary.get('requests_failed_example', '?')})")
        if key == "request_throughput" and summary.get("request_goodput") is not None:
            lines.append(f"{'goodput (requests/s)':<{width}}  "
                         f"{_fmt('{:.3f}', summary['request_goodput'])} "
                         f"({summary.get('requests_good', '?')} requests met {_slo(summary)})")
    offload = summary.get("kv_offload")
    if offload:
        lines.append(f"{'host KV tier':<{width}}  {offload['policy']}: "
                     f"{offload['host_capacity_tokens']:,d} tokens, "
                     f"{offload['bytes_to_host'] / 1e9:,.1f} GB written, "
                     f"{offload['bytes_to_gpu'] / 1e9:,.1f} GB reloaded")
        if "storage_capacity_tokens" in offload:
            lines.append(f"{'storage KV tier':<{width}}  "
                         f"{offload['storage_capacity_tokens']:,d} tokens, "
                         f"{offload['bytes_to_storage'] / 1e9:,.1f} GB written, "
                         f"{offload['bytes_from_storage'] / 1e9:,.1f} GB read")
    if summary.get("prefill_kv_pool_tokens") is not None:
        lines.append(f"{'KV pool, prefill (tokens)':<{width}}  "
                     f"{summary['prefill_kv_pool_tokens']:,d} (the row above: a decode "
                     "scheduler's)")
    group = summary.get("lockstep_group")
    if group:
        how = ("apart, each at its own batch" if group == 1 else
               f"together in groups of {group}")
        lines.append(f"{'attention-DP ranks':<{width}}  {how} (INFERASIM_DES_LOCKSTEP)")
    cal = summary.get("calibration", {})
    lines += _calibration_lines("calibration", cal, width)
    if cal.get("decode_pool"):
        lines += _calibration_lines("calibration, decode", cal["decode_pool"], width)
    return "\n".join(lines)


def _slo(summary: dict[str, Any]) -> str:
    """``ttft <= 2 s, tpot <= 50 ms``: the SLOs the goodput counted."""
    parts = []
    for key, seconds in (summary.get("slo") or {}).items():
        name = key.removesuffix("_s")
        parts.append(f"{name} <= {seconds:g} s" if seconds >= 1 else
                     f"{name} <= {seconds * 1e3:g} ms")
    return ", ".join(parts) or "every SLO"


def _calibration_lines(label: str, cal: dict[str, Any], width: int) -> list[str]:
    """An oracle's calibration line and its warnings (a sweep short of the asked batch, a
    crossed build, an assumed KV dtype), printed, not left to --json; not the ones the line
    already says (an analytic fallback's reason is both)."""
    main = cal.get("note", "")
    return [f"{label:<{width}}  {cal.get('mode', '?')}: {main}",
            *(f"{'':<{width}}  - {note}" for note in cal.get("notes") or () if note not in main)]


def markdown_table(results) -> str:
    """``anchors validate``'s summary as Markdown: per regime and over all, the median / p90
    absolute error and the signed median of each metric."""
    from inferasim.validate.anchors import METRICS, error_stats, stats_by

    def cells(stats) -> str:
        out = []
        for m in METRICS:
            st = stats[m]
            if st["median_abs"] is None:
                out.append("-")
                continue
            out.append(f"{100 * st['median_abs']:.1f}% / {100 * st['p90_abs']:.1f}% "
                       f"({100 * st['median_signed']:+.1f}%)")
        return " | ".join(out)

    def scored(stats) -> int:
        return max(stats[m]["n"] for m in METRICS)

    lines = ["| regime | scored | tput/GPU | TPOT | TTFT |", "|---|---:|---|---|---|"]
    preds = []
    for g in results:
        if g.skipped or not g.predictions:
            continue
        preds += g.predictions
        st = error_stats(g.predictions)
        lines.append(f"| {g.key} | {scored(st)} | {cells(st)} |")
    st = error_stats(preds)
    lines.append(f"| **all** | {scored(st)} | {cells(st)} |")
    for field, what in (("calibration", "calibrated as"), ("model", "model"),
                        ("family", "family")):
        by = stats_by(preds, field)
        if len(by) < 2:
            continue
        for v, st in by.items():
            lines.append(f"| {what} {v} | {scored(st)} | {cells(st)} |")
    lines.append("")
    lines.append("median / p90 absolute error (signed median) of predicted / measured - 1; "
                 "TTFT by its median")
    return "\n".join(lines)
