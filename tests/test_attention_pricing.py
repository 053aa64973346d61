"""Attention seconds: rates per term, the indexer's kernel scale, attention-DP decode and its knob."""

from __future__ import annotations

import attrs
import numpy as np
import pytest

from inferasim.arch.attention import AttentionCost, GqaAttention, attention_for
from inferasim.arch.gpu import Efficiency, GpuSpec
from inferasim.arch.sparse_attention import decode_attention_cost
from inferasim.arch.spec import AttentionSpec, FfnSpec, ModelSpec
from inferasim.config.catalog import load_entry
from inferasim.config.knobs import Knobs
from inferasim.config.typed import build_spec
from inferasim.cost.attention_time import (
    attention_math_dtype,
    attention_seconds,
    kind_attention_seconds,
)


def _catalog(kind: str, cls, name: str):
    data, origins, _ = load_entry(kind, name, key=kind, origin_file="test")
    prefix = kind[:-1]
    return build_spec(cls, data, prefix=prefix, default_file="test",
                      origins={f"{prefix}.{k}": v for k, v in origins.items()})


def model(name: str) -> ModelSpec:
    return _catalog("models", ModelSpec, name)


def gpu(name: str) -> GpuSpec:
    return _catalog("gpus", GpuSpec, name)


def toy_gpu(**kw) -> GpuSpec:
    base = dict(name="toy", source="test", vendor="amd", arch="cdna4", isa="gfx950",
                hbm_bytes=1e11, hbm_bw=1e12, bf16_flops=1e15, fp8_flops=2e15, fp4_flops=None,
                scaleup_bw_per_dir=1e11, scaleup_domain=8,
                efficiency=Efficiency(gemm=1.0, attention=1.0, memory=1.0, collective=1.0),
                step_overhead_s=0.0, collective_latency_s=0.0, sparse_indexer_cost_scale=1.0)
    base.update(kw)
    return GpuSpec(**base)


def ratio(kind, g, ctx, *, phase="dpa-decode", kv_dtype="fp8", width=1, **kw):
    ctx = np.asarray(ctx, dtype=np.float64)
    args = dict(phase=phase, attn_tp=1, kv_bytes_divisor=1.0, kv_dtype=kv_dtype, **kw)
    run = kind_attention_seconds(kind, kind.decode(ctx, width, kv_dtype), g, **args)
    ref = kind_attention_seconds(kind, kind.dense_reference(ctx, width, kv_dtype), g, **args)
    return sum(run.values()) / sum(ref.values()), run, ref


# -- rates ------------------------------------------------------------------------------------
def test_indexer_rate_scale_and_replication():
    g = toy_gpu(sparse_indexer_cost_scale=2.5)
    cost = AttentionCost({"selection": np.array([8e12]), "indexing": np.array([8e12])},
                         {"selection": np.array([0.0]), "indexing": np.array([0.0])})
    secs = attention_seconds(cost, g, phase="prefill", attn_tp=4, kv_bytes_divisor=4)
    assert secs["selection"][0] == pytest.approx(8e12 / (1e15 * 4))
    # The indexer is replicated on every TP rank (not divided by attn_tp), fp8 rate / scale.
    assert secs["indexing"][0] == pytest.approx(8e12 / (2e15 / 2.5))
    over = attention_seconds(cost, g, phase="prefill", attn_tp=4, kv_bytes_divisor=4,
                             indexer_cost_scale=1.0)
    assert over["indexing"][0] == pytest.approx(8e12 / 2e15)


def test_dpa_decode_of_grouped_kv_kinds_keeps_the_roofline():
    # A GQA rank holding every head of its sequences still reads each KV head for only its
    # group of query heads: its decode attention stays bound by the KV read under DPA.
    g = gpu("mi355x")
    ctx = np.array([8192.0, 131072.0])
    for name in ("llama-3.1-70b", "minimax-m3"):
        kind = attention_for(model(name))
        cost = kind.decode(ctx, 1, "bf16")
        kw = dict(attn_tp=1, kv_bytes_divisor=1.0, kv_dtype="bf16")
        dpa = kind_attention_seconds(kind, cost, g, phase="dpa-decode", **kw)
        dec = kind_attention_seconds(kind, cost, g, phase="decode", **kw)
        for term in dpa:
            np.testing.assert_allclose(dpa[term], dec[term])
        read = cost.bytes["dense"] / (g.hbm_bw * g.efficiency.memory)
        assert (dpa["dense"] >= read * (1 - 1e-12)).all()
    # MLA keeps compute-only pricing there (every query head over one shared latent).
    r1 = attention_for(model("deepseek-r1"))
    cost = r1.decode(ctx, 1, "fp8")
    dpa = kind_attention_seconds(r1, cost, g, phase="dpa-decode", attn_tp=1,
                                 kv_bytes_divisor=1.0, kv_dtype="fp8")
    math = attention_math_dtype(g, phase="dpa-decode", kv_dtype="fp8", attention_kind="mla")
    np.testing.assert_allclose(dpa["dense"], cost.flops["dense"]
                               / (g.peak_flops(math) * g.efficiency.attention))


def test_decode_roofline_and_dpa_compute_only():
    g = toy_gpu()
    cost = AttentionCost({"dense": np.array([1e9])}, {"dense": np.array([1e9])})
    dec = attention_seconds(cost, g, phase="decode", attn_tp=1, kv_bytes_divisor=1)
    dpa = attention_seconds(cost, g, phase="dpa-decode", attn_tp=1, kv_bytes_divisor=1)
    assert dec["dense"][0] == pytest.approx(1e-3)   # 1 GB at 1 TB/s
    assert dpa["dense"][0] == pytest.approx(1e-6)   # 1 GFLOP at 1 PFLOP/s
    with pytest.raises(ValueError):
        attention_seconds(cost, g, phase="nope", attn_tp=1, kv_bytes_divisor=1)


def test_attention_math_dtype():
    amd, nv = toy_gpu(), toy_gpu(vendor="nvidia", arch="hopper", isa="sm90")
    assert attention_math_dtype(amd, phase="dpa-decode", kv_dtype="fp8", attention_kind="mla_dsa") == "fp8"
    assert attention_math_dtype(amd, phase="decode", kv_dtype="fp8", attention_kind="mla") == "fp8"
    assert attention_math_dtype(amd, phase="prefill", kv_dtype="fp8", attention_kind="mla") == "bf16"
    assert attention_math_dtype(amd, phase="decode", kv_dtype="bf16", attention_kind="mla") == "bf16"
    assert attention_math_dtype(nv, phase="decode", kv_dtype="fp8", attention_kind="mla") == "bf16"
    assert attention_math_dtype(amd, phase="decode", kv_dtype="fp8",
                                attention_kind="dsv4_compressed") == "bf16"
    assert attention_math_dtype(amd, phase="decode", kv_dtype="fp8", attention_kind="gqa") == "bf16"


# -- GLM-5.2: the reference figures -------------------------------------------------------------
def test_glm52_fused_mi355x_reproduces_reference():
    kind = attention_for(model("glm-5.2"))
    r, run, _ = ratio(kind, gpu("mi355x"), [131072, 373760])
    assert r[0] == pytest.approx(0.032, abs=0.002)
    assert r[1] == pytest.approx(0.021, abs=0.002)
    # Selection is flat in context, indexing grows with it.
    assert run["selection"][0] == pytest.approx(run["selection"][1])
    assert run["indexing"][1] == pytest.approx(run["indexing"][0] * 373760 / 131072)
    # In FLOPs the same figure: topk/L + (21 x 8192) / (78 x 139264).
    flop = 2048 / np.array([131072, 373760]) + 21 * 8192 / (78 * 2 * 64 * 1088)
    np.testing.assert_allclose(r, flop, rtol=1e-9)


def test_glm52_unfused_indexer_costs_more():
    kind = attention_for(model("glm-5.2"))
    fused, _, _ = ratio(kind, gpu("mi355x"), [131072, 373760])
    gfx942, _, _ = ratio(kind, gpu("mi325x"), [131072, 373760])
    forced, _, _ = ratio(kind, gpu("mi355x"), [131072, 373760], indexer_cost_scale=2.5)
    assert np.all(gfx942 > fused + 0.01)
    np.testing.assert_allclose(forced, gfx942)


def test_glm52_bf16_kv_is_cheaper_relative_to_dense():
    # bf16 KV: attention math at bf16, the fp8 indexer twice as fast relative to it.
    kind = attention_for(model("glm-5.2"))
    r, _, _ = ratio(kind, gpu("mi355x"), [131072, 373760], kv_dtype="bf16")
    flop = 2048 / np.array([131072, 373760]) + 21 * 8192 / (78 * 2 * 64 * 1088) / 2
    np.testing.assert_allclose(r, flop, rtol=1e-9)


# -- DeepSeek-V4-Pro -------------------------------------------------------------------------
def test_v4_pro_growth_comes_from_indexer():
    kind = attention_for(model("deepseek-v4-pro"))
    ctx = np.array([131072.0, 262144.0, 524288.0, 1048576.0])
    cost = kind.decode(ctx, 1, "fp8")
    # Window: constant. Pool: bounded per token of context. Indexing: linear in context.
    np.testing.assert_allclose(cost.flops["window"], cost.flops["window"][0])
    per_tok_pool = cost.flops["pool"] / ctx
    assert np.all(np.diff(per_tok_pool) <= 0)
    np.testing.assert_allclose(cost.flops["indexing"] / ctx, cost.flops["indexing"][0] / ctx[0])
    growth = {k: v[-1] - v[0] for k, v in cost.flops.items()}
    assert growth["indexing"] > growth["pool"] + growth["window"]
    # In a decode step (roofline) the indexer is most of the added time too.
    secs = kind_attention_seconds(kind, cost, gpu("mi355x"), phase="decode", attn_tp=1,
                                  kv_bytes_divisor=1.0, kv_dtype="fp8")
    tgrowth = {k: v[-1] - v[0] for k, v in secs.items()}
    assert tgrowth["indexing"] > 2 * (tgrowth["pool"] + tgrowth["window"])


def test_v4_pro_dpa_decode_below_dense_and_knob_restores_dense():
    kind = attention_for(model("deepseek-v4-pro"))
    g, ctx = gpu("mi355x"), np.array([131072.0])
    kw = dict(phase="dpa-decode", attn_tp=1, kv_bytes_divisor=1.0, kv_dtype="fp8")
    run = kind_attention_seconds(kind, decode_attention_cost(kind, ctx, 2, "fp8", dense=False),
                                 g, **kw)
    knobs = Knobs.from_mapping({"INFERASIM_DPA_DECODE_DENSE": "1"})
    dense = kind_attention_seconds(
        kind, decode_attention_cost(kind, ctx, 2, "fp8", dense=knobs.dpa_decode_dense), g, **kw)
    run_s, dense_s = sum(run.values())[0], sum(dense.values())[0]
    # Attended entries per query at 128k: 61 x 128 window + 30 x 1024 + 31 x 1024 pool, against
    # 61 x 131072 dense, i.e. 1/114; with the indexer the step is still ~1/80 of dense.
    assert run_s < dense_s / 50
    assert set(dense) == {"dense"}
    ref = kind_attention_seconds(kind, kind.dense_reference(ctx, 2, "fp8"), g, **kw)
    assert dense_s == pytest.approx(sum(ref.values())[0])
    assert not Knobs.from_mapping({}).dpa_decode_dense


def test_decode_attention_cost_configured_scale_only_for_dense_kinds():
    att = AttentionSpec(kind="gqa", head_dim=128)
    m = ModelSpec(name="g", source="t", num_layers=4, hidden_size=1024, vocab_size=10,
                  num_attention_heads=8, num_kv_heads=8, attention=att,
                  ffn=FfnSpec(intermediate_size=1))
    kind = GqaAttention(m)
    ctx = np.array([1000.0])
    base = decode_attention_cost(kind, ctx, 1, "bf16", dense=False)
    scaled = decode_attention_cost(kind, ctx, 1, "bf16", dense=False, scale=0.25)
    assert scaled.flops["dense"][0] == pytest.approx(0.25 * base.flops["dense"][0])
    # Selection and compression win over a configured scale.
    v4 = attention_for(model("deepseek-v4-pro"))
    a = decode_attention_cost(v4, ctx, 1, "fp8", dense=False, scale=0.25)
    b = v4.decode(ctx, 1, "fp8")
    assert a.flops == b.flops


def test_configured_dpa_decode_scale_reaches_the_oracle():
    from inferasim.config.loader import load_scenario
    from inferasim.cost.oracle import AnalyticOracle, StepBatch

    def attention_ms(name, dpa, *extra, knobs=None):
        sc = load_scenario(None, [f"model.name={name}", "gpu.name=mi355x", "parallel.tp=8",
                                  f"parallel.dp_attention={dpa}", *extra])
        cost = AnalyticOracle(sc, knobs).step(StepBatch(decode_context=np.full(8, 32768.0)))
        return {k: v for k, v in cost.breakdown.items() if k.startswith("attn")}

    scale = "engine.dpa_decode_attention_scale=0.25"
    for name in ("deepseek-r1", "llama-3.1-70b"):  # kinds that neither select nor compress
        plain, scaled = attention_ms(name, 8), attention_ms(name, 8, scale)
        assert scaled == pytest.approx({k: 0.25 * v for k, v in plain.items()})
        assert attention_ms(name, 1, scale) == attention_ms(name, 1)  # DPA decode only
        dense = Knobs(dpa_decode_dense=True)
        assert attention_ms(name, 8, scale, knobs=dense) == attention_ms(name, 8, knobs=dense)
    # Selection prices itself: the scale does not act on a DSA model.
    assert attention_ms("deepseek-v3.2", 8, scale) == attention_ms("deepseek-v3.2", 8)


def test_dense_kinds_ratio_one():
    kind = attention_for(model("llama-3.1-8b"))
    r, _, _ = ratio(kind, gpu("h100"), [8192, 131072], kv_dtype="bf16")
    np.testing.assert_allclose(r, 1.0)


def test_kind_seconds_use_kind_indexer_dtype():
    # MiniMax-M3 keeps a bf16 index cache: its indexer runs at the bf16 rate.
    m3 = attention_for(model("minimax-m3"))
    cost = m3.decode(np.array([131072.0]), 1, "bf16")
    g = toy_gpu(hbm_bw=1e18)  # memory never binds: the rate is what is read here
    secs = kind_attention_seconds(m3, cost, g, phase="dpa-decode", attn_tp=1,
                                  kv_bytes_divisor=1.0, kv_dtype="bf16")
    assert secs["indexing"][0] == pytest.approx(cost.flops["indexing"][0] / 1e15)
    g2 = attrs.evolve(g, sparse_indexer_cost_scale=3.0)
    secs2 = kind_attention_seconds(m3, cost, g2, phase="dpa-decode", attn_tp=1,
                                   kv_bytes_divisor=1.0, kv_dtype="bf16")
    assert secs2["indexing"][0] == pytest.approx(3 * secs["indexing"][0])


# -- the sparse-MLA kernel's padded heads -------------------------------------------------------
def test_a_rank_with_fewer_heads_than_the_kernel_runs_pays_for_the_padded_ones():
    from inferasim.cost.attention_time import selection_padding

    h200, b200, mi355x = gpu("h200"), gpu("b200"), gpu("mi355x")
    # GLM-5's 64 heads over TP8: 8 a rank, padded to FlashMLA's 64
    assert selection_padding(h200, heads=64, attn_tp=8, kv_dtype="bf16") == 8.0
    assert selection_padding(h200, heads=64, attn_tp=1, kv_dtype="bf16") == 1.0  # DPA: all 64
    # DeepSeek-V3.2's 128 over TP8 on Blackwell: the BF16 prefill kernel runs 128, FP8 64
    assert selection_padding(b200, heads=128, attn_tp=8, kv_dtype="bf16") == 8.0
    assert selection_padding(b200, heads=128, attn_tp=8, kv_dtype="fp8") == 4.0
    assert selection_padding(h200, heads=96, attn_tp=1, kv_dtype="fp8") == pytest.approx(128 / 96)
    # no multiple on the AMD parts: their measured kernel scale covers their kernels
    assert selection_padding(mi355x, heads=64, attn_tp=8, kv_dtype="bf16") == 1.0


def test_only_the_dsa_selection_term_is_padded():
    glm = attention_for(model("glm-5"))
    ctx = np.array([16384.0])
    g = gpu("h200")
    bare = attrs.evolve(g, sparse_mla_head_multiple={})
    for phase, cost in (("prefill", glm.prefill(np.array([8192.0]), ctx, "bf16")),
                        ("decode", glm.decode(ctx, 1, "bf16"))):
        args = dict(phase=phase, attn_tp=8, kv_bytes_divisor=1.0, kv_dtype="bf16")
        padded = kind_attention_seconds(glm, cost, g, **args)
        plain = kind_attention_seconds(glm, cost, bare, **args)
        assert padded["indexing"] == pytest.approx(plain["indexing"])
        compute = cost.flops["selection"][0] / (g.peak_flops("bf16") * g.efficiency.attention * 8)
        if phase == "prefill":
            assert padded["selection"][0] == pytest.approx(8 * plain["selection"][0])
        else:  # the roofline: the padded compute against the same bytes
            assert padded["selection"][0] == pytest.approx(
                max(8 * compute, plain["selection"][0]))
    # MiniMax-M3's block-sparse GQA runs no FlashMLA kernel
    m3 = attention_for(model("minimax-m3"))
    cost = m3.prefill(np.array([8192.0]), ctx, "bf16")
    args = dict(phase="prefill", attn_tp=8, kv_bytes_divisor=8.0, kv_dtype="bf16")
    assert kind_attention_seconds(m3, cost, g, **args)["selection"] == pytest.approx(
        kind_attention_seconds(m3, cost, bare, **args)["selection"])


@pytest.mark.parametrize("value, words", [({"fp16": 64}, "expected KV dtypes bf16 and fp8"),
                                          ({"fp8": 0}, "at least 1")])
def test_a_bad_head_multiple_is_an_error_naming_the_key(value, words):
    from inferasim.config.errors import ConfigError

    data, origins, _ = load_entry("gpus", "h100", key="gpus", origin_file="test")
    data = {**data, "sparse_mla_head_multiple": value}
    with pytest.raises(ConfigError, match=f"sparse_mla_head_multiple.*{words}"):
        build_spec(GpuSpec, data, prefix="gpu", default_file="h100.yaml")
