"""Agentic lanes against the real engine model (behaviour.md section 5): the server admits a
lane's subagents up to its own sequence limit; TTFT at one client is the prefill alone."""

from __future__ import annotations

import numpy as np
import pytest

from inferasim.config.loader import load_scenario
from inferasim.cost.calibrated import oracle_for
from inferasim.cost.oracle import StepBatch
from inferasim.serve.simulation import simulate
from inferasim.workload.agentx import agentx_source
from inferasim.workload.sessions_format import write_sessions
from tests.conftest import REPO

SCENARIO = REPO / "scenarios" / "agentic-quickstart.yaml"


def fanout_session(name: str, width: int) -> dict:
    turns = [{"id": "r0", "in": 4000, "out": 20}]
    for k in range(width):
        turns.append({"stream": f"a{k}", "parent": "r0", "in": 3000 + 64 * k, "out": 300,
                      "gap": 0.5})
    turns.append({"in": 5000, "out": 20, "gap": 1.0, "joins": [f"a{k}" for k in range(width)]})
    return {"session": name, "turns": turns}


def run(tmp_path, sessions, overrides):
    path = tmp_path / "s.jsonl"
    write_sessions(path, sessions)
    sc = load_scenario(SCENARIO, [f"workload.trace={path}", "workload.start_max_ratio=0",
                                  "workload.start_min_ratio=0", *overrides])
    src = agentx_source(sc, np.random.default_rng(0))
    return simulate(sc, source=src)


def subagent_overlap(result) -> int:
    """Most subagent requests of the first tree running at once."""
    subs = [r for r in result.requests if r.spec.session == 0 and r.spec.turn >= 2]
    events = sorted([(r.admitted, 1) for r in subs] + [(r.finish, -1) for r in subs])
    depth = best = 0
    for _, d in events:
        depth += d
        best = max(best, depth)
    return best


def test_subagents_are_admitted_up_to_the_engine_sequence_limit(tmp_path):
    sessions = [fanout_session("f", 4)]
    wide = run(tmp_path, sessions, ["workload.concurrency=1", "workload.duration_s=30"])
    assert subagent_overlap(wide) == 4           # one lane, four subagents in one batch
    narrow = run(tmp_path, sessions, ["workload.concurrency=1", "workload.duration_s=30",
                                      "engine.max_num_seqs=2"])
    assert subagent_overlap(narrow) == 2


def test_ttft_at_one_lane_is_the_prefill_and_grows_under_load(tmp_path):
    sessions = [{"session": f"s{i}", "turns": [
        {"in": 20000 + 1000 * k, "out": 50, "gap": 0.5} for k in range(6)]} for i in range(8)]
    one = run(tmp_path, sessions, ["workload.concurrency=1", "workload.duration_s=20"])
    many = run(tmp_path, sessions, ["workload.concurrency=8", "workload.duration_s=20"])

    def ttft(result):
        return np.mean([r.first_token - r.arrival for r in result.requests])

    first = one.requests[0]
    # Alone, the first request is admitted at once and its TTFT is its own prefill: the
    # engine's chunks of it (vLLM's 8192-token budget), each priced at the context before it.
    assert first.admitted == first.arrival
    oracle = oracle_for(one.scenario)
    prompt, budget = first.spec.prompt_tokens, one.scenario.engine.max_num_batched_tokens
    starts = range(0, prompt, budget)
    prefill = sum(oracle.step_seconds(StepBatch(
        prefill_tokens=np.array([float(min(budget, prompt - s))]),
        prefill_resident=np.array([float(s)]), prefill_samples=int(s + budget >= prompt)))
        for s in starts)
    assert first.first_token - first.arrival == pytest.approx(prefill, rel=1e-9)
    # Under load a request also waits behind the other lanes' prefills.
    assert ttft(many) > 1.5 * ttft(one)


def test_live_responses_serve_the_next_prompt_from_the_generated_blocks(tmp_path):
    # the second prompt is the first (8,000 tokens) + its 1,000-token response + 1,000 new:
    # sent back live, the response's blocks were cached as the engine generated them
    sessions = [{"session": "s", "turns": [{"in": 8000, "out": 1000},
                                           {"in": 10000, "out": 20, "gap": 0.5}]}]
    cached = {}
    for live in ("false", "true"):
        result = run(tmp_path, sessions, ["workload.concurrency=1", "workload.duration_s=60",
                                          f"workload.live_responses={live}"])
        second = [r for r in result.requests if r.spec.session == 0 and r.spec.turn == 1]
        cached[live] = second[0].cached_first
    assert cached["false"] == 8000 // 64 * 64
    assert cached["true"] == 9000 // 64 * 64
