"""Each engine's own policy object: queue, eviction, counter and allocation as the engine
has them (docs/engines.md), and the mechanisms behind them."""

import attrs
import numpy as np
import pytest
import simpy

from inferasim.config.loader import load_scenario
from inferasim.cost.oracle import AnalyticOracle
from inferasim.serve.engine import EngineInstance
from inferasim.serve.engine_policy import EnginePolicy, PrefixCounter, version_tuple
from inferasim.serve.kv_manager import KVManager
from inferasim.serve.kv_pool import KVPool
from inferasim.serve.live import LiveRequest
from inferasim.serve.radix_cache import RadixCache
from inferasim.workload.request import RequestSpec

BT = 16


def keys(*ids):
    return np.array(ids, dtype=np.int64)


@pytest.mark.parametrize("engine, gpu, queue, eviction, per_step", [
    ("vllm", "h100", "fcfs", "block-pool", True),
    ("atom", "mi300x", "fcfs", "block-pool", False),   # ATOM runs on AMD parts only
    ("sglang", "h100", "fcfs", "radix-leaf", False),
])
def test_each_engine_defaults_to_its_own_queue_cache_and_allocation(engine, gpu, queue, eviction,
                                                                      per_step):
    spec = load_scenario(None, [f"engine.name={engine}", f"gpu.name={gpu}"]).engine
    policy = EnginePolicy.for_engine(spec, speculative=False)
    assert (policy.queue_policy, policy.eviction, policy.allocates_per_step) == \
        (queue, eviction, per_step)


def test_every_policy_field_is_overridable_from_the_scenario():
    spec = load_scenario(None, ["engine.queue_policy=lpm", "engine.eviction_policy=leaf-lru",
                                "engine.kv_allocation=admission",
                                "engine.prefix_counter=per-admission"]).engine
    policy = EnginePolicy.for_engine(spec, speculative=False)
    assert policy.queue_policy == "lpm" and policy.eviction == "leaf-lru"
    assert not policy.allocates_per_step and not policy.counter.per_lookup


@pytest.mark.parametrize("version, per_lookup, gate_whole", [
    ("0.18.0", True, False), ("0.22.0", True, True), ("0.24", True, True),
    ("0.25.0", False, True), ("0.33.0", False, True),
])
def test_vllm_counter_and_admission_gate_follow_the_version(version, per_lookup, gate_whole):
    spec = load_scenario(None, ["engine.name=vllm", f"engine.version={version}"]).engine
    policy = EnginePolicy.for_engine(spec, speculative=False)
    assert policy.counter.per_lookup is per_lookup
    assert policy.gates_whole_sequence is gate_whole


def test_version_tuple_reads_dotted_versions_only():
    assert version_tuple("v0.22.0") == (0, 22, 0)
    assert version_tuple("0.5.12.post1") == (0, 5, 12)
    assert version_tuple("ffdf3bb5") is None


# ---- eviction orders ------------------------------------------------------------------------

def _cached(policy, *chains):
    """A cache holding each chain of keys, computed and released in the order given."""
    pool = KVPool(100 * BT)
    cache = RadixCache(pool, BT, policy)
    for chain in chains:
        pool.alloc_private(len(chain) * BT)
        node = cache.insert(keys(*chain), 0.0).node
        cache.lock(node)
        cache.unlock(node)
    return cache


def test_block_pool_evicts_in_release_order_and_a_failed_lookup_refreshes_nothing():
    # A (released first), then B. A lookup of A that pins it for an admission that does not
    # happen leaves A first in the queue under the block pool, while leaf-LRU counts the
    # lookup as an access and evicts B instead.
    for policy, survivor in (("block-pool", 20), ("leaf-lru", 10)):
        cache = _cached(policy, (10, 11), (20, 21))
        m = cache.match_prefix(keys(10, 11), 5.0)
        cache.lock(m.node)
        cache.unlock(m.node, released=False)
        cache.evict(2 * BT)
        cache.check()
        assert cache.peek_prefix(keys(survivor, survivor + 1)) == 2, policy


def test_block_pool_takes_a_chains_tail_before_its_prefix():
    cache = _cached("block-pool", (1, 2, 3, 4))
    cache.evict(BT)
    assert cache.peek_prefix(keys(1, 2, 3, 4)) == 3


def test_radix_leaf_frees_the_whole_leaf_where_leaf_lru_trims_it():
    for policy, left in (("radix-leaf", 0), ("leaf-lru", 3)):
        cache = _cached(policy, (1, 2, 3, 4))
        assert cache.evict(BT) == (4 - left) * BT
        assert cache.peek_prefix(keys(1, 2, 3, 4)) == left, policy
        cache.check()


# ---- the engine's counter --------------------------------------------------------------------

def _request(rid, prompt_blocks, first_key=0, out=8):
    spec = RequestSpec(prompt_tokens=prompt_blocks * BT, output_tokens=out,
                       keys=np.arange(first_key, first_key + prompt_blocks, dtype=np.int64),
                       block_tokens=BT, session=rid)
    return LiveRequest(rid, spec, 0.0, simpy.Environment().event())


@pytest.mark.parametrize("per_lookup, counted", [(True, 3), (False, 1)])
def test_a_blocked_request_is_counted_at_every_lookup_only_where_the_engine_does(per_lookup,
                                                                                 counted):
    kv = KVManager(10 * BT, BT, BT, "block-pool", True,
                   counter=PrefixCounter(per_lookup=per_lookup))
    big = _request(1, 8, first_key=100)
    assert kv.try_admit(big, 0.0)
    blocked = _request(2, 6, first_key=200)
    assert not kv.try_admit(blocked, 1.0)
    assert not kv.try_admit(blocked, 2.0)
    kv.release(big)
    assert kv.try_admit(blocked, 3.0)
    assert blocked.lookup_tokens == counted * 6 * BT


def test_preempted_readmissions_stay_out_of_vllms_hit_rate():
    kv = KVManager(10 * BT, BT, BT, "block-pool", True, counter=PrefixCounter(per_lookup=True))
    req = _request(1, 4)
    req.preemptions = 1
    assert kv.try_admit(req, 0.0)
    assert req.lookup_tokens == 0


# ---- allocation per step (vLLM) ---------------------------------------------------------------

def test_per_step_allocation_takes_the_first_chunk_and_gates_on_the_whole_prompt():
    kv = KVManager(40 * BT, BT, BT, "block-pool", True)
    req = _request(1, 30)
    assert kv.try_admit(req, 0.0, first_chunk=8 * BT, gate_whole=True)
    assert req.private == 8 * BT
    too_big = _request(2, 41, first_key=500)
    assert not kv.try_admit(too_big, 0.0, first_chunk=8 * BT, gate_whole=True)
    assert kv.try_admit(too_big, 0.0, first_chunk=8 * BT, gate_whole=False)  # vLLM < 0.19


def _engine(pool_blocks, *sets):
    sc = load_scenario(None, ["engine.name=vllm", "engine.max_num_batched_tokens=128",
                              "engine.page_size=16", *sets])
    kv = KVManager(pool_blocks * BT, 16, BT, sc.engine.eviction_policy, True)
    return EngineInstance(simpy.Environment(), sc, AnalyticOracle(sc), kv, driven=True), kv


@pytest.mark.parametrize("allocation, survives", [("per-step", [20, 20, 16, 10]),
                                                  ("admission", [10, 10, 10, 10])])
def test_per_step_allocation_evicts_another_lanes_cache_only_as_chunks_need_it(allocation,
                                                                               survives):
    # 40 blocks: another lane's 20 cached blocks, and a cold 30-block prompt prefilled 8
    # blocks a step. vLLM takes each chunk's blocks as it is scheduled, so the cached lane
    # keeps its blocks until a chunk needs them; allocating at admission evicts 10 at once.
    eng, kv = _engine(40, f"engine.kv_allocation={allocation}")
    other = _request(9, 20, first_key=900)
    assert kv.try_admit(other, 0.0)
    kv.prompt_done(other, 0.0)
    kv.release(other)
    cold = _request(1, 30, first_key=100, out=4)
    eng.waiting.append(cold)
    seen = []
    for t in range(4):
        step = eng.form_step(float(t))
        seen.append(kv.cache.peek_prefix(other.spec.keys))
        eng.apply_step(step, 0.5)
        kv.pool.check()
    assert seen == survives


# ---- what the engine knows of the output ------------------------------------------------------

def _spec(prompt, out, max_tokens, first_key=0):
    return RequestSpec(prompt_tokens=prompt, output_tokens=out,
                       keys=np.arange(first_key, first_key + prompt // BT, dtype=np.int64),
                       block_tokens=BT, max_tokens=max_tokens)


@pytest.mark.parametrize("max_tokens, reserved", [(300, 300), (None, 4096)])
def test_the_output_reserve_reads_the_clients_max_tokens_never_the_true_length(max_tokens,
                                                                              reserved):
    # SGLang reserves min(max_new_tokens, 4096) per new request (engines.md 3.2); a client
    # that sends no max_tokens leaves it the rest of the context. The true output (50) is the
    # simulator's to know, not the scheduler's.
    sc = load_scenario(None, ["engine.name=sglang"])
    eng = EngineInstance(simpy.Environment(), sc, AnalyticOracle(sc),
                         KVManager(100_000, 1, BT, "radix-leaf", True), driven=True)
    req = LiveRequest(1, _spec(160, 50, max_tokens), 0.0, simpy.Environment().event())
    assert eng.admission_reserve(req) == reserved


def test_benchmark_clients_send_the_output_length_as_max_tokens():
    # vllm bench serve's random dataset with --ignore-eos: max_tokens = the output length
    from inferasim.workload.random_lengths import RandomRequests

    spec = RandomRequests(512, 64, 1.0, np.random.default_rng(0)).next_request()
    assert spec.max_tokens == spec.output_tokens == 64


# ---- TensorRT-LLM's capacity scheduler ----------------------------------------------------------

def _trt(policy, pool_blocks):
    sc = load_scenario(None, ["engine.name=trt", f"engine.capacity_policy={policy}",
                              "engine.page_size=16", "engine.max_num_batched_tokens=4096"])
    kv = KVManager(pool_blocks * BT, 16, BT, "block-pool", True)
    return EngineInstance(simpy.Environment(), sc, AnalyticOracle(sc), kv, driven=True), kv


def _run_steps(eng, steps):
    for t in range(steps):
        step = eng.form_step(float(t))
        if step is None:
            return
        eng.apply_step(step, 0.01, float(t) + 0.01)


def test_guaranteed_no_evict_admits_only_what_can_run_to_its_max_output():
    # 40 blocks: each request's prompt is 10 blocks and its max output 15 blocks (240
    # tokens): one fits to completion (25), two do not (50), though both prompts would (20).
    def requests():
        return [LiveRequest(i, _spec(160, 240, 240, first_key=100 * i), 0.0,
                            simpy.Environment().event()) for i in (1, 2)]

    eng, kv = _trt("guaranteed-no-evict", 40)
    eng.waiting.extend(requests())
    eng.form_step(0.0)
    assert [r.rid for r in eng.running] == [1]
    _run_steps(eng, 400)
    assert eng.stats.preemptions == 0  # a started request is never paused
    kv.pool.check()

    packed, kv2 = _trt("max-utilization", 40)
    packed.waiting.extend(requests())
    packed.form_step(0.0)
    assert [r.rid for r in packed.running] == [1, 2]
    _run_steps(packed, 400)
    assert packed.stats.preemptions > 0  # both grow past the pool: the newest is paused
    kv2.pool.check()


def test_without_max_tokens_trt_deduces_the_output_from_a_length_capped_at_its_pool():
    # 40 blocks (640 tokens), far below the model's context: TensorRT-LLM lowers max_seq_len
    # to the pool, so a request without max_tokens reserves the pool, runs alone, and is
    # never refused (it was, when the context stood for max_seq_len: it could never fit)
    eng, kv = _trt("guaranteed-no-evict", 40)
    reqs = [LiveRequest(i, _spec(150, 20, None, first_key=100 * i), 0.0,
                        simpy.Environment().event()) for i in (1, 2)]
    assert eng.max_new(reqs[0]) == 640 - 150 - 1
    eng.waiting.extend(reqs)
    eng.form_step(0.0)
    assert [r.rid for r in eng.running] == [1]
    _run_steps(eng, 200)
    assert all(not r.failed and r.generated >= 20 for r in reqs)
    kv.pool.check()


def test_sglang_caps_a_requests_length_at_its_pool_and_vllm_at_the_context():
    # SGLang's max_req_len is min(context, pool) - 1; vLLM serves the model's context or
    # refuses to start (layout.context_problem)
    spec = _spec(160, 50, None)
    for engine, longest in (("sglang", 2_000), ("vllm", 131_072)):
        sc = load_scenario(None, [f"engine.name={engine}"])
        eng = EngineInstance(simpy.Environment(), sc, AnalyticOracle(sc),
                             KVManager(2_000, 1, BT, "radix-leaf", True), driven=True)
        req = LiveRequest(1, spec, 0.0, simpy.Environment().event())
        assert eng.max_new(req) == longest - 160 - 1, engine


def test_synthetic_clients_send_the_max_tokens_the_scenario_gives_and_answers_end_there():
    from inferasim.config.scenario import SyntheticSpec
    from inferasim.workload.synthetic import SyntheticSessions

    def turns(cap):  # each seed's first request
        return [SyntheticSessions(SyntheticSpec(max_tokens=cap), 131_072,
                                  np.random.default_rng(seed)).next_session().turns[0].request
                for seed in range(300)]

    free, capped = turns(None), turns(300)
    assert {r.max_tokens for r in free} == {None}
    assert {r.max_tokens for r in capped} == {300}
    assert max(r.output_tokens for r in free) > 300 >= max(r.output_tokens for r in capped)
    # the same draws: only the answers past the cap end sooner
    assert [min(r.output_tokens, 300) for r in free] == [r.output_tokens for r in capped]


def test_a_server_started_with_a_max_model_len_serves_and_deduces_from_it(tmp_path):
    from click.testing import CliRunner

    from inferasim.arch.layout import context_problem
    from inferasim.cli.main import cli
    from inferasim.config.errors import ConfigError

    spec = _spec(160, 50, None)
    sc = load_scenario(None, ["engine.name=sglang", "engine.max_model_len=1000"])
    assert sc.context_limit == 1000
    eng = EngineInstance(simpy.Environment(), sc, AnalyticOracle(sc),
                         KVManager(100_000, 1, BT, "radix-leaf", True), driven=True)
    assert eng.max_new(LiveRequest(1, spec, 0.0, simpy.Environment().event())) == 1000 - 161
    # vLLM starts where its pool holds one request of its max_model_len, not the model's
    sets = ["model.name=llama-3.3-70b", "gpu.name=mi300x", "engine.name=vllm"]
    assert "refuse to start" in context_problem(load_scenario(None, sets))
    assert context_problem(load_scenario(None, [*sets, "engine.max_model_len=65536"])) is None
    with pytest.raises(ConfigError, match="at most llama-3.3-70b's context of 131,072"):
        load_scenario(None, [*sets, "engine.max_model_len=200000"])
    # the clients' requests past it are refused and counted, not reshaped
    res = CliRunner().invoke(cli, ["run", "--json", *[a for s in sets for a in ("--set", s)],
                                   "--set", "workload.duration_s=60",
                                   "--set", "engine.max_model_len=8192"])
    assert res.exit_code == 0, res.output
    import json

    out = json.loads(res.stdout)
    assert out["requests_failed"] > 0
    assert "the server's context of 8192" in out["requests_failed_example"]


def test_trt_says_when_its_reservation_runs_fewer_requests_than_the_clients():
    from inferasim.arch.layout import reservation_problem

    sets = ["model.name=llama-3.3-70b", "gpu.name=h100", "engine.name=trt"]
    tight = load_scenario(None, [*sets, "parallel.tp=4", "workload.concurrency=32"])
    said = reservation_problem(tight)
    assert said and "of the 32 clients' requests run at once" in said
    assert reservation_problem(attrs.evolve(tight, engine=attrs.evolve(
        tight.engine, capacity_policy="max-utilization"))) is None
    benchmark = load_scenario(None, [*sets, "parallel.tp=4", "workload.format=random"])
    assert reservation_problem(benchmark) is None  # its clients send max_tokens
    sent = load_scenario(None, [*sets, "parallel.tp=4", "workload.synthetic.max_tokens=2048"])
    assert reservation_problem(sent) is None


def test_trt_defaults_to_its_own_scheduler_block_size_and_memory_rule():
    spec = load_scenario(None, ["engine.name=trt"]).engine
    policy = EnginePolicy.for_engine(spec, speculative=False)
    assert spec.capacity_policy == "guaranteed-no-evict" and policy.reserve_output
    assert (spec.page_size, spec.max_num_seqs, spec.max_num_batched_tokens) == (32, 2048, 8192)
    assert (spec.memory_rule, spec.mem_fraction, spec.scheduler) == \
        ("trt-free-fraction", 0.9, "unified")


def test_trt_sizes_its_kv_cache_as_a_fraction_of_the_memory_left_free():
    from inferasim.arch.engine_memory import comm_bytes, memory_breakdown, profile_peak
    from inferasim.arch.memory import weight_bytes_per_gpu

    sc = load_scenario(None, ["engine.name=trt", "model.name=llama-3.1-70b", "gpu.name=h200",
                              "parallel.tp=4"])
    weights = weight_bytes_per_gpu(sc)
    mem = memory_breakdown(sc, weights)
    free = sc.gpu.hbm_bytes - weights - profile_peak(sc).peak_bytes - comm_bytes(4)
    assert mem.kv_bytes == pytest.approx(0.9 * free)


@pytest.mark.parametrize("version, queue", [("0.4.2", "lpm"), ("0.4.3.post4", "fcfs"),
                                            ("0.5.10", "fcfs")])
def test_sglang_queues_as_its_version_did(version, queue):
    spec = load_scenario(None, ["engine.name=sglang", f"engine.version={version}"]).engine
    assert EnginePolicy.for_engine(spec, speculative=False).queue_policy == queue
    forced = load_scenario(None, ["engine.name=sglang", f"engine.version={version}",
                                  "engine.queue_policy=fcfs"]).engine
    assert EnginePolicy.for_engine(forced, speculative=False).queue_policy == "fcfs"
