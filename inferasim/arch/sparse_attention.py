"""Attention kinds that do not attend every context token: selection, indexing, compression.

Three kinds, each a subclass of :class:`~inferasim.arch.attention.AttentionKind`:

- :class:`DsaAttention` (``mla_dsa``): MLA with a DeepSeek Sparse Attention lightning indexer
  (DeepSeek-V3.2, GLM-5.x). Every sparse layer attends the ``indexer.topk`` tokens picked by
  the indexer ("selection"); the indexer scores every context token ("indexing"). GLM-5.2
  runs the indexer on ``indexer.full_layers`` layers and reuses the top-k on the rest.
- :class:`BlockSparseAttention` (``gqa_block_sparse``): GQA over selected fixed-size blocks
  plus the local block (MiniMax-M3 MSA); the leading ``dense_layers`` stay dense.
- :class:`CompressedAttention` (``dsv4_compressed``): DeepSeek-V4's per-layer schedule
  (``compress_ratios``): a raw local window on every layer ("window"), top-k over ctx/4
  compressed entries on c4 layers and all ctx/128 entries on c128 layers ("pool"), with an
  indexer over the ctx/4 entries on c4 layers ("indexing").

Conventions shared with ``attention.py``: costs are per sequence, whole model (all layers and
heads, before any parallel division). Decode prices ``width`` query tokens (1 + draft tokens)
at context ``ctx``; prefill prices a chunk of ``chunk`` tokens over ``resident`` tokens
already cached. FLOPs count a multiply-add as 2. The indexer term carries the indexer's own
FLOPs (2 x index heads x index head dim per (query, key) pair) and bytes (index keys plus the
fp32 scores written and read back by the top-k); ``cost/attention_time.py`` prices it at the
indexer's dtype rate times the GPU's ``sparse_indexer_cost_scale``. docs/attention.md gives
the formulas.
"""

from __future__ import annotations

import numpy as np

from inferasim.arch.attention import (
    AttentionCost,
    AttentionKind,
    GqaAttention,
    MlaAttention,
    _causal_pairs,
)
from inferasim.arch.dtypes import kv_element_bytes
from inferasim.arch.params import indexer_layers
from inferasim.arch.spec import IndexerSpec, ModelSpec
from inferasim.config.errors import ConfigError

# The top-k reads the fp32 score of every scored entry once after the logits kernel wrote it.
SCORE_BYTES_PER_ENTRY = 8.0


def _f64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def _indexer(model: ModelSpec) -> IndexerSpec:
    idx = model.attention.indexer
    if idx is None:
        raise ConfigError(f"attention kind {model.attention.kind!r} needs an indexer "
                          "(n_heads, head_dim, topk)", key="model.attention.indexer")
    return idx


def _indexer_pair_flops(idx: IndexerSpec) -> float:
    """FLOPs of the indexer logits for one (query, key) pair: every index head's dot product."""
    return 2.0 * idx.n_heads * idx.head_dim


# ---------------------------------------------------------------------------------------------
# DSA: MLA + token-level top-k (DeepSeek-V3.2, GLM-5.1, GLM-5.2)
# ---------------------------------------------------------------------------------------------
class DsaAttention(MlaAttention):
    """MLA whose sparse layers attend the indexer's top-k tokens (absorbed / MQA mode).

    Selection per query token and layer: ``2·H·(kv_lora + rope + kv_lora)·min(ctx, topk)``
    FLOPs and ``min(ctx, width·topk)`` cache entries read (the distinct tokens the verify
    queries can pick). Indexing per query token and indexer layer: ``2·n_idx·d_idx·ctx`` FLOPs,
    reading ``ctx`` index keys and the scores. Index keys sit beside the MLA cache, one per
    token per indexer layer, in their own dtype (fp8 + scale = 132 B) whatever the KV dtype.
    """

    def __init__(self, model: ModelSpec):
        super().__init__(model)
        self.idx = _indexer(model)

    # -- layers -------------------------------------------------------------------------------
    def dense_layers(self) -> int:
        return self.att.dense_layers

    def sparse_layers(self) -> int:
        return self.kv_layers() - self.att.dense_layers

    def indexer_layers(self) -> int:
        """Layers that run an indexer (GLM-5.2: the 21 "full" ones; the rest reuse their top-k)."""
        return indexer_layers(self.model)

    def indexer_dtype(self) -> str:
        return "fp8"  # DeepGEMM / AITER fp8 MQA logits

    # -- memory -------------------------------------------------------------------------------
    def index_key_bytes_per_token(self) -> float:
        return float(self.indexer_layers() * self.idx.key_bytes_per_token)

    # -- work ---------------------------------------------------------------------------------
    def decode(self, ctx, width, kv_dtype):
        ctx = _f64(ctx)
        per_key = self._absorbed_per_key_flops()
        entry = self.kv_bytes_per_token_layer(kv_dtype)
        topk = float(self.idx.topk)
        flops: dict[str, np.ndarray] = {}
        byts: dict[str, np.ndarray] = {}
        if self.dense_layers():
            flops["dense"] = self.dense_layers() * per_key * width * ctx
            byts["dense"] = self.dense_layers() * entry * ctx
        sel = np.minimum(ctx, topk)
        flops["selection"] = self.sparse_layers() * per_key * width * sel
        byts["selection"] = self.sparse_layers() * entry * np.minimum(ctx, width * topk)
        n_idx = self.indexer_layers()
        flops["indexing"] = n_idx * _indexer_pair_flops(self.idx) * width * ctx
        byts["indexing"] = n_idx * (self.idx.key_bytes_per_token * ctx
                                    + SCORE_BYTES_PER_ENTRY * width * ctx)
        return AttentionCost(flops, byts)

    def prefill(self, chunk, resident, kv_dtype):
        chunk, resident = _f64(chunk), _f64(resident)
        entry = self.kv_bytes_per_token_layer(kv_dtype)
        total = resident + chunk
        flops: dict[str, np.ndarray] = {}
        byts: dict[str, np.ndarray] = {}
        if self.dense_layers():
            flops["dense"] = self.dense_layers() * self._prefill_per_key_flops() \
                * _causal_pairs(chunk, resident)
            byts["dense"] = self.dense_layers() * entry * total
        # Sparse prefill runs in MQA mode over the latent (FlashMLA flash_mla_sparse_fwd:
        # d_qk 576, d_v 512), each query over at most topk keys.
        pairs = _causal_pairs(chunk, resident, float(self.idx.topk))
        flops["selection"] = self.sparse_layers() * self._absorbed_per_key_flops() * pairs
        byts["selection"] = self.sparse_layers() * entry * total
        all_pairs = _causal_pairs(chunk, resident)
        n_idx = self.indexer_layers()
        flops["indexing"] = n_idx * _indexer_pair_flops(self.idx) * all_pairs
        byts["indexing"] = n_idx * (self.idx.key_bytes_per_token * total
                                    + SCORE_BYTES_PER_ENTRY * all_pairs)
        return AttentionCost(flops, byts)

    def dense_reference(self, ctx, width, kv_dtype):
        return MlaAttention.decode(self, ctx, width, kv_dtype)

    def dense_prefill_reference(self, chunk, resident, kv_dtype):
        return MlaAttention.prefill(self, _f64(chunk), _f64(resident), kv_dtype)


# ---------------------------------------------------------------------------------------------
# Block-sparse GQA (MiniMax-M3 MSA)
# ---------------------------------------------------------------------------------------------
class BlockSparseAttention(GqaAttention):
    """GQA whose sparse layers attend ``indexer.topk`` selected blocks plus the local block.

    Each KV group picks its own blocks (the selection is shared by the query heads of a
    group), so the selected tokens per group are ``min(ctx, (topk + local)·block_size)``.
    The index scores every context token (max-pooled per block): ``2·n_idx·d_idx`` FLOPs per
    (query, key token) pair on every sparse layer.
    """

    # MiniMax-M3 ``sparse_local_block: 1``, ``sparse_init_block: 0`` (facts.md A.3); the spec
    # has no field for them.
    LOCAL_BLOCKS = 1
    INIT_BLOCKS = 0

    def __init__(self, model: ModelSpec):
        super().__init__(model)
        self.idx = _indexer(model)
        if self.att.block_size <= 0:
            raise ConfigError("gqa_block_sparse needs a positive block_size",
                              key="model.attention.block_size")

    def dense_layers(self) -> int:
        return self.att.dense_layers

    def sparse_layers(self) -> int:
        return self.kv_layers() - self.att.dense_layers

    def indexer_layers(self) -> int:
        return indexer_layers(self.model)

    def selected_tokens(self) -> float:
        return float((self.idx.topk + self.LOCAL_BLOCKS + self.INIT_BLOCKS) * self.att.block_size)

    def indexer_dtype(self) -> str:
        # One key per index head: 2 bytes per element is a bf16 index cache.
        per_element = self.idx.key_bytes_per_token / (self.idx.n_heads * self.idx.head_dim)
        return "bf16" if per_element >= 2 else "fp8"

    def index_key_bytes_per_token(self) -> float:
        return float(self.indexer_layers() * self.idx.key_bytes_per_token)

    def kv_bytes_per_token(self, kv_dtype, *, attn_tp, dcp, latent_sharded):
        return super().kv_bytes_per_token(kv_dtype, attn_tp=attn_tp, dcp=dcp,
                                          latent_sharded=latent_sharded) \
            + self.index_key_bytes_per_token()

    def _scored_blocks(self, ctx: np.ndarray) -> np.ndarray:
        return np.ceil(ctx / self.att.block_size)

    def decode(self, ctx, width, kv_dtype):
        ctx = _f64(ctx)
        per_key = self._per_key_flops()
        per_tok = self.kv_bytes_per_token_layer(kv_dtype)
        sel_tok = self.selected_tokens()
        flops: dict[str, np.ndarray] = {}
        byts: dict[str, np.ndarray] = {}
        if self.dense_layers():
            flops["dense"] = self.dense_layers() * per_key * width * ctx
            byts["dense"] = self.dense_layers() * per_tok * ctx
        flops["selection"] = self.sparse_layers() * per_key * width * np.minimum(ctx, sel_tok)
        byts["selection"] = self.sparse_layers() * per_tok * np.minimum(ctx, width * sel_tok)
        n_idx = self.indexer_layers()
        flops["indexing"] = n_idx * _indexer_pair_flops(self.idx) * width * ctx
        # Block scores (one per index head and block) go to the top-k.
        byts["indexing"] = n_idx * (self.idx.key_bytes_per_token * ctx + SCORE_BYTES_PER_ENTRY
                                    * width * self.idx.n_heads * self._scored_blocks(ctx))
        return AttentionCost(flops, byts)

    def prefill(self, chunk, resident, kv_dtype):
        chunk, resident = _f64(chunk), _f64(resident)
        per_key = self._per_key_flops()
        per_tok = self.kv_bytes_per_token_layer(kv_dtype)
        total = resident + chunk
        flops: dict[str, np.ndarray] = {}
        byts: dict[str, np.ndarray] = {}
        all_pairs = _causal_pairs(chunk, resident)
        if self.dense_layers():
            flops["dense"] = self.dense_layers() * per_key * all_pairs
            byts["dense"] = self.dense_layers() * per_tok * total
        flops["selection"] = self.sparse_layers() * per_key \
            * _causal_pairs(chunk, resident, self.selected_tokens())
        byts["selection"] = self.sparse_layers() * per_tok * total
        n_idx = self.indexer_layers()
        flops["indexing"] = n_idx * _indexer_pair_flops(self.idx) * all_pairs
        byts["indexing"] = n_idx * (self.idx.key_bytes_per_token * total + SCORE_BYTES_PER_ENTRY
                                    * self.idx.n_heads * chunk * self._scored_blocks(total))
        return AttentionCost(flops, byts)

    def dense_reference(self, ctx, width, kv_dtype):
        return GqaAttention.decode(self, ctx, width, kv_dtype)

    def dense_prefill_reference(self, chunk, resident, kv_dtype):
        return GqaAttention.prefill(self, _f64(chunk), _f64(resident), kv_dtype)


# ---------------------------------------------------------------------------------------------
# DeepSeek-V4 hybrid compressed attention
# ---------------------------------------------------------------------------------------------
class CompressedAttention(AttentionKind):
    """DeepSeek-V4: raw window on every layer; c4 layers top-k over ctx/4 entries with an
    indexer; c128 layers dense over ctx/128 entries. Shared K = V MQA (one 512-wide head).

    Per query token and layer, ``P = 2·H·(head_dim + v_head_dim)`` FLOPs per attended entry:
    window ``P·min(ctx, W)``; c4 pool ``P·min(ctx/4, topk)``; c128 pool ``P·ctx/128``;
    c4 indexing ``2·n_idx·d_idx·ctx/4``. Compressed entries exist for complete groups only
    (``floor(ctx/ratio)``).
    """

    def __init__(self, model: ModelSpec):
        super().__init__(model)
        self.idx = _indexer(model)
        ratios = list(self.att.compress_ratios)
        if len(ratios) != model.num_layers:
            raise ConfigError(f"compress_ratios has {len(ratios)} entries for "
                              f"{model.num_layers} layers (leave the MTP entry out)",
                              key="model.attention.compress_ratios")
        bad = sorted({r for r in ratios if r not in (0, 4, 128)})
        if bad:
            raise ConfigError(f"compress_ratios may hold 0, 4 and 128, not {bad}",
                              key="model.attention.compress_ratios")
        if self.att.sliding_window <= 0:
            raise ConfigError("dsv4_compressed needs sliding_window (128)",
                              key="model.attention.sliding_window")
        self.n_window_only = ratios.count(0)
        self.n_c4 = ratios.count(4)
        self.n_c128 = ratios.count(128)
        self.window = float(self.att.sliding_window)

    def indexer_dtype(self) -> str:
        return "fp8"

    # -- memory -------------------------------------------------------------------------------
    def kv_bytes_per_token_layer(self, kv_dtype):
        """Bytes of one cache entry (a raw window token or one compressed entry)."""
        if kv_dtype in self.att.kv_entry_bytes:
            return float(self.att.kv_entry_bytes[kv_dtype])
        v = self.att.v_head_dim or self.att.head_dim
        # K = V: one head_dim-wide vector per entry.
        return float(max(self.att.head_dim, v) * kv_element_bytes(kv_dtype))

    def kv_layers(self) -> int:
        return self.n_c4 + self.n_c128

    def compressed_entry_bytes_per_token(self, kv_dtype: str) -> float:
        """Compressed-pool bytes one token adds, all layers (indexer keys apart)."""
        entry = self.kv_bytes_per_token_layer(kv_dtype)
        return self.n_c4 * entry / 4 + self.n_c128 * entry / 128

    def index_key_bytes_per_token(self):
        return self.n_c4 * self.idx.key_bytes_per_token / 4

    def kv_bytes_per_token(self, kv_dtype, *, attn_tp, dcp, latent_sharded):
        # One shared KV head: replicated over attention-TP ranks unless the engine shards it;
        # DCP splits the pools by position. Index keys are neither.
        pools = self.compressed_entry_bytes_per_token(kv_dtype) / (attn_tp if latent_sharded else 1)
        return pools / dcp + self.index_key_bytes_per_token()

    def kv_fixed_bytes_per_seq(self, kv_dtype, *, attn_tp):
        """The raw window on every layer (compressor residual state not counted)."""
        return self.window * self.model.num_layers * self.kv_bytes_per_token_layer(kv_dtype)

    # -- work ---------------------------------------------------------------------------------
    def _per_entry_flops(self) -> float:
        v = self.att.v_head_dim or self.att.head_dim
        return 2.0 * self.model.num_attention_heads * (self.att.head_dim + v)

    def decode(self, ctx, width, kv_dtype):
        ctx = _f64(ctx)
        per = self._per_entry_flops()
        entry = self.kv_bytes_per_token_layer(kv_dtype)
        topk = float(self.idx.topk)
        L = self.model.num_layers
        win = np.minimum(ctx, self.window)
        n4, n128 = np.floor(ctx / 4), np.floor(ctx / 128)
        flops: dict[str, np.ndarray] = {"window": L * per * width * win}
        byts: dict[str, np.ndarray] = {"window": L * entry * win}
        flops["pool"] = (self.n_c4 * np.minimum(n4, topk) + self.n_c128 * n128) * per * width
        byts["pool"] = (self.n_c4 * np.minimum(n4, width * topk) + self.n_c128 * n128) * entry
        flops["indexing"] = self.n_c4 * _indexer_pair_flops(self.idx) * width * n4
        byts["indexing"] = self.n_c4 * (self.idx.key_bytes_per_token + SCORE_BYTES_PER_ENTRY
                                        * width) * n4
        return AttentionCost(flops, byts)

    def prefill(self, chunk, resident, kv_dtype):
        chunk, resident = _f64(chunk), _f64(resident)
        per = self._per_entry_flops()
        entry = self.kv_bytes_per_token_layer(kv_dtype)
        topk = float(self.idx.topk)
        L = self.model.num_layers
        total = resident + chunk
        all_pairs = _causal_pairs(chunk, resident)
        flops: dict[str, np.ndarray] = {
            "window": L * per * _causal_pairs(chunk, resident, self.window)}
        byts: dict[str, np.ndarray] = {"window": L * entry * np.minimum(total, self.window)}
        # A query at position p sees p/4 c4 entries (capped at topk) and p/128 c128 entries.
        c4_pairs = _causal_pairs(chunk, resident, 4 * topk) / 4
        flops["pool"] = (self.n_c4 * c4_pairs + self.n_c128 * all_pairs / 128) * per
        byts["pool"] = (self.n_c4 * total / 4 + self.n_c128 * total / 128) * entry
        flops["indexing"] = self.n_c4 * _indexer_pair_flops(self.idx) * all_pairs / 4
        byts["indexing"] = self.n_c4 * (self.idx.key_bytes_per_token * total / 4
                                        + SCORE_BYTES_PER_ENTRY * all_pairs / 4)
        return AttentionCost(flops, byts)

    def dense_reference(self, ctx, width, kv_dtype):
        """Every layer dense over the whole raw context (MQA, one 512-wide head)."""
        ctx = _f64(ctx)
        L = self.model.num_layers
        return AttentionCost({"dense": L * self._per_entry_flops() * width * ctx},
                             {"dense": L * self.kv_bytes_per_token_layer(kv_dtype) * ctx})

    def dense_prefill_reference(self, chunk, resident, kv_dtype):
        chunk, resident = _f64(chunk), _f64(resident)
        L = self.model.num_layers
        return AttentionCost(
            {"dense": L * self._per_entry_flops() * _causal_pairs(chunk, resident)},
            {"dense": L * self.kv_bytes_per_token_layer(kv_dtype) * (resident + chunk)})


# ---------------------------------------------------------------------------------------------
# Helpers the oracle and the CLI call
# ---------------------------------------------------------------------------------------------
def decode_attention_cost(kind: AttentionKind, ctx, width: int, kv_dtype: str, *,
                          dense: bool, scale: float | None = None) -> AttentionCost:
    """The decode attention a step runs, or its dense charge when ``dense`` is set.

    ``dense`` is ``Knobs.dpa_decode_dense`` (INFERASIM_DPA_DECODE_DENSE) for the dpa-decode
    phase. A kind that neither compresses nor selects is priced dense, times ``scale`` when
    one is configured (a measured sparse-attention factor); compression and selection take
    precedence over any configured scale.
    """
    ctx = _f64(ctx)
    if dense:
        return kind.dense_reference(ctx, width, kv_dtype)
    cost = kind.decode(ctx, width, kv_dtype)
    if scale is not None and not isinstance(kind, (DsaAttention, BlockSparseAttention,
                                                   CompressedAttention)):
        cost = AttentionCost({k: v * scale for k, v in cost.flops.items()},
                             {k: v * scale for k, v in cost.bytes.items()})
    return cost


def dense_prefill_cost(kind: AttentionKind, chunk, resident, kv_dtype: str) -> AttentionCost:
    """The prefill chunk charged dense over its whole context (the prefill ratio's reference)."""
    ref = getattr(kind, "dense_prefill_reference", None)
    if ref is not None:
        return ref(chunk, resident, kv_dtype)
    return kind.prefill(_f64(chunk), _f64(resident), kv_dtype)


def indexer_dtype(kind: AttentionKind) -> str:
    """The math dtype of a kind's indexer (fp8 for DSA and DeepSeek-V4)."""
    fn = getattr(kind, "indexer_dtype", None)
    return fn() if fn is not None else "fp8"


def kv_resident_bytes(kind: AttentionKind, ctx, kv_dtype: str, *, attn_tp: int = 1,
                      dcp: int = 1, latent_sharded: bool = False) -> np.ndarray:
    """Bytes a resident sequence of ``ctx`` tokens holds per GPU: per-token growth (compressed
    pools, index keys) times its context, plus its bounded windows."""
    ctx = _f64(ctx)
    return kind.kv_bytes_per_token(kv_dtype, attn_tp=attn_tp, dcp=dcp,
                                   latent_sharded=latent_sharded) * ctx \
        + kind.kv_fixed_bytes_per_seq(kv_dtype, attn_tp=attn_tp)
