"""Topologies: routers, disaggregated prefill/decode on one clock, attention-DP ranks in
lockstep, speculative decoding, the host TTFT term, and `inferasim compare`."""

from __future__ import annotations

import json

import attrs
import numpy as np
import pytest
import simpy
from click.testing import CliRunner

from inferasim.cli.main import cli
from inferasim.config.errors import ConfigError
from inferasim.config.knobs import Knobs
from inferasim.config.loader import load_scenario, pool_scenario
from inferasim.cost.oracle import AnalyticOracle, StepBatch
from inferasim.report.run_report import replay_summary
from inferasim.serve.simulation import simulate
from inferasim.serve.topology import build_topology

SHORT = ["workload.duration_s=90", "workload.concurrency=8"]


def run(*overrides, knobs=None):
    result = simulate(load_scenario(None, [*SHORT, *overrides]), knobs)
    frame, summary = replay_summary(result)
    return result, frame, summary


def test_round_robin_spreads_requests_evenly():
    _, frame, _ = run("topology.instances=3", "topology.router=round-robin")
    counts = frame.instance.value_counts().to_numpy()
    assert counts.max() - counts.min() <= 1


def test_frontends_each_keep_their_own_round_robin_turn():
    # nginx deals requests to the frontends in turn; each frontend sends its own requests to
    # the workers in turn, from the first: with 3 frontends over 3 workers the first three
    # requests all go to the first worker
    from inferasim.serve.router import Router

    one, three = Router(["a", "b", "c"], "round-robin"), Router(["a", "b", "c"],
                                                                "round-robin", frontends=3)
    assert [one.choose(None) for _ in range(6)] == ["a", "b", "c", "a", "b", "c"]
    assert [three.choose(None) for _ in range(9)] == ["a"] * 3 + ["b"] * 3 + ["c"] * 3
    with pytest.raises(ValueError):
        Router(["a"], "round-robin", frontends=0)
    # the scenario key reaches both pools' routers
    sc = load_scenario(None, ["topology.kind=disaggregated", "topology.orchestrator=dynamo",
                              "topology.frontends=4"])
    topo = build_topology(simpy.Environment(), sc, Knobs(), 16,
                          lambda s, k: AnalyticOracle(s))
    assert len(topo.frontend.decode._turns) == len(topo.frontend.prefill._turns) == 4


def test_prefix_affinity_keeps_sessions_on_their_cache():
    _, _, rr = run("topology.instances=4", "topology.router=round-robin",
                   "workload.synthetic.turns_mean=4")
    _, _, pa = run("topology.instances=4", "topology.router=prefix-affinity",
                   "workload.synthetic.turns_mean=4")
    assert pa["prefix_hit_rate"] > rr["prefix_hit_rate"]


def test_kv_aware_router_weighs_cached_blocks_against_load():
    # Dynamo's KV router: cost = the prefill blocks a worker would compute (its queue's
    # prompts and this one's uncached part) + its decode blocks; the cheapest wins.
    from inferasim.serve.router import Router, kv_router_cost

    result, _, _ = run("topology.instances=2", "topology.router=kv-aware")
    a, b = result.engines
    req = type("Req", (), {})()
    req.spec = type("Spec", (), {"prompt_tokens": 4 * a.kv.bt})()
    assert not a.running and not b.running  # drained: equal costs, the lower index
    a.peek = b.peek = lambda r: 0            # nothing of this prompt cached
    assert kv_router_cost(a, req) == kv_router_cost(b, req) == 8.0
    router = Router([a, b], "kv-aware")
    b.peek = lambda r: 4     # b holds the whole prompt: no prefill blocks there
    assert kv_router_cost(b, req) == 4.0
    assert router.choose(req) is b
    # served, and spread: both instances took requests
    again, frame, _ = run("topology.instances=2", "topology.router=kv-aware")
    assert set(frame.instance) == {0, 1}


def test_dynamo_orchestrator_routes_round_robin_and_native_by_load():
    # Dynamo's frontend routes round robin unless launched with --router-mode kv (its
    # frontend reference); the engine then picks the attention-DP rank itself
    dyn = load_scenario(None, ["topology.kind=disaggregated", "topology.orchestrator=dynamo",
                               "parallel.dp_attention=2", "parallel.tp=2"])
    assert dyn.topology.router_policy == "round-robin"
    assert dyn.rank_router == dyn.engine.dp_rank_router
    native = load_scenario(None, ["topology.kind=disaggregated"])
    assert native.topology.router_policy == "least-loaded"
    kv = load_scenario(None, ["topology.orchestrator=dynamo", "topology.router=kv-aware",
                              "parallel.dp_attention=2", "parallel.tp=2"])
    assert kv.topology.router_policy == "kv-aware"
    assert kv.rank_router == "kv-aware"     # Dynamo's KV router pins the rank


def test_kv_transfer_time_is_bytes_over_bandwidth_plus_latency():
    sc = load_scenario(None, ["model.name=deepseek-r1", "gpu.name=mi355x", "parallel.tp=8",
                              "engine.kv_dtype=fp8", "topology.kind=disaggregated",
                              "topology.link_bandwidth_gbs=50", "topology.link_latency_us=200"])
    env = simpy.Environment()
    topo = build_topology(env, sc, Knobs(), 16, lambda s, r: AnalyticOracle(s))
    # 61 layers x 576 B (fp8 latent), one copy of the cache: 35,136 B per token.
    expect = 200e-6 + 10_000 * 35_136 / 50e9
    assert topo.frontend.transfer_seconds(10_000) == pytest.approx(expect, rel=1e-12)


def test_disaggregated_ttft_has_its_parts_and_decode_runs_elsewhere():
    result, frame, summary = run("topology.kind=disaggregated",
                                 "topology.link_bandwidth_gbs=10")
    assert summary["gpus"] == 2
    done = frame[np.isfinite(frame.finish_s)]
    assert (done.transfer_s > 0).all() and (done.decode_wait_s >= 0).all()
    # The client's first token comes from the decode instance, after the KV crossed over.
    assert np.allclose(done.queue_s + done.prefill_s + done.transfer_s + done.decode_wait_s,
                       done.first_token_s - done.arrival_s)
    prefill_engine, decode_engine = result.engines
    assert prefill_engine.stats.decode_steps == 0  # the prefill pool only prefills
    assert decode_engine.stats.prefill_steps == 0  # KV arrives: decode never prefills


def test_disaggregated_summary_reports_each_pools_kv():
    # the decode instance's pool as kv_pool_tokens, the prefill instance's apart (the summary
    # gave only the decode pool's)
    result, _, summary = run("topology.kind=disaggregated",
                             "topology.decode.engine={mem_fraction: 0.6}")
    prefill_engine, decode_engine = result.engines
    assert decode_engine.kv.pool.capacity < prefill_engine.kv.pool.capacity
    assert summary["kv_pool_tokens"] == decode_engine.kv.pool.capacity
    assert summary["prefill_kv_pool_tokens"] == prefill_engine.kv.pool.capacity
    assert "prefill_kv_pool_tokens" not in run()[2]


def test_disaggregated_population_in_flight_does_not_collapse():
    """behaviour.md 4: with the prefill pool on the simulation clock, the decode pool runs
    at the batch the closed loop implies (almost every client is decoding)."""
    n = 16
    result, frame, _ = run(f"workload.concurrency={n}", "workload.duration_s=200",
                           "topology.kind=disaggregated",
                           "workload.synthetic.think_time_median_s=0.001",
                           "workload.synthetic.output_tokens_median=1500",
                           "workload.synthetic.output_sigma=0.01",
                           "workload.synthetic.first_prompt_tokens_median=500")
    done = frame[np.isfinite(frame.finish_s)]
    decoding = (done.finish_s - done.first_token_s).sum()
    span = done.finish_s.max() - done.arrival_s.min()
    assert decoding / span > 0.8 * n


def test_lockstep_of_one_equals_independent_ranks():
    common = ["model.name=deepseek-r1", "gpu.name=mi355x", "parallel.tp=8",
              "parallel.dp_attention=8", "workload.concurrency=16", "workload.duration_s=60",
              "sim.exact_steps=true"]
    sc = load_scenario(None, common)
    oracle = AnalyticOracle(sc, rank_level=True)
    batch = StepBatch(prefill_tokens=np.array([512.0]), prefill_resident=np.array([100.0]),
                      prefill_samples=1, decode_context=np.array([300.0, 900.0]))
    assert oracle.step_group([batch]).seconds == pytest.approx(oracle.step(batch).seconds,
                                                               rel=1e-12)
    # Groups of one rank (driven) against free-running ranks: identical requests.
    import inferasim.serve.topology as topo_mod

    real = topo_mod.LockstepGroup
    independent = replay_summary(simulate(sc, Knobs(des_lockstep=1)))[0]
    topo_mod_knob = Knobs(des_lockstep=1)
    try:
        # Force the driven path with groups of one.
        orig_instance = topo_mod._instance

        def grouped(env, scenario, knobs, block_tokens, make_oracle, first_index):
            from inferasim.serve.engine import EngineInstance
            from inferasim.serve.kv_manager import KVManager

            eng = scenario.engine
            pool = topo_mod.memory_plan(scenario).kv_pool_tokens
            orc = make_oracle(scenario, True)
            ranks = [EngineInstance(env, scenario, orc,
                                    KVManager(pool, eng.page_size, block_tokens,
                                              eng.eviction_policy, eng.prefix_caching),
                                    first_index + r, driven=True)
                     for r in range(scenario.parallel.dp_attention)]
            for r in ranks:
                real(env, [r], orc)
            return topo_mod.Router(ranks, scenario.rank_router), ranks

        topo_mod._instance = grouped
        driven = replay_summary(simulate(sc, topo_mod_knob))[0]
    finally:
        topo_mod._instance = orig_instance
    for col in ("arrival_s", "first_token_s", "finish_s"):
        np.testing.assert_allclose(driven[col], independent[col], rtol=1e-9)


def test_lockstep_prices_the_combined_batch():
    common = ["model.name=deepseek-r1", "gpu.name=mi355x", "parallel.tp=8",
              "parallel.dp_attention=8", "workload.concurrency=32", "workload.duration_s=60"]
    free = replay_summary(simulate(load_scenario(None, common), Knobs(des_lockstep=1)))[1]
    lock = replay_summary(simulate(load_scenario(None, common), Knobs(des_lockstep=8)))[1]
    # Stepping together, a rank waits for the slowest rank and the combined MoE batch.
    assert lock["itl_mean_ms"] > free["itl_mean_ms"]
    # The default is the engines' own: every rank of the instance steps together.
    default = replay_summary(simulate(load_scenario(None, common), Knobs()))[1]
    assert default["itl_mean_ms"] == lock["itl_mean_ms"]


DPA8 = ["model.name=deepseek-r1", "gpu.name=mi355x", "parallel.tp=8", "parallel.ep=8",
        "parallel.dp_attention=8"]


@pytest.mark.parametrize("case", [
    # SGLang's prefill-only steps, chat sessions whose prefixes a rank router reads mid-run
    ["engine.name=sglang", "topology.rank_router=prefix-affinity", "workload.concurrency=48",
     "workload.duration_s=120"],
    # vLLM's mixed steps over desynchronised random lengths
    ["engine.name=vllm", "workload.format=random", "workload.isl=2048", "workload.osl=256",
     "workload.random_range_ratio=0.5", "workload.concurrency=48", "workload.max_requests=240",
     "workload.duration_s=1e5"],
    # requests that each accept their own share of drafts
    ["engine.name=sglang", "speculative.method=mtp", "speculative.draft_tokens=3",
     "speculative.acceptance=0.7", "speculative.acceptance_cv=0.2", "workload.format=random",
     "workload.isl=1024", "workload.osl=512", "workload.random_range_ratio=0.8",
     "workload.concurrency=64", "workload.max_requests=256", "workload.duration_s=1e5"],
    # a disaggregated decode pool of 8 ranks: KV lands at any rank, cutting the group's runs
    ["engine.name=sglang", "topology.kind=disaggregated", "parallel.dp_attention=1",
     "topology.decode.parallel={dp_attention: 8}", "workload.concurrency=48",
     "workload.duration_s=60"],
    # sparse attention, priced step by step (not linear in the context)
    ["model.name=deepseek-v3.2", "gpu.name=h200", "engine.name=sglang",
     "workload.format=random", "workload.isl=8192", "workload.osl=256",
     "workload.random_range_ratio=0.8", "workload.concurrency=32", "workload.max_requests=96",
     "workload.duration_s=1e5"],
], ids=["sglang-chat-affinity", "vllm-random", "sglang-mtp-spread", "disagg-decode-dpa",
        "sparse-attention"])
def test_lockstep_macro_steps_equal_the_step_exact_mode(case):
    frames, groups = [], []
    for exact in ("true", "false"):
        result = simulate(load_scenario(None, [*DPA8, *case, f"sim.exact_steps={exact}"]),
                          Knobs())
        frames.append(replay_summary(result)[0])
        groups.append(sum(e.stats.macro_steps for e in result.engines))
    exact, macro = frames
    assert groups[0] == 0 and groups[1] > 0  # the group ran steady decode as macro-steps
    assert len(exact) == len(macro) > 0
    for col in ("arrival_s", "first_token_s", "finish_s"):
        np.testing.assert_array_equal(macro[col].to_numpy(), exact[col].to_numpy())


def test_lockstep_must_divide_ranks():
    sc = load_scenario(None, ["model.name=deepseek-r1", "gpu.name=mi355x", "parallel.tp=8",
                              "parallel.dp_attention=8"])
    with pytest.raises(ConfigError, match="must divide"):
        simulate(sc, Knobs(des_lockstep=3))


def test_speculation_with_zero_drafts_is_refused():
    # it would decode plainly under a speculative label, and be calibrated from MTP anchors
    with pytest.raises(ConfigError, match="speculative: method mtp needs draft_tokens"):
        run("speculative.method=mtp", "speculative.draft_tokens=0")


def test_acceptance_zero_advances_like_no_speculation():
    base, _, _ = run("sim.exact_steps=true")
    spec, _, _ = run("sim.exact_steps=true", "speculative.method=mtp",
                     "speculative.draft_tokens=3", "speculative.acceptance=0.0")
    assert spec.engines[0].advance == 1.0
    assert spec.engines[0].width == 4
    # same tokens per step, but each step verifies 4 tokens and runs the draft: slower
    assert spec.engines[0].stats.decode_steps >= base.engines[0].stats.decode_steps * 0.9


def test_acceptance_speeds_decode():
    _, _, none = run()
    _, _, mtp = run("speculative.method=mtp", "speculative.draft_tokens=3",
                    "speculative.acceptance=0.8")
    assert mtp["tpot_mean_ms"] < 0.7 * none["tpot_mean_ms"]


def test_macro_steps_equal_exact_under_speculation():
    common = ["speculative.method=mtp", "speculative.draft_tokens=2",
              "speculative.acceptance=0.7"]
    _, a, _ = run("sim.exact_steps=true", *common)
    _, b, _ = run(*common)
    np.testing.assert_allclose(b.finish_s, a.finish_s, rtol=1e-9)


def test_uncached_prompt_latency_is_ttft_only():
    _, a, _ = run("sim.exact_steps=true")
    _, b, _ = run("sim.exact_steps=true", "engine.uncached_prompt_latency_us=10",
                  "engine.uncached_prompt_latency_max_tokens=1000")
    uncached = np.minimum(a.prompt_tokens - a.cached_tokens, 1000)
    np.testing.assert_allclose(b.first_token_s - a.first_token_s, uncached * 10e-6, atol=1e-9)
    np.testing.assert_allclose(b.finish_s, a.finish_s, rtol=1e-12)


def test_a_large_host_term_delivers_the_later_tokens_with_the_first():
    # 100 us a prompt token outlasts a 4-token decode: the tokens decoded meanwhile reach
    # the client with the first one, never before it (the finish used to come first and the
    # TPOT turned negative)
    lengths = ["workload.format=random", "workload.isl=1024", "workload.osl=4",
               "workload.rate=4", "workload.duration_s=20"]
    _, a, _ = run(*lengths)
    _, b, s = run(*lengths, "engine.uncached_prompt_latency_us=100")
    assert (b.finish_s >= b.first_token_s).all() and (b.first_token_s > a.first_token_s).all()
    assert s["tpot_mean_ms"] >= 0 and (b.finish_s == np.maximum(a.finish_s, b.first_token_s)).all()


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_prompt_completed_beside_running_decodes_decodes_from_the_next_step(engine):
    # vLLM mixes the step that completes a prompt with the running decodes; the prompt's
    # first token is sampled there and its decode starts at the next step (a two-token
    # request used to finish in the step that prefilled it, one step for free)
    common = ["workload.format=random", "workload.isl=1024", "workload.osl=2", "workload.rate=4",
              "workload.random_range_ratio=1",
              "workload.duration_s=30", f"engine.name={engine}"]
    _, frame, _ = run(*common)
    assert len(frame) > 50 and (frame.finish_s > frame.first_token_s).all()
    _, exact, _ = run(*common, "sim.exact_steps=true")
    np.testing.assert_allclose(exact.finish_s, frame.finish_s, rtol=1e-12)


def test_pool_scenario_overrides_layout():
    sc = load_scenario(None, ["model.name=deepseek-r1", "gpu.name=mi355x", "parallel.tp=8",
                              "topology.kind=disaggregated",
                              "topology.decode.parallel={dp_attention: 8}"])
    assert pool_scenario(sc, "decode").parallel.dp_attention == 8
    assert pool_scenario(sc, "prefill").parallel.dp_attention == 1
    # a layout the pool sets wrong is named as the pool's key
    bad = attrs.evolve(sc, topology=attrs.evolve(
        sc.topology, prefill=attrs.evolve(sc.topology.prefill, parallel={"tp": 3})))
    with pytest.raises(ConfigError, match="topology.prefill.parallel.tp: attention TP 3"):
        pool_scenario(bad, "prefill")


def test_compare_cli_per_gpu_rows():
    args = ["compare", "scenarios/quickstart.yaml", "scenarios/quickstart.yaml", "--json",
            "--set", "workload.duration_s=30", "--set", "topology.instances=1"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    rows = {r["metric"]: r for r in json.loads(result.output)["rows"]}
    assert rows["output_tok_s_per_gpu"]["delta"] == 0
    bad = CliRunner().invoke(cli, ["compare", "scenarios/quickstart.yaml", "/nope.yaml"])
    assert bad.exit_code == 2


@pytest.mark.parametrize("engine, chunk, ratio", [("sglang", 2048, 0.21), ("vllm", 8192, 0.7)])
def test_sglang_dp_ranks_split_the_chunk_and_scale_the_reservation(engine, chunk, ratio):
    # engines.md 5: an SGLang attention-DP rank chunks prefill at chunked_prefill_size // dp
    # and reserves at schedule_conservativeness x 0.3; vLLM's ranks keep the engine's figures.
    sc = load_scenario(None, ["model.name=deepseek-r1", "gpu.name=mi355x", "parallel.tp=8",
                              "parallel.dp_attention=8", f"engine.name={engine}",
                              "workload.format=random", "workload.isl=8000", "workload.osl=8",
                              "workload.concurrency=1", "workload.max_requests=1",
                              "workload.duration_s=60"])
    result = simulate(sc)
    assert {e.chunked_prefill_size for e in result.engines} == {chunk}
    # the idle ranks' ratio is still its initial value (a decoding rank's decays)
    assert max(e.new_token_ratio for e in result.engines) == pytest.approx(ratio)
    # The one request's 8,000-token prompt takes ceil(8000 / chunk) prefill steps on its rank.
    assert sum(e.stats.prefill_steps for e in result.engines) == -(-8000 // chunk)


def test_rank_router_defaults_to_the_engines_own_policy():
    # engines.md 5: SGLang dispatches round robin, vLLM to the lowest waiting x 4 + running,
    # ATOM to the fewest requests; topology.rank_router names another one explicitly.
    dpa = ["model.name=deepseek-r1", "gpu.name=mi355x", "parallel.tp=8",
           "parallel.dp_attention=8"]
    own = {e: load_scenario(None, [*dpa, f"engine.name={e}"]).rank_router
           for e in ("sglang", "vllm", "atom")}
    assert own == {"sglang": "round-robin", "vllm": "least-loaded", "atom": "least-requests"}
    chosen = load_scenario(None, [*dpa, "engine.name=vllm", "topology.rank_router=round-robin"])
    assert chosen.rank_router == "round-robin"


def test_least_requests_counts_requests_where_least_loaded_weighs_waiting():
    from inferasim.serve.router import Router

    class Rank:
        def __init__(self, waiting, running):
            self.load_score = 4 * waiting + running
            self.request_count = waiting + running
            self.got = []

        def submit(self, req):
            self.got.append(req)

    # rank 0: 1 waiting + 0 running (score 4, 1 request); rank 1: 3 running (score 3, 3)
    for policy, picked in (("least-requests", 0), ("least-loaded", 1)):
        ranks = [Rank(1, 0), Rank(0, 3)]
        Router(ranks, policy).submit("r")
        assert ranks[picked].got == ["r"], policy


def test_sglang_disaggregated_decode_runs_a_chunk_cache():
    # engines.md 4.2 / 6: SGLang's PD decode servers force the radix cache off (<= 0.5.10);
    # vLLM's decode keeps prefix caching; a pool that sets prefix_caching keeps its own.
    disagg = ["engine.name=sglang", "topology.kind=disaggregated"]
    sc = load_scenario(None, disagg)
    assert pool_scenario(sc, "prefill").engine.prefix_caching
    assert not pool_scenario(sc, "decode").engine.prefix_caching
    told = load_scenario(None, [*disagg, "topology.decode.engine={prefix_caching: true}"])
    assert pool_scenario(told, "decode").engine.prefix_caching
    vllm = load_scenario(None, ["engine.name=vllm", "topology.kind=disaggregated"])
    assert pool_scenario(vllm, "decode").engine.prefix_caching
    result, frame, _ = run(*disagg, "workload.duration_s=60")
    prefill_engine, decode_engine = result.engines
    assert prefill_engine.kv.cache.cached_tokens > 0
    assert decode_engine.kv.cache.cached_tokens == 0  # nothing shared: each request its own


def _preallocating_run(prealloc: bool, decode_pool: int):
    """Eight clients on SGLang 1P1D whose decode pool holds a few of them at a time."""
    return run("engine.name=sglang", "topology.kind=disaggregated", "workload.concurrency=8",
               "workload.duration_s=120", "workload.synthetic.think_time_median_s=0.001",
               "workload.synthetic.output_tokens_median=400", "workload.synthetic.output_sigma=0.01",
               "workload.synthetic.first_prompt_tokens_median=3000",
               "workload.synthetic.first_prompt_sigma=0.01",
               f"topology.decode.engine={{kv_pool_tokens: {decode_pool}, "
               f"disagg_decode_preallocates: {str(prealloc).lower()}}}")


def test_sglang_decode_preallocates_before_the_prefill_admits():
    # engines.md 6: SGLang's decode server allocates the prompt's KV (FIFO) before the
    # prefill server admits the request, so a full decode pool holds requests ahead of their
    # prefill; without it they prefill at once and wait for the decode pool after the transfer.
    held, held_frame, _ = _preallocating_run(True, 16000)
    ahead, ahead_frame, _ = _preallocating_run(False, 16000)
    for frame in (held_frame, ahead_frame):
        assert np.isfinite(frame.finish_s).sum() > 20
    done_h = held_frame[np.isfinite(held_frame.finish_s)]
    done_a = ahead_frame[np.isfinite(ahead_frame.finish_s)]
    # where the decode side is the bottleneck the wait moves from after the transfer to
    # before the prefill
    assert done_h.decode_wait_s.mean() < 0.2 * done_a.decode_wait_s.mean()
    assert done_h.queue_s.mean() > 3 * done_a.queue_s.mean()
    # the run drains: every preallocation was taken up or given back, no page is left held
    decode = held.engines[1]
    assert not decode.running and not decode.prealloc_queue and decode._prealloc_held == 0
    decode.kv.pool.check()
    assert decode.kv.pool.private == 0


def test_an_unpreallocatable_prompt_is_refused_with_the_reason():
    result, frame, summary = run("engine.name=sglang", "topology.kind=disaggregated",
                                 "workload.concurrency=2", "workload.duration_s=30",
                                 "workload.synthetic.first_prompt_tokens_median=6000",
                                 "workload.synthetic.first_prompt_sigma=0.01",
                                 "topology.decode.engine={kv_pool_tokens: 4000}")
    assert summary["requests_failed"] > 0
    assert "decode pool holds" in summary["requests_failed_example"]


def test_the_lockstep_knob_leaves_an_instance_without_attention_dp_one_rank():
    # A prior prices an attention-DP target's neighbours (no attention DP) with the target's
    # knobs: INFERASIM_DES_LOCKSTEP=8 read those anchors as eight-rank group steps, so the
    # default (every rank of the instance) and the explicit 8 priced the same target apart.
    assert Knobs(des_lockstep=8).lockstep_group(1) == 1
    assert Knobs(des_lockstep=8).lockstep_group(8) == 8 == Knobs().lockstep_group(8)
    common = ["model.name=deepseek-r1", "gpu.name=mi355x", "parallel.tp=8",
              "parallel.dp_attention=8", "workload.concurrency=32", "workload.duration_s=30"]
    sc = load_scenario(None, common)
    summaries = [replay_summary(simulate(sc, k))[1] for k in (Knobs(), Knobs(des_lockstep=8))]
    assert summaries[0]["calibration"]["mode"] == "prior"  # vLLM MI355X anchors of other models
    assert summaries[0]["itl_mean_ms"] == summaries[1]["itl_mean_ms"]


def test_a_calibrated_group_of_one_rank_is_that_ranks_step():
    from inferasim.cost.calibrated import oracle_for

    sc = load_scenario(None, ["model.name=deepseek-r1", "gpu.name=mi355x", "parallel.tp=8",
                              "parallel.dp_attention=8"])
    oracle = oracle_for(sc, Knobs(des_lockstep=1), rank_level=True)
    assert oracle.calibrated
    batch = StepBatch(prefill_tokens=np.array([512.0]), prefill_resident=np.array([100.0]),
                      prefill_samples=1, decode_context=np.array([300.0, 900.0]))
    assert oracle.step_group([batch]).seconds == oracle.step(batch).seconds
    assert oracle.step_group_seconds([batch]) == oracle.step_seconds(batch)
