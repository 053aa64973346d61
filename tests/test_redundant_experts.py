"""EPLB's redundant expert slots (``parallel.redundant_experts``): wide expert parallelism over
more ranks than the experts divide by, as the Dynamo SGLang recipes run DeepSeek-R1 (256
experts + 32 slots over EP48)."""

from __future__ import annotations

import attrs
import pytest

from inferasim.arch.memory import weight_bytes_per_gpu
from inferasim.arch.params import param_counts
from inferasim.arch.work import step_work
from inferasim.config.catalog import REPO_ROOT
from inferasim.config.errors import ConfigError
from inferasim.config.loader import load_scenario, pool_scenario

FAMILY = REPO_ROOT / "scenarios" / "inferencemax" / "dsr1-gb300-dynamo-sglang-nvfp4-disagg.yaml"
WIDE = ["parallel.tp=48", "parallel.ep=48", "parallel.dp_attention=48"]


def test_ep_past_what_the_experts_divide_needs_the_redundant_slots():
    with pytest.raises(ConfigError) as err:
        load_scenario(FAMILY, [*WIDE, "parallel.redundant_experts=0"])
    assert err.value.key == "parallel.ep" and "redundant_experts" in err.value.message
    sc = load_scenario(FAMILY, [*WIDE, "parallel.redundant_experts=32"])
    assert (256 + sc.parallel.redundant_experts) % sc.parallel.ep == 0
    with pytest.raises(ConfigError) as err:
        load_scenario(FAMILY, ["parallel.tp=4", "parallel.ep=1", "parallel.dp_attention=1"])
    assert err.value.key == "parallel.redundant_experts"


def test_the_slots_hold_weights_and_are_streamed_like_experts():
    plain = load_scenario(FAMILY, ["parallel.redundant_experts=0"])
    spare = load_scenario(FAMILY)
    assert spare.parallel.redundant_experts == 32
    routed = param_counts(plain.model).routed_experts
    grown = weight_bytes_per_gpu(spare) - weight_bytes_per_gpu(plain)
    # 32 more slots of 256 experts' weights, split over the 32 ranks (nvfp4: ~0.56 B a weight)
    assert grown == pytest.approx(routed * 32 / 256 / 32 * 0.5625, rel=0.05)
    moe = {g.name: g for g in step_work(spare).groups}["gemm_moe"]
    base = {g.name: g for g in step_work(plain).groups}["gemm_moe"]
    assert moe.experts == 288 and base.experts == 256
    assert moe.weight_bytes == pytest.approx(base.weight_bytes * 288 / 256)


def test_an_anchor_in_a_wider_layout_keeps_its_familys_slots():
    from inferasim.anchors.record import AnchorRecord
    from inferasim.validate.anchors import (
        TEMPLATE_DIR,
        anchor_workload,
        base_scenario,
        load_templates,
    )

    row = AnchorRecord.from_dict({
        "id": "t-ep48", "provenance": {"source": "test"},
        "regime": {"model": "deepseek-r1", "engine": "dynamo-sglang", "gpu": "gb300",
                   "weight_dtype": "nvfp4", "spec_method": "none", "topology": "disaggregated",
                   "tp": 48, "ep": 48, "dp_attention": 48, "prefill_tp": 4, "prefill_ep": 4,
                   "prefill_dp_attention": 4, "prefill_workers": 4, "decode_workers": 1},
        "workload": {"isl": 1024, "osl": 1024, "concurrency": 4096},
        "measurements": {"itl_median_s": 0.03, "tpot_mean_s": 0.03, "ttft_median_s": 1.0}})
    name, base = base_scenario(row, load_templates(TEMPLATE_DIR))
    target = anchor_workload(base, row)
    assert name == FAMILY.name and target.parallel.redundant_experts == 32
    decode = pool_scenario(target, "decode")
    assert (decode.parallel.ep, decode.parallel.redundant_experts) == (48, 32)
    # a prefill pool without expert parallelism carries no slots
    plain = attrs.evolve(row, regime=attrs.evolve(row.regime, prefill_ep=1))
    assert "redundant_experts" not in anchor_workload(base, plain).topology.prefill.parallel


def test_tensorrt_llms_fraction_is_of_the_memory_left_after_the_weights():
    """free_gpu_memory_fraction sizes the KV cache from what the weights leave: DeepSeek-R1
    FP8 at TP4 on B200 (157 GiB of weights, more than 0.8 of the part) runs, as the
    InferenceX TP4 rows did at 0.8 and 0.75."""
    from inferasim.arch.layout import fit_problem

    path = REPO_ROOT / "scenarios" / "inferencemax" / "dsr1-b200-trt-fp8-tp8.yaml"
    sc = load_scenario(path, ["parallel.tp=4", "engine.mem_fraction=0.75"])
    assert fit_problem(sc) is None
    sglang = load_scenario(path, ["parallel.tp=4", "engine.name=sglang",
                                  "engine.mem_fraction=0.75"], check_fit=False)
    assert "weights need" in fit_problem(sglang)


def test_a_pool_without_expert_parallelism_takes_none_of_the_deployments_slots():
    """The 8k/1k recipes pair an EP48 decode pool (32 slots) with TP4 prefill workers without
    EP (GB300 FP4 mid_curve): the prefill pool runs no EPLB, whatever the decode pool's."""
    sc = load_scenario(FAMILY, [*WIDE, "topology.prefill.parallel.ep=1",
                                "topology.prefill.parallel.dp_attention=1"])
    prefill, decode = pool_scenario(sc, "prefill"), pool_scenario(sc, "decode")
    assert (prefill.parallel.ep, prefill.parallel.redundant_experts) == (1, 0)
    assert (decode.parallel.ep, decode.parallel.redundant_experts) == (48, 32)
    # one that sets its own slots without EP is told so
    with pytest.raises(ConfigError) as err:
        load_scenario(FAMILY, [*WIDE, "topology.prefill.parallel.ep=1",
                               "topology.prefill.parallel.redundant_experts=32"])
    assert "redundant_experts" in err.value.key


def test_another_layout_keeps_the_slots_only_with_expert_parallelism():
    par = load_scenario(FAMILY).parallel
    assert par.relaid(tp=48, ep=48, dp_attention=48).redundant_experts == 32
    assert par.relaid(tp=4, ep=1, dp_attention=1).redundant_experts == 0
