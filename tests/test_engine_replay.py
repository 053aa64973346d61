"""Replay behaviour of one engine instance (behaviour.md section 4), one test per failure it prevents."""

from __future__ import annotations

import numpy as np
import pytest
import simpy

from inferasim.config.loader import load_scenario
from inferasim.cost.oracle import AnalyticOracle
from inferasim.report.run_report import replay_summary
from inferasim.serve.clients import RequestLog
from inferasim.serve.engine import EngineInstance
from inferasim.serve.kv_manager import KVManager
from inferasim.serve.simulation import simulate
from inferasim.workload.keys import session_base, stream_keys
from inferasim.workload.request import RequestSpec

SHARED = -np.arange(1, 101, dtype=np.int64)  # a 1,600-token shared prefix in 16-token blocks


def scenario(*overrides):
    return load_scenario(None, ["workload.duration_s=60", "workload.concurrency=4",
                                "sim.exact_steps=true", *overrides])


def rig(*overrides, pool=None):
    sc = scenario(*overrides)
    env = simpy.Environment()
    kv = KVManager(pool or 200_000, sc.engine.page_size, 16, sc.engine.eviction_policy,
                   sc.engine.prefix_caching)
    eng = EngineInstance(env, sc, AnalyticOracle(sc), kv)
    return env, eng, kv, RequestLog(env)


def spec(sid: int, prompt: int, out: int = 8, shared=SHARED) -> RequestSpec:
    keys = stream_keys(shared, session_base(sid), prompt // 16)
    return RequestSpec(prompt, out, keys, 16, None, sid, 0)


def test_shared_prefix_reserved_once():
    env, eng, kv, log = rig()
    first = log.new(spec(0, 2000))
    eng.submit(first)
    env.run(until=5)  # first is done: its prompt is cached
    assert first.finish < 5
    others = [log.new(spec(i, 2000)) for i in range(1, 5)]
    for r in others:
        eng.submit(r)
    env.step()  # let the engine wake
    while not any(r.admitted == r.admitted for r in others):
        env.step()
    for r in others:
        if r.admitted == r.admitted:
            # the cached 1,600-token prefix is not charged again: only the tail is private
            assert r.cached_first == 1600
            assert r.private <= kv.pages(2000 - 1600)
    env.run()
    kv.pool.check()


def test_one_allocation_pool_and_cache_share_capacity():
    env, eng, kv, log = rig(pool=20_000)
    for i in range(12):
        eng.submit(log.new(spec(i, 3000, out=50)))
    for _ in range(400):
        if not env._queue:
            break
        env.step()
        pool = kv.pool
        assert pool.free + pool.tree + pool.private == pool.capacity
        assert pool.free >= 0 and pool.private >= 0
        assert kv.cache.cached_tokens == pool.tree
    env.run()
    assert all(np.isfinite(r.finish) for r in log.requests)


def _most_running(window: int) -> int:
    """Requests of 3,000 tokens on a 20,000-token pool, each holding ``window`` tokens of it
    for bounded windows while admitted: the most that ran at once. Checks the ledger after
    every event: the pool's private tokens are the running requests' contexts and windows."""
    sc = scenario()
    env = simpy.Environment()
    kv = KVManager(20_000, sc.engine.page_size, 16, sc.engine.eviction_policy,
                   sc.engine.prefix_caching, window_tokens=window)
    eng = EngineInstance(env, sc, AnalyticOracle(sc), kv)
    log = RequestLog(env)
    for i in range(8):
        eng.submit(log.new(spec(i, 3000, out=50, shared=SHARED[:0])))
    most = 0
    while env._queue:
        env.step()
        eng.decoding.sync()
        assert all(r.window == window for r in eng.running)
        assert kv.pool.private == sum(r.private + r.window for r in eng.running)
        kv.pool.check()
        most = max(most, len(eng.running))
    assert kv.pool.private == 0 and all(np.isfinite(r.finish) for r in log.requests)
    return most


def test_bounded_windows_are_held_beside_the_context_from_one_pool():
    # six 3,008-token tails fit 20,000 tokens; with 512 more each (21,120) only five do
    assert _most_running(0) == 6
    assert _most_running(512) == 5


def test_admission_by_prefix_not_by_age():
    for policy, expect_first in (("lpm", 2), ("fcfs", 1)):
        env, eng, kv, log = rig(f"engine.queue_policy={policy}", "engine.max_num_seqs=1")
        warm = log.new(spec(0, 3000, out=200))
        eng.submit(warm)
        env.run(until=0.5)  # warm is decoding; its prompt is cached
        cold = log.new(spec(1, 3000, out=4, shared=np.zeros(0, np.int64)))
        hot = log.new(spec(0, 3000, out=4))  # same stream as warm: full prefix hit
        eng.submit(cold)
        eng.submit(hot)
        env.run()
        order = sorted([cold, hot], key=lambda r: r.admitted)
        assert order[0] is (hot if expect_first == 2 else cold), policy


def test_report_window_honoured():
    sc = load_scenario(None, ["workload.duration_s=40", "workload.warmup_s=20",
                              "workload.concurrency=4"])
    result = simulate(sc)
    frame, summary = replay_summary(result)
    inwin = frame[(frame.arrival_s >= 20) & (frame.arrival_s < 60)]
    assert summary["requests_sent"] == len(inwin)
    assert summary["requests_sent"] < len(frame)  # warm-up requests exist and are excluded
    assert frame.arrival_s.max() < 60


def test_prefill_exclusive_vs_unified():
    vllm = simulate(scenario("engine.name=vllm", "workload.concurrency=8"))
    sglang = simulate(scenario("engine.name=sglang", "workload.concurrency=8"))
    assert vllm.engines[0].stats.mixed_steps > 0
    assert sglang.engines[0].stats.mixed_steps == 0
    assert sglang.engines[0].stats.prefill_steps > 0


def test_an_exclusive_step_under_a_per_step_allocator_takes_each_chunks_pages():
    # vLLM's policy allocates each chunk's pages as it is scheduled; an exclusive step (the
    # scheduler key overridden) used to carry a prompt on to its next chunk without them,
    # and its prompt's end then cached blocks it never held.
    sc = scenario("engine.name=vllm", "engine.scheduler=prefill-exclusive",
                  "engine.max_num_batched_tokens=512", "workload.concurrency=4",
                  "workload.synthetic.first_prompt_tokens_median=3000")
    assert sc.engine.scheduler == "prefill-exclusive"
    result = simulate(sc)
    eng = result.engines[0]
    assert eng.stats.mixed_steps == 0 and eng.stats.prefill_steps > 0
    _, summary = replay_summary(result)
    assert summary["requests_completed"] > 0
    eng.kv.pool.check()


def test_think_time_keeps_fewer_than_n_in_flight():
    sc = load_scenario(None, ["workload.duration_s=300", "workload.concurrency=16"])
    result = simulate(sc)
    frame, _ = replay_summary(result)
    busy = (frame.finish_s - frame.arrival_s).sum()
    mean_in_flight = busy / (frame.finish_s.max() - frame.arrival_s.min())
    assert mean_in_flight < 0.8 * 16


def test_small_pool_preempts_and_counts():
    sc = scenario("engine.kv_pool_tokens=12000", "workload.concurrency=8",
                  "workload.synthetic.first_prompt_tokens_median=2500",
                  "workload.synthetic.output_tokens_median=2000")
    result = simulate(sc)
    _, summary = replay_summary(result)
    assert summary["kv_pool_tokens"] == 12000
    assert summary["preemptions"] > 0
    assert summary["requests_completed"] > 0


def test_max_num_seqs_caps_the_batch():
    sc = scenario("engine.max_num_seqs=2", "workload.concurrency=8")
    env = simpy.Environment()
    oracle = AnalyticOracle(sc)
    seen = []
    real = oracle.step_seconds

    def spy(batch):
        seen.append(batch.n_decode + batch.prefill_tokens.size)
        return real(batch)

    oracle.step_seconds = spy
    simulate(sc, oracle=oracle)
    assert max(seen) <= 2
    del env


def _exact_and_macro(common):
    exact = simulate(load_scenario(None, [*common, "sim.exact_steps=true"]))
    macro = simulate(load_scenario(None, common))
    fa, _ = replay_summary(exact)
    fb, _ = replay_summary(macro)
    assert len(fa) == len(fb)
    for col in ("arrival_s", "admitted_s", "first_token_s", "finish_s"):
        np.testing.assert_allclose(fb[col], fa[col], rtol=1e-9)
    np.testing.assert_array_equal(fb.cached_tokens, fa.cached_tokens)
    np.testing.assert_array_equal(fb.preemptions, fa.preemptions)
    for a, b in zip(exact.engines, macro.engines, strict=True):
        for field in ("steps", "prefill_steps", "decode_steps", "mixed_steps", "preemptions"):
            assert getattr(b.stats, field) == getattr(a.stats, field), field
    return exact, macro


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_macro_steps_equal_exact_steps(engine):
    _, macro = _exact_and_macro(["workload.duration_s=120", "workload.concurrency=12",
                                 f"engine.name={engine}", "engine.kv_pool_tokens=60000"])
    assert macro.engines[0].stats.macro_steps > 0
    # a step that completes the last prompt in flight carries the decode steps after it
    assert macro.engines[0].stats.settled_macro_steps > 0
    assert macro.engines[0].stats.continued_macro_steps > 0


def test_open_loop_arrivals_interrupting_settled_macro_steps_equal_exact_steps():
    """The peers' shape (fixed lengths, Poisson arrivals, one instance): nearly every
    macro-step rides on the prompt step before it, and arrivals cut them at any point."""
    _, macro = _exact_and_macro(["workload.format=random", "workload.isl=2048",
                                 "workload.osl=256", "workload.rate=1.5",
                                 "workload.duration_s=200"])
    stats = macro.engines[0].stats
    assert stats.settled_macro_steps > 100 and stats.steps > 20 * stats.macro_steps
    # after a finish the remaining batch decodes on without a scheduling pass
    assert stats.continued_macro_steps > 50


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_chunked_prefill_macro_steps_equal_exact_steps(engine):
    """Prompts of many chunks under a small token budget: the full-chunk steps run as
    macro-steps (decodes riding along under vLLM, finishing and growing into evictable cache
    in a tight pool; arrivals land meanwhile) and every request ends as step by step."""
    budget = "engine.max_num_batched_tokens=512" if engine == "vllm" \
        else "engine.chunked_prefill_size=512"
    _, macro = _exact_and_macro(["workload.duration_s=120", "workload.concurrency=12",
                                 f"engine.name={engine}", budget,
                                 "engine.kv_pool_tokens=36000",
                                 "workload.synthetic.output_tokens_median=150"])
    stats = macro.engines[0].stats
    assert stats.chunk_macro_steps > 0
    assert stats.preemptions > 0 or engine == "sglang"


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_pool_drains_to_the_cache_after_replay(engine):
    """Private pages held in the decode arrays are all given back: when the replay has drained,
    nothing is private and the pool is free + cached, even after preemptions."""
    # outputs long enough that SGLang, reserving 4096 per request whose client sends no
    # max_tokens, still retracts
    sc = scenario(f"engine.name={engine}", "engine.kv_pool_tokens=20000", "workload.concurrency=8",
                  "workload.synthetic.first_prompt_tokens_median=2500",
                  "workload.synthetic.output_tokens_median=2500", "sim.exact_steps=false")
    result = simulate(sc)
    kv = result.engines[0].kv
    assert result.engines[0].stats.preemptions > 0
    kv.pool.check()
    assert kv.pool.private == 0
    assert kv.pool.free + kv.pool.tree == kv.pool.capacity
    kv.cache.check()


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_router_reads_each_instance_mid_macro_step_as_step_by_step(engine, monkeypatch):
    """Behind the prefix-affinity router an arrival reads every instance's cache: an instance
    mid-macro-step must show it as the step-exact mode would (the growth evictions of the
    steps taken so far applied), or routing, and then requests, differ between the modes."""
    from inferasim.serve.engine import EngineInstance

    seen: list[tuple] = []
    plain_peek = EngineInstance.peek

    def recording_peek(self, req):
        blocks = plain_peek(self, req)
        seen.append((req.rid, self.index, self.kv.pool.free, self.kv.cache.stats.evictions,
                     blocks))
        return blocks

    monkeypatch.setattr(EngineInstance, "peek", recording_peek)
    common = ["workload.duration_s=150", "workload.concurrency=24", f"engine.name={engine}",
              "engine.kv_pool_tokens=12000", "topology.instances=3",
              "topology.router=prefix-affinity"]
    _, macro = _exact_and_macro(common)
    exact_seen, macro_seen = seen[: len(seen) // 2], seen[len(seen) // 2:]
    assert exact_seen == macro_seen
    # behind the router too a finish lets the rest of the batch decode on without a pass
    assert sum(e.stats.continued_macro_steps for e in macro.engines) > 0
    assert any(ev > 0 for *_, ev, _ in exact_seen)  # the pool was tight: growth evicted


@pytest.mark.parametrize("every", [3, 30])
def test_scheduler_recv_interval_macro_steps_equal_exact_steps(every):
    """SGLang's receive interval: requests sent while the batch decodes are read only at the
    next read (every ``every`` decode steps, or after a prefill step); macro-steps are cut
    there and end as the step-exact mode does: closed and open loops, and instances behind
    the prefix-affinity router (which reads each one's cache mid-macro-step)."""
    loads = [["workload.concurrency=12", "workload.duration_s=120"],
             ["workload.format=random", "workload.isl=2048", "workload.osl=256",
              "workload.rate=1.5", "workload.duration_s=200"]]
    if every == 30:
        loads.append(["workload.concurrency=24", "workload.duration_s=100",
                      "engine.kv_pool_tokens=12000", "topology.instances=3",
                      "topology.router=prefix-affinity"])
    for load in loads:
        _, macro = _exact_and_macro([*load, "engine.name=sglang",
                                     f"engine.scheduler_recv_interval={every}"])
        assert macro.engines[0].stats.macro_steps > 0


def _late_admission(every: int) -> tuple[float, float, int]:
    """One request decoding alone, a second sent between reads: (its wait for admission,
    the decode step, the decode steps left to the next read when it was sent)."""
    env, eng, _, log = rig("engine.name=sglang", f"engine.scheduler_recv_interval={every}")
    first = log.new(spec(0, 2000, out=400))
    eng.submit(first)           # idle: read at once
    env.run(until=1.0)
    assert first.first_token < 1.0 and len(eng.decoding) == 1
    step = eng.oracle.step_seconds(eng.batch(eng.form_step(env.now)))
    env.run(until=env.now + 3.5 * step)   # mid-step, a few steps past the last read
    late = log.new(spec(1, 1000, out=4))
    sent = env.now
    to_read = every - eng._recv_count
    eng.submit(late)
    if every > 1:
        assert late in eng.inbox and late not in eng.waiting
    env.run(until=sent + 60 * step)
    return late.admitted - sent, step, to_read


def test_scheduler_recv_interval_holds_a_request_sent_mid_decode_until_the_next_read():
    wait_every_step, step, _ = _late_admission(1)
    assert wait_every_step <= 1.01 * step          # read after the step in flight
    for every in (10, 30):
        wait, step, to_read = _late_admission(every)
        # read once the steps left to the interval have run, the one in flight included
        assert (to_read - 1) * step < wait <= 1.01 * to_read * step
        assert wait > 1.01 * step or to_read == 1


def test_scheduler_recv_interval_is_refused_outside_sglang_and_with_attention_dp():
    from inferasim.config.errors import ConfigError
    with pytest.raises(ConfigError, match="engine.scheduler_recv_interval"):
        load_scenario(None, ["engine.name=vllm", "engine.scheduler_recv_interval=10"])


def test_lpm_falls_back_to_arrival_order_past_its_waiting_limit():
    # SGLang's LPM sorts by cached prefix only while at most lpm_max_waiting requests wait.
    from inferasim.serve.policies import lpm_order

    class Peeks:  # the KVManager's one call lpm_order makes: the cached prefix of a request
        def __init__(self, hits):
            self.hits = hits

        def peek(self, req):
            return self.hits[req]

    waiting = ["a", "b", "c", "d"]
    kv = Peeks({"a": 0, "b": 64, "c": 16, "d": 64})
    assert lpm_order(waiting, kv, lpm_max=4) == ["b", "d", "c", "a"]  # ties keep arrival order
    assert lpm_order(waiting, kv, lpm_max=3) == waiting


def test_sglang_reserves_a_pass_admissions_at_full_output():
    # engines.md 3.2: PrefillAdder keeps the requests it added in this pass at their full
    # clipped output plus a page; only the running ones are discounted by new_token_ratio.
    # 20,000 tokens, prompts of 1,000 and outputs of 4,000: the first pass admits three
    # (3 x 1,000 + 3 x 4,001 = 15,003 held; a fourth needs 5,000 of the 4,997 left), where
    # discounting them at 0.7 would have let a fourth in.
    sc = load_scenario(None, ["engine.name=sglang", "engine.kv_pool_tokens=20000",
                              "workload.format=random", "workload.isl=1000",
                              "workload.osl=4000", "workload.random_range_ratio=1",
                              "workload.concurrency=8", "workload.max_requests=8",
                              "workload.duration_s=30"])
    result = simulate(sc)
    assert sum(r.admitted == 0.0 for r in result.requests) == 3


@pytest.mark.parametrize("spec, victim", [("none", "few"), ("mtp", "newest")])
def test_sglang_retracts_the_fewest_output_or_under_speculation_the_newest(spec, victim):
    # engines.md 3.2: retraction sorts by generated tokens (fewest goes), except under
    # speculative decoding, where it pops the back of the batch unsorted.
    from types import SimpleNamespace

    sc = load_scenario(None, ["engine.name=sglang", f"speculative.method={spec}",
                              "speculative.draft_tokens=1",
                              "speculative.acceptance=0.7"])
    eng = EngineInstance(simpy.Environment(), sc, AnalyticOracle(sc),
                         KVManager(10_000, 1, 16, "leaf-lru", True))

    def running(name, generated, seq):
        return SimpleNamespace(name=name, generated=generated, admitted_seq=seq,
                               spec=SimpleNamespace(prompt_tokens=100))

    batch = [running("few", 3, 0), running("mid", 50, 1), running("newest", 90, 2)]
    assert eng.policy.victim(batch).name == victim


def test_a_preempted_vllm_request_matches_its_computed_blocks_on_readmission():
    # engines.md 4.1: vLLM caches blocks as they fill, decode tokens too, so a preempted
    # request's recompute hits what it had computed; its output blocks take its own keys
    # when no later turn shares them (finish_keys None).
    env = simpy.Environment()
    kv = KVManager(100_000, 16, 16, "leaf-lru", True)
    log = RequestLog(env)
    req = log.new(spec(7, 2000, out=500))
    assert kv.try_admit(req, 0.0)
    req.computed = req.target
    kv.prompt_done(req, 1.0)
    assert kv.grow(req, 2000 + 300)              # 300 tokens decoded: 2,299 with KV
    kv.keep_computed(req, 2000 + 300 - 1, 2.0)
    kv.release(req)
    kv.pool.check()
    assert kv.cache.cached_tokens == (2299 // 16) * 16
    req.target, req.computed = 2000 + 300, 0     # recompute prompt + generated
    assert kv.try_admit(req, 3.0)
    assert req.computed == (2299 // 16) * 16     # all but the partial last block is a hit
    kv.release(req)
    kv.pool.check()


def test_vllm_recomputes_less_after_preemption_than_an_engine_that_drops_decode_blocks():
    common = ["engine.name=vllm", "engine.kv_pool_tokens=12000", "workload.concurrency=8",
              "workload.synthetic.first_prompt_tokens_median=2500",
              "workload.synthetic.output_tokens_median=2000", "workload.duration_s=120"]

    def prefilled(*extra):
        sc = load_scenario(None, [*common, *extra])
        oracle = AnalyticOracle(sc)
        tokens = []
        real = oracle.step_seconds

        def spy(batch):
            tokens.append(float(batch.prefill_tokens.sum()))
            return real(batch)

        oracle.step_seconds = spy
        result = simulate(sc, oracle=oracle)
        return sum(tokens), replay_summary(result)[1]

    kept, with_kept = prefilled()
    dropped, with_dropped = prefilled("engine.preemption_keeps_blocks=false")
    assert with_kept["preemptions"] > 0 and with_dropped["preemptions"] > 0
    # per preemption, the kept blocks spare the recompute of what was decoded
    assert kept / with_kept["preemptions"] < dropped / with_dropped["preemptions"]


def test_sglang_lpm_defers_a_request_that_shares_an_uncached_prefix_with_one_ahead():
    # engines.md 3.2: SGLang's lpm pushes a request the cache serves <= 32 tokens of to the
    # back of the pass when it shares >= 32 tokens with a request ahead of it.
    from types import SimpleNamespace

    from inferasim.serve.policies import lpm_order

    def req(name, keys):
        return SimpleNamespace(name=name, match_keys=np.array(keys, dtype=np.int64))

    kv = SimpleNamespace(bt=16, peek=lambda r: 0)
    a, b, c = req("a", [1, 2, 3]), req("b", [1, 2, 9]), req("c", [7, 8])
    assert [r.name for r in lpm_order([a, b, c], kv, 128)] == ["a", "b", "c"]
    assert [r.name for r in lpm_order([a, b, c], kv, 128, dedup_tokens=32)] == ["a", "c", "b"]
    # Sharing one block (16 tokens) is not enough; a cached request is not deferred.
    d = req("d", [1, 5])
    assert [r.name for r in lpm_order([a, d, c], kv, 128, dedup_tokens=32)] == ["a", "d", "c"]
    warm = SimpleNamespace(bt=16, peek=lambda r: 3 if r.name == "b" else 0)
    assert [r.name for r in lpm_order([a, b, c], warm, 128, dedup_tokens=32)] == ["b", "a", "c"]


@pytest.mark.parametrize("chunks_cached", [True, False])
def test_a_prompt_admitted_mid_prefill_hits_the_chunks_already_computed(chunks_cached):
    # engines.md 4.1 / 4.2: vLLM registers blocks as they fill and SGLang inserts each chunk,
    # so a request sharing a long prefix that arrives while the first is still prefilling
    # hits the chunks computed so far.
    env, eng, kv, log = rig("engine.chunked_prefill_size=2048",
                            "engine.max_num_batched_tokens=2048",
                            f"engine.caches_prompt_chunks={str(chunks_cached).lower()}")
    long_prefix = np.arange(600, dtype=np.int64) + 10**6      # 9,600 shared tokens
    first = log.new(RequestSpec(9600, 8, long_prefix, 16, None, 0, 0))
    eng.submit(first)
    while first.computed < 3 * 2048:
        env.step()
    assert first.computed < first.target  # still prefilling
    second = log.new(RequestSpec(9600, 8, long_prefix.copy(), 16, None, 1, 0))
    eng.submit(second)
    env.run()
    kv.pool.check()
    if chunks_cached:
        assert second.cached_first >= 3 * 2048
    else:
        assert second.cached_first == 0


def test_the_replay_collects_young_objects_rarely_and_puts_the_threshold_back():
    """A replay's live heap grows with the trace; the young-generation threshold is raised
    while it runs (REPLAY_GC_YOUNG) and the caller's thresholds come back after, also when the
    replay fails."""
    import gc

    from inferasim.serve.simulation import REPLAY_GC_YOUNG

    sc = scenario("workload.duration_s=5")
    seen = []

    class Watching(AnalyticOracle):
        def step_seconds(self, *args, **kwargs):
            seen.append(gc.get_threshold()[0])
            return super().step_seconds(*args, **kwargs)

    before = gc.get_threshold()
    gc.set_threshold(900, 11, 12)
    try:
        simulate(sc, oracle=Watching(sc))
        assert seen and set(seen) == {REPLAY_GC_YOUNG}
        assert gc.get_threshold() == (900, 11, 12)

        class Failing(AnalyticOracle):
            def step_seconds(self, *args, **kwargs):
                raise RuntimeError("priced nothing")

        with pytest.raises(RuntimeError, match="priced nothing"):
            simulate(sc, oracle=Failing(sc))
        assert gc.get_threshold() == (900, 11, 12)
    finally:
        gc.set_threshold(*before)
