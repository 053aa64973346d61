"""The disaggregated closed form against the replay of the same xPyD deployment."""

from __future__ import annotations

import pytest

from inferasim.config.catalog import REPO_ROOT as REPO
from inferasim.config.knobs import Knobs
from inferasim.config.loader import load_scenario
from inferasim.report.run_report import replay_summary
from inferasim.serve.simulation import simulate
from inferasim.sweep.projection import project_disaggregated, workload_moments

BASE = ["model.name=llama-3.1-8b", "gpu.name=h100", "workload.format=random",
        "workload.isl=1024", "workload.osl=512", "workload.duration_s=120",
        "topology.kind=disaggregated"]


@pytest.mark.parametrize("split, conc", [((1, 1), 16), ((1, 2), 64), ((2, 1), 32)])
def test_disaggregated_projection_tracks_the_replay(split, conc):
    sc = load_scenario(None, BASE + [f"topology.prefill.instances={split[0]}",
                                     f"topology.decode.instances={split[1]}",
                                     f"workload.concurrency={conc}"])
    _, rep = replay_summary(simulate(sc, Knobs()))
    proj = project_disaggregated(sc, Knobs())
    for key in ("total_tok_s_per_gpu", "interactivity_tok_s"):
        assert proj[key] == pytest.approx(rep[key], rel=0.15), key
    assert proj["kv_transfer_s"] > 0 and proj["prefill_capacity_rps"] > proj["request_rate"]


def test_a_prefill_pool_that_cannot_keep_up_caps_the_rate():
    # long prompts, short outputs, one prefill instance for four decode ones
    sc = load_scenario(None, ["model.name=llama-3.1-8b", "gpu.name=h100",
                              "workload.format=random", "workload.isl=16000",
                              "workload.osl=64", "workload.concurrency=256",
                              "topology.kind=disaggregated", "topology.prefill.instances=1",
                              "topology.decode.instances=4"])
    proj = project_disaggregated(sc, Knobs())
    assert proj["saturated"] == "prefill"
    assert proj["request_rate"] == pytest.approx(proj["prefill_capacity_rps"], rel=1e-3)
    with pytest.raises(ValueError):
        project_disaggregated(load_scenario(None, []), Knobs())


DYNAMO = "scenarios/inferencemax/dsr1-b200-dynamo-sglang-fp8-disagg.yaml"


@pytest.mark.parametrize("conc", [16, 128])
def test_an_anchored_dynamo_deployment_projects_as_it_replays(conc):
    """Each pool priced by the oracle its replay builds (the decode pool's own calibration,
    not a colocated one's) and the prefill pool's frontend latency in the TTFT: before, the
    projection ran 33-44% above this replay in throughput and 25% in interactivity."""
    sc = load_scenario(REPO / DYNAMO, [f"workload.concurrency={conc}",
                                       "workload.duration_s=120"])
    _, rep = replay_summary(simulate(sc, Knobs()))
    proj = project_disaggregated(sc, Knobs())
    assert proj["oracle"] == "anchored"
    for key in ("total_tok_s_per_gpu", "interactivity_tok_s"):
        assert proj[key] == pytest.approx(rep[key], rel=0.10), key
    # the frontend's time is in both TTFTs (the replay's mean also holds its start-up burst)
    assert proj["frontend_s"] > 0.05
    assert 0.5 * rep["ttft_p50_s"] < proj["ttft_mean_s"] < 2.0 * rep["ttft_p50_s"]


def test_a_batching_prefill_pool_serves_more_than_lone_prompts():
    """The prefill workers batch the waiting prompts up to their ranks' token budgets (the
    station the calibration reads): DeepSeek-R1's 1k-token prompts share the expert weights'
    reads, so full steps serve about twice the prompts a second of one at a time (the
    projection priced lone prompts before: 19.1 requests a second here, now 36.9)."""
    sc = load_scenario(REPO / DYNAMO, ["workload.concurrency=512"])
    proj = project_disaggregated(sc, Knobs())
    lone = 1.0 / proj["prefill_span_s"]
    assert proj["prefill_capacity_rps"] > 1.5 * lone


def test_a_session_workloads_prefill_pool_is_priced_from_its_prompts_and_its_cache():
    """Multi-turn sessions with long, heavy-tailed prompts on one prefill worker. The pool's
    cache is never sent the outputs and, under LRU, loses a session whose next turn comes
    back after the pool has turned over; a long prompt's chunks cost more a token than the
    mean prompt's. Before, the mean prompt priced alone on an unbounded cache put the
    prefill pool below saturation: 10.5% more requests a second than this replay, TTFT
    0.07 s against 3.5 s (now 1.4 s: the pool's queue is priced with a deterministic service). (Requests, not tokens: the projection's sampled prompt mean
    differs from the replay's by a few percent.)"""
    sc = load_scenario(None, ["model.name=gpt-oss-120b", "gpu.name=h100", "parallel.tp=4",
                              "topology.kind=disaggregated", "topology.prefill.instances=1",
                              "topology.decode.instances=1", "workload.concurrency=256"])
    _, rep = replay_summary(simulate(sc, Knobs()))
    proj = project_disaggregated(sc, Knobs())
    assert proj["request_rate"] == pytest.approx(rep["request_throughput"], rel=0.06)
    assert proj["prefix_hit_rate"] == pytest.approx(rep["prefix_hit_rate"], abs=0.04)
    assert rep["ttft_mean_s"] / 3 < proj["ttft_mean_s"] < 3 * rep["ttft_mean_s"]
    m = workload_moments(sc)
    prompt_only = (m.prompt_shared_tokens.sum() + m.prompt_private_tokens.sum()) / m.prompts.sum()
    assert 0 < prompt_only < m.hit_ideal      # the outputs a colocated cache also holds


def test_an_attention_dp_prefill_worker_steps_at_its_slowest_rank():
    """Two attention-DP ranks a prefill worker, prompts up to 130k tokens: the ranks step
    together, each on its own token budget, so a step lasts as long as the dearer rank's.
    Priced as the mean rank's step, the projection ran 22% above this replay's throughput;
    as the larger of two chunk prices drawn without weighting by tokens, 11% below."""
    sc = load_scenario(None, ["model.name=gpt-oss-120b", "gpu.name=h100", "parallel.tp=2",
                              "parallel.ep=2", "parallel.dp_attention=2",
                              "topology.kind=disaggregated", "topology.prefill.instances=1",
                              "topology.decode.instances=1", "workload.concurrency=128"])
    _, rep = replay_summary(simulate(sc, Knobs()))
    proj = project_disaggregated(sc, Knobs())
    assert proj["total_tok_s_per_gpu"] == pytest.approx(rep["total_tok_s_per_gpu"], rel=0.06)


@pytest.mark.parametrize("scenario, extra", [
    ("dsr1-gb200-dynamo-trt-nvfp4-mtp-disagg.yaml", []),       # anchored pools, speculative
    ("dsr1-mi355x-sglang-fp8-tp8.yaml", []),                    # anchored, colocated
    ("dsr1-mi355x-sglang-fp8-tp8.yaml", ["parallel.ep=8", "parallel.dp_attention=8"]),
    ("dsr1-b200-sglang-fp8-tp8.yaml", ["model.name=deepseek-v4-pro"]),  # a prior
])
def test_projections_sharing_one_oracle_across_the_ladder_equal_their_own(scenario, extra):
    # A search projects each deployment at every rung with one oracle (shared_oracle): the
    # oracle must not depend on the number of clients, so every projection is the one its
    # own oracle gives, key for key.
    from inferasim.sweep.projection import project

    base = load_scenario(REPO / "scenarios" / "inferencemax" / scenario, extra)
    closed_form = project if base.topology.kind == "colocated" else project_disaggregated
    shared: dict = {}
    for conc in (4, 64, 512):
        sc = load_scenario(REPO / "scenarios" / "inferencemax" / scenario,
                           [*extra, f"workload.concurrency={conc}"])
        alone = closed_form(sc, Knobs())
        together = closed_form(sc, Knobs(), oracles=shared)
        assert together.keys() == alone.keys()
        for key, value in alone.items():
            assert together[key] == value or (value != value and together[key] != together[key]), \
                (conc, key)
    assert 1 <= len(shared) <= 2   # one oracle per pool, read at the first rung
