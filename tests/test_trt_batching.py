"""TensorRT-LLM's prompt admission: whole prompts without chunked context, and batch waiting
(serve/batch_wait.py) as its PyExecutor counts it; replays that show each and the step-exact
mode agreeing with macro-steps."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from inferasim.config.catalog import REPO_ROOT
from inferasim.config.loader import load_scenario
from inferasim.report.run_report import replay_summary
from inferasim.serve.batch_wait import BatchWait
from inferasim.serve.scheduler import _prompts_offered
from inferasim.serve.simulation import simulate
from tests.conftest import assert_same_requests


def test_prompts_wait_for_the_token_ratio_or_the_timeout():
    wait = BatchWait(timeout_iters=3, max_tokens_ratio=0.5, max_num_tokens=1000)
    # 100 prompt + 10 decode tokens, under 500: held three steps, then the timeout lets them
    assert [wait.releases(100, 10) for _ in range(4)] == [False, False, False, True]
    assert wait.held == 0
    # enough tokens gathered: in at once, the count back to 0
    wait.held = 2
    assert wait.releases(495, 5) and wait.held == 0


def test_a_ratio_without_timeout_never_holds():
    """TensorRT-LLM compares the count with a timeout of 0 first: nothing is ever held."""
    wait = BatchWait(timeout_iters=0, max_tokens_ratio=0.9, max_num_tokens=8192)
    assert wait.enabled and wait.releases(1, 1)
    assert not BatchWait(0, 0.0, 8192).enabled


SCENARIO = REPO_ROOT / "scenarios" / "inferencemax" / "dsr1-b200-trt-fp8-tp8.yaml"
LOAD = ["workload.concurrency=64", "workload.max_requests=256", "workload.duration_s=1e5",
        "sim.anchors=none", "workload.osl=256", "workload.random_range_ratio=0.8"]
WAIT = ["engine.batch_wait_timeout_iters=40", "engine.batch_wait_max_tokens_ratio=0.8"]


def _frame(sets):
    return replay_summary(simulate(load_scenario(SCENARIO, sets)))[0]


@pytest.fixture(scope="module")
def waited():
    return [_frame([*LOAD, *WAIT, f"sim.exact_steps={e}"]) for e in ("true", "false")]


def test_waiting_macro_steps_equal_the_step_exact_mode(waited):
    assert_same_requests(*waited, 256)


def test_batch_waiting_gathers_prompts_and_spares_the_decodes(waited):
    plain = _frame(LOAD)
    held = waited[1]
    ttft = lambda f: (f.first_token_s - f.arrival_s).median()  # noqa: E731
    tpot = lambda f: ((f.finish_s - f.first_token_s) / (f.output_tokens - 1)).median()  # noqa: E731
    assert ttft(held) > 1.5 * ttft(plain)
    # fewer steps carry a prompt, so a decode is interrupted less often
    assert tpot(held) < tpot(plain)


def test_without_chunked_context_a_prompt_enters_whole():
    """A prompt of 8,150 tokens beside 64 decodes does not fit a budget of 8,192 tokens:
    TensorRT-LLM (no chunked context) holds it until the decodes leave room, where the launch
    scripts' max_num_tokens (ISL + clients + 64, to 64: 8,320) lets it in at once."""
    sets = ["workload.isl=8150", "workload.osl=64", "workload.concurrency=64",
            "workload.max_requests=192", "workload.duration_s=1e5", "sim.anchors=none",
            "workload.random_range_ratio=1.0"]
    tight = _frame(sets)
    roomy = _frame([*sets, "engine.max_num_batched_tokens=8320"])
    chunked = _frame([*sets, "engine.chunked_prefill=true"])
    assert len(tight) == len(roomy) == len(chunked) == 192
    ttft = lambda f: (f.first_token_s - f.arrival_s).median()  # noqa: E731
    assert ttft(tight) > 1.2 * ttft(roomy)
    assert ttft(tight) > 1.2 * ttft(chunked)


def _offered(prompts, budget=8192.0):
    waiting = [SimpleNamespace(target=float(p), computed=0.0) for p in prompts]
    eng = SimpleNamespace(prefilling=[], running=[], max_num_seqs=64, chunks_prompts=False,
                          max_batched_tokens=8192, queue_order=lambda: waiting)
    return _prompts_offered(eng, budget)


def test_batch_waiting_weighs_what_admission_would_take():
    """Without chunked context a prompt that fits the step budget but not the room left waits
    (head-of-line), while one longer than the whole budget is let in and chunked
    (``_admit``): the prompt tokens batch waiting weighs are the same ones."""
    assert _offered([3000, 6000]) == 3000
    assert _offered([3000, 20000]) == 8192
    assert _offered([20000]) == 8192
    assert _offered([3000, 2000], budget=4000) == 3000


def test_without_chunked_prefill_a_prompt_past_max_num_tokens_is_refused_at_once():
    """TensorRT-LLM's LLM API answers 400 for a prompt longer than max_num_tokens when
    chunked prefill is off: the replay refuses it and counts it; with chunked prefill, or a
    budget that holds it, it is served."""
    sets = ["workload.isl=9000", "workload.osl=16", "workload.concurrency=4",
            "workload.max_requests=8", "workload.duration_s=1e5", "sim.anchors=none",
            "workload.random_range_ratio=1.0"]
    refused = replay_summary(simulate(load_scenario(SCENARIO, sets)))[1]
    assert (refused["requests_failed"], refused["requests_completed"]) == (8, 0)
    assert "exceeds the step's token budget (8192, max_num_tokens)" in \
        refused["requests_failed_example"]
    for extra in ("engine.chunked_prefill=true", "engine.max_num_batched_tokens=9216"):
        served = replay_summary(simulate(load_scenario(SCENARIO, [*sets, extra])))[1]
        assert served["requests_failed"] == 0 and served["requests_completed"] == 8, extra
