"""TensorRT-LLM's attention-DP prompt balancing (serve/adp_balance.py): the counters as its
PyExecutor moves them, their closed form over a steady run, and a replay that holds prompts
and still equals the step-by-step mode."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from inferasim.config.catalog import REPO_ROOT
from inferasim.config.loader import load_scenario
from inferasim.report.run_report import replay_summary
from inferasim.serve.adp_balance import AdpBalance
from inferasim.serve.simulation import simulate
from tests.conftest import assert_same_requests


def test_prompts_wait_for_every_rank_or_the_timeout():
    bal = AdpBalance(timeout_iters=3, batching_wait_iters=0)
    one = ([True, False], [True, True], [True, True])   # one rank has a prompt, both decode
    assert [bal.admits(*one) for _ in range(3)] == [False, False, True]
    assert bal.waiting == 0
    # every rank with a prompt and a free slot: they start at once, the counter back to 0
    bal.waiting = 2
    assert bal.admits([True, True], [True, True], [True, True]) and bal.waiting == 0
    # a rank with nothing to decode lets them start
    assert bal.admits([True, False], [True, False], [True, True])
    # a full rank holds them as a missing prompt does
    assert not bal.admits([True, True], [True, True], [True, False])


def test_steps_without_prompts_move_the_counter_too():
    """A prompt arriving alone waits by where the counter stands, not a whole timeout."""
    bal = AdpBalance(timeout_iters=4)
    idle = ([False, False], [True, True], [True, True])
    for _ in range(3):
        assert not bal.admits(*idle)
    assert bal.waiting == 3
    assert bal.admits([True, False], [True, True], [True, True])   # the fourth step: timeout


def test_batching_wait_holds_prompts_every_rank_has():
    bal = AdpBalance(timeout_iters=50, batching_wait_iters=2)
    ready = ([True, True], [True, True], [True, True])
    assert [bal.admits(*ready) for _ in range(3)] == [False, False, True]


flags = st.lists(st.booleans(), min_size=2, max_size=2)


@given(st.integers(1, 9), st.integers(0, 3), st.integers(0, 8), st.integers(0, 3),
       st.integers(0, 40), flags, flags, flags)
def test_a_steady_run_advances_the_counters_as_its_steps_would(
        timeout, wait, waiting, batching, steps, prompts, decodes, free):
    a = AdpBalance(timeout, wait, waiting % timeout, batching % (wait + 1))
    b = AdpBalance(timeout, wait, a.waiting, a.batching)
    for _ in range(steps):
        a.admits(prompts, decodes, free)
    b.advance(steps, prompts, decodes, free)
    assert (a.waiting, a.batching) == (b.waiting, b.batching)


SCENARIO = REPO_ROOT / "scenarios" / "inferencemax" / "dsr1-b200-trt-fp8-tp8.yaml"
DPA8 = ["parallel.ep=8", "parallel.dp_attention=8", "workload.concurrency=48",
        "workload.max_requests=192", "workload.duration_s=1e5", "sim.anchors=none",
        "workload.random_range_ratio=0.5"]
BALANCE = ["engine.attention_dp_balance=true", "engine.attention_dp_timeout_iters=60",
           "engine.attention_dp_batching_wait_iters=2"]


@pytest.fixture(scope="module")
def balanced():
    return [replay_summary(simulate(load_scenario(SCENARIO, [*DPA8, *BALANCE,
                                                            f"sim.exact_steps={e}"])))[0]
            for e in ("true", "false")]


def test_balanced_macro_steps_equal_the_step_exact_mode(balanced):
    assert_same_requests(*balanced, 192)


def test_balancing_holds_prompts_the_ranks_would_start(balanced):
    plain = replay_summary(simulate(load_scenario(SCENARIO, DPA8)))[0]
    held = balanced[1]
    ttft = (held.first_token_s - held.arrival_s).median()
    assert ttft > 2 * (plain.first_token_s - plain.arrival_s).median()
    # the hold is steps, not throughput: the decodes run as before
    assert held.finish_s.max() == pytest.approx(plain.finish_s.max(), rel=0.15)


def test_a_context_only_pool_never_holds_its_prompts():
    """A disaggregated prefill worker decodes nothing, and TensorRT-LLM releases the prompts
    whenever some rank has no generation request (``_balance_adp_requests``), so turning the
    balance on leaves every first token where it was (the dynamo-trt rows' TTFT falling with
    load is not this hold: docs/engines.md)."""
    path = REPO_ROOT / "scenarios/inferencemax/dsr1-b200-dynamo-trt-fp8-disagg.yaml"
    sets = ["workload.max_requests=40", "topology.decode.parallel.dp_attention=8",
            "topology.decode.parallel.ep=8"]
    frames = [replay_summary(simulate(load_scenario(
        path, [*sets, f"engine.attention_dp_balance={on}"])))[0] for on in ("false", "true")]
    off, on = frames
    assert len(off) == len(on) == 40
    np.testing.assert_array_equal(on.first_token_s.to_numpy(), off.first_token_s.to_numpy())
    # the decode pool's requests arrive with their KV (generation-init requests, not context
    # requests), which the balance does not hold either
    np.testing.assert_array_equal(on.finish_s.to_numpy(), off.finish_s.to_numpy())
