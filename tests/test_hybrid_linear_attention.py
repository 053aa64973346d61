"""Hybrid linear attention (Qwen3.5-397B-A17B): only the full-attention layers hold per-token
KV; each Gated DeltaNet layer holds a constant state per sequence and costs a constant per
decode step. Hand figures from the model's config (aiconfigurator
Qwen--Qwen3.5-397B-A17B_config.json) and vLLM's gated_delta_net_state_shape."""

from __future__ import annotations

import json

import attrs
import numpy as np
import pytest
from click.testing import CliRunner

from inferasim.arch.attention import GqaAttention, attention_for
from inferasim.arch.linear_attention import state_bytes_per_seq
from inferasim.arch.memory import memory_plan
from inferasim.arch.params import param_counts
from inferasim.arch.sparse_attention import kv_resident_bytes
from inferasim.arch.spec import ModelSpec
from inferasim.cli.main import cli
from inferasim.config.catalog import load_entry
from inferasim.config.errors import ConfigError
from inferasim.config.loader import load_scenario
from inferasim.config.typed import build_spec
from inferasim.cost.oracle import AnalyticOracle, StepBatch

NAME = "qwen3.5-397b-a17b"
SETS = [f"model.name={NAME}", "gpu.name=h200", "parallel.tp=8"]
# At TP8 per layer: recurrent state 64/8 heads x 128 x 128 bf16, conv history 3 x
# (2*16*128 + 64*128)/8 channels bf16.
STATE_PER_LAYER_TP8 = 8 * 128 * 128 * 2 + 3 * (12288 // 8) * 2
# 15 full layers x 1 KV head per rank (2 heads over 8 ranks, replicated) x (256 + 256) x 2 B.
KV_PER_TOKEN_TP8 = 15 * 1 * 512 * 2


def _model_data() -> dict:
    data, _, _ = load_entry("models", NAME, key="model.name", origin_file="test")
    return data


def qwen35() -> ModelSpec:
    return build_spec(ModelSpec, _model_data(), prefix="model", default_file="test")


def all_full(model: ModelSpec) -> ModelSpec:
    """The same model with every layer full attention."""
    return attrs.evolve(model, attention=attrs.evolve(model.attention, linear=None))


def test_catalog_entry_loads_with_its_config():
    m = qwen35()
    lin = m.attention.linear
    assert (m.num_layers, m.hidden_size, m.num_attention_heads, m.num_kv_heads) == (60, 4096, 32, 2)
    assert (lin.layers, lin.key_heads, lin.value_heads, lin.conv_kernel) == (45, 16, 64, 4)
    counts = param_counts(m)
    # the name's labels: 397B total (a ~0.4B vision tower is not modelled), 17B active
    assert counts.total / 1e9 == pytest.approx(397, rel=0.01)
    assert counts.active / 1e9 == pytest.approx(17, rel=0.03)


def test_linear_layers_have_their_own_projection_weights():
    m = qwen35()
    # a linear layer here (4096 -> 2*2048 + 2*8192 + 128, 8192 -> 4096) is wider than a
    # gated full layer (4096 -> 16384 + 1024, 8192 -> 4096): counting every layer as full
    # would undercount
    assert param_counts(m).attention > param_counts(all_full(m)).attention


def test_kv_per_token_counts_only_the_full_layers():
    m = qwen35()
    hybrid = attention_for(m)
    full = attention_for(all_full(m))
    kw = dict(attn_tp=8, dcp=1, latent_sharded=False)
    assert hybrid.kv_layers() == 15 and full.kv_layers() == 60
    assert hybrid.kv_bytes_per_token("bf16", **kw) == KV_PER_TOKEN_TP8
    assert full.kv_bytes_per_token("bf16", **kw) == 4 * KV_PER_TOKEN_TP8


def test_state_per_sequence_is_constant_in_context():
    kind = attention_for(qwen35())
    ctx = np.array([1.0, 1024.0, 131072.0])
    per_token = kind.kv_bytes_per_token("bf16", attn_tp=8, dcp=1, latent_sharded=False)
    resident = kv_resident_bytes(kind, ctx, "bf16", attn_tp=8)
    fixed = resident - per_token * ctx
    assert np.allclose(fixed, 45 * STATE_PER_LAYER_TP8)
    # the states keep their own dtype under an fp8 KV cache
    assert kind.kv_fixed_bytes_per_seq("fp8", attn_tp=8) == 45 * STATE_PER_LAYER_TP8


def test_fp32_state_doubles_the_recurrent_part_only():
    lin = qwen35().attention.linear
    wide = attrs.evolve(lin, state_dtype="fp32")
    recurrent = 45 * 8 * 128 * 128 * 2
    assert state_bytes_per_seq(wide, 8) - state_bytes_per_seq(lin, 8) == recurrent


def test_memory_plan_sizes_the_pool_on_full_layers_and_charges_states_per_sequence():
    sc = load_scenario(overrides=SETS)
    plan = memory_plan(sc)
    assert plan.kv_bytes_per_token == KV_PER_TOKEN_TP8
    assert plan.kv_fixed_bytes_per_seq == 45 * STATE_PER_LAYER_TP8
    page = sc.engine.page_size
    tokens = -(-45 * STATE_PER_LAYER_TP8 // KV_PER_TOKEN_TP8)
    assert plan.kv_window_pool_tokens == -(-tokens // page) * page
    flat = memory_plan(attrs.evolve(sc, model=all_full(sc.model)))
    # same budget (the weights differ a little), four times the tokens
    assert plan.kv_pool_tokens / flat.kv_pool_tokens == pytest.approx(
        4 * plan.kv_budget_bytes / flat.kv_budget_bytes, rel=1e-3)


def test_decode_grows_with_context_only_through_the_full_layers():
    sc = load_scenario(overrides=SETS)
    hybrid = AnalyticOracle(sc)
    flat = AnalyticOracle(attrs.evolve(sc, model=all_full(sc.model)))

    def growth(oracle, short, long):
        price = [oracle.step(StepBatch(decode_context=np.full(8, float(c)))).seconds
                 for c in (short, long)]
        return price[1] - price[0]

    assert growth(hybrid, 4096, 131072) == pytest.approx(
        growth(flat, 4096, 131072) * 15 / 60, rel=1e-9)
    # the linear term is there, and the same at every context
    short = hybrid.step(StepBatch(decode_context=np.full(8, 1024.0))).breakdown
    long = hybrid.step(StepBatch(decode_context=np.full(8, 131072.0))).breakdown
    assert short["attn_decode_linear"] > 0
    assert short["attn_decode_linear"] == long["attn_decode_linear"]
    assert "attn_decode_linear" not in flat.step(
        StepBatch(decode_context=np.full(8, 1024.0))).breakdown


def test_decode_steps_agree_with_single_steps():
    # the hybrid leaves the oracle's linear fast path: the steady-batch path must still
    # price each step as step() does
    oracle = AnalyticOracle(load_scenario(overrides=SETS))
    ctx0 = np.array([1000.0, 5000.0, 20000.0])
    steps = oracle.decode_steps(ctx0, 4, 1.0, 1)
    single = [oracle.step(StepBatch(decode_context=ctx0 + j)).seconds for j in range(4)]
    assert np.allclose(steps, single, rtol=1e-9)


def test_prefill_linear_term_is_linear_in_the_chunk_and_blind_to_resident():
    kind = attention_for(qwen35())
    assert isinstance(kind, GqaAttention)
    chunk = np.array([2048.0, 4096.0, 4096.0])
    resident = np.array([0.0, 0.0, 100000.0])
    flops = kind.prefill(chunk, resident, "bf16").flops
    assert flops["linear"][1] == pytest.approx(2 * flops["linear"][0])
    assert flops["linear"][2] == flops["linear"][1]
    assert flops["dense"][2] > flops["dense"][1]


def _error(data: dict) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        build_spec(ModelSpec, data, prefix="model", default_file="qwen-test.yaml")
    return info.value


def test_bad_linear_blocks_name_the_file_and_key():
    data = _model_data()
    data["attention"]["linear"]["value_heads"] = 24
    err = _error(data)
    assert "key_heads" in str(err) and "qwen-test.yaml" in str(err)
    assert "model.attention.linear" in str(err)

    data = _model_data()
    data["attention"]["linear"]["layers"] = 60
    assert "leaves no full-attention layer" in str(_error(data))

    data = _model_data()
    data["attention"]["linear"]["conv_kernel"] = 0
    assert "model.attention.linear.conv_kernel" in str(_error(data))

    data = _model_data()
    data["attention"]["linear"]["state_dtype"] = "fp8"
    assert "expected one of bf16, fp16, fp32" in str(_error(data))


def test_describe_runs_for_the_hybrid():
    args = ["describe", "--json"] + [a for s in SETS for a in ("--set", s)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    described = json.loads(result.output)
    assert described["kv_bytes_per_token"] == KV_PER_TOKEN_TP8
    assert described["kv_fixed_bytes_per_seq"] == 45 * STATE_PER_LAYER_TP8
