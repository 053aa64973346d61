"""Mooncake replay: the loader, the ideal hit rate, and the replayed hit rate against it."""

from __future__ import annotations

import numpy as np
import pytest

from inferasim.config.errors import ConfigError
from inferasim.config.loader import load_scenario
from inferasim.report.run_report import replay_summary
from inferasim.serve.simulation import simulate
from inferasim.workload.mooncake import ideal_hit_rate, load_mooncake
from tests.conftest import shared_data

TRACE = ("mooncake", "conversation_trace.jsonl")


def test_loader_reads_the_whole_trace():
    trace = load_mooncake(shared_data(*TRACE))
    assert len(trace) == 12031
    assert trace.times_s[-1] == pytest.approx(3537.0, abs=1.0)
    assert int((trace.parent >= 0).sum()) == 3975  # implicit follow-ups (README figure)
    assert ideal_hit_rate(trace) == pytest.approx(0.374, abs=0.002)


def _slice(tmp_path, n=1500):
    src = shared_data(*TRACE)
    path = tmp_path / "slice.jsonl"
    path.write_text("".join(src.read_text().splitlines(True)[:n]))
    return path


def _replay(path, *overrides):
    sc = load_scenario(None, ["workload.format=mooncake", f"workload.trace={path}",
                              "model.name=llama-3.1-8b", "gpu.name=b200",
                              "workload.rate_scale=0.25", *overrides])
    return replay_summary(simulate(sc))[1]


def test_unbounded_pool_replays_the_ideal_hit_rate(tmp_path):
    path = _slice(tmp_path)
    ideal = ideal_hit_rate(load_mooncake(path))
    summary = _replay(path, "engine.kv_pool_tokens=100000000")
    assert summary["requests_failed"] == 0
    # Equal but for requests that arrive while the blocks they would reuse are still being
    # prefilled by an earlier one (several requests share a stamp): a real race, not a loss.
    assert summary["prefix_hit_rate"] == pytest.approx(ideal, abs=2e-4)
    assert summary["prefix_hit_rate"] <= ideal


def test_bounded_pool_hit_rate_lower_and_monotonic(tmp_path):
    path = _slice(tmp_path)
    ideal = ideal_hit_rate(load_mooncake(path))
    rates = [_replay(path, f"engine.kv_pool_tokens={p}")["prefix_hit_rate"]
             for p in (150_000, 400_000, 1_500_000)]
    assert rates[0] < ideal
    assert all(np.diff(rates) >= 0), rates
    assert rates[-1] > rates[0]


def test_missing_trace_is_a_clear_error():
    sc = load_scenario(None, ["workload.format=mooncake", "workload.trace=/nope.jsonl"])
    with pytest.raises(ConfigError, match="trace not found") as err:
        simulate(sc)
    assert err.value.key == "workload.trace"
