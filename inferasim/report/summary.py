"""The windowed summary of a replay.

Window: requests that *arrive* in [warm-up, horizon) are measured; rates are taken over the
window plus the drain (from the window's start to the last of those requests' finish), the
way a benchmark client that stops issuing at its horizon and waits for stragglers reports.

Latencies: every one of TTFT, TPOT, ITL and E2E has a mean, median, std and the percentiles
asked for (``DEFAULT_PERCENTILES`` and any more, ``percentiles=``), in inferasim's names
(``ttft_p99_s``, ``tpot_median_ms``) and, under ``summary["vllm_bench"]``, in the names and
units of ``vllm bench serve --save-result`` (``p99_ttft_ms``, ``median_tpot_ms``,
``request_throughput``, ...), so a result can be diffed against a measured one key by key.
Goodput (``slo=``) is vLLM's and AIPerf's: completed requests meeting every given SLO, per
second of the window.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from inferasim.config.errors import ConfigError
from inferasim.report.frame import FAILED_PREFIX, OK, UNFINISHED, chunk_gaps

# Reported whatever is asked; ``percentiles=`` adds to them (vLLM's --metric-percentiles).
DEFAULT_PERCENTILES = (50.0, 75.0, 90.0, 95.0, 99.0)
# SLO names as ``vllm bench serve --goodput`` takes them (values here in seconds).
SLO_KEYS = ("ttft", "tpot", "e2el")
# Seconds a run may span for the per-second peaks (vLLM's 1-s buckets); past it they are
# left out (null) rather than allocating a bucket per second of a month.
PEAK_BUCKETS_MAX = 10_000_000


def percentile_name(q: float) -> str:
    """``99`` -> ``p99``, ``99.9`` -> ``p99.9``: the spelling vLLM's result keys use."""
    return f"p{int(q)}" if float(q).is_integer() else f"p{q:g}"


def resolve_percentiles(extra: Sequence[float] | None = None) -> tuple[float, ...]:
    """The defaults plus ``extra``, sorted, each once; a value outside [0, 100] (or not a
    number) is a ConfigError on ``--percentiles``."""
    chosen = set(DEFAULT_PERCENTILES)
    for q in extra or ():
        try:
            value = float(q)
        except (TypeError, ValueError):
            raise ConfigError(f"expected numbers in [0, 100], got {q!r}",
                              key="--percentiles") from None
        if not 0.0 <= value <= 100.0:
            raise ConfigError(f"a percentile is in [0, 100], got {q!r}", key="--percentiles")
        chosen.add(value)
    return tuple(sorted(chosen))


def check_slo(slo: Mapping[str, float] | None) -> dict[str, float]:
    """``{"ttft": s, "tpot": s, "e2el": s}`` (any of them, seconds), checked: an unknown name
    or a value that is not a positive number is a ConfigError on ``--slo``."""
    checked: dict[str, float] = {}
    for name, value in (slo or {}).items():
        if name not in SLO_KEYS:
            raise ConfigError(f"unknown SLO {name!r}; choose from {', '.join(SLO_KEYS)}",
                              key="--slo")
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{name}: expected seconds, got {value!r}", key="--slo") from None
        if not (math.isfinite(seconds) and seconds > 0):
            raise ConfigError(f"{name}: expected a positive time, got {value!r}", key="--slo")
        checked[name] = seconds
    return checked


def weighted_percentiles(values: np.ndarray, weights: np.ndarray,
                         qs: Sequence[float]) -> np.ndarray:
    """``np.percentile(np.repeat(values, weights), qs)`` for integer weights, without the
    repeat: a request's gaps pooled with everyone's, as a client's ITL list pools them."""
    order = np.argsort(values)
    v = values[order]
    cum = np.cumsum(weights[order])
    pos = np.asarray(qs, dtype=np.float64) / 100.0 * (cum[-1] - 1.0)
    lo = np.floor(pos)
    below = v[np.searchsorted(cum, lo, side="right")]
    above = v[np.minimum(np.searchsorted(cum, lo + 1.0, side="right"), v.size - 1)]
    return below + (pos - lo) * (above - below)


def distribution(values: np.ndarray, qs: Sequence[float],
                 weights: np.ndarray | None = None) -> dict[str, float]:
    """mean, median, std (population, as numpy and vLLM) and ``p<q>`` of ``values``, each
    counted ``weights`` times when given; NaN for no values."""
    names = ["mean", "median", "std", *(percentile_name(q) for q in qs)]
    if values.size == 0 or (weights is not None and weights.sum() <= 0):
        return dict.fromkeys(names, float("nan"))
    points = [50.0, *qs]
    if weights is None:
        mean = float(values.mean())
        std = float(values.std())
        pct = np.percentile(values, points)
    else:
        mean = float(np.average(values, weights=weights))
        std = float(np.sqrt(np.average((values - mean) ** 2, weights=weights)))
        pct = weighted_percentiles(values, weights, points)
    return dict(zip(names, [mean, float(pct[0]), std, *map(float, pct[1:])], strict=True))


def _named(metric: str, unit: str, dist: dict[str, float], scale: float = 1.0) -> dict[str, float]:
    """inferasim's spelling: ``ttft_p99_s``."""
    return {f"{metric}_{stat}_{unit}": value * scale for stat, value in dist.items()}


def _vllm_named(metric: str, dist: dict[str, float], scale: float) -> dict[str, float]:
    """vLLM's spelling, in ms: ``p99_ttft_ms``."""
    return {f"{stat}_{metric}_ms": value * scale for stat, value in dist.items()}


def _ramp_sum(starts: np.ndarray, rates: np.ndarray, at: np.ndarray) -> np.ndarray:
    """sum_i rates_i * max(0, at - starts_i) at every point of ``at``, for ``starts``
    sorted: O((n + m) log n)."""
    cum_r = np.concatenate(([0.0], np.cumsum(rates)))
    cum_rs = np.concatenate(([0.0], np.cumsum(rates * starts)))
    k = np.searchsorted(starts, at, side="left")
    return at * cum_r[k] - cum_rs[k]


def peaks(arrival: np.ndarray, first: np.ndarray, finish: np.ndarray,
          chunks: np.ndarray) -> tuple[float, float]:
    """``vllm bench serve``'s ``max_output_tokens_per_s`` and ``max_concurrent_requests``:
    over 1-s buckets from the first send, the most streamed chunks landing in one (the first
    token, then one per chunk: vLLM counts chunks) and the most requests in flight during
    any part of one. NaN for no requests, or a run of more than PEAK_BUCKETS_MAX seconds."""
    if arrival.size == 0:
        return float("nan"), float("nan")
    t0 = float(arrival.min())
    buckets = int(math.ceil(float(finish.max()) - t0)) + 1
    if buckets > PEAK_BUCKETS_MAX:
        return float("nan"), float("nan")
    return (_peak_chunks(first - t0, finish - t0, chunks, buckets),
            _peak_in_flight(arrival - t0, finish - t0, buckets))


def _peak_in_flight(start: np.ndarray, end: np.ndarray, buckets: int) -> float:
    """Requests in flight during any part of a second, at its most (a difference array)."""
    change = (np.bincount(start.astype(np.int64), minlength=buckets + 1)
              - np.bincount(end.astype(np.int64) + 1, minlength=buckets + 2)[:buckets + 1])
    return float(np.cumsum(change)[:buckets].max())


def _peak_chunks(first: np.ndarray, finish: np.ndarray, chunks: np.ndarray,
                 buckets: int) -> float:
    """Chunks landing in a second, at its most. A request's chunks after the first token are
    spread evenly over its decode span (steps are priced in aggregate): the count before
    each bucket edge is a step at the first token plus a ramp to the finish."""
    edges = np.arange(buckets + 1, dtype=np.float64)
    span = finish - first
    ramped = span > 0
    at_first = 1.0 + np.where(ramped, 0.0, chunks)  # a nil span sends them all at once
    rate = np.where(ramped, chunks / np.where(ramped, span, 1.0), 0.0)
    by_first, by_finish = np.argsort(first), np.argsort(finish)
    landed = np.concatenate(([0.0], np.cumsum(at_first[by_first])))[
        np.searchsorted(first[by_first], edges, side="left")]
    landed += _ramp_sum(first[by_first], rate[by_first], edges)
    landed -= _ramp_sum(finish[by_finish], rate[by_finish], edges)
    return float(np.diff(landed).max())


def summarize(frame: pd.DataFrame, *, window_start_s: float, horizon_s: float,
              kv_pool_tokens: int, gpus: int, calibration: dict[str, Any],
              engine_stats: list, evictions: int,
              percentiles: Sequence[float] | None = None,
              slo: Mapping[str, float] | None = None) -> dict[str, Any]:
    """The summary of ``frame`` (``request_frame``'s rows). ``percentiles``: more latency
    percentiles beside ``DEFAULT_PERCENTILES`` (e.g. ``[99.9]``); ``slo``: seconds by
    ``SLO_KEYS`` name, for ``request_goodput`` (null without)."""
    qs = resolve_percentiles(percentiles)
    slo = check_slo(slo)
    inwin = frame[(frame.arrival_s >= window_start_s) & (frame.arrival_s < horizon_s)]
    status = inwin.status.to_numpy()
    done = inwin[status == OK]
    end = float(done.finish_s.max()) if len(done) else horizon_s
    window = max(end - window_start_s, 1e-9)
    out_tok = float(done.output_tokens.sum())
    in_tok = float(done.prompt_tokens.sum())
    arrival = done.arrival_s.to_numpy()
    first = done.first_token_s.to_numpy()
    finish = done.finish_s.to_numpy()
    ttft = first - arrival
    e2e = finish - arrival
    gaps = (done.output_tokens - 1).to_numpy().astype(np.float64)
    decode_span = finish - first
    multi = gaps > 0
    tpot = decode_span[multi] / gaps[multi]
    # As a client that records a gap per received chunk (vllm bench serve, AIPerf): the
    # decode span over the chunks that carried the tokens after the first.
    chunks = chunk_gaps(done.output_tokens.to_numpy(), done.chunk_tokens.to_numpy())
    ttft_d = distribution(ttft, qs)
    tpot_d = distribution(tpot, qs)
    # ITL, token-weighted: each request's mean gap counted once per gap (steps are priced in
    # aggregate, so the spread of one request's own gaps is not modelled).
    itl_d = distribution(tpot, qs, weights=gaps[multi])
    itl_client_d = distribution(decode_span[multi] / chunks[multi], qs, weights=chunks[multi])
    e2e_d = distribution(e2e, qs)
    good = _meets(slo, ttft, np.where(multi, decode_span / np.maximum(gaps, 1.0), 0.0), e2e)
    prompts = float(inwin.prompt_tokens.sum())
    first_hit = float(inwin.cached_tokens.sum()) / prompts if prompts else 0.0
    # The engine's own counter (vLLM's prefix_cache_hits / queries): every lookup it counts
    looked = float(inwin.lookup_tokens.sum())
    hit = float(inwin.lookup_hit_tokens.sum()) / looked if looked else first_hit
    steps = sum(s.steps for s in engine_stats)
    failed = inwin.status[(status != OK) & (status != UNFINISHED)]
    goodput = None if good is None else int(good.sum()) / window
    tpot_median_ms = tpot_d["median"] * 1e3
    summary = {
        "requests_completed": int(len(done)),
        "requests_sent": int(len(inwin)),
        "requests_failed": int(len(failed)),
        # why the first refused request was refused (requests.csv has every reason)
        "requests_failed_example": str(failed.iloc[0]).removeprefix(FAILED_PREFIX)
        if len(failed) else "",
        "requests_unfinished": int(len(inwin) - len(done) - len(failed)),
        "window_s": window,
        "request_throughput": len(done) / window,
        # vLLM's and AIPerf's goodput: completed requests meeting every SLO, per second
        "request_goodput": goodput,
        "requests_good": None if good is None else int(good.sum()),
        "slo": {f"{k}_s": v for k, v in slo.items()},
        "output_tok_s": out_tok / window,
        "input_tok_s": in_tok / window,
        "total_tok_s": (in_tok + out_tok) / window,
        "output_tok_s_per_gpu": out_tok / window / gpus,
        "total_tok_s_per_gpu": (in_tok + out_tok) / window / gpus,
        **_named("ttft", "s", ttft_d),
        **_named("itl", "ms", itl_d, 1e3),
        "itl_client_mean_ms": itl_client_d["mean"] * 1e3,
        **_named("tpot", "ms", tpot_d, 1e3),
        "ttft_queue_mean_s": _mean(done.queue_s.to_numpy()),
        "ttft_prefill_mean_s": _mean(done.prefill_s.to_numpy()),
        "kv_transfer_mean_s": float(np.nanmean(done.transfer_s.to_numpy())) if len(done) else float("nan"),
        "ttft_decode_wait_mean_s": _mean(done.decode_wait_s.to_numpy()),
        **_named("e2e", "s", e2e_d),
        # tokens per second a user sees; none when every later token came with the first
        "interactivity_tok_s": _per_second(tpot_d["mean"]),
        # the same from the median TPOT, as InferenceMAX charts it
        "interactivity_median_tok_s": _per_second(tpot_median_ms / 1e3),
        "prefix_hit_rate": hit,
        # prompt tokens the cache served at each request's first admission
        "first_admission_hit_rate": first_hit,
        # prompt tokens a host KV tier reloaded (0 without one), and a storage tier behind
        # it: GPU, host and storage hits and misses partition the prompts
        # (first_admission_hit_rate + host_hit_rate + storage_hit_rate + the rest)
        "host_hit_rate": float(inwin.host_tokens.sum()) / prompts if prompts else 0.0,
        "storage_hit_rate": float(inwin.storage_tokens.sum()) / prompts if prompts else 0.0,
        "kv_pool_tokens": int(kv_pool_tokens),
        "gpus": int(gpus),
        "engine_steps": int(steps),
        "macro_steps": int(sum(s.macro_steps for s in engine_stats)),
        "preemptions": int(sum(s.preemptions for s in engine_stats)),
        "evictions_tokens": int(evictions),
        "calibration": calibration,
    }
    peak_out, peak_conc = peaks(arrival, first, finish, chunks)
    summary["vllm_bench"] = {
        "num_prompts": int(len(inwin)),
        "completed": int(len(done)),
        "failed": int(len(inwin) - len(done)),
        "duration": window,
        "total_input_tokens": int(in_tok),
        "total_output_tokens": int(out_tok),
        "request_throughput": len(done) / window,
        "request_goodput": goodput,
        "output_throughput": out_tok / window,
        "total_token_throughput": (in_tok + out_tok) / window,
        "max_output_tokens_per_s": peak_out,
        "max_concurrent_requests": peak_conc if math.isnan(peak_conc) else int(peak_conc),
        **_vllm_named("ttft", ttft_d, 1e3),
        **_vllm_named("tpot", tpot_d, 1e3),
        **_vllm_named("itl", itl_client_d, 1e3),
        **_vllm_named("e2el", e2e_d, 1e3),
    }
    return summary


def _meets(slo: dict[str, float], ttft: np.ndarray, tpot: np.ndarray,
           e2e: np.ndarray) -> np.ndarray | None:
    """Which completed requests meet every SLO given (None: no SLO). A one-token answer's
    TPOT is 0, as vLLM counts it for goodput."""
    if not slo:
        return None
    by_name = {"ttft": ttft, "tpot": tpot, "e2el": e2e}
    good = np.ones(ttft.size, dtype=bool)
    for name, limit in slo.items():
        good &= by_name[name] <= limit
    return good


def _mean(values: np.ndarray) -> float:
    return float(values.mean()) if values.size else float("nan")


def _per_second(seconds: float) -> float:
    return 1.0 / seconds if seconds > 0 else float("nan")
