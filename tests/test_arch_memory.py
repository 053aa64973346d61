"""Weights, KV bytes and pool sizes per attention kind and parallel layout (facts.md A.2, behaviour.md 3)."""

from __future__ import annotations

import pytest

from inferasim.arch.memory import GIB, memory_plan
from inferasim.arch.params import param_counts
from inferasim.config.loader import load_scenario


def plan(*overrides, check_fit=True):
    sc = load_scenario(None, list(overrides), check_fit=check_fit)
    return sc, memory_plan(sc)


@pytest.mark.parametrize("kv, per_layer", [("bf16", 1152), ("fp8", 576)])
def test_mla_kv_per_layer(kv, per_layer):
    _, p = plan("model.name=deepseek-r1", f"engine.kv_dtype={kv}", check_fit=False)
    assert p.kv_bytes_per_token_layer == per_layer


def test_mla_latent_replicated_under_tp_sharded_by_mori():
    base = ["model.name=deepseek-r1", "gpu.name=mi355x", "parallel.tp=8", "engine.kv_dtype=fp8"]
    _, vllm = plan(*base, "engine.name=vllm")
    _, sglang = plan(*base, "engine.name=sglang")
    _, mori = plan(*base, "engine.name=mori-sglang")
    assert vllm.kv_bytes_per_token == sglang.kv_bytes_per_token == 61 * 576  # replicated
    assert mori.kv_bytes_per_token == pytest.approx(61 * 576 / 8)           # sharded


def test_dcp_shrinks_mla():
    base = ["model.name=deepseek-r1", "gpu.name=mi355x", "parallel.tp=8", "engine.kv_dtype=fp8"]
    _, one = plan(*base)
    _, four = plan(*base, "parallel.dcp=4")
    assert four.kv_bytes_per_token == pytest.approx(one.kv_bytes_per_token / 4)


def test_gqa_heads_divide_by_tp_and_replicate_below_kv_heads():
    _, tp1 = plan("model.name=llama-3.1-70b", "gpu.name=mi355x", "parallel.tp=1")
    _, tp8 = plan("model.name=llama-3.1-70b", "gpu.name=mi355x", "parallel.tp=8")
    assert tp1.kv_bytes_per_token == 327_680               # facts.md A.2
    assert tp8.kv_bytes_per_token == pytest.approx(327_680 / 8)
    # Qwen3-235B has 4 KV heads: at TP8 each rank keeps one head (replicated), not half.
    _, q8 = plan("model.name=qwen3-235b-a22b", "gpu.name=mi355x", "parallel.tp=8")
    assert q8.kv_bytes_per_token == pytest.approx(94 * 2 * 128 * 2)


def test_sliding_window_layers_hold_bounded_kv():
    _, p = plan("model.name=gpt-oss-120b", "gpu.name=h100", "parallel.tp=1")
    assert p.kv_bytes_per_token == 18 * 2048            # full layers only
    assert p.kv_fixed_bytes_per_seq == 18 * 128 * 2048  # 4.5 MiB per request (facts.md A.2)
    # in tokens of the pool (whose token is the 18 full layers'): the 128-token window
    assert p.kv_window_pool_tokens == 128
    _, fp8 = plan("model.name=gpt-oss-120b", "gpu.name=h100", "engine.kv_dtype=fp8")
    assert fp8.kv_window_pool_tokens == 128  # both halve alike
    _, dense = plan()
    assert dense.kv_fixed_bytes_per_seq == 0 and dense.kv_window_pool_tokens == 0


def test_window_pool_tokens_round_up_to_pages():
    from inferasim.arch.memory import window_pool_tokens

    assert window_pool_tokens(100.0, 1.0, 16) == 112
    assert window_pool_tokens(96.0, 1.0, 16) == 96
    assert window_pool_tokens(0.0, 1.0, 16) == 0


def test_weights_by_dtype_and_parallelism():
    sc, p = plan("model.name=deepseek-r1", "gpu.name=mi355x", "parallel.tp=8")
    counts = param_counts(sc.model)
    assert counts.total / 1e9 == pytest.approx(671, rel=0.01)
    assert counts.active / 1e9 == pytest.approx(37, rel=0.03)
    # fp8 weights, embeddings bf16: about 671 GB / 8 per GPU.
    assert p.weight_bytes_per_gpu / 1e9 == pytest.approx(671 / 8 + 1.9 / 8 * 2, rel=0.03)
    _, fp4 = plan("model.name=deepseek-r1", "gpu.name=mi355x", "parallel.tp=8",
                  "model.weight_dtype=mxfp4")
    assert fp4.weight_bytes_per_gpu < 0.65 * p.weight_bytes_per_gpu
    _, tp4 = plan("model.name=deepseek-r1", "gpu.name=mi355x", "parallel.tp=4",
                  "model.weight_dtype=mxfp4")
    assert tp4.weight_bytes_per_gpu == pytest.approx(2 * fp4.weight_bytes_per_gpu, rel=0.02)


def test_a_checkpoint_that_quantizes_its_shared_experts_stores_them_in_four_bits():
    # amd/GLM-5.1-MXFP4 quantizes the shared expert with the routed ones, amd/GLM-5-MXFP4
    # keeps it unquantized: one architecture, the shared expert's bf16 less its 4 bits apart
    from inferasim.arch.dtypes import bytes_per_element

    base = ("gpu.name=mi355x", "parallel.tp=2", "model.weight_dtype=mxfp4")
    sc51, glm51 = plan("model.name=glm-5.1", *base)
    sc5, glm5 = plan("model.name=glm-5", *base)
    assert sc51.model.four_bit_shared_experts and not sc5.model.four_bit_shared_experts
    shared = param_counts(sc51.model).shared_experts
    assert shared > 1e9
    gap = shared * (bytes_per_element("bf16") - bytes_per_element("mxfp4")) / 2
    assert glm5.weight_bytes_per_gpu - glm51.weight_bytes_per_gpu == pytest.approx(gap)
    # fp8 checkpoints of both store every weight alike
    _, f51 = plan("model.name=glm-5.1", "gpu.name=mi355x", "parallel.tp=8")
    _, f5 = plan("model.name=glm-5", "gpu.name=mi355x", "parallel.tp=8")
    assert f51.weight_bytes_per_gpu == f5.weight_bytes_per_gpu


def test_attention_dp_replicates_attention_weights():
    base = ["model.name=deepseek-r1", "gpu.name=mi355x", "parallel.tp=8"]
    _, tp = plan(*base)
    _, dpa = plan(*base, "parallel.dp_attention=8")
    assert dpa.weight_bytes_per_gpu > tp.weight_bytes_per_gpu
    # ...and each rank keeps only its own requests' KV: no replication discount applies.
    assert dpa.kv_bytes_per_token == tp.kv_bytes_per_token


def test_pool_tokens_follow_memory_and_override():
    # the fixed-reserve rule's arithmetic (the engines' own rules: test_engine_memory.py)
    sc, p = plan("engine.memory_rule=fixed-reserve", "engine.reserve_gib=6")
    expect = (sc.gpu.hbm_bytes * sc.engine.mem_fraction - p.weight_bytes_per_gpu
              - sc.engine.reserve_gib * GIB) / p.kv_bytes_per_token
    assert p.kv_pool_tokens == pytest.approx(expect, abs=sc.engine.page_size + 1)
    _, given = plan("engine.kv_pool_tokens=123456")
    assert given.kv_pool_tokens == 123456 and given.kv_pool_from == "engine.kv_pool_tokens"
    _, fp8 = plan("engine.memory_rule=fixed-reserve", "engine.reserve_gib=6",
                  "engine.kv_dtype=fp8")
    assert fp8.kv_pool_tokens == pytest.approx(2 * p.kv_pool_tokens, rel=0.001)
