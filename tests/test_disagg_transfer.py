"""Disaggregated KV transfer as the engines run it (engines.md 6): transfers share their
prefill instance's link, SGLang streams chunk by chunk, vLLM's decode side pulls only the
blocks it lacks, and the prefill instance holds the prompt's blocks until the read ends."""

from __future__ import annotations

import math

import numpy as np
import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from inferasim.config.knobs import Knobs
from inferasim.config.loader import load_scenario, pool_scenario
from inferasim.cost.oracle import AnalyticOracle
from inferasim.serve.kv_link import KVLink
from inferasim.serve.live import LiveRequest
from inferasim.serve.topology import build_topology
from inferasim.workload.keys import unique_keys
from inferasim.workload.request import RequestSpec

BT = 16
GB = 1e9


def _send_at(env: simpy.Environment, link: KVLink, at: float, nbytes: float, log: dict,
             name):
    """Start a transfer at ``at`` and note when it is done."""
    def go():
        yield env.timeout(at - env.now)
        yield link.transfer(nbytes)
        log[name] = env.now
    env.process(go())


# (a) processor sharing ------------------------------------------------------------------

def _sends(*sends):
    """Run ``(at, bytes, name)`` transfers on one 1 GB/s, 1 ms link; (link, done times)."""
    env = simpy.Environment()
    link = KVLink(env, 1 * GB, 1e-3)
    log: dict = {}
    for at, nbytes, name in sends:
        _send_at(env, link, at, nbytes, log, name)
    env.run()
    return link, log


def test_two_transfers_started_together_each_take_twice_as_long_and_finish_together():
    link, log = _sends((0.0, 1e8, "a"), (0.0, 1e8, "b"))
    alone = link.seconds_alone(1e8)
    assert alone == pytest.approx(0.101)
    assert log["a"] == log["b"]  # drained at the same event
    assert log["a"] - 1e-3 == pytest.approx(2 * (alone - 1e-3), rel=1e-12)
    assert link.bytes_sent == 2e8 and link.in_flight == 0


def test_a_transfer_joining_halfway_shares_the_rest_piecewise():
    # A (1e8 B at 1 GB/s) alone for 0.05 s sends half; then A and C share 0.5 GB/s each:
    # A's last 5e7 B take 0.1 s (drained at 0.15), C has sent 5e7 B by then and its last
    # 5e7 B go alone in 0.05 s (drained at 0.2); each is done 1 ms after its last byte.
    link, log = _sends((0.0, 1e8, "a"), (0.05, 1e8, "c"))
    assert log["a"] == pytest.approx(0.151, rel=1e-12)
    assert log["c"] == pytest.approx(0.201, rel=1e-12)
    assert link.busy_s == pytest.approx(0.2, rel=1e-12)


# (e) the link never delivers more than its bandwidth ---------------------------------------

@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0.0, 2.0), st.floats(1e3, 5e8)), min_size=1, max_size=12),
       st.floats(0.0, 2e-3))
def test_the_link_never_beats_its_bandwidth_and_never_idles_with_work(transfers, latency):
    env = simpy.Environment()
    bw = 1 * GB
    link = KVLink(env, bw, latency)
    log: dict = {}
    for i, (at, nbytes) in enumerate(transfers):
        _send_at(env, link, at, nbytes, log, i)
    env.run()
    start = np.array([t[0] for t in transfers])
    size = np.array([t[1] for t in transfers])
    drained = np.array([log[i] for i in range(len(transfers))]) - latency
    assert (drained >= start + size / bw - 1e-9).all()  # none faster than alone
    # whatever starts at or after a and drains by b crossed within [a, b]
    for a in start:
        for b in drained[drained >= a]:
            inside = (start >= a) & (drained <= b)
            assert size[inside].sum() <= bw * (b - a) * (1 + 1e-9) + 1e-3
    # work-conserving: busy exactly as long as the bytes take at full rate
    assert link.bytes_sent == pytest.approx(size.sum(), rel=1e-12)
    assert link.busy_s == pytest.approx(size.sum() / bw, rel=1e-9)


# deployments --------------------------------------------------------------------------------

def _deployment(*overrides):
    sc = load_scenario(None, ["topology.kind=disaggregated", *overrides])
    env = simpy.Environment()
    topo = build_topology(env, sc, Knobs(), BT, lambda s, r: AnalyticOracle(s))
    return sc, env, topo


def _request(env, rid: int, prompt: int, output: int = 50, keys=None) -> LiveRequest:
    keys = unique_keys(rid + 1, prompt // BT) if keys is None else keys
    spec = RequestSpec(prompt_tokens=prompt, output_tokens=output, keys=keys, block_tokens=BT)
    return LiveRequest(rid, spec, env.now, env.event())


def _served(env, topo, req: LiveRequest) -> LiveRequest:
    topo.submit(req)
    env.run()
    assert not req.failed and math.isfinite(req.finish)
    return req


# (b) SGLang streams chunk by chunk --------------------------------------------------------

def test_streamed_transfer_exposes_only_the_last_chunk():
    chunk, last = 4096, 1000
    common = ["engine.name=sglang", f"engine.chunked_prefill_size={chunk}",
              "topology.link_bandwidth_gbs=20"]
    sc, env, topo = _deployment(*common)
    assert pool_scenario(sc, "prefill").engine.disagg_transfer == "streamed"
    front = topo.frontend
    prompt = 3 * chunk + last
    req = _served(env, topo, _request(env, 0, prompt))
    # the first three chunks' KV crossed while the next chunk computed
    assert req.transfer_done - req.prefill_done == pytest.approx(front.transfer_seconds(last),
                                                                 rel=1e-9)
    assert front.links[0].bytes_sent == pytest.approx(prompt * front.kv_bytes_per_token)
    # sent whole after the prefill, the same prompt exposes all of it
    _, env2, topo2 = _deployment(*common, "engine.disagg_transfer=whole")
    whole = _served(env2, topo2, _request(env2, 0, prompt))
    assert whole.transfer_done - whole.prefill_done == pytest.approx(
        topo2.frontend.transfer_seconds(prompt), rel=1e-9)


# (c) vLLM's decode side pulls only what it lacks -------------------------------------------

def test_vllm_pull_reads_only_the_full_blocks_the_decode_cache_lacks():
    sc, env, topo = _deployment("engine.name=vllm")
    assert pool_scenario(sc, "prefill").engine.disagg_transfer == "whole"
    front = topo.frontend
    decode = topo.engines[-1]
    prompt, cached_blocks = 100 * BT + 7, 40
    keys = unique_keys(9, prompt // BT)
    decode.kv.pool.alloc_private(cached_blocks * BT)  # the decode side holds a prefix
    decode.kv.cache.insert(keys[:cached_blocks], 0.0)
    req = _served(env, topo, _request(env, 0, prompt, keys=keys))
    # floor(prompt / block) x block - local hits; the last 7 tokens are D's own
    remote = 100 * BT - cached_blocks * BT
    assert front.links[0].bytes_sent == pytest.approx(remote * front.kv_bytes_per_token)
    assert req.transfer_done - req.prefill_done == pytest.approx(front.transfer_seconds(remote),
                                                                 rel=1e-9)


def test_a_cold_decode_side_pulls_every_full_block():
    _, env, topo = _deployment("engine.name=vllm")
    prompt = 100 * BT + 7
    _served(env, topo, _request(env, 0, prompt))
    front = topo.frontend
    assert front.links[0].bytes_sent == pytest.approx(100 * BT * front.kv_bytes_per_token)


# (d) the prefill side frees after the read ---------------------------------------------------

@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_prefill_blocks_stay_pinned_until_the_transfer_ends(engine):
    # a slow link: the transfer outlasts the prefill many times over
    _, env, topo = _deployment(f"engine.name={engine}", "topology.link_bandwidth_gbs=0.05")
    prefill = topo.engines[0]
    req = _request(env, 0, 3000)
    topo.submit(req)
    while not math.isfinite(req.prefill_done):
        env.step()
    env.run(until=req.prefill_done + 0.5 * topo.frontend.transfer_seconds(3000))
    assert math.isnan(req.transfer_done)
    kv = prefill.kv
    assert kv.held == 1 and not prefill.running
    assert kv.cache.cached_tokens >= 3000 // BT * BT  # cached, but pinned:
    assert kv.cache.evictable_tokens == 0
    env.run()
    assert math.isfinite(req.transfer_done) and kv.held == 0
    assert kv.cache.evictable_tokens == kv.cache.cached_tokens > 0
    kv.pool.check()
    assert kv.pool.private == 0


def test_a_prefill_pool_full_of_held_kv_waits_rather_than_refuses():
    # Two prompts that each fill most of a tiny prefill pool, on a slow link: the second
    # waits for the first's KV to be read, then prefills; nothing is refused.
    _, env, topo = _deployment("engine.name=vllm", "topology.link_bandwidth_gbs=0.5",
                               "topology.prefill.engine={kv_pool_tokens: 5000}")
    a, b = _request(env, 0, 4000), _request(env, 1, 4000)
    topo.submit(a)
    topo.submit(b)
    env.run()
    assert not a.failed and not b.failed
    assert b.prefill_admitted >= a.transfer_done


def test_a_wait_for_a_decode_slot_is_decode_admission_not_kv_transfer():
    """Three decode workers of one slot each and four clients (an InferenceMAX Dynamo TRT-LLM
    row): the fourth request waits for a slot before its KV can cross. That wait is the
    decode side's admission; the transfer is the link's time alone."""
    from inferasim.config.catalog import REPO_ROOT
    from inferasim.report.run_report import replay_summary
    from inferasim.serve.simulation import simulate

    path = REPO_ROOT / "scenarios" / "inferencemax" / "dsr1-b200-dynamo-trt-fp8-disagg.yaml"
    sc = load_scenario(path, ["workload.duration_s=120", "sim.anchors=none"])
    frame, summary = replay_summary(simulate(sc))
    done = frame[frame.status == "ok"]
    assert summary["ttft_decode_wait_mean_s"] > 0.3          # a client in four waits a decode
    assert summary["kv_transfer_mean_s"] < 0.01              # ~40 MB over NVLink
    parts = done.queue_s + done.prefill_s + done.transfer_s + done.decode_wait_s
    assert np.allclose(parts, done.first_token_s - done.arrival_s)
