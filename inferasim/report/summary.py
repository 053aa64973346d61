"""The windowed summary of a replay.

Window: requests that *arrive* in [warm-up, horizon) are measured; rates are taken over the
window plus the drain (from the window's start to the last of those requests' finish), the
way a benchmark client that stops issuing at its horizon and waits for stragglers reports.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd


def _pct(values: np.ndarray, q: float) -> float:
    return float(np.percentile(values, q)) if values.size else float("nan")


def _mean(values: np.ndarray) -> float:
    return float(values.mean()) if values.size else float("nan")


def summarize(frame: pd.DataFrame, *, window_start_s: float, horizon_s: float,
              kv_pool_tokens: int, gpus: int, calibration: dict[str, Any],
              engine_stats: list, evictions: int) -> dict[str, Any]:
    inwin = frame[(frame.arrival_s >= window_start_s) & (frame.arrival_s < horizon_s)]
    done = inwin[np.isfinite(inwin.finish_s) & (inwin.failed == "")]
    end = float(done.finish_s.max()) if len(done) else horizon_s
    window = max(end - window_start_s, 1e-9)
    out_tok = float(done.output_tokens.sum())
    in_tok = float(done.prompt_tokens.sum())
    ttft = (done.first_token_s - done.arrival_s).to_numpy()
    e2e = (done.finish_s - done.arrival_s).to_numpy()
    gaps = (done.output_tokens - 1).to_numpy().astype(np.float64)
    decode_span = (done.finish_s - done.first_token_s).to_numpy()
    multi = gaps > 0
    tpot = decode_span[multi] / gaps[multi]
    tpot_mean = _mean(tpot)
    itl_mean = float(decode_span[multi].sum() / gaps[multi].sum()) if multi.any() else float("nan")
    # As a client that records a gap per received chunk (vllm bench serve, AIPerf): the
    # decode span over the chunks that carried the tokens after the first.
    chunks = np.maximum(1.0, np.ceil(gaps / done.chunk_tokens.to_numpy() - 1e-9))
    itl_client = float(decode_span[multi].sum() / chunks[multi].sum()) if multi.any() \
        else float("nan")
    prompts = float(inwin.prompt_tokens.sum())
    first_hit = float(inwin.cached_tokens.sum()) / prompts if prompts else 0.0
    # The engine's own counter (vLLM's prefix_cache_hits / queries): every lookup it counts
    looked = float(inwin.lookup_tokens.sum())
    hit = float(inwin.lookup_hit_tokens.sum()) / looked if looked else first_hit
    steps = sum(s.steps for s in engine_stats)
    failed = inwin.failed[inwin.failed != ""]
    return {
        "requests_completed": int(len(done)),
        "requests_sent": int(len(inwin)),
        "requests_failed": int(len(failed)),
        # why the first refused request was refused (requests.csv has every reason)
        "requests_failed_example": str(failed.iloc[0]) if len(failed) else "",
        "window_s": window,
        "output_tok_s": out_tok / window,
        "input_tok_s": in_tok / window,
        "total_tok_s": (in_tok + out_tok) / window,
        "output_tok_s_per_gpu": out_tok / window / gpus,
        "total_tok_s_per_gpu": (in_tok + out_tok) / window / gpus,
        "ttft_mean_s": _mean(ttft),
        "ttft_p50_s": _pct(ttft, 50),
        "ttft_p75_s": _pct(ttft, 75),
        "ttft_p90_s": _pct(ttft, 90),
        "ttft_p95_s": _pct(ttft, 95),
        "ttft_p99_s": _pct(ttft, 99),
        "itl_mean_ms": itl_mean * 1e3,
        "itl_client_mean_ms": itl_client * 1e3,
        "tpot_mean_ms": tpot_mean * 1e3,
        "tpot_p75_ms": _pct(tpot, 75) * 1e3,
        "tpot_p90_ms": _pct(tpot, 90) * 1e3,
        "tpot_p95_ms": _pct(tpot, 95) * 1e3,
        "ttft_queue_mean_s": _mean(done.queue_s.to_numpy()),
        "ttft_prefill_mean_s": _mean(done.prefill_s.to_numpy()),
        "kv_transfer_mean_s": float(np.nanmean(done.transfer_s.to_numpy())) if len(done) else float("nan"),
        "ttft_decode_wait_mean_s": _mean(done.decode_wait_s.to_numpy()),
        "e2e_mean_s": _mean(e2e),
        "e2e_p75_s": _pct(e2e, 75),
        "e2e_p90_s": _pct(e2e, 90),
        "e2e_p95_s": _pct(e2e, 95),
        # tokens per second a user sees; none when every later token came with the first
        "interactivity_tok_s": 1e3 / (tpot_mean * 1e3) if tpot_mean > 0 else float("nan"),
        "prefix_hit_rate": hit,
        # prompt tokens the cache served at each request's first admission
        "first_admission_hit_rate": first_hit,
        "kv_pool_tokens": int(kv_pool_tokens),
        "gpus": int(gpus),
        "engine_steps": int(steps),
        "macro_steps": int(sum(s.macro_steps for s in engine_stats)),
        "preemptions": int(sum(s.preemptions for s in engine_stats)),
        "evictions_tokens": int(evictions),
        "calibration": calibration,
    }
