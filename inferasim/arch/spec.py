"""A checkpoint's architecture as read from its config.json: the facts the work and memory math need.

Catalog files under ``scenarios/bases/models/`` fill these classes; every field a base supplies
arrives here (nothing falls back to a silent default that the catalog meant to set).
"""

from __future__ import annotations

import attrs

from inferasim.config.typed import choices

ATTENTION_KINDS = ("gqa", "mla", "mla_dsa", "gqa_block_sparse", "dsv4_compressed")
WEIGHT_DTYPES = ("bf16", "fp16", "fp8", "int8", "mxfp4", "nvfp4", "fp4", "int4")


@attrs.frozen
class IndexerSpec:
    """A lightning indexer that scores context positions to pick a top-k (DSA, MSA, DeepSeek-V4 c4)."""

    n_heads: int
    head_dim: int = 128
    topk: int = 2048
    # Index keys are stored fp8 with a fp32 scale per 128 values, whatever the KV dtype.
    key_bytes_per_token: int = 132
    # GLM-5.2 computes top-k on some layers and reuses it on the rest; None means every
    # selective layer runs its own indexer.
    full_layers: int | None = None


@attrs.frozen
class AttentionSpec:
    kind: str = attrs.field(metadata=choices(*ATTENTION_KINDS))
    head_dim: int = 128
    v_head_dim: int | None = None
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    o_lora_rank: int = 0
    o_groups: int = 0
    # Layers attending only over a local window (gpt-oss even layers); their KV is bounded.
    sliding_window: int = 0
    sliding_layers: int = 0
    # Leading layers that stay dense in a sparse model (MiniMax-M3 layers 0-2).
    dense_layers: int = 0
    # Block-sparse selection picks ``indexer.topk`` blocks of this many tokens.
    block_size: int = 0
    indexer: IndexerSpec | None = None
    # DeepSeek-V4: per-layer compression ratio (0 = window only, 4 = c4 + indexer, 128 = c128).
    compress_ratios: list[int] = attrs.field(factory=tuple)
    # Bytes of one cache entry per KV dtype when the engine's layout is not the plain
    # dims x dtype (FlashMLA's 656-B fp8 DSA layout, DeepSeek-V4's 584-B entry).
    kv_entry_bytes: dict[str, int] = attrs.field(factory=dict)


@attrs.frozen
class FfnSpec:
    intermediate_size: int = 0
    first_k_dense: int = 0
    n_routed_experts: int = 0
    experts_per_token: int = 0
    n_shared_experts: int = 0
    moe_intermediate_size: int = 0
    # Width of the shared expert when it differs from n_shared x moe_intermediate_size.
    shared_intermediate_size: int = 0

    @property
    def is_moe(self) -> bool:
        return self.n_routed_experts > 0


@attrs.frozen
class ModelSpec:
    name: str
    source: str
    num_layers: int
    hidden_size: int
    vocab_size: int
    num_attention_heads: int
    num_kv_heads: int
    attention: AttentionSpec
    ffn: FfnSpec
    hf_id: str = ""
    weight_dtype: str = attrs.field(default="bf16", metadata=choices(*WEIGHT_DTYPES))
    # Routed experts stored in another dtype than the rest (DeepSeek-V4 fp4, Kimi-K2.5 int4).
    expert_weight_dtype: str | None = attrs.field(default=None, metadata=choices(*WEIGHT_DTYPES))
    tie_embeddings: bool = False
    mtp_layers: int = 0
    max_context: int = 131072
    published_total_params_b: float | None = None
    published_active_params_b: float | None = None
