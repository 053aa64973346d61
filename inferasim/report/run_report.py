"""From a finished replay to what the user sees: the frame, the summary, the output folder."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import pandas as pd
import yaml

from inferasim.config.loader import scenario_to_dict
from inferasim.report import strict_json
from inferasim.report.atomic import atomic_dir
from inferasim.report.frame import request_frame
from inferasim.report.row_stream import EXACT_FLOATS, StreamTotals, rows_equal_totals
from inferasim.report.summary import summarize

# Summary keys that say how long this machine took, not what the replay measured: they go to
# timing.json, so the rest of a result folder is a pure function of the scenario.
TIMING_KEYS = ("wall_s",)


def replay_summary(result, *, percentiles: Sequence[float] | None = None,
                   slo: Mapping[str, float] | None = None) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The rows and the summary of ``result``; ``percentiles`` and ``slo`` as ``summarize``
    takes them (more latency percentiles; SLOs in seconds for ``request_goodput``)."""
    sc = result.scenario
    if result.rows is not None:
        frame = result.rows.read()  # streamed: the rows as written
    else:
        frame = request_frame(result.requests, sc.speculative.tokens_per_step,
                              sc.engine.stream_interval)
    return frame, summary_of(result, frame, percentiles=percentiles, slo=slo)


def streamed_summary(result, *, percentiles: Sequence[float] | None = None,
                     slo: Mapping[str, float] | None = None) -> dict[str, Any]:
    """``replay_summary``'s summary of a streamed replay, reading back only the columns it
    needs; its counts and token totals checked against those kept as the rows went."""
    frame = result.rows.read(list(SUMMARY_COLUMNS))
    kept = result.rows.totals
    if not rows_equal_totals(frame, kept):
        raise AssertionError(f"the written rows ({StreamTotals.of(frame)}) disagree with the "
                             f"stream ({kept})")
    return summary_of(result, frame, percentiles=percentiles, slo=slo)


#: The columns ``summarize`` reads.
SUMMARY_COLUMNS = ("status", "arrival_s", "first_token_s", "finish_s", "prompt_tokens",
                   "cached_tokens", "host_tokens", "storage_tokens", "lookup_tokens",
                   "lookup_hit_tokens",
                   "output_tokens", "queue_s", "prefill_s", "transfer_s", "decode_wait_s",
                   "chunk_tokens")


def summary_of(result, frame: pd.DataFrame, *, percentiles: Sequence[float] | None = None,
               slo: Mapping[str, float] | None = None) -> dict[str, Any]:
    """The summary of ``result`` over its rows ``frame``."""
    sc = result.scenario
    evictions = sum(e.kv.cache.stats.evictions for e in result.engines) \
        * result.engines[0].kv.bt
    summary = summarize(frame, window_start_s=result.window_start_s, horizon_s=result.horizon_s,
                        kv_pool_tokens=result.kv_pool_tokens or result.memory.kv_pool_tokens,
                        gpus=result.scenario.total_gpus,
                        calibration=result.calibration,
                        engine_stats=[e.stats for e in result.engines], evictions=evictions,
                        percentiles=percentiles, slo=slo)
    if result.prefill_kv_pool_tokens is not None:
        # kv_pool_tokens is then a decode instance's; the prefill instances size their own
        summary["prefill_kv_pool_tokens"] = int(result.prefill_kv_pool_tokens)
    tiers = [e.kv.tier for e in result.engines if e.kv.tier is not None]
    if tiers:
        # the whole run's traffic over the host links (the window's share is host_hit_rate)
        summary["kv_offload"] = {
            "policy": tiers[0].policy.name,
            "host_capacity_tokens": int(sum(t.pool.capacity for t in tiers)),
            "written_tokens": int(sum(t.stats.written_tokens for t in tiers)),
            "reloaded_tokens": int(sum(t.stats.hit_tokens for t in tiers)),
            "bytes_to_host": float(sum(t.stats.bytes_to_host for t in tiers)),
            "bytes_to_gpu": float(sum(t.stats.bytes_to_gpu for t in tiers)),
        }
        stores = [t.below for t in tiers if t.below is not None]
        if stores:
            summary["kv_offload"].update({
                "storage_capacity_tokens": int(sum(s.pool.capacity for s in stores)),
                "storage_written_tokens": int(sum(s.stats.written_tokens for s in stores)),
                "storage_read_tokens": int(sum(s.stats.hit_tokens for s in stores)),
                "bytes_to_storage": float(sum(s.stats.bytes_to_host for s in stores)),
                "bytes_from_storage": float(sum(s.stats.bytes_to_gpu for s in stores)),
            })
    dp = sc.parallel.dp_attention
    if dp > 1:
        # how the ranks were stepped: together in groups (the engines' way) or apart
        summary["lockstep_group"] = result.knobs.lockstep_group(dp)
    return summary


def occupancy_frame(result) -> pd.DataFrame:
    if result.rows is not None:
        return pd.read_csv(result.rows.occupancy_path, **EXACT_FLOATS)
    rows = [(e.index, t, used, cached) for e in result.engines for t, used, cached in e.stats.occupancy]
    return pd.DataFrame(rows, columns=["instance", "time_s", "pool_used_tokens", "cached_tokens"])


def split_timing(summary: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the summary without TIMING_KEYS, those keys): what a replay measured, and how long
    this machine took to replay it."""
    measured = {k: v for k, v in summary.items() if k not in TIMING_KEYS}
    timing = {k: summary[k] for k in TIMING_KEYS if k in summary}
    return measured, timing


def write_outputs(out_dir: Path, result, frame: pd.DataFrame, summary: dict[str, Any],
                  fmt: str = "csv") -> None:
    """Requests, occupancy, summary and the resolved scenario, written all at once. Timing
    (``wall_s``) goes to ``timing.json``: every other file is byte-identical between two
    replays of one scenario."""
    with atomic_dir(out_dir) as tmp:
        if fmt == "parquet":
            frame.to_parquet(tmp / "requests.parquet", index=False)
        else:
            frame.to_csv(tmp / "requests.csv", index=False)
        occupancy_frame(result).to_csv(tmp / "occupancy.csv", index=False)
        write_result_files(tmp, result, summary)


def write_result_files(folder: Path, result, summary: dict[str, Any]) -> None:
    """The summary (its timing apart) and the resolved scenario, beside the rows in
    ``folder``: what ``write_outputs`` adds to the rows, and what a streamed replay (its rows
    already written there) adds at its end."""
    summary, timing = split_timing(summary)
    (folder / "summary.json").write_text(strict_json.dumps(summary, indent=2) + "\n")
    if timing:
        (folder / "timing.json").write_text(strict_json.dumps(timing, indent=2) + "\n")
    resolved = scenario_to_dict(result.scenario)
    resolved["knobs"] = attrs.asdict(result.knobs)
    (folder / "scenario.resolved.yaml").write_text(yaml.safe_dump(resolved, sort_keys=False))
