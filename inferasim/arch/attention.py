"""Attention work and KV memory per attention kind.

Each kind answers, for a whole model (all layers, all heads, before parallel division):
- the KV bytes a token adds, and the bounded bytes a sequence holds (windows);
- decode: FLOPs and bytes read per sequence at context ``ctx``, verifying ``width`` tokens;
- prefill: FLOPs and bytes for a chunk of ``chunk`` tokens over ``resident`` tokens already cached.

Every cost is split into named terms so that ``inferasim price`` can show why a step costs
what it does: ``dense`` (full attention), ``selection`` (attention over selected tokens),
``indexing`` (the indexer scoring every context position), ``window`` and ``pool``
(DeepSeek-V4's local window and compressed pools), ``linear`` (a hybrid model's Gated
DeltaNet layers: a constant state per sequence, see ``inferasim.arch.linear_attention``).
"""

from __future__ import annotations

import attrs
import numpy as np

from inferasim.arch import linear_attention
from inferasim.arch.dtypes import kv_element_bytes
from inferasim.arch.spec import ModelSpec

INDEXER_FLOP_BYTES = 1  # index q/k are fp8


@attrs.frozen
class AttentionCost:
    """Per-sequence arrays (one entry per sequence) of FLOPs and bytes, by term."""

    flops: dict[str, np.ndarray]
    bytes: dict[str, np.ndarray]

    def total_flops(self) -> np.ndarray:
        return sum(self.flops.values())



def _causal_pairs(chunk: np.ndarray, resident: np.ndarray, cap: float | None = None) -> np.ndarray:
    """Sum over the chunk's queries of the keys each attends (causal), optionally capped per query."""
    chunk = chunk.astype(np.float64)
    resident = resident.astype(np.float64)
    if cap is None:
        return chunk * resident + chunk * (chunk + 1) / 2
    # Query i (1-based) sees resident + i keys, capped: sum_i min(resident + i, cap).
    first = resident + 1
    below = np.clip(cap - first + 1, 0, chunk)  # queries whose count is still under the cap
    summed_below = below * first + below * (below - 1) / 2
    return summed_below + (chunk - below) * cap


class AttentionKind:
    """Base: dense attention over every context token on every layer."""

    def __init__(self, model: ModelSpec):
        self.model = model
        self.att = model.attention

    # -- memory ---------------------------------------------------------------------------
    def kv_bytes_per_token_layer(self, kv_dtype: str) -> float:
        """Bytes one token adds on one full-attention layer, before any parallel division."""
        raise NotImplementedError

    def kv_layers(self) -> int:
        """Layers whose KV grows with context (not the windowed, not the linear ones)."""
        return self.model.num_layers - self.att.sliding_layers - self.linear_layers()

    def linear_layers(self) -> int:
        """Linear-attention layers: a fixed state per sequence, no KV."""
        return self.att.linear.layers if self.att.linear is not None else 0

    def kv_bytes_per_token(self, kv_dtype: str, *, attn_tp: int, dcp: int,
                           latent_sharded: bool) -> float:
        """Bytes one token adds per GPU, all layers."""
        raise NotImplementedError

    def kv_fixed_bytes_per_seq(self, kv_dtype: str, *, attn_tp: int) -> float:
        """Bounded per-sequence bytes per GPU (sliding windows, linear-attention states),
        whatever the context."""
        return 0.0

    def index_key_bytes_per_token(self) -> float:
        """Index keys a token adds (all indexer layers), not divided by TP."""
        return 0.0

    # -- work -----------------------------------------------------------------------------
    def decode(self, ctx: np.ndarray, width: int, kv_dtype: str) -> AttentionCost:
        raise NotImplementedError

    def prefill(self, chunk: np.ndarray, resident: np.ndarray, kv_dtype: str) -> AttentionCost:
        raise NotImplementedError

    def dense_reference(self, ctx: np.ndarray, width: int, kv_dtype: str) -> AttentionCost:
        """The same model charged dense attention over the whole context (for ratios to dense)."""
        return self.decode(ctx, width, kv_dtype)


class GqaAttention(AttentionKind):
    """Dense MHA/GQA, with optional sliding-window layers (gpt-oss) or linear-attention
    layers (Qwen3.5)."""

    def _per_key_flops(self) -> float:
        att = self.att
        v = att.v_head_dim or att.head_dim
        return 2.0 * self.model.num_attention_heads * (att.head_dim + v)

    def kv_bytes_per_token_layer(self, kv_dtype: str) -> float:
        att = self.att
        v = att.v_head_dim or att.head_dim
        return self.model.num_kv_heads * (att.head_dim + v) * kv_element_bytes(kv_dtype)

    def _heads_per_rank(self, attn_tp: int) -> float:
        # Fewer KV heads than ranks: each rank keeps a (replicated) copy of one head.
        return max(1.0, self.model.num_kv_heads / attn_tp)

    def _per_layer_per_rank(self, kv_dtype: str, attn_tp: int) -> float:
        return self.kv_bytes_per_token_layer(kv_dtype) / self.model.num_kv_heads \
            * self._heads_per_rank(attn_tp)

    def kv_bytes_per_token(self, kv_dtype, *, attn_tp, dcp, latent_sharded):
        return self.kv_layers() * self._per_layer_per_rank(kv_dtype, attn_tp) / dcp

    def window_bytes_per_token(self, kv_dtype: str, *, attn_tp: int) -> float:
        """Bytes one token adds per GPU across the sliding-window layers (while in window)."""
        return self.att.sliding_layers * self._per_layer_per_rank(kv_dtype, attn_tp)

    def kv_fixed_bytes_per_seq(self, kv_dtype, *, attn_tp):
        windows = self.att.sliding_window * self.window_bytes_per_token(kv_dtype,
                                                                        attn_tp=attn_tp)
        if self.att.linear is None:
            return windows
        # the states keep their own dtype: an fp8 KV cache does not quantize them
        return windows + linear_attention.state_bytes_per_seq(self.att.linear, attn_tp)

    def decode(self, ctx, width, kv_dtype):
        ctx = ctx.astype(np.float64)
        full, slide = self.kv_layers(), self.att.sliding_layers
        per_key = self._per_key_flops()
        per_tok_bytes = self.kv_bytes_per_token_layer(kv_dtype)
        flops = {"dense": full * per_key * width * ctx}
        byts = {"dense": full * per_tok_bytes * ctx}
        if slide:
            win = np.minimum(ctx, self.att.sliding_window)
            flops["window"] = slide * per_key * width * win
            byts["window"] = slide * per_tok_bytes * win
        if self.att.linear is not None:
            flops["linear"], byts["linear"] = linear_attention.decode_cost(self.att.linear,
                                                                           ctx, width)
        return AttentionCost(flops, byts)

    def prefill(self, chunk, resident, kv_dtype):
        full, slide = self.kv_layers(), self.att.sliding_layers
        per_key = self._per_key_flops()
        per_tok_bytes = self.kv_bytes_per_token_layer(kv_dtype)
        flops = {"dense": full * per_key * _causal_pairs(chunk, resident)}
        # Prefill reads the resident context once per layer and writes the chunk.
        byts = {"dense": full * per_tok_bytes * (resident + chunk).astype(np.float64)}
        if slide:
            flops["window"] = slide * per_key * _causal_pairs(chunk, resident, self.att.sliding_window)
            byts["window"] = slide * per_tok_bytes * np.minimum(resident + chunk, self.att.sliding_window)
        if self.att.linear is not None:
            flops["linear"], byts["linear"] = linear_attention.prefill_cost(self.att.linear,
                                                                            chunk)
        return AttentionCost(flops, byts)


class MlaAttention(AttentionKind):
    """Multi-head latent attention: one latent (kv_lora + rope) per token; absorbed decode."""

    def _latent_dim(self) -> int:
        return self.att.kv_lora_rank + self.att.qk_rope_head_dim

    def kv_bytes_per_token_layer(self, kv_dtype):
        if kv_dtype in self.att.kv_entry_bytes:
            return float(self.att.kv_entry_bytes[kv_dtype])
        return float(self._latent_dim() * kv_element_bytes(kv_dtype))

    def kv_bytes_per_token(self, kv_dtype, *, attn_tp, dcp, latent_sharded):
        # vLLM and SGLang replicate the latent on every attention-TP rank; mori-sglang shards it.
        # Decode context parallelism splits it by position across dcp ranks.
        per_layer = self.kv_bytes_per_token_layer(kv_dtype) / (attn_tp if latent_sharded else 1)
        return self.kv_layers() * per_layer / dcp + self.index_key_bytes_per_token()

    def _absorbed_per_key_flops(self) -> float:
        # Scores over the latent+rope, values over the latent, for every head.
        return 2.0 * self.model.num_attention_heads * (self._latent_dim() + self.att.kv_lora_rank)

    def _prefill_per_key_flops(self) -> float:
        att = self.att
        v = att.v_head_dim or att.qk_nope_head_dim
        return 2.0 * self.model.num_attention_heads * (att.qk_nope_head_dim + att.qk_rope_head_dim + v)

    def decode(self, ctx, width, kv_dtype):
        ctx = ctx.astype(np.float64)
        L = self.kv_layers()
        return AttentionCost(
            {"dense": L * self._absorbed_per_key_flops() * width * ctx},
            {"dense": L * self.kv_bytes_per_token_layer(kv_dtype) * ctx},
        )

    def prefill(self, chunk, resident, kv_dtype):
        L = self.kv_layers()
        return AttentionCost(
            {"dense": L * self._prefill_per_key_flops() * _causal_pairs(chunk, resident)},
            {"dense": L * self.kv_bytes_per_token_layer(kv_dtype)
             * (resident + chunk).astype(np.float64)},
        )


def attention_for(model: ModelSpec) -> AttentionKind:
    """The attention model of a checkpoint, chosen by its declared kind."""
    from inferasim.arch import sparse_attention

    kinds = {
        "gqa": GqaAttention,
        "mla": MlaAttention,
        "mla_dsa": sparse_attention.DsaAttention,
        "gqa_block_sparse": sparse_attention.BlockSparseAttention,
        "dsv4_compressed": sparse_attention.CompressedAttention,
    }
    return kinds[model.attention.kind](model)
