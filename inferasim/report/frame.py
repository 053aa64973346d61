"""Per-request rows of a replay as a pandas frame (built once, at the end, from the request records).

Besides the records' timestamps and counts, each row carries what a benchmark client reports
per request (``latency_columns``): ``ttft_s``, ``tpot_ms``, ``itl_mean_ms``, ``e2e_s``, and a
``status``: ``ok``, ``failed: <the server's reason>`` or ``unfinished`` (still in flight
when the replay ended). The status is never empty, so a CSV read back has no NaN in it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

COLUMNS = ("rid", "session", "turn", "instance", "status", "arrival_s", "admitted_s",
           "first_token_s", "finish_s", "prompt_tokens", "cached_tokens", "host_tokens",
           "storage_tokens", "lookup_tokens", "lookup_hit_tokens", "output_tokens",
           "preemptions", "ttft_s", "tpot_ms",
           "itl_mean_ms", "e2e_s", "queue_s", "prefill_s", "transfer_s", "decode_wait_s",
           "chunk_tokens")

OK = "ok"
UNFINISHED = "unfinished"
FAILED_PREFIX = "failed: "


def chunk_tokens(advance: np.ndarray, stream_interval: int) -> np.ndarray:
    """Tokens a streamed chunk carries after the first token: a step's worth (``advance``
    tokens; a verify step's under speculative decoding), or, when the server buffers
    ``stream_interval`` tokens before it sends, the whole steps it takes to reach them."""
    steps = np.maximum(1.0, np.ceil(stream_interval / advance - 1e-9))
    return steps * advance


def chunk_gaps(output_tokens: np.ndarray, chunk: np.ndarray) -> np.ndarray:
    """Gaps a streaming client records after the first token: one per chunk that carried the
    later tokens (0 for a one-token answer)."""
    later = np.maximum(output_tokens.astype(np.float64) - 1.0, 0.0)
    return np.where(later > 0, np.maximum(1.0, np.ceil(later / chunk - 1e-9)), 0.0)


def latency_columns(arrival: np.ndarray, first: np.ndarray, finish: np.ndarray,
                    output_tokens: np.ndarray, chunk: np.ndarray) -> dict[str, np.ndarray]:
    """Per-request latencies as ``vllm bench serve`` and AIPerf define them: TTFT and E2E from
    the send; TPOT the decode span over the tokens after the first (NaN for a one-token
    answer, which vLLM leaves out of TPOT); ITL the decode span over the chunks that carried
    those tokens. Steps are priced in aggregate, so a request's chunks are evenly spaced:
    ``itl_mean_ms`` is its mean gap, exact, and the spread of its own gaps is not modelled.
    NaN where the request did not finish."""
    span = finish - first
    later = output_tokens.astype(np.float64) - 1.0
    multi = later > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        tpot = np.where(multi, span / later, np.nan)
        itl = np.where(multi, span / chunk_gaps(output_tokens, chunk), np.nan)
    return {"ttft_s": first - arrival, "tpot_ms": tpot * 1e3, "itl_mean_ms": itl * 1e3,
            "e2e_s": finish - arrival}


def request_status(failed: list[str], finish: np.ndarray) -> np.ndarray:
    """``ok``, ``failed: <reason>`` (refused by the server), or ``unfinished``."""
    status = np.full(len(failed), OK, dtype=object)
    status[~np.isfinite(finish)] = UNFINISHED
    for i in np.flatnonzero(np.fromiter(map(bool, failed), bool, len(failed))):
        status[i] = FAILED_PREFIX + failed[i]  # refusals are few: a loop over them alone
    return status


def request_frame(requests: list, tokens_per_step: float = 1.0,
                  stream_interval: int = 1) -> pd.DataFrame:
    """``tokens_per_step``: what a decode step emits where a request has no rate of its
    own; ``stream_interval``: the server's buffering of a stream (``chunk_tokens``)."""
    n = len(requests)
    cols = {
        "rid": np.fromiter((r.rid for r in requests), np.int64, n),
        "session": np.fromiter((r.spec.session for r in requests), np.int64, n),
        "turn": np.fromiter((r.spec.turn for r in requests), np.int64, n),
        "instance": np.fromiter((r.instance for r in requests), np.int64, n),
        "arrival_s": np.fromiter((r.arrival for r in requests), np.float64, n),
        "admitted_s": np.fromiter((r.admitted for r in requests), np.float64, n),
        "first_token_s": np.fromiter((r.first_token for r in requests), np.float64, n),
        "finish_s": np.fromiter((r.finish for r in requests), np.float64, n),
        "prompt_tokens": np.fromiter((r.spec.prompt_tokens for r in requests), np.int64, n),
        "cached_tokens": np.fromiter((max(r.cached_first, 0) for r in requests), np.int64, n),
        # prompt tokens a host KV tier served (reloaded, not computed)
        "host_tokens": np.fromiter((r.reload_tokens for r in requests), np.int64, n),
        # ...and a storage tier behind the host (read from the drive)
        "storage_tokens": np.fromiter((r.storage_tokens for r in requests), np.int64, n),
        "lookup_tokens": np.fromiter((r.lookup_tokens for r in requests), np.int64, n),
        "lookup_hit_tokens": np.fromiter((r.lookup_hit_tokens for r in requests), np.int64, n),
        "output_tokens": np.fromiter((r.spec.output_tokens for r in requests), np.int64, n),
        "preemptions": np.fromiter((r.preemptions for r in requests), np.int64, n),
    }
    failed = [r.failed for r in requests]
    # A refused request's timestamps say nothing a client saw: its latencies stay NaN.
    refused = np.fromiter((bool(f) for f in failed), bool, n)
    cols["status"] = request_status(failed, np.where(refused, np.nan, cols["finish_s"]))
    # TTFT in its parts: queue (arrival to admission where the prompt is computed), prefill
    # (to the prompt's first token), and, disaggregated, KV transfer (the KV crossing to the
    # decode side) and decode wait (for the decode instance to take the request, before or
    # after the crossing, and stream the first token to the client).
    disagg = np.fromiter((np.isfinite(r.prefill_done) for r in requests), bool, n)
    p_admit = np.fromiter((r.prefill_admitted for r in requests), np.float64, n)
    p_done = np.fromiter((r.prefill_done for r in requests), np.float64, n)
    t_done = np.fromiter((r.transfer_done for r in requests), np.float64, n)
    t_start = np.fromiter((r.transfer_start for r in requests), np.float64, n)
    moved = disagg & np.isfinite(t_done)  # a one-token answer never leaves the prefill pool
    admit = np.where(disagg, p_admit, cols["admitted_s"])
    cols["queue_s"] = admit - cols["arrival_s"]
    cols["prefill_s"] = np.where(moved, p_done, cols["first_token_s"]) - admit
    cols["transfer_s"] = np.where(moved, t_done - t_start, 0.0)
    # the decode side's admission: before the KV crosses where the decode instance takes
    # the request first (vLLM and TensorRT-LLM pull), and after it lands
    cols["decode_wait_s"] = np.where(moved, (t_start - p_done) + (cols["first_token_s"] - t_done),
                                     0.0)
    advance = np.fromiter((r.advance or tokens_per_step for r in requests), np.float64, n)
    cols["chunk_tokens"] = chunk_tokens(advance, stream_interval)
    served = np.where(refused, np.nan, 1.0)
    cols.update(latency_columns(cols["arrival_s"], cols["first_token_s"] * served,
                                cols["finish_s"] * served, cols["output_tokens"],
                                cols["chunk_tokens"]))
    return pd.DataFrame(cols, columns=list(COLUMNS))
