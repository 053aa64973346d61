"""The catalog under scenarios/bases/: every entry builds through the loader and carries the
figures of ../shared/reference/facts.md (models A.1-A.4, GPUs C.1-C.2) and engines.md."""

from __future__ import annotations

import attrs
import pytest

from inferasim.arch.gpu import GpuSpec
from inferasim.arch.spec import ModelSpec
from inferasim.config.catalog import catalog_names, load_entry
from inferasim.config.scenario import EngineSpec
from inferasim.config.typed import build_spec

SPEC_CLASSES = {"models": ModelSpec, "gpus": GpuSpec, "engines": EngineSpec}

EXPECTED_NAMES = {
    "models": {
        "deepseek-r1", "deepseek-v3", "deepseek-v3.2", "deepseek-v4-flash", "deepseek-v4-pro",
        "glm-4.5", "glm-4.6", "glm-5", "glm-5.1", "glm-5.2", "minimax-m2", "minimax-m2.5",
        "minimax-m2.7", "minimax-m3", "kimi-k2", "kimi-k2.5", "qwen3-235b-a22b",
        "llama-3.1-8b", "llama-3.1-70b", "gpt-oss-120b",
        # added with the engine-log memory checks (tests/test_engine_memory_logs.py)
        "llama-3.3-70b", "qwq-32b", "kimi-k2.7", "qwen3.5-397b-a17b", "qwen3-8b",
    },
    "gpus": {"mi300x", "mi325x", "mi350x", "mi355x", "h100", "h200", "b200", "gb200", "b300",
             "gb300", "l4", "a100"},
    "engines": {"vllm", "sglang", "mori-sglang", "atom", "trt"},
}

ALL_ENTRIES = [(kind, name) for kind in SPEC_CLASSES for name in sorted(EXPECTED_NAMES[kind])]


def load(kind: str, name: str):
    data, origins, path = load_entry(kind, name, key=f"{kind}.name", origin_file="<test>")
    return build_spec(SPEC_CLASSES[kind], data, origins=origins, default_file=str(path))


def model(name: str) -> ModelSpec:
    return load("models", name)


# ---------------------------------------------------------------------------------------------
# Every entry


@pytest.mark.parametrize("kind", sorted(SPEC_CLASSES))
def test_catalog_holds_exactly_the_expected_entries(kind):
    assert set(catalog_names(kind)) == EXPECTED_NAMES[kind]


@pytest.mark.parametrize(("kind", "name"), ALL_ENTRIES)
def test_entry_builds_and_names_itself_and_its_source(kind, name):
    spec = load(kind, name)
    # An entry that extends another must not inherit the parent's name.
    assert spec.name == name
    assert spec.source.strip()


# ---------------------------------------------------------------------------------------------
# Models: the inputs of the per-layer KV bytes (facts A.2)

MLA_MODELS = ["deepseek-r1", "deepseek-v3.2", "glm-5.1", "glm-5.2", "kimi-k2.5"]

# facts A.2: layers holding per-token KV and bf16 bytes per token per layer.
GQA_KV = {
    # name: (num_layers, kv heads, head_dim, bf16 B/token/layer, total bf16 B/token)
    "llama-3.1-8b": (32, 8, 128, 4096, 131_072),
    "llama-3.1-70b": (80, 8, 128, 4096, 327_680),
    "qwen3-235b-a22b": (94, 4, 128, 2048, 192_512),
    "minimax-m2.5": (62, 8, 128, 4096, 253_952),
    "minimax-m3": (60, 4, 128, 2048, 122_880),
}


@pytest.mark.parametrize("name", MLA_MODELS)
def test_mla_latent_is_576_wide(name):
    att = model(name).attention
    assert att.kind in ("mla", "mla_dsa")
    assert att.kv_lora_rank + att.qk_rope_head_dim == 576
    assert att.head_dim == att.qk_nope_head_dim + att.qk_rope_head_dim


@pytest.mark.parametrize(
    ("name", "layers", "heads", "nope", "v", "q_lora", "bf16_total"),
    [
        ("deepseek-r1", 61, 128, 128, 128, 1536, 70_272),
        ("deepseek-v3.2", 61, 128, 128, 128, 1536, None),
        ("kimi-k2.5", 61, 64, 128, 128, 1536, 70_272),
        ("glm-5.1", 78, 64, 192, 256, 2048, None),
        ("glm-5.2", 78, 64, 192, 256, 2048, None),
    ],
)
def test_mla_dims_and_dense_mla_totals(name, layers, heads, nope, v, q_lora, bf16_total):
    m = model(name)
    assert (m.num_layers, m.num_attention_heads, m.num_kv_heads) == (layers, heads, heads)
    att = m.attention
    assert (att.qk_nope_head_dim, att.v_head_dim, att.q_lora_rank) == (nope, v, q_lora)
    if bf16_total is not None:
        assert m.num_layers * (att.kv_lora_rank + att.qk_rope_head_dim) * 2 == bf16_total
        assert m.num_layers * (att.kv_lora_rank + att.qk_rope_head_dim) == bf16_total // 2


@pytest.mark.parametrize(
    ("name", "idx_heads", "bf16_total", "fp8_total"),
    [("deepseek-v3.2", 64, 78_324, 48_068), ("glm-5.1", 32, 100_152, 61_464)],
)
def test_dsa_layout_and_index_keys_match_facts_totals(name, idx_heads, bf16_total, fp8_total):
    m = model(name)
    att = m.attention
    assert att.kind == "mla_dsa"
    assert att.indexer is not None
    assert (att.indexer.n_heads, att.indexer.head_dim, att.indexer.topk) == (idx_heads, 128, 2048)
    # 128 fp8 values + one fp32 scale; fp8 even when the MLA cache is bf16.
    assert att.indexer.key_bytes_per_token == 128 + 4 == 132
    # FlashMLA fp8 DSA layout: 512 fp8 NoPE + 4 fp32 scales + 64 bf16 RoPE.
    assert att.kv_entry_bytes == {"bf16": 1152, "fp8": 512 + 4 * 4 + 64 * 2}
    idx = att.indexer.key_bytes_per_token
    assert m.num_layers * (att.kv_entry_bytes["bf16"] + idx) == bf16_total
    assert m.num_layers * (att.kv_entry_bytes["fp8"] + idx) == fp8_total


def test_glm_5_2_is_glm_5_1_with_index_cache_and_1m_context():
    base, top = model("glm-5.1"), model("glm-5.2")
    assert top.attention.indexer.full_layers == 21
    assert base.attention.indexer.full_layers is None
    assert top.num_layers - top.attention.indexer.full_layers == 57
    assert top.max_context == 1_048_576
    assert base.max_context == 202_752
    assert attrs.evolve(top.attention, indexer=base.attention.indexer) == base.attention
    assert top.ffn == base.ffn


@pytest.mark.parametrize("name", sorted(GQA_KV))
def test_gqa_per_layer_kv_bytes(name):
    layers, heads, head_dim, per_layer, total = GQA_KV[name]
    m = model(name)
    assert m.attention.kind in ("gqa", "gqa_block_sparse")
    assert (m.num_layers, m.num_kv_heads, m.attention.head_dim) == (layers, heads, head_dim)
    assert 2 * m.num_kv_heads * m.attention.head_dim * 2 == per_layer
    assert m.num_layers * per_layer == total


def test_gpt_oss_half_its_layers_slide():
    m = model("gpt-oss-120b")
    att = m.attention
    assert (m.num_layers, m.num_kv_heads, att.head_dim) == (36, 8, 64)
    assert (att.sliding_window, att.sliding_layers) == (128, 18)
    full_layers = m.num_layers - att.sliding_layers
    per_layer = 2 * m.num_kv_heads * att.head_dim * 2
    assert per_layer == 2048
    assert full_layers * per_layer == 36_864
    # 18 x 128 tokens x 2048 B = 4.5 MiB of sliding KV per request (bf16).
    assert att.sliding_layers * att.sliding_window * per_layer == 4.5 * 2**20
    # mxfp4 experts; attention, router, embeddings and head stay bf16 (modules_to_not_convert)
    assert (m.weight_dtype, m.expert_weight_dtype) == ("bf16", "mxfp4")
    assert (m.ffn.n_routed_experts, m.ffn.experts_per_token, m.ffn.moe_intermediate_size) == (
        128, 4, 2880)


def test_minimax_m3_block_sparse_selection():
    m = model("minimax-m3")
    att = m.attention
    assert att.kind == "gqa_block_sparse"
    assert (att.block_size, att.dense_layers) == (128, 3)
    assert (att.indexer.n_heads, att.indexer.head_dim, att.indexer.topk) == (4, 128, 16)
    assert m.num_layers - att.dense_layers == 57
    assert att.indexer.key_bytes_per_token > 0
    assert (m.ffn.intermediate_size, m.ffn.first_k_dense) == (12288, 3)
    assert (m.ffn.n_routed_experts, m.ffn.experts_per_token, m.ffn.n_shared_experts) == (128, 4, 1)


# ---------------------------------------------------------------------------------------------
# DeepSeek-V4: compression schedule and KV growth (facts A.2)


def schedule_counts(ratios) -> tuple[int, int, int]:
    return ratios.count(0), ratios.count(4), ratios.count(128)


@pytest.mark.parametrize(
    ("name", "layers", "counts", "topk", "fp8_growth", "bf16_growth", "swa_fp8", "swa_bf16"),
    [
        ("deepseek-v4-flash", 43, (2, 21, 20), 512, 3850.25, 6880, 3_214_336, 5_636_096),
        ("deepseek-v4-pro", 61, (0, 30, 31), 1024, 5511.4375, 9848, 4_559_872, 7_995_392),
    ],
)
def test_v4_schedule_and_kv_growth(name, layers, counts, topk, fp8_growth, bf16_growth,
                                   swa_fp8, swa_bf16):
    m = model(name)
    att = m.attention
    assert att.kind == "dsv4_compressed"
    assert m.num_layers == layers
    assert len(att.compress_ratios) == layers  # the MTP entry is left out
    assert set(att.compress_ratios) <= {0, 4, 128}
    assert schedule_counts(list(att.compress_ratios)) == counts
    assert (att.head_dim, att.qk_rope_head_dim, att.sliding_window) == (512, 64, 128)
    assert (att.indexer.n_heads, att.indexer.head_dim, att.indexer.topk) == (64, 128, topk)
    assert att.indexer.key_bytes_per_token == 132
    assert att.kv_entry_bytes == {"fp8": 584, "bf16": 1024}
    _, n_c4, n_c128 = counts
    entry = att.kv_entry_bytes
    idx_fp8 = att.indexer.key_bytes_per_token
    idx_bf16 = 2 * att.indexer.head_dim
    assert n_c4 * (entry["fp8"] + idx_fp8) / 4 + n_c128 * entry["fp8"] / 128 == fp8_growth
    assert n_c4 * (entry["bf16"] + idx_bf16) / 4 + n_c128 * entry["bf16"] / 128 == bf16_growth
    assert layers * att.sliding_window * entry["fp8"] == swa_fp8
    assert layers * att.sliding_window * entry["bf16"] == swa_bf16
    assert (m.weight_dtype, m.expert_weight_dtype) == ("fp8", "mxfp4")
    assert m.num_kv_heads == 1


def test_v4_pro_overrides_flash_where_the_configs_differ():
    flash, pro = model("deepseek-v4-flash"), model("deepseek-v4-pro")
    assert (flash.hidden_size, pro.hidden_size) == (4096, 7168)
    assert (flash.num_attention_heads, pro.num_attention_heads) == (64, 128)
    assert (flash.attention.q_lora_rank, pro.attention.q_lora_rank) == (1024, 1536)
    assert (flash.attention.o_groups, pro.attention.o_groups) == (8, 16)
    assert flash.attention.o_lora_rank == pro.attention.o_lora_rank == 1024
    assert (flash.ffn.n_routed_experts, pro.ffn.n_routed_experts) == (256, 384)
    assert (flash.ffn.moe_intermediate_size, pro.ffn.moe_intermediate_size) == (2048, 3072)
    assert flash.ffn.experts_per_token == pro.ffn.experts_per_token == 6
    assert flash.ffn.first_k_dense == pro.ffn.first_k_dense == 0


# ---------------------------------------------------------------------------------------------
# Models: MoE shapes and labels (facts A.1)

FFN = {
    # name: (intermediate, first_k_dense, routed, active, shared, moe_intermediate)
    "deepseek-r1": (18432, 3, 256, 8, 1, 2048),
    "deepseek-v3.2": (18432, 3, 256, 8, 1, 2048),
    "glm-5.1": (12288, 3, 256, 8, 1, 2048),
    "kimi-k2.5": (18432, 1, 384, 8, 1, 2048),
    "kimi-k2": (18432, 1, 384, 8, 1, 2048),
    "glm-4.5": (12288, 3, 160, 8, 1, 1536),
    "glm-4.6": (12288, 3, 160, 8, 1, 1536),
    "qwen3-235b-a22b": (0, 0, 128, 8, 0, 1536),
    "minimax-m2.5": (0, 0, 256, 8, 0, 1536),
    "llama-3.1-8b": (14336, 0, 0, 0, 0, 0),
    "llama-3.1-70b": (28672, 0, 0, 0, 0, 0),
}


@pytest.mark.parametrize("name", sorted(FFN))
def test_ffn_shapes(name):
    f = model(name).ffn
    got = (f.intermediate_size, f.first_k_dense, f.n_routed_experts, f.experts_per_token,
           f.n_shared_experts, f.moe_intermediate_size)
    assert got == FFN[name]
    assert f.is_moe == (f.n_routed_experts > 0)


@pytest.mark.parametrize(
    ("name", "total", "active"),
    [("deepseek-r1", 671, 37), ("deepseek-v4-flash", 284, 13), ("deepseek-v4-pro", 1600, 49),
     ("glm-5.1", 744, 40), ("minimax-m2.5", 229, 10), ("deepseek-v3", 671, 37),
     ("glm-5", 744, 40), ("glm-4.5", 355, 32), ("kimi-k2", 1000, 32)],
)
def test_published_parameter_labels(name, total, active):
    m = model(name)
    assert (m.published_total_params_b, m.published_active_params_b) == (total, active)


def test_kimi_k2_5_int4_routed_experts_and_long_context():
    m = model("kimi-k2.5")
    assert (m.weight_dtype, m.expert_weight_dtype) == ("bf16", "int4")
    assert (m.max_context, m.vocab_size, m.mtp_layers) == (262_144, 163_840, 0)


def test_same_architecture_entries_differ_only_where_facts_say():
    # facts.md A.1: V3 is R1's architecture, GLM-5 is GLM-5.1's, M2 and M2.7 are M2.5's (M2.7
    # with a 204,800 context), K2 is K2.5's with fp8 weights and a 131,072 context, GLM-4.6 is
    # GLM-4.5's with a 202,752 context.
    def arch(m):
        return (m.num_layers, m.hidden_size, m.num_attention_heads, m.num_kv_heads,
                m.vocab_size, m.attention, m.ffn, m.mtp_layers)

    for alias, base in (("deepseek-v3", "deepseek-r1"), ("glm-5", "glm-5.1"),
                        ("minimax-m2", "minimax-m2.5"), ("minimax-m2.7", "minimax-m2.5"),
                        ("kimi-k2", "kimi-k2.5"), ("glm-4.6", "glm-4.5")):
        assert arch(model(alias)) == arch(model(base)), alias
    assert model("minimax-m2.7").max_context == 204_800
    assert model("glm-4.6").max_context == 202_752
    k2 = model("kimi-k2")
    assert (k2.weight_dtype, k2.expert_weight_dtype, k2.max_context) == ("fp8", None, 131_072)
    glm45 = model("glm-4.5")
    assert (glm45.attention.kind, glm45.num_attention_heads, glm45.num_kv_heads) == ("gqa", 96, 8)


def test_dense_models_have_no_experts():
    for name in ("llama-3.1-8b", "llama-3.1-70b"):
        assert not model(name).ffn.is_moe


# ---------------------------------------------------------------------------------------------
# GPUs (facts C.1/C.2)

GPU_PEAKS = {
    # name: (isa, hbm_bytes, hbm_bw, bf16, fp8, fp4, scale-up B/s per dir). AMD capacities
    # are the devices' own readings (rocm-smi), binary like NVIDIA's, not the sheets' 1e9 GB.
    "mi300x": ("gfx942", 205_822_885_888, 5.3e12, 1307.4e12, 2614.9e12, None, 448e9),
    "mi325x": ("gfx942", 256 * 2**30, 6.0e12, 1307.4e12, 2614.9e12, None, 448e9),
    "mi355x": ("gfx950", 309_220_868_096, 8.0e12, 2516.6e12, 5033.2e12, 10066.3e12, 537.6e9),
    "h100": ("sm90", 85_899_345_920, 3.35e12, 989e12, 1978e12, None, 450e9),
    "h200": ("sm90", 151_397_597_184, 4.8e12, 989e12, 1978e12, None, 450e9),
    "b200": ("sm100", 192_265_289_728, 7.7e12, 2250e12, 4500e12, 9000e12, 900e9),
    "gb200": ("sm100", 198_674_743_296, 8.0e12, 2500e12, 5000e12, 10000e12, 900e9),
    "b300": ("sm103", 288e9, 8.0e12, 2250e12, 4500e12, 13000e12, 900e9),
    "gb300": ("sm103", 288e9, 8.0e12, 2500e12, 5000e12, 15300e12, 900e9),
    "mi350x": ("gfx950", 309_220_868_096, 8.0e12, 2306.9e12, 4613.7e12, 9227.5e12, 537.6e9),
    "a100": ("sm80", 85_056_798_720, 2.039e12, 312e12, None, None, 300e9),
}
SCALEUP_DOMAIN = {"gb200": 72, "gb300": 72}  # NVL72; the others are 8-GPU nodes


@pytest.mark.parametrize("name", sorted(GPU_PEAKS))
def test_gpu_peaks(name):
    g = load("gpus", name)
    isa, hbm, bw, bf16, fp8, fp4, link = GPU_PEAKS[name]
    assert g.isa == isa
    assert g.vendor == ("amd" if isa.startswith("gfx") else "nvidia")
    assert g.hbm_bytes == pytest.approx(hbm)
    assert g.hbm_bw == pytest.approx(bw)
    assert g.bf16_flops == pytest.approx(bf16)
    assert g.fp8_flops == (None if fp8 is None else pytest.approx(fp8))
    assert g.fp4_flops == (None if fp4 is None else pytest.approx(fp4))
    assert g.scaleup_bw_per_dir == pytest.approx(link)
    assert g.scaleup_domain == SCALEUP_DOMAIN.get(name, 8)
    assert g.l2_bytes > 0
    for value in attrs.astuple(g.efficiency):
        assert 0.0 < value <= 1.0
    # No native fp4 falls back to the fp8 rate, no fp8 (Ampere) to bf16: weight-only GEMMs.
    assert g.peak_flops("mxfp4") == pytest.approx(fp4 or fp8 or bf16)
    assert g.peak_flops("fp8") == pytest.approx(fp8 or bf16)


@pytest.mark.parametrize("name", sorted(GPU_PEAKS))
def test_indexer_cost_scale_is_unfused_only_on_gfx942(name):
    g = load("gpus", name)
    assert g.sparse_indexer_cost_scale == (2.5 if g.isa == "gfx942" else 1.0)


def test_gpu_children_inherit_everything_but_memory():
    # and their economics: a part's rental rate and board power are its own
    for child, parent in (("mi325x", "mi300x"), ("h200", "h100")):
        c, p = load("gpus", child), load("gpus", parent)
        assert attrs.evolve(c, name=p.name, source=p.source, hbm_bytes=p.hbm_bytes,
                            hbm_bw=p.hbm_bw, price_per_gpu_hour=p.price_per_gpu_hour,
                            price_source=p.price_source, tdp_w=p.tdp_w) == p


# ---------------------------------------------------------------------------------------------
# Engines (engines.md 1-3, 9, 10; behaviour.md 1)


def test_mori_sglang_differs_from_sglang_only_in_the_latent_sharding():
    sglang, mori = load("engines", "sglang"), load("engines", "mori-sglang")
    a, b = attrs.asdict(sglang), attrs.asdict(mori)
    differing = {k for k in a if a[k] != b[k]}
    assert differing == {"name", "source", "mla_latent_sharded", "vendors"}
    assert (sglang.mla_latent_sharded, mori.mla_latent_sharded) == (False, True)
    assert (sglang.vendors, mori.vendors) == (("amd", "nvidia"), ("amd",))  # MoRI is ROCm's


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("vllm", dict(scheduler="unified", preemption="recompute-newest", mem_fraction=0.92,
                      page_size=16, max_num_seqs=1024, max_num_batched_tokens=8192)),
        ("sglang", dict(scheduler="prefill-exclusive", preemption="retract-fewest-output",
                        page_size=1, reserve_gib=0.0, lpm_max_waiting=128,
                        chunked_prefill_size=16384)),
        ("atom", dict(scheduler="prefill-exclusive", preemption="recompute-newest",
                      mem_fraction=0.9, page_size=16, max_num_seqs=512,
                      max_num_batched_tokens=16384)),
    ],
)
def test_engine_defaults(name, expected):
    e = load("engines", name)
    for key, value in expected.items():
        assert getattr(e, key) == value, key
    # each engine's own arrival-order admission is its default (behaviour.md 4, amended);
    # prefix-first (lpm) is selectable
    from inferasim.serve.engine_policy import queue_policy_for

    assert queue_policy_for(e) == "fcfs"
    assert e.eviction_policy == {"vllm": "block-pool", "atom": "block-pool",
                                 "sglang": "radix-leaf"}[name]
    assert e.prefix_caching
    assert 0.0 < e.mem_fraction <= 1.0
    assert not e.mla_latent_sharded


def test_each_engine_sizes_its_pool_by_its_own_memory_rule():
    # engines.md 1: vLLM and ATOM profile (activation peak, non-torch, graphs), SGLang takes
    # mem_fraction_static of the free memory; no fixed reserve is left on top of either.
    assert load("engines", "vllm").memory_rule == "vllm-profile"
    assert load("engines", "atom").memory_rule == "atom-profile"
    assert load("engines", "sglang").memory_rule == "sglang-static"
    for name in ("vllm", "atom", "sglang"):
        assert load("engines", name).reserve_gib == 0
