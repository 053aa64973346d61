"""Each attention kind's FLOPs and bytes against hand-computed values (facts.md A.2, A.3, B.1)."""

from __future__ import annotations

import attrs
import numpy as np
import pytest

from inferasim.arch.attention import GqaAttention, MlaAttention, _causal_pairs, attention_for
from inferasim.arch.sparse_attention import (
    BlockSparseAttention,
    CompressedAttention,
    DsaAttention,
    kv_resident_bytes,
)
from inferasim.arch.spec import AttentionSpec, FfnSpec, IndexerSpec, ModelSpec
from inferasim.config.catalog import load_entry
from inferasim.config.errors import ConfigError
from inferasim.config.typed import build_spec


def catalog_model(name: str) -> ModelSpec:
    data, origins, _ = load_entry("models", name, key="model.name", origin_file="test")
    return build_spec(ModelSpec, data, prefix="model", default_file="test",
                      origins={f"model.{k}": v for k, v in origins.items()})


def _model(name, layers, heads, kv_heads, attention, hidden=7168) -> ModelSpec:
    return ModelSpec(name=name, source="test", num_layers=layers, hidden_size=hidden,
                     vocab_size=1000, num_attention_heads=heads, num_kv_heads=kv_heads,
                     attention=attention, ffn=FfnSpec(intermediate_size=1))


def v32() -> ModelSpec:
    """DeepSeek-V3.2 attention, built inline from facts.md A.1/A.3."""
    att = AttentionSpec(kind="mla_dsa", head_dim=192, v_head_dim=128, q_lora_rank=1536,
                        kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64,
                        indexer=IndexerSpec(n_heads=64, head_dim=128, topk=2048),
                        kv_entry_bytes={"bf16": 1152, "fp8": 656})
    return _model("v3.2", 61, 128, 128, att)


def glm52() -> ModelSpec:
    att = AttentionSpec(kind="mla_dsa", head_dim=256, v_head_dim=256, q_lora_rank=2048,
                        kv_lora_rank=512, qk_nope_head_dim=192, qk_rope_head_dim=64,
                        indexer=IndexerSpec(n_heads=32, head_dim=128, topk=2048, full_layers=21),
                        kv_entry_bytes={"bf16": 1152, "fp8": 656})
    return _model("glm-5.2", 78, 64, 64, att, hidden=6144)


def m3() -> ModelSpec:
    att = AttentionSpec(kind="gqa_block_sparse", head_dim=128, dense_layers=3, block_size=128,
                        indexer=IndexerSpec(n_heads=4, head_dim=128, topk=16,
                                            key_bytes_per_token=1024))
    return _model("m3", 60, 64, 4, att, hidden=6144)


V4_PRO_RATIOS = [128, 128] + [4, 128] * 29 + [4]
V4_FLASH_RATIOS = [0, 0] + [4, 128] * 20 + [4]


def v4(pro: bool = True) -> ModelSpec:
    att = AttentionSpec(kind="dsv4_compressed", head_dim=512, v_head_dim=512,
                        qk_nope_head_dim=448, qk_rope_head_dim=64,
                        q_lora_rank=1536 if pro else 1024, o_lora_rank=1024,
                        o_groups=16 if pro else 8, sliding_window=128,
                        indexer=IndexerSpec(n_heads=64, head_dim=128, topk=1024 if pro else 512),
                        compress_ratios=V4_PRO_RATIOS if pro else V4_FLASH_RATIOS,
                        kv_entry_bytes={"fp8": 584, "bf16": 1024})
    if pro:
        return _model("v4-pro", 61, 128, 1, att)
    return _model("v4-flash", 43, 64, 1, att, hidden=4096)


CTX = np.array([1000.0, 2048.0, 100_000.0, 131072.0])


# -- dispatch --------------------------------------------------------------------------------
def test_attention_for_dispatches_each_kind():
    assert type(attention_for(v32())) is DsaAttention
    assert type(attention_for(m3())) is BlockSparseAttention
    assert type(attention_for(v4())) is CompressedAttention


# -- dense kinds (attention.py) ---------------------------------------------------------------
def test_mla_dense_v3_bytes_and_absorbed_flops():
    att = attrs.evolve(v32().attention, kind="mla", indexer=None, kv_entry_bytes={})
    kind = MlaAttention(_model("v3", 61, 128, 128, att))
    assert kind.kv_bytes_per_token("bf16", attn_tp=8, dcp=1, latent_sharded=False) == 70272
    assert kind.kv_bytes_per_token("fp8", attn_tp=8, dcp=1, latent_sharded=False) == 35136
    cost = kind.decode(np.array([4096.0]), 1, "bf16")
    assert cost.flops["dense"][0] == 61 * 2 * 128 * (576 + 512) * 4096
    assert cost.bytes["dense"][0] == 61 * 1152 * 4096


def test_gqa_sliding_window_fixed_bytes():
    att = AttentionSpec(kind="gqa", head_dim=64, sliding_window=128, sliding_layers=18)
    kind = GqaAttention(_model("gpt-oss", 36, 64, 8, att, hidden=2880))
    assert kind.kv_bytes_per_token("bf16", attn_tp=1, dcp=1, latent_sharded=False) == 36864
    assert kind.kv_fixed_bytes_per_seq("bf16", attn_tp=1) == 18 * 128 * 2048  # 4.5 MiB


# -- DSA --------------------------------------------------------------------------------------
def test_dsa_v32_decode_selection_and_indexing():
    kind = DsaAttention(v32())
    cost = kind.decode(CTX, 1, "fp8")
    sel = np.minimum(CTX, 2048)
    # facts B.1: sparse MLA 2*128*min(L,2048)*(576+512) per query token per layer.
    np.testing.assert_allclose(cost.flops["selection"], 61 * 2 * 128 * sel * (576 + 512))
    # facts B.1: indexer logits 16,384*L FLOP per layer, reading L*132 B of index K.
    assert 2 * 64 * 128 == 16384
    np.testing.assert_allclose(cost.flops["indexing"], 61 * 16384 * CTX)
    np.testing.assert_allclose(cost.bytes["selection"], 61 * 656 * sel)
    np.testing.assert_allclose(cost.bytes["indexing"], 61 * (132 + 8) * CTX)
    assert set(cost.flops) == {"selection", "indexing"}
    # About 570 MFLOP of sparse MLA per query token per layer at L >= 2048.
    assert cost.flops["selection"][-1] / 61 == pytest.approx(570e6, rel=0.01)


def test_dsa_verify_width():
    kind = DsaAttention(v32())
    one, two = kind.decode(CTX, 1, "fp8"), kind.decode(CTX, 2, "fp8")
    np.testing.assert_allclose(two.flops["selection"], 2 * one.flops["selection"])
    np.testing.assert_allclose(two.flops["indexing"], 2 * one.flops["indexing"])
    # Each verify query picks its own top-k: distinct tokens read at most min(ctx, 2*topk).
    np.testing.assert_allclose(two.bytes["selection"], 61 * 656 * np.minimum(CTX, 4096))


def test_dsa_dense_reference_is_dense_mla():
    kind = DsaAttention(v32())
    ref = kind.dense_reference(CTX, 1, "bf16")
    assert set(ref.flops) == {"dense"}
    np.testing.assert_allclose(ref.flops["dense"], 61 * 2 * 128 * 1088 * CTX)
    np.testing.assert_allclose(ref.bytes["dense"], 61 * 1152 * CTX)


def test_dsa_kv_bytes_facts():
    kind = DsaAttention(v32())
    kw = dict(attn_tp=8, dcp=1, latent_sharded=False)
    assert kind.kv_bytes_per_token("fp8", **kw) == 48068   # 61 x (656 + 132)
    assert kind.kv_bytes_per_token("bf16", **kw) == 78324  # 61 x (1152 + 132)
    assert kind.index_key_bytes_per_token() == 61 * 132
    # Index keys keep their fp8 + scale layout whatever the KV dtype and are not split by TP
    # or DCP; DCP splits the MLA part, a sharded latent splits it by attention-TP.
    assert kind.kv_bytes_per_token("fp8", attn_tp=8, dcp=4, latent_sharded=False) \
        == 61 * 656 / 4 + 61 * 132
    assert kind.kv_bytes_per_token("fp8", attn_tp=8, dcp=1, latent_sharded=True) \
        == 61 * 656 / 8 + 61 * 132
    assert kind.kv_fixed_bytes_per_seq("fp8", attn_tp=8) == 0


def test_dsa_prefill():
    kind = DsaAttention(v32())
    chunk, resident = np.array([4096.0, 8192.0]), np.array([0.0, 65536.0])
    cost = kind.prefill(chunk, resident, "bf16")
    # Chunk of 4096 from empty: queries 1..2048 see i keys, the rest see 2048.
    capped0 = 2048 * 2049 / 2 + 2048 * 2048
    assert cost.flops["selection"][0] == 61 * 2 * 128 * 1088 * capped0
    assert cost.flops["selection"][1] == 61 * 2 * 128 * 1088 * 8192 * 2048
    pairs = chunk * resident + chunk * (chunk + 1) / 2
    np.testing.assert_allclose(cost.flops["indexing"], 61 * 16384 * pairs)
    np.testing.assert_allclose(cost.bytes["selection"], 61 * 1152 * (resident + chunk))


def test_glm52_indexer_on_full_layers_only():
    kind = DsaAttention(glm52())
    assert kind.indexer_layers() == 21 and kind.sparse_layers() == 78
    cost = kind.decode(CTX, 1, "fp8")
    np.testing.assert_allclose(cost.flops["indexing"], 21 * 2 * 32 * 128 * CTX)
    np.testing.assert_allclose(cost.flops["selection"],
                               78 * 2 * 64 * 1088 * np.minimum(CTX, 2048))
    assert kind.kv_bytes_per_token("fp8", attn_tp=1, dcp=1, latent_sharded=False) \
        == 78 * 656 + 21 * 132


def test_glm51_catalog_kv_bytes():
    kind = attention_for(catalog_model("glm-5.1"))
    assert kind.kv_bytes_per_token("fp8", attn_tp=8, dcp=1, latent_sharded=False) == 61464
    assert kind.kv_bytes_per_token("bf16", attn_tp=8, dcp=1, latent_sharded=False) == 100152


# -- block-sparse (MiniMax-M3) ------------------------------------------------------------------
def test_block_sparse_decode():
    kind = BlockSparseAttention(m3())
    assert kind.selected_tokens() == (16 + 1) * 128
    cost = kind.decode(CTX, 1, "bf16")
    per_key = 2 * 64 * (128 + 128)
    np.testing.assert_allclose(cost.flops["dense"], 3 * per_key * CTX)
    np.testing.assert_allclose(cost.flops["selection"], 57 * per_key * np.minimum(CTX, 2176))
    np.testing.assert_allclose(cost.flops["indexing"], 57 * 2 * 4 * 128 * CTX)
    np.testing.assert_allclose(cost.bytes["selection"], 57 * 2048 * np.minimum(CTX, 2176))
    assert kind.indexer_dtype() == "bf16"
    ref = kind.dense_reference(CTX, 1, "bf16")
    np.testing.assert_allclose(ref.flops["dense"], 60 * per_key * CTX)


def test_block_sparse_kv_and_prefill():
    kind = BlockSparseAttention(m3())
    # 60 layers x 4 KV heads x 256 x 2 B, plus 57 x 1024 B of index keys (not split by TP).
    assert kind.kv_bytes_per_token("bf16", attn_tp=1, dcp=1, latent_sharded=False) \
        == 122880 + 57 * 1024
    assert kind.kv_bytes_per_token("bf16", attn_tp=4, dcp=1, latent_sharded=False) \
        == 122880 / 4 + 57 * 1024
    # fp8 KV halves the KV heads' bytes; the index keys keep the stack dtype (behaviour.md 3).
    assert kind.kv_bytes_per_token("fp8", attn_tp=1, dcp=1, latent_sharded=False) \
        == 122880 / 2 + 57 * 1024
    cost = kind.prefill(np.array([8192.0]), np.array([0.0]), "bf16")
    assert cost.flops["selection"][0] == 57 * 2 * 64 * 256 * _causal_pairs(
        np.array([8192.0]), np.array([0.0]), 2176.0)[0]


# -- DeepSeek-V4 ------------------------------------------------------------------------------
def test_v4_kv_bytes_facts():
    pro, flash = CompressedAttention(v4(True)), CompressedAttention(v4(False))
    kw = dict(attn_tp=1, dcp=1, latent_sharded=False)
    assert (pro.n_c4, pro.n_c128, pro.n_window_only) == (30, 31, 0)
    assert (flash.n_c4, flash.n_c128, flash.n_window_only) == (21, 20, 2)
    assert pro.kv_bytes_per_token("fp8", **kw) == pytest.approx(5511.44, abs=0.01)
    assert flash.kv_bytes_per_token("fp8", **kw) == pytest.approx(3850.25, abs=0.01)
    assert pro.kv_fixed_bytes_per_seq("fp8", attn_tp=1) == 4559872     # 4.35 MiB
    assert flash.kv_fixed_bytes_per_seq("fp8", attn_tp=1) == 3214336   # 3.07 MiB
    assert pro.kv_fixed_bytes_per_seq("bf16", attn_tp=1) == 7995392
    # bf16 entries with the index keys kept fp8 (132 B): 30 x (256 + 33) + 31 x 8.
    assert pro.kv_bytes_per_token("bf16", **kw) == 8918
    # The vLLM blog's all-bf16 figure (256-B index keys) is the same formula: 9,848 B/token.
    bf16_idx = attrs.evolve(v4(True).attention,
                            indexer=IndexerSpec(n_heads=64, head_dim=128, topk=1024,
                                                key_bytes_per_token=256))
    blog = CompressedAttention(attrs.evolve(v4(True), attention=bf16_idx))
    assert blog.kv_bytes_per_token("bf16", **kw) == 9848
    # DCP splits the pools, not the index keys.
    assert pro.kv_bytes_per_token("fp8", attn_tp=1, dcp=2, latent_sharded=False) \
        == pytest.approx((30 * 146 + 31 * 4.5625) / 2 + 30 * 33)


def test_v4_catalog_matches_inline():
    for name, pro in (("deepseek-v4-pro", True), ("deepseek-v4-flash", False)):
        cat = attention_for(catalog_model(name))
        inline = CompressedAttention(v4(pro))
        kw = dict(attn_tp=1, dcp=1, latent_sharded=False)
        assert cat.kv_bytes_per_token("fp8", **kw) == inline.kv_bytes_per_token("fp8", **kw)
        assert cat.kv_fixed_bytes_per_seq("fp8", attn_tp=1) \
            == inline.kv_fixed_bytes_per_seq("fp8", attn_tp=1)


def test_v4_resident_bytes_are_pools_plus_window():
    pro = CompressedAttention(v4(True))
    ctx = np.array([131072.0])
    got = kv_resident_bytes(pro, ctx, "fp8")
    assert got[0] == pytest.approx(4559872 + 5511.4375 * 131072)
    dense_read = DsaAttention(v32()).kv_bytes_per_token("fp8", attn_tp=1, dcp=1,
                                                        latent_sharded=False) * 131072
    assert got[0] < dense_read / 5


def test_v4_decode_terms():
    pro = CompressedAttention(v4(True))
    per = 2 * 128 * (512 + 512)
    cost = pro.decode(np.array([1000.0, 131072.0]), 1, "fp8")
    assert set(cost.flops) == {"window", "pool", "indexing"}
    np.testing.assert_allclose(cost.flops["window"], 61 * per * 128)
    # ctx 1000: 250 c4 entries (all of them, under top-k 1024), 7 c128 entries.
    # ctx 128k: top-1024 of 32768 c4 entries, all 1024 c128 entries.
    np.testing.assert_allclose(cost.flops["pool"],
                               [(30 * 250 + 31 * 7) * per, (30 * 1024 + 31 * 1024) * per])
    np.testing.assert_allclose(cost.flops["indexing"], [30 * 16384 * 250, 30 * 16384 * 32768])
    np.testing.assert_allclose(cost.bytes["window"], 61 * 584 * 128)
    np.testing.assert_allclose(cost.bytes["pool"], [(30 * 250 + 31 * 7) * 584,
                                                    (30 * 1024 + 31 * 1024) * 584])
    np.testing.assert_allclose(cost.bytes["indexing"], [30 * 140 * 250, 30 * 140 * 32768])
    ref = pro.dense_reference(np.array([131072.0]), 1, "fp8")
    assert ref.flops["dense"][0] == 61 * per * 131072
    assert ref.bytes["dense"][0] == 61 * 584 * 131072


def test_v4_prefill_terms():
    pro = CompressedAttention(v4(True))
    per = 2 * 128 * 1024
    chunk, resident = np.array([8192.0]), np.array([131072.0 - 8192])
    cost = pro.prefill(chunk, resident, "bf16")
    pairs = 8192 * resident[0] + 8192 * 8193 / 2
    # Every query is past 4 x topk tokens: the c4 pool is topk per query.
    assert cost.flops["pool"][0] == pytest.approx((30 * 8192 * 1024 + 31 * pairs / 128) * per)
    assert cost.flops["window"][0] == 61 * per * 8192 * 128
    assert cost.flops["indexing"][0] == pytest.approx(30 * 16384 * pairs / 4)


def test_v4_bad_schedule_is_config_error():
    bad = attrs.evolve(v4(True).attention, compress_ratios=[4] * 60)
    with pytest.raises(ConfigError, match="compress_ratios"):
        CompressedAttention(attrs.evolve(v4(True), attention=bad))
    bad = attrs.evolve(v4(True).attention, compress_ratios=[8] * 61)
    with pytest.raises(ConfigError, match="compress_ratios"):
        CompressedAttention(attrs.evolve(v4(True), attention=bad))


def test_sparse_kind_without_indexer_is_config_error():
    att = attrs.evolve(v32().attention, indexer=None)
    with pytest.raises(ConfigError, match="indexer"):
        DsaAttention(attrs.evolve(v32(), attention=att))
