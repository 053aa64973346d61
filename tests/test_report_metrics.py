"""What the summary and the rows report: every latency with mean, median, std and percentiles
(more on request), goodput under SLOs as vLLM and AIPerf define it, the names of
``vllm bench serve --save-result`` (checked against real result files), and per-request rows
with their latencies and a status that survives a CSV round trip."""

from __future__ import annotations

import json
import math
import re
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from inferasim.config.errors import ConfigError
from inferasim.config.loader import load_scenario
from inferasim.report.frame import COLUMNS
from inferasim.report.run_report import replay_summary
from inferasim.report.summary import (
    DEFAULT_PERCENTILES,
    distribution,
    peaks,
    percentile_name,
    resolve_percentiles,
    summarize,
    weighted_percentiles,
)
from inferasim.serve.simulation import simulate
from tests.conftest import shared_data

STATS = SimpleNamespace(steps=10, macro_steps=2, preemptions=0)


def _frame(rows: list[dict]) -> pd.DataFrame:
    """Rows as request_frame writes them, from (arrival, first, finish, output, status)."""
    base = {c: 0 for c in COLUMNS}
    base.update(prompt_tokens=100, chunk_tokens=1.0, queue_s=0.0, prefill_s=0.0,
                transfer_s=0.0, decode_wait_s=0.0, status="ok")
    return pd.DataFrame([{**base, **r} for r in rows])


def _summarize(frame: pd.DataFrame, **kwargs):
    return summarize(frame, window_start_s=0.0, horizon_s=100.0, kv_pool_tokens=1000, gpus=2,
                     calibration={"mode": "analytic"}, engine_stats=[STATS], evictions=0,
                     **kwargs)


# Three requests: TTFT 1, 2, 4 s; 11, 1, 21 tokens over 5, 0, 4 s of decode.
THREE = [
    {"arrival_s": 0.0, "first_token_s": 1.0, "finish_s": 6.0, "output_tokens": 11},
    {"arrival_s": 1.0, "first_token_s": 3.0, "finish_s": 3.0, "output_tokens": 1},
    {"arrival_s": 2.0, "first_token_s": 6.0, "finish_s": 10.0, "output_tokens": 21},
]


def test_every_latency_has_mean_median_std_and_the_percentiles():
    s = _summarize(_frame(THREE))
    for metric, unit in (("ttft", "s"), ("tpot", "ms"), ("itl", "ms"), ("e2e", "s")):
        for stat in ("mean", "median", "std", "p50", "p75", "p90", "p95", "p99"):
            assert f"{metric}_{stat}_{unit}" in s, (metric, stat)
    assert s["ttft_mean_s"] == pytest.approx(7 / 3)
    assert s["ttft_median_s"] == s["ttft_p50_s"] == pytest.approx(2.0)
    assert s["ttft_std_s"] == pytest.approx(np.std([1.0, 2.0, 4.0]))
    # TPOT per request over the answers longer than one token: 500 ms and 200 ms
    assert s["tpot_mean_ms"] == pytest.approx(350.0)
    assert s["tpot_median_ms"] == pytest.approx(350.0)
    # ITL pools every gap: 10 of 500 ms, 20 of 200 ms
    pooled = np.repeat([500.0, 200.0], [10, 20])
    assert s["itl_mean_ms"] == pytest.approx(pooled.mean())
    assert s["itl_median_ms"] == pytest.approx(np.median(pooled))
    assert s["itl_p90_ms"] == pytest.approx(np.percentile(pooled, 90))
    assert s["e2e_p99_s"] == pytest.approx(np.percentile([6.0, 2.0, 8.0], 99))
    assert s["interactivity_tok_s"] == pytest.approx(1e3 / 350.0)
    assert s["interactivity_median_tok_s"] == pytest.approx(1e3 / s["tpot_median_ms"])
    assert s["request_throughput"] == pytest.approx(3 / 10.0)
    assert s["request_goodput"] is None and s["requests_good"] is None


def test_more_percentiles_on_request():
    assert resolve_percentiles() == DEFAULT_PERCENTILES
    assert resolve_percentiles([99.9, 1, 99]) == (1.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.9)
    assert percentile_name(99.0) == "p99" and percentile_name(99.9) == "p99.9"
    s = _summarize(_frame(THREE), percentiles=[99.9, 10])
    assert {"ttft_p99.9_s", "tpot_p10_ms", "e2e_p99.9_s", "itl_p10_ms"} <= set(s)
    assert {"p99.9_ttft_ms", "p10_itl_ms", "p99.9_e2el_ms"} <= set(s["vllm_bench"])
    for bad in ([101], [-1], ["x"]):
        with pytest.raises(ConfigError, match="--percentiles"):
            _summarize(_frame(THREE), percentiles=bad)


def test_goodput_counts_requests_meeting_every_slo():
    frame = _frame(THREE)
    # TTFT <= 2.5 s: the first two; their TPOT 500 ms and 0 (a one-token answer, as vLLM)
    s = _summarize(frame, slo={"ttft": 2.5})
    assert s["requests_good"] == 2 and s["request_goodput"] == pytest.approx(2 / 10.0)
    assert s["vllm_bench"]["request_goodput"] == s["request_goodput"]
    assert _summarize(frame, slo={"ttft": 2.5, "tpot": 0.3})["requests_good"] == 1
    assert _summarize(frame, slo={"e2el": 7.0, "tpot": 0.6})["requests_good"] == 2
    assert _summarize(frame, slo={"ttft": 2.5})["slo"] == {"ttft_s": 2.5}
    for bad in ({"itl": 1.0}, {"ttft": 0}, {"ttft": "soon"}):
        with pytest.raises(ConfigError, match="--slo"):
            _summarize(frame, slo=bad)


def test_failed_and_unfinished_requests_stay_out_of_the_latencies():
    rows = [*THREE,
            {"arrival_s": 3.0, "first_token_s": math.nan, "finish_s": math.nan,
             "output_tokens": 5, "status": "failed: too long"},
            {"arrival_s": 4.0, "first_token_s": 5.0, "finish_s": math.nan,
             "output_tokens": 5, "status": "unfinished"}]
    s = _summarize(_frame(rows))
    assert (s["requests_completed"], s["requests_failed"], s["requests_unfinished"]) == (3, 1, 1)
    assert s["requests_failed_example"] == "too long"
    assert s["ttft_mean_s"] == pytest.approx(7 / 3)
    vb = s["vllm_bench"]
    assert (vb["completed"], vb["failed"], vb["num_prompts"]) == (3, 2, 5)


def test_weighted_percentiles_are_the_pooled_ones():
    rng = np.random.default_rng(3)
    values = rng.lognormal(size=200)
    weights = rng.integers(1, 40, size=200).astype(np.float64)
    qs = [0, 1, 33.3, 50, 90, 99, 99.9, 100]
    pooled = np.repeat(values, weights.astype(int))
    assert weighted_percentiles(values, weights, qs) == pytest.approx(np.percentile(pooled, qs))
    d = distribution(values, [99.9], weights=weights)
    assert d["mean"] == pytest.approx(pooled.mean()) and d["std"] == pytest.approx(pooled.std())
    assert all(math.isnan(v) for v in distribution(np.array([]), [99]).values())


def _peaks_as_vllm_counts(arrival, first, finish, chunks):
    """vllm bench serve's loop (benchmarks/serve.py), with evenly spaced chunks."""
    t0 = arrival.min()
    n = int(np.ceil(finish.max() - t0)) + 1
    tokens, active = np.zeros(n), np.zeros(n)
    for a, f, e, c in zip(arrival, first, finish, chunks, strict=True):
        for t in [f, *(f + (e - f) * np.arange(1, int(c) + 1) / c)]:
            tokens[int(t - t0)] += 1
        active[int(a - t0):int(e - t0) + 1] += 1
    return tokens.max(), active.max()


def test_peaks_match_vllm_bench_serve_counting():
    rng = np.random.default_rng(7)
    arrival = np.sort(rng.uniform(0, 50, 300))
    first = arrival + rng.uniform(0.05, 2.0, 300)
    finish = first + rng.uniform(0.0, 20.0, 300)
    chunks = rng.integers(1, 300, 300).astype(np.float64)
    out, conc = peaks(arrival, first, finish, chunks)
    want_out, want_conc = _peaks_as_vllm_counts(arrival, first, finish, chunks)
    assert conc == want_conc
    assert out == pytest.approx(want_out, rel=0.02)  # a ramp where vLLM has discrete chunks


# Keys of a vllm bench serve result that describe the run asked for, not what it measured.
VLLM_RUN_KEYS = {"date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id",
                 "request_rate", "burstiness", "max_concurrency", "best_of", "use_beam_search"}
PERCENTILE_KEY = re.compile(r"^p(\d+(?:\.\d+)?)_(ttft|tpot|itl|e2el)_ms$")


def _vllm_results() -> dict[str, set[str]]:
    """Metric names of every `vllm bench serve` (or benchmark_serving) JSON result; not the
    InferenceX random dialect (seconds, no _ms), which is not vLLM's."""
    folder = shared_data("engine-outputs", "vllm-bench-serve")
    found = {}
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text())
        if "mean_ttft_ms" not in data:
            continue
        # InferenceX's fork writes "request_goodput:" (a stray colon) for vLLM's key
        found[path.name] = {k.rstrip(":") for k, v in data.items()
                            if k not in VLLM_RUN_KEYS and not isinstance(v, list)}
    if not found:
        pytest.skip(f"no vllm bench serve result in {folder}")
    return found


def test_the_summary_has_every_metric_a_vllm_bench_serve_result_has():
    results = _vllm_results()
    asked = {float(m.group(1)) for names in results.values() for k in names
             if (m := PERCENTILE_KEY.match(k))}
    sc = load_scenario(None, ["workload.format=random", "workload.isl=512", "workload.osl=64",
                              "workload.concurrency=4", "workload.duration_s=20"])
    result = simulate(sc)
    default = replay_summary(result)[1]["vllm_bench"]
    asked_for = replay_summary(result, percentiles=sorted(asked), slo={"ttft": 1.0})[1]
    assert "benchmaq_vllm-bench-serve_glm47-fp8_b200_tp8_in8192_out128_c100.json" in results
    for name, metrics in results.items():
        missing = metrics - set(asked_for["vllm_bench"])
        assert not missing, f"{name}: the summary lacks {sorted(missing)}"
        # vLLM's own default (--metric-percentiles 99) needs no --percentiles at all
        plain = {k for k in metrics if not (m := PERCENTILE_KEY.match(k))
                 or float(m.group(1)) in DEFAULT_PERCENTILES}
        assert plain <= set(default), name
    vb, s = asked_for["vllm_bench"], asked_for
    assert vb["mean_ttft_ms"] == pytest.approx(s["ttft_mean_s"] * 1e3)
    assert vb["p99_e2el_ms"] == pytest.approx(s["e2e_p99_s"] * 1e3)
    assert vb["median_tpot_ms"] == pytest.approx(s["tpot_median_ms"])
    assert vb["mean_itl_ms"] == pytest.approx(s["itl_client_mean_ms"])
    assert vb["output_throughput"] == pytest.approx(s["output_tok_s"])
    assert vb["request_goodput"] == pytest.approx(s["request_goodput"])
    assert vb["max_concurrent_requests"] >= 4  # 4 clients, each in flight in the busiest second


def test_speculative_chunks_make_the_client_itl_longer_than_tpot():
    sc = load_scenario(None, ["workload.format=random", "workload.isl=512", "workload.osl=128",
                              "workload.concurrency=2", "workload.duration_s=20",
                              "speculative.method=mtp", "speculative.draft_tokens=3",
                              "speculative.acceptance=0.6"])
    frame, s = replay_summary(simulate(sc))
    ok = frame[frame.status == "ok"]
    assert (ok.itl_mean_ms > ok.tpot_ms).all()
    assert s["vllm_bench"]["mean_itl_ms"] > s["vllm_bench"]["mean_tpot_ms"]


def test_rows_carry_latencies_and_a_status_through_csv(tmp_path):
    # the second request is past Llama-3.1-8B's context of 131072: refused, with the reason
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps({"timestamp": i * 500, "input_length": isl,
                                        "output_length": 32,
                                        "hash_ids": [i * 1000 + b for b in range(-(-isl // 512))]})
                            + "\n"
                            for i, isl in enumerate([2000, 131072, 3000, 1500])))
    sc = load_scenario(None, ["workload.format=mooncake", f"workload.trace={path}",
                              "model.name=llama-3.1-8b", "gpu.name=b200"])
    frame, _ = replay_summary(simulate(sc))
    frame.to_csv(tmp_path / "requests.csv", index=False)
    rows = pd.read_csv(tmp_path / "requests.csv")
    assert rows.status.notna().all()
    assert list(rows.status[[0, 2, 3]]) == ["ok"] * 3
    assert rows.status[1].startswith("failed: ") and "the server's context" in rows.status[1]
    ok = rows[rows.status == "ok"]
    assert np.allclose(ok.ttft_s, ok.first_token_s - ok.arrival_s)
    assert np.allclose(ok.e2e_s, ok.finish_s - ok.arrival_s)
    assert np.allclose(ok.tpot_ms, (ok.finish_s - ok.first_token_s) / (ok.output_tokens - 1) * 1e3)
    assert np.allclose(ok.itl_mean_ms, ok.tpot_ms)  # one token a chunk without speculation
    assert rows.loc[1, ["ttft_s", "tpot_ms", "itl_mean_ms", "e2e_s"]].isna().all()
