"""behaviour.md 4, "the report covers the harness's window": warm-up and duration are
honoured in every replay mode. Requests are sent through the warm-up and the window, nothing
is sent at or past the horizon, and the summary counts exactly the requests sent inside
[warmup, warmup + duration)."""

from __future__ import annotations

import json

import pytest

from inferasim.config.loader import load_scenario
from inferasim.report.run_report import replay_summary
from inferasim.serve.simulation import simulate
from tests.conftest import REPO

WARMUP, DURATION = 40.0, 30.0  # a warm-up longer than the window: arrivals must outlast both
SMALL = ["model.name=llama-3.1-8b", "gpu.name=h100"]


def _mooncake_trace(tmp_path, rate_per_s: float = 1.0, span_s: float = 120.0):
    """A stamped trace in Mooncake's format: one request a second, a shared first block."""
    path = tmp_path / "trace.jsonl"
    rows = []
    for i in range(int(span_s * rate_per_s)):
        rows.append({"timestamp": int(1000 * i / rate_per_s), "input_length": 1024,
                     "output_length": 32, "hash_ids": [0, 1000 + 2 * i, 1001 + 2 * i]})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _modes(tmp_path) -> dict[str, list[str]]:
    trace = _mooncake_trace(tmp_path)
    return {
        "closed-loop synthetic": ["workload.concurrency=4"],
        "open-loop synthetic": ["workload.rate=2"],
        "open-loop random": ["workload.format=random", "workload.isl=512", "workload.osl=32",
                             "workload.rate=2"],
        "mooncake stamped": ["workload.format=mooncake", f"workload.trace={trace}"],
        "mooncake paced sessions": ["workload.format=mooncake", f"workload.trace={trace}",
                                    "workload.mooncake_sessions=true"],
        "agentic lanes": ["workload.format=sessions",
                          f"workload.trace={REPO / 'traces' / 'agentic-small.jsonl'}",
                          "workload.concurrency=4", "workload.idle_cap_s=2"],
    }


@pytest.mark.parametrize("mode", ["closed-loop synthetic", "open-loop synthetic",
                                  "open-loop random", "mooncake stamped",
                                  "mooncake paced sessions", "agentic lanes"])
def test_window_is_honoured_in_every_replay_mode(tmp_path, mode):
    overrides = [*SMALL, *_modes(tmp_path)[mode], f"workload.warmup_s={WARMUP:g}",
                 f"workload.duration_s={DURATION:g}"]
    result = simulate(load_scenario(None, overrides))
    frame, summary = replay_summary(result)
    # Agentic lanes open their measured phase once every lane's cache warm-up turn (the
    # turn before its start point) is done, as AIPerf runs warm-up as a phase of its own;
    # every other source opens it at time 0.
    start, horizon = result.window_start_s, result.horizon_s
    assert horizon == start + DURATION
    if mode == "agentic lanes":
        warmups = frame[frame.arrival_s == 0.0]
        assert len(warmups) == 4  # one per lane, all outside the window
        assert start == pytest.approx(WARMUP + warmups.finish_s.max())
    else:
        assert start == WARMUP
    inside = frame[(frame.arrival_s >= start) & (frame.arrival_s < horizon)]
    assert len(inside) > 0, f"{mode}: nothing was sent inside the window"
    assert inside.arrival_s.max() > start + DURATION / 2, f"{mode}: arrivals stopped early"
    assert (frame.arrival_s < start).any(), f"{mode}: the warm-up sent nothing"
    assert frame.arrival_s.max() < horizon
    assert summary["requests_sent"] == len(inside)
