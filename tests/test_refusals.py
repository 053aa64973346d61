"""Requests the deployment cannot serve: refused with a reason, and a workload of nothing but
such requests stops with a clear error instead of resending them forever at one instant."""

from __future__ import annotations

import json
import math
import re

import pytest
from click.testing import CliRunner

from inferasim.cli.main import cli
from inferasim.config.errors import ConfigError
from inferasim.config.loader import load_scenario
from inferasim.report.run_report import replay_summary
from inferasim.serve.simulation import REFUSAL_STREAK_LIMIT, simulate

LLAMA_8B_CONTEXT = 131072


def _trace(path, inputs: list[int], gap_ms: int = 500):
    with path.open("w") as fh:
        for i, isl in enumerate(inputs):
            blocks = [i * 1000 + b for b in range(math.ceil(isl / 512))]
            fh.write(json.dumps({"timestamp": i * gap_ms, "input_length": isl,
                                 "output_length": 32, "hash_ids": blocks}) + "\n")
    return path


def _trace_scenario(path, *overrides):
    return load_scenario(None, ["workload.format=mooncake", f"workload.trace={path}",
                                "model.name=llama-3.1-8b", "gpu.name=b200", *overrides])


def test_random_lengths_past_the_model_context_are_a_config_error():
    with pytest.raises(ConfigError) as err:
        load_scenario(None, ["workload.format=random", "workload.isl=131072",
                             "workload.osl=16"])
    assert err.value.key == "workload.isl"
    assert "131088" in str(err.value) and str(LLAMA_8B_CONTEXT) in str(err.value)
    load_scenario(None, ["workload.format=random", "workload.isl=131056", "workload.osl=16"])


def test_a_request_past_the_context_is_refused_and_the_rest_are_served(tmp_path):
    path = _trace(tmp_path / "t.jsonl", [2000, LLAMA_8B_CONTEXT, 3000, 1500])
    result = simulate(_trace_scenario(path))
    failed = [r.failed for r in result.requests]
    assert failed[0] == failed[2] == failed[3] == ""
    assert "the server's context of 131072" in failed[1]
    assert all(math.isfinite(result.requests[i].finish) for i in (0, 2, 3))
    summary = replay_summary(result)[1]
    assert summary["requests_failed"] == 1


def test_refusals_between_served_requests_do_not_stop_the_replay(tmp_path):
    # more refusals than the streak limit, but never that many in a row
    n = REFUSAL_STREAK_LIMIT + 200
    path = _trace(tmp_path / "t.jsonl", [200_000 if i % 2 else 600 for i in range(2 * n)],
                  gap_ms=50)
    result = simulate(_trace_scenario(path))
    assert sum(bool(r.failed) for r in result.requests) == n


def test_a_closed_loop_the_pool_can_never_hold_stops_with_the_reason():
    sc = load_scenario(None, ["workload.format=random", "workload.isl=4000",
                              "workload.osl=16", "engine.kv_pool_tokens=2048"])
    with pytest.raises(ConfigError) as err:
        simulate(sc)
    assert err.value.key == "workload"
    assert f"refused {REFUSAL_STREAK_LIMIT} requests in a row" in str(err.value)
    assert "the pool holds" in str(err.value)


def test_the_cli_reports_it_in_one_line(tmp_path):
    result = CliRunner().invoke(cli, ["run", "--out", str(tmp_path / "out"),
                                      "--set", "workload.format=random",
                                      "--set", "workload.isl=4000", "--set", "workload.osl=16",
                                      "--set", "engine.kv_pool_tokens=2048"])
    assert result.exit_code == 2
    assert "refused 1000 requests in a row" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def test_refused_requests_are_counted_with_a_reason_and_the_json_stays_strict(tmp_path):
    # issue 32: a run in which no request completes measured nothing, so it is refused
    # (exit 2) with the reason, the first refusal's, and writes nothing
    path = _trace(tmp_path / "t.jsonl", [200_000] * 3)
    args = ["run", "--set", "workload.format=mooncake", "--set", f"workload.trace={path}"]
    table = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "out")])
    assert table.exit_code == 2, table.output
    assert re.search(r"no request completed: the deployment refused all 3 requests .*"
                     r"a prompt of 200000 tokens leaves no room", table.output), table.output
    assert not (tmp_path / "out").exists()
    as_json = CliRunner().invoke(cli, [*args, "--json"])
    assert as_json.exit_code == 2 and "NaN" not in as_json.output
    assert "the server's context" in as_json.output
    # the summary itself still counts them, with null latencies
    from inferasim.config.loader import load_scenario
    from inferasim.report.run_report import replay_summary
    from inferasim.serve.simulation import simulate

    sc = load_scenario(None, ["workload.format=mooncake", f"workload.trace={path}"])
    summary = replay_summary(simulate(sc))[1]
    assert summary["requests_completed"] == 0 and summary["requests_failed"] == 3
    assert summary["ttft_p50_s"] is None or summary["ttft_p50_s"] != summary["ttft_p50_s"]


def test_an_empty_prompt_is_refused_not_simulated(tmp_path):
    # An AgentX entry without its input length reads as a 0-token prompt: the servers reject
    # it, and so does the replay (it used to crash the engine).
    import numpy as np
    import simpy

    from inferasim.serve.live import LiveRequest
    from inferasim.serve.topology import Topology
    from inferasim.workload.request import RequestSpec

    class Front:
        def submit(self, req):
            raise AssertionError("an empty prompt reached the engine")

    env = simpy.Environment()
    req = LiveRequest(0, RequestSpec(0, 8, np.zeros(0, dtype=np.int64), 16), 0.0, env.event())
    Topology(Front(), [], 1000, LLAMA_8B_CONTEXT).submit(req)
    assert req.done.triggered and "empty prompt" in req.failed


def test_without_max_tokens_an_answer_ends_at_the_servers_context():
    """A chat client that sends no max_tokens: the server takes the rest of its context as the
    limit (vLLM's default max_tokens), so a prompt that fits is served and its answer cut
    there; one that fills the context is refused."""
    result = simulate(load_scenario(None, ["engine.max_model_len=6000",
                                           "workload.duration_s=300"]))
    served = [r for r in result.requests if not r.failed and math.isfinite(r.finish)]
    assert served and all(r.spec.prompt_tokens + r.spec.output_tokens <= 6000 for r in served)
    assert any(r.spec.prompt_tokens + r.spec.output_tokens == 6000 for r in served)  # cut
    refused = [r.failed for r in result.requests if r.failed]
    assert refused and all("leaves no room for its answer" in f for f in refused)


def _live(rid: int, blocks: int, first_key: int):
    import numpy as np
    import simpy

    from inferasim.serve.live import LiveRequest
    from inferasim.workload.request import RequestSpec

    spec = RequestSpec(prompt_tokens=blocks * 16, output_tokens=8, block_tokens=16,
                       keys=np.arange(first_key, first_key + blocks, dtype=np.int64))
    return LiveRequest(rid, spec, 0.0, simpy.Environment().event())


def test_a_head_blocked_by_preallocated_pages_is_named_a_stall_not_a_request_past_the_pool():
    # A disaggregated vLLM decode instance: two requests hold their transferred prompts'
    # pages while a preempted one (private pages 0) heads the queue and fits the pool only
    # once they have run. Nothing runs, so the replay refuses the head; its reason must say
    # the pool is held, not that the request is longer than the pool (a 30-block request
    # was "refused" from a 40-block pool with "the pool holds 640").
    import simpy

    from inferasim.cost.oracle import AnalyticOracle
    from inferasim.serve.engine import EngineInstance
    from inferasim.serve.kv_manager import KVManager

    sc = load_scenario(None, ["engine.name=vllm", "engine.page_size=16"])
    kv = KVManager(40 * 16, 16, 16, sc.engine.eviction_policy, True)
    eng = EngineInstance(simpy.Environment(), sc, AnalyticOracle(sc), kv, driven=True)
    held = [_live(2, 15, 200), _live(3, 15, 400)]
    for req in held:
        assert kv.preallocate(req, 0)
    head = _live(1, 30, 0)
    eng.waiting.extend([head, *held])
    eng.form_step(0.0)
    assert head.failed.startswith("stalled at the head of the queue")
    assert "480 held by 2 waiting request(s)' preallocated pages" in head.failed
    # longer than the whole pool: the plain refusal
    alone = KVManager(40 * 16, 16, 16, sc.engine.eviction_policy, True)
    assert alone.refusal(41 * 16, holders=2) == "needs 656 tokens of KV; the pool holds 640"
    assert alone.refusal(30 * 16) == "needs 480 tokens of KV; the pool holds 640"


def test_a_head_waits_while_pages_held_here_are_still_on_their_way():
    # A disaggregated decode instance preallocated a prompt whose prefill runs elsewhere:
    # its pages are held, it is not queued here yet. A head that fits the pool once that
    # request has run is not refused: it waits for it (SGLang's prealloc queue).
    import simpy

    from inferasim.cost.oracle import AnalyticOracle
    from inferasim.serve.engine import EngineInstance
    from inferasim.serve.kv_manager import KVManager

    sc = load_scenario(None, ["engine.name=sglang", "engine.page_size=16"])
    kv = KVManager(40 * 16, 16, 16, sc.engine.eviction_policy, True)
    eng = EngineInstance(simpy.Environment(), sc, AnalyticOracle(sc), kv, driven=True)
    on_its_way = _live(2, 20, 200)
    assert kv.preallocate(on_its_way, 0)
    eng._prealloc_held = 1  # as _serve_preallocs counts a preallocation it made
    head = _live(1, 30, 0)
    eng.waiting.append(head)
    assert eng.form_step(0.0) is None
    assert on_its_way.private == 320 and eng.pages_in_flight() == 1
    assert head.failed == "" and eng.waiting == [head]
