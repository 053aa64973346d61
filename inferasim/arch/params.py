"""Parameter counts per component, from the architecture alone.

Counts are for the whole model (before any parallel division). They feed both the weight
memory per GPU and the GEMM work per token, so the two can never disagree.
"""

from __future__ import annotations

import attrs

from inferasim.arch import linear_attention
from inferasim.arch.spec import AttentionSpec, ModelSpec


@attrs.frozen
class ParamCounts:
    embedding: int          # input embedding (vocab x hidden)
    lm_head: int            # output projection (0 when tied)
    attention: int          # q/k/v/o projections and any indexer, all layers
    dense_ffn: int          # FFN of the dense layers
    shared_experts: int     # always-active experts of MoE layers
    routed_experts: int     # all routed experts of MoE layers
    router: int
    mtp: int                # the next-token-prediction layer(s), loaded only for MTP decoding
    # Per token work: the routed weights a token actually multiplies.
    routed_active: int

    @property
    def total(self) -> int:
        return (self.embedding + self.lm_head + self.attention + self.dense_ffn
                + self.shared_experts + self.routed_experts + self.router)

    @property
    def active(self) -> int:
        return (self.embedding + self.lm_head + self.attention + self.dense_ffn
                + self.shared_experts + self.routed_active + self.router)


def _indexer_params(model: ModelSpec, att: AttentionSpec) -> int:
    idx = att.indexer
    if idx is None:
        return 0
    q_in = att.q_lora_rank or model.hidden_size
    return q_in * idx.n_heads * idx.head_dim + model.hidden_size * idx.head_dim \
        + model.hidden_size * idx.n_heads


def attention_params_per_layer(model: ModelSpec) -> dict[str, int]:
    """Projection parameters of one (full-)attention layer, by role (``indexer`` apart)."""
    att = model.attention
    h, heads = model.hidden_size, model.num_attention_heads
    if att.kind in ("gqa", "gqa_block_sparse"):
        v = att.v_head_dim or att.head_dim
        # an output gate doubles the q projection's width
        q_width = heads * att.head_dim * (2 if att.output_gate else 1)
        proj = h * q_width + h * model.num_kv_heads * (att.head_dim + v) + heads * v * h
        return {"projections": proj, "indexer": _indexer_params(model, att)}
    if att.kind in ("mla", "mla_dsa"):
        qk = att.qk_nope_head_dim + att.qk_rope_head_dim
        v = att.v_head_dim or att.qk_nope_head_dim
        q = (h * att.q_lora_rank + att.q_lora_rank * heads * qk) if att.q_lora_rank else h * heads * qk
        kv = h * (att.kv_lora_rank + att.qk_rope_head_dim) + att.kv_lora_rank * heads * (att.qk_nope_head_dim + v)
        o = heads * v * h
        return {"projections": q + kv + o, "indexer": _indexer_params(model, att)}
    if att.kind == "dsv4_compressed":
        q = h * att.q_lora_rank + att.q_lora_rank * heads * att.head_dim
        kv = h * att.head_dim
        # Grouped low-rank output: each group maps its heads to o_lora, then all groups to hidden.
        o = heads * att.head_dim * att.o_lora_rank + max(att.o_groups, 1) * att.o_lora_rank * h
        return {"projections": q + kv + o, "indexer": _indexer_params(model, att)}
    raise ValueError(att.kind)


def attention_projection_params(model: ModelSpec) -> int:
    """Projection parameters of every layer (indexers apart): a hybrid model's linear layers
    have their own projections, the rest the full-attention layer's."""
    full = attention_params_per_layer(model)["projections"]
    lin = model.attention.linear
    if lin is None:
        return full * model.num_layers
    return full * (model.num_layers - lin.layers) \
        + linear_attention.projection_params(lin, model.hidden_size) * lin.layers


def indexer_layers(model: ModelSpec) -> int:
    """How many layers run an indexer of their own."""
    att = model.attention
    if att.indexer is None:
        return 0
    if att.kind == "dsv4_compressed":
        return sum(1 for r in att.compress_ratios if r == 4)
    if att.indexer.full_layers is not None:
        return att.indexer.full_layers
    return model.num_layers - att.dense_layers


def param_counts(model: ModelSpec) -> ParamCounts:
    h, L = model.hidden_size, model.num_layers
    ffn = model.ffn
    per_layer = attention_params_per_layer(model)
    attention = attention_projection_params(model) \
        + per_layer["indexer"] * indexer_layers(model)
    embedding = model.vocab_size * h
    lm_head = 0 if model.tie_embeddings else model.vocab_size * h
    if ffn.is_moe:
        dense_layers = ffn.first_k_dense
        moe_layers = L - dense_layers
        shared_width = ffn.shared_intermediate_size or ffn.n_shared_experts * ffn.moe_intermediate_size
        shared = moe_layers * 3 * h * shared_width
        routed = moe_layers * ffn.n_routed_experts * 3 * h * ffn.moe_intermediate_size
        routed_active = moe_layers * ffn.experts_per_token * 3 * h * ffn.moe_intermediate_size
        router = moe_layers * h * ffn.n_routed_experts
        dense = dense_layers * 3 * h * ffn.intermediate_size
        mtp_ffn = 3 * h * (shared_width + ffn.n_routed_experts * ffn.moe_intermediate_size)
    else:
        dense = L * 3 * h * ffn.intermediate_size
        shared = routed = routed_active = router = 0
        mtp_ffn = 3 * h * ffn.intermediate_size
    # An MTP module is one more decoder layer plus a 2h -> h projection (embeddings shared).
    mtp = model.mtp_layers * (per_layer["projections"] + mtp_ffn + 2 * h * h)
    return ParamCounts(embedding=embedding, lm_head=lm_head, attention=attention, dense_ffn=dense,
                       shared_experts=shared, routed_experts=routed, router=router, mtp=mtp,
                       routed_active=routed_active)
