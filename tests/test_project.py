"""inferasim project: the closed-form steady state, its laws, and its score against a replay."""

from __future__ import annotations

import json
import math

import click
import numpy as np
import pytest
from click.testing import CliRunner

from inferasim.cli.errors import ConfigErrorGroup as _Group
from inferasim.cli.project_cmd import project as project_cmd
from inferasim.config.loader import load_scenario
from inferasim.sweep.projection import project, workload_moments

RANDOM = ["workload.format=random", "workload.isl=2048", "workload.osl=256",
          "workload.random_range_ratio=1.0"]


def _invoke(*args: str):
    @click.group(cls=_Group)
    def group() -> None:
        pass

    group.add_command(project_cmd)
    return CliRunner().invoke(group, ["project", *args])


def _scenario(*overrides: str):
    return load_scenario(None, list(overrides))


def test_littles_law_closes_the_loop():
    for conc in (1, 4, 16):
        s = _scenario(f"workload.concurrency={conc}")
        p = project(s)
        w = p["workload"]
        x = p["request_rate"]
        cycle = w["think_mean_s"] + p["ttft_mean_s"] + (w["output_mean"] - 1) * p["tpot_mean_ms"] / 1e3
        assert p["saturated"] is None
        assert x * cycle == pytest.approx(conc, rel=1e-3)
        # Decode batch = rate x decode time (Little on the decode phase).
        decode_s = (w["output_mean"] - 1) * p["tpot_mean_ms"] / 1e3
        assert p["decode_batch"] == pytest.approx(x * decode_s, rel=1e-3)


def test_throughput_rises_and_interactivity_falls_with_concurrency():
    rows = [project(_scenario(*RANDOM, f"workload.concurrency={c}")) for c in (1, 4, 16, 64)]
    tput = [r["output_tok_s"] for r in rows]
    inter = [r["interactivity_tok_s"] for r in rows]
    assert tput == sorted(tput) and inter == sorted(inter, reverse=True)


def test_batch_limit_saturates_and_queues_by_littles_law():
    p = project(_scenario(*RANDOM, "workload.concurrency=32", "engine.max_num_seqs=4"))
    assert p["saturated"] == "batch"
    assert p["decode_batch"] <= 4 + 1e-9
    x = p["request_rate"]
    w = p["workload"]
    cycle = p["ttft_mean_s"] + (w["output_mean"] - 1) * p["tpot_mean_ms"] / 1e3
    assert x * cycle == pytest.approx(32, rel=1e-3)
    assert p["ttft_mean_s"] > 1.0


def test_workload_moments_of_fixed_lengths():
    m = workload_moments(_scenario(*RANDOM))
    assert m.prompt_mean == 2048 and m.output_mean == 256 and m.think_mean_s == 0
    assert m.hit_ideal == 0 and m.decode_context == 2048 + 128 and m.rate is None
    chat = workload_moments(_scenario())
    # Follow-up turns resend the conversation: most of their prompt is cached.
    assert 0.2 < chat.hit_private < 0.8 and 0 < chat.hit_shared < 0.1 and chat.think_mean_s > 0


def test_open_loop_projection():
    p = project(_scenario(*RANDOM, "workload.rate=2.0"))
    assert p["request_rate"] == pytest.approx(2.0, rel=1e-3)
    assert p["output_tok_s"] == pytest.approx(2.0 * 256, rel=1e-3)
    over = project(_scenario(*RANDOM, "workload.rate=1000"))
    assert over["saturated"] == "overloaded" and over["request_rate"] < 1000


def test_projection_scored_against_the_replay():
    result = _invoke("--set", "workload.duration_s=60", "--set", "workload.concurrency=4",
                     *[x for o in RANDOM for x in ("--set", o)], "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    score = data["score"]
    for key in ("output_tok_s", "itl_mean_ms", "e2e_mean_s", "interactivity_tok_s"):
        s = score[key]
        assert s["diff"] == pytest.approx(s["projection"] - s["replay"])
        assert abs(s["pct"]) < 25, (key, s)


def test_table_and_bad_input():
    result = _invoke("--set", "workload.duration_s=30")
    assert result.exit_code == 0, result.output
    assert "projection" in result.output and "replay" in result.output
    assert "diff %" in result.output and "decode batch" in result.output
    only = _invoke("--no-replay")
    assert only.exit_code == 0 and "replay" not in only.output.splitlines()[1]
    bad = _invoke("--set", "workload.concurrency=zero")
    assert bad.exit_code == 2 and len(bad.output.strip().splitlines()) == 1


def test_instances_share_the_load():
    one = project(_scenario(*RANDOM, "workload.concurrency=16"))
    two = project(_scenario(*RANDOM, "workload.concurrency=32", "topology.instances=2"))
    assert two["schedulers"] == 2
    assert two["output_tok_s"] == pytest.approx(2 * one["output_tok_s"], rel=1e-6)
    assert two["output_tok_s_per_gpu"] == pytest.approx(one["output_tok_s_per_gpu"], rel=1e-6)
    assert two["ttft_mean_s"] == pytest.approx(one["ttft_mean_s"], rel=1e-6)
    chat = project(_scenario("topology.instances=2", "topology.router=least-loaded"))
    assert chat["session_affinity"] == 0.5 and chat["cache_retention"] <= 0.5


DPA8 = ["model.name=deepseek-r1", "gpu.name=mi355x", "parallel.tp=8", "parallel.ep=8",
        "parallel.dp_attention=8", "engine.name=sglang", "workload.format=random",
        "workload.isl=1024", "workload.osl=1024", "workload.concurrency=256",
        "workload.max_requests=2560", "workload.duration_s=1e5"]


def test_attention_dp_ranks_in_lockstep_share_every_prefill():
    # The replay steps an instance's 8 ranks together (the default): every rank's prefill
    # holds every rank's decode, which the projection carries (and with independent ranks
    # does not).
    from inferasim.config.knobs import Knobs
    from inferasim.report.run_report import replay_summary
    from inferasim.serve.simulation import simulate

    sc = _scenario(*DPA8)
    lock = project(sc)
    free = project(sc, Knobs(des_lockstep=1))
    assert lock["lockstep_group"] == 8 and free["lockstep_group"] == 1
    assert lock["output_tok_s"] < 0.7 * free["output_tok_s"]
    replay = replay_summary(simulate(sc))[1]
    # The projection holds the ranks' prefills apart (each holds every rank's decode); the
    # replay's closed loop of near-equal requests prefills them together in waves, and since
    # each GPU projects only its own rank's prompts a wave costs about one rank's prefill:
    # the projection reads 12% under the replay here (it read within 10% while the oracle
    # priced every rank's projections on every GPU).
    assert lock["output_tok_s"] == pytest.approx(replay["output_tok_s"], rel=0.15)
    assert lock["tpot_mean_ms"] == pytest.approx(replay["tpot_mean_ms"], rel=0.20)


def test_attention_dp_projection_is_priced_by_the_replays_calibrated_oracle(tmp_path):
    # The projection used the analytic oracle whenever ranks were attention-DP, so its "error"
    # against an anchored replay measured the pricing, not the closed form.
    import attrs

    from inferasim.anchors.store import AnchorStore, write_anchor_file
    from inferasim.config.catalog import REPO_ROOT

    shipped = [r for r in AnchorStore.load(REPO_ROOT / "anchors")
               if r.regime.gpu == "mi355x" and r.regime.engine == "sglang"
               and r.regime.weight_dtype == "fp8" and r.regime.tp == 8
               and r.regime.spec_method in (None, "none")]
    dpa = [attrs.evolve(r, regime=attrs.evolve(r.regime, ep=8, dp_attention=8))
           for r in shipped]
    path = write_anchor_file(tmp_path / "dpa8.json", dpa)
    sc = _scenario(*DPA8, "model.weight_dtype=fp8", "workload.concurrency=32")
    anchored = project(_scenario(*DPA8, "model.weight_dtype=fp8", "workload.concurrency=32",
                                 f"sim.anchors={path}"))
    analytic = project(_scenario(*DPA8, "model.weight_dtype=fp8", "workload.concurrency=32",
                                 "sim.anchors=none"))
    assert sc.parallel.dp_attention == 8 and dpa
    assert anchored["oracle"] == "anchored" and analytic["oracle"] == "analytic"
    assert anchored["tpot_mean_ms"] != pytest.approx(analytic["tpot_mean_ms"], rel=0.02)


def test_disaggregated_projects_its_pools():
    """An xPyD scenario is projected by project_disaggregated (the search's closed form) and
    says what its prefill pool does."""
    result = _invoke("--no-replay", "--set", "topology.kind=disaggregated")
    assert result.exit_code == 0, result.output
    pool = [line for line in result.output.splitlines() if line.startswith("prefill pool:")]
    assert len(pool) == 1 and "capacity" in pool[0] and "KV transfer" in pool[0]


def test_agentic_lanes_are_projected_and_fall_off_their_kv_cliff_with_the_replay():
    """The lanes of a sessions workload are projected as closed-loop sessions (each tree
    instance's turns in order, LaneDriver.lane_sessions). On the bundled agentic trace the
    replay holds its lanes' histories at 2 lanes and loses them at 16; the projection
    falls off between the same rungs."""
    from inferasim.report.run_report import replay_summary
    from inferasim.serve.simulation import simulate

    path = "scenarios/agentic-quickstart.yaml"
    low, high = (load_scenario(path, [f"workload.concurrency={c}", f"engine.max_num_seqs={c}"])
                 for c in (2, 16))
    held, lost = project(low), project(high)
    assert held["workload"]["requests_sampled"] > 100
    assert held["prefix_hit_rate"] > 0.8 and lost["prefix_hit_rate"] < 0.2
    replayed = replay_summary(simulate(high))[1]
    assert replayed["prefix_hit_rate"] < 0.2
    assert lost["output_tok_s"] == pytest.approx(replayed["output_tok_s"], rel=0.3)


def test_the_lanes_moments_sample_a_bounded_number_of_lanes():
    """Sampling every lane of a 1,024-lane rung took 81 s and 10.9 GB on the AgentX corpus:
    the moments (per request) read LANE_SAMPLE lanes, whatever the concurrency."""
    from inferasim.sweep.projection import LANE_SAMPLE

    path = "scenarios/agentic-quickstart.yaml"
    few, many = (workload_moments(load_scenario(path, [f"workload.concurrency={c}"]))
                 for c in (LANE_SAMPLE, 4 * LANE_SAMPLE))
    assert many.requests == few.requests > LANE_SAMPLE


def test_che_keeps_the_histories_younger_than_the_time_that_fills_the_room():
    from inferasim.sweep.projection import closed_loop_horizon

    ages = np.array([1.0, 2.0, 4.0, 8.0])
    held = np.full(4, 100.0)
    # all fit: rate x mean(held x age) = 1 x 375 <= 400
    assert closed_loop_horizon(ages, held, 1.0, 400.0) == math.inf
    # equal ages beyond the room: the cyclic sweep, none kept
    assert closed_loop_horizon(np.full(4, 5.0), held, 1.0, 400.0) == pytest.approx(4.0)
    # room 200: occupancy(T) = (100 + 200 + 100 T + 100 T) / 4 at 2 <= T <= 4, = 200 at T = 2.5
    assert closed_loop_horizon(ages, held, 1.0, 200.0) == pytest.approx(2.5)
    assert closed_loop_horizon(ages, held, 1.0, 0.0) == 0.0


def test_a_disaggregated_prefill_pool_too_small_for_the_sessions_loses_them():
    """The prefill pool's cache of a closed loop is Che's too: each session holds its last
    prompt until it returns. A 1P1D agentic deployment whose prefill pool holds a few lanes'
    prompts loses their histories at 32 lanes, as its replay does (the write-rate horizon
    it had kept them all: 22,404 tok/s/GPU projected against 3,420 replayed)."""
    from inferasim.sweep.projection import project_disaggregated

    sc = load_scenario("scenarios/agentic-quickstart.yaml", [
        "topology.kind=disaggregated", "workload.concurrency=32", "engine.max_num_seqs=32"])
    proj = project_disaggregated(sc)
    assert proj["prefix_hit_rate"] < 0.3 and math.isfinite(proj["prefill_cache_horizon_s"])


def test_resident_tokens_override_the_sampled_session_size():
    """--workload-resident-tokens: with sessions said to hold far more than sampled, fewer
    idle histories fit beside the running batch and the projected hit rate falls."""
    common = ["workload.concurrency=32", "engine.kv_pool_tokens=400000"]
    sampled = project(_scenario(*common))
    big = project(_scenario(*common, "workload.resident_tokens=150000"))
    assert big["workload"]["idle_context"] == 150000
    assert big["prefix_hit_rate"] < sampled["prefix_hit_rate"]


def test_bounded_windows_take_room_from_the_batch_the_pool_holds():
    """gpt-oss keeps a 128-token window on 18 layers: each running sequence holds 128 tokens
    of the pool besides its context, in the projection as in the replay."""
    from inferasim.arch.memory import memory_plan
    from inferasim.sweep.projection import _batch_cap

    # a fixed reserve: vLLM's own rule warms its sampler up over min(max_num_seqs, 8192)
    # rows, 34 GiB of gpt-oss logits at this max_num_seqs, more than an H100 has left
    sc = _scenario("model.name=gpt-oss-120b", "gpu.name=h100", "engine.max_num_seqs=100000",
                   "engine.memory_rule=fixed-reserve", "engine.reserve_gib=6")
    m = workload_moments(sc)
    plan = memory_plan(sc)
    assert plan.kv_window_pool_tokens == 128
    bare = _batch_cap(sc, plan.kv_pool_tokens, m)
    held = _batch_cap(sc, plan.kv_pool_tokens, m, plan.kv_window_pool_tokens)
    assert held == pytest.approx(plan.kv_pool_tokens / (m.decode_context + 128))
    assert held < bare


def test_the_frontend_latency_is_in_the_ttft_and_the_round():
    """A request reaches the engine after the anchors' time outside it, as the replay delays
    it (``serve/simulation.py``): the projection charges it to the TTFT and to the closed
    loop's round. An anchored InferenceMAX deployment read 0.05 s of TTFT without it, against
    the replay's 0.52 s, 0.19 s of it the frontend's."""
    sc = load_scenario("scenarios/inferencemax/dsr1-b200-sglang-fp8-tp8.yaml",
                       ["workload.concurrency=64"])
    with_it = project(sc)
    without = project(sc, frontend=lambda _open: 0.0)
    assert with_it["oracle"] == "anchored"
    assert 0.1 < with_it["frontend_s"] < 0.5 and without["frontend_s"] == 0.0
    assert with_it["ttft_mean_s"] == pytest.approx(
        without["ttft_mean_s"] + with_it["frontend_s"], rel=0.1)
    # the clients spend the latency away from the engine, so they send less
    assert with_it["request_rate"] < without["request_rate"]
    assert with_it["request_rate"] * with_it["e2e_mean_s"] == pytest.approx(64, rel=0.02)


def test_a_recorded_trace_is_read_whole_for_its_rate_and_lengths():
    """The Mooncake hour's first 2,000 arrivals are no sample of it (2.99/s, 13.7k-token
    prompts, 29% reuse, against the hour's 3.40/s, 12.0k and 37%): the projection reads
    every arrival the replay sends, and the rate over the replay's horizon."""
    from inferasim.workload.mooncake import load_mooncake
    from inferasim.workload.stamped import ideal_hit_rate
    from tests.conftest import shared_data

    path = shared_data("mooncake", "conversation_trace.jsonl")
    trace = load_mooncake(path)
    sc = _scenario("workload.format=mooncake", f"workload.trace={path}")
    m = workload_moments(sc)
    assert m.requests == len(trace) == 12031
    assert m.rate == pytest.approx(len(trace) / trace.span_s, rel=1e-6)
    assert m.prompt_mean == pytest.approx(trace.input_tokens.mean())
    assert m.hit_shared + m.hit_private == pytest.approx(ideal_hit_rate(trace), abs=0.005)
    window = workload_moments(_scenario("workload.format=mooncake", f"workload.trace={path}",
                                        "workload.duration_s=600"))
    sent = int((trace.order_s < 600).sum())
    assert window.requests == sent and window.rate == pytest.approx(sent / 600)


def test_reuse_ages_keep_the_recently_touched_leading_blocks():
    """Two follow-ups of one prompt, 5 s and 50 s after it: a cache whose blocks live 21 s
    keeps the first's prefix and not the second's, but the head block the request between
    them touched at 30 s."""
    from inferasim.sweep.projection import _cached_blocks, _reuse_ages
    from inferasim.workload.request import RequestSpec

    def spec(keys, session):
        return RequestSpec(16 * len(keys) + 1, 4, keys, 16, None, session, 0)

    specs = [spec([1, 2, 3], 0), spec([1, 2, 3, 4], 1), spec([1, 7], 2),
             spec([1, 2, 3, 4, 5], 3)]
    times = np.array([0.0, 5.0, 30.0, 50.0])
    shared, private = _cached_blocks(specs, outputs=False)
    ages = _reuse_ages(specs, times, shared, private, outputs=False)
    assert list(ages.cached_within(np.inf)) == list(shared + private) == [0, 48, 16, 64]
    # at 30 s block 1 is 25 s old; at 50 s it is 20 s old, blocks 2-4 45 s
    assert list(ages.cached_within(21.0)) == [0, 48, 0, 16]
    assert list(ages.cached_within(4.0)) == [0, 0, 0, 0]


def test_a_recorded_traces_bounded_cache_is_projected_as_replayed():
    """The Mooncake hour on eight B200: the unbounded cache would serve 37% of the prompts,
    the pool keeps about 17% (its blocks age out before the follow-ups come), and the
    projection's LRU horizon finds the same."""
    from inferasim.report.run_report import replay_summary
    from inferasim.serve.simulation import simulate
    from tests.conftest import shared_data

    sc = _scenario("workload.format=mooncake",
                   f"workload.trace={shared_data('mooncake', 'conversation_trace.jsonl')}",
                   "model.name=llama-3.1-70b", "gpu.name=b200", "parallel.tp=8")
    projected = project(sc)
    replayed = replay_summary(simulate(sc))[1]
    assert projected["workload"]["hit_ideal"] > 0.35 > 0.2 > replayed["prefix_hit_rate"]
    assert projected["prefix_hit_rate"] == pytest.approx(replayed["prefix_hit_rate"], abs=0.03)
    assert 30 < projected["cache_horizon_s"] < 300


def test_a_bursty_trace_queues_its_prompts_longer_than_an_even_one(tmp_path):
    """The same 600 arrivals in 10 minutes, one a second or sixty at each minute: the
    prefill lane's wait scales with the arrivals' dispersion (G/G/1), 1 for Poisson."""
    def trace(name, stamps):
        path = tmp_path / name
        path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(
            f"2024-05-01 10:{int(t) // 60:02d}:{t % 60:06.3f},4096,16\n" for t in stamps))
        return path

    even = trace("even.csv", [i * 540.059 / 599 for i in range(600)])  # the same span
    bursty = trace("bursty.csv", [60.0 * (i // 60) + 0.001 * (i % 60) for i in range(600)])
    common = ["workload.format=azure", "model.name=llama-3.1-8b", "gpu.name=h100"]
    smooth = project(_scenario(*common, f"workload.trace={even}"))
    clumped = project(_scenario(*common, f"workload.trace={bursty}"))
    assert smooth["workload"]["arrival_scv"] < 0.5 < 10 < clumped["workload"]["arrival_scv"]
    assert smooth["request_rate"] == pytest.approx(clumped["request_rate"], rel=0.05)
    assert clumped["prefill_wait_s"] > 5 * smooth["prefill_wait_s"] > 0
    poisson = workload_moments(_scenario(*RANDOM, "workload.rate=2"))
    assert poisson.arrival_scv == 1.0


def test_a_host_tier_serves_in_the_closed_form_what_the_gpu_pool_lost():
    """Qwen3-235B on 4 H200 under SGLang, the agentic quickstart's lanes at 128: past the
    GPU pool's cliff every history is lost there; HiCache's host tier (twice the pool) holds
    them, and the projection says so with the replay (host hits 89.7% against 86.9%,
    output 762 against 706 tok/s; without the tier 167 against 175)."""
    from inferasim.report.run_report import replay_summary
    from inferasim.serve.simulation import simulate

    common = ["model.name=qwen3-235b-a22b", "gpu.name=h200", "engine.name=sglang",
              "parallel.tp=4", "engine.max_num_seqs=256", "workload.concurrency=128"]
    path = "scenarios/agentic-quickstart.yaml"
    tiered = load_scenario(path, [*common, "engine.kv_offload=hicache"])
    bare = project(load_scenario(path, common))
    proj = project(tiered)
    rep = replay_summary(simulate(tiered))[1]
    assert bare["host_hit_rate"] == 0 and proj["prefix_hit_rate"] < 0.05
    assert proj["host_hit_rate"] == pytest.approx(rep["host_hit_rate"], abs=0.1)
    assert proj["output_tok_s"] == pytest.approx(rep["output_tok_s"], rel=0.15)
    assert proj["output_tok_s"] > 3 * bare["output_tok_s"]
