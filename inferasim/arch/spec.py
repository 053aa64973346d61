"""A checkpoint's architecture as read from its config.json: the facts the work and memory math need.

Catalog files under ``scenarios/bases/models/`` fill these classes; every field a base supplies
arrives here (nothing falls back to a silent default that the catalog meant to set).
"""

from __future__ import annotations

import attrs

from inferasim.config.typed import at_least, choices

ATTENTION_KINDS = ("gqa", "mla", "mla_dsa", "gqa_block_sparse", "dsv4_compressed")
WEIGHT_DTYPES = ("bf16", "fp16", "fp8", "int8", "mxfp4", "nvfp4", "fp4", "int4")
# vLLM's mamba_cache_dtype / mamba_ssm_cache_dtype: "auto" is the model dtype, fp32 on request.
STATE_DTYPES = ("bf16", "fp16", "fp32")


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
class LinearAttentionSpec:
    """Gated DeltaNet layers (Qwen3-Next, Qwen3.5): instead of a KV cache each holds a
    recurrent state of value_heads x key_head_dim x value_head_dim and a causal-conv history
    of (conv_kernel - 1) x (q, k, v channels) per sequence, whatever its context."""

    layers: int = attrs.field(metadata=at_least(1))
    key_heads: int = attrs.field(metadata=at_least(1))
    value_heads: int = attrs.field(metadata=at_least(1))
    key_head_dim: int = attrs.field(metadata=at_least(1))
    value_head_dim: int = attrs.field(metadata=at_least(1))
    conv_kernel: int = attrs.field(metadata=at_least(1))
    state_dtype: str = attrs.field(default="bf16", metadata=choices(*STATE_DTYPES))
    conv_dtype: str = attrs.field(default="bf16", metadata=choices(*STATE_DTYPES))
    # Tokens per chunk of the chunked delta rule in prefill (FLA's chunk_gated_delta_rule).
    chunk_size: int = attrs.field(default=64, metadata=at_least(1))

    def __attrs_post_init__(self):
        # q/k heads are shared by groups of value heads, as KV heads are in GQA.
        if self.value_heads % self.key_heads:
            raise ValueError(f"value_heads ({self.value_heads}) must be a multiple of "
                             f"key_heads ({self.key_heads})")

    @property
    def conv_channels(self) -> int:
        """Channels the short convolution runs over: q and k (key heads) and v."""
        return 2 * self.key_heads * self.key_head_dim + self.value_heads * self.value_head_dim


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
    # Full-attention layers whose q projection also yields a sigmoid output gate (Qwen3-Next,
    # Qwen3.5 ``attn_output_gate``): the q projection is twice as wide.
    output_gate: bool = False
    # Linear-attention layers of a hybrid model; the rest of num_layers attend in full.
    linear: LinearAttentionSpec | None = None


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
    # A 4-bit checkpoint of this model quantizes its shared experts with the routed ones
    # (amd/GLM-5.1-MXFP4's card: "MOE-only (shared experts quantized)"); by default a 4-bit
    # checkpoint keeps them unquantized (``arch.memory.stored_dtypes``).
    four_bit_shared_experts: bool = False
    tie_embeddings: bool = False
    mtp_layers: int = 0
    max_context: int = 131072
    published_total_params_b: float | None = None
    published_active_params_b: float | None = None

    def __attrs_post_init__(self):
        lin = self.attention.linear
        if lin is None:
            return
        if self.attention.kind != "gqa":
            raise ValueError(f"attention.linear is modelled beside gqa full-attention layers "
                             f"only, not {self.attention.kind!r}")
        if lin.layers + self.attention.sliding_layers >= self.num_layers:
            raise ValueError(f"attention.linear.layers ({lin.layers}) leaves no full-attention "
                             f"layer of num_layers ({self.num_layers})")
