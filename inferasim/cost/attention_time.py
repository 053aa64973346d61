"""Turn attention work (FLOPs and bytes per term) into seconds on one GPU.

Phases:
- ``decode`` under tensor parallelism: heads split over attention-TP ranks, so each rank does
  1/attn_tp of the FLOPs but (MLA) reads the whole replicated latent; a roofline per term.
- ``dpa-decode``: under attention-DP a rank runs every head of its own sequences, so MLA-family
  decode attention over long contexts (every query head over one shared latent) is
  compute-bound; priced from the attention actually run (compression schedule, else uniform
  selection, else a configured scale) plus the indexer, unless ``dense`` is forced by
  INFERASIM_DPA_DECODE_DENSE (see ``inferasim.arch.sparse_attention.decode_attention_cost``).
  GQA kinds keep the roofline there: a KV head serves only its group of query heads (a few
  FLOPs per byte read), so holding every head does not make their decode compute-bound, and
  compute alone priced Llama-3.1-70B's DPA decode attention about 20x below its KV read.
- ``prefill``: compute-bound per term, heads split over attention-TP ranks.

Math rates:
- attention terms run at the bf16 rate, except MLA decode (``mla``, ``mla_dsa``) with an fp8
  KV cache on AMD parts, where AITER's MLA decode kernel ``mla_decode_fwd`` is a8w8 (fp8 Q
  and KV on the fp8 matrix cores); the DSA sparse decode is that same kernel, the top-k
  indices standing in for its page table (HIP page size 1). NVIDIA's FlashMLA dequantises fp8
  KV to bf16; GQA paged attention and DeepSeek-V4's kernel are priced at bf16; prefill is bf16.
- the indexer term runs at its own dtype's rate (fp8 for DSA / DeepSeek-V4) divided by the
  GPU's ``sparse_indexer_cost_scale`` (fused AITER on gfx950 = 1, unfused Torch on gfx942 > 1).
  The indexer is replicated on every attention-TP rank (ReplicatedLinear, all index heads per
  rank), so its FLOPs and its index-key reads are not divided by TP.
- the sparse selection's prefill runs at the attention rate divided by the GPU's
  ``sparse_prefill_cost_scale`` (the measured kernel's shortfall; 1 where none is known).
- a DSA selection kernel that runs its query heads in multiples (``sparse_mla_head_multiple``:
  FlashMLA's sparse kernels on NVIDIA) pays for the padded heads: a rank holding 8 of GLM-5's
  64 heads (TP8) runs 64 (``selection_padding``).
"""

from __future__ import annotations

import math

import attrs
import numpy as np

from inferasim.arch.attention import AttentionCost, AttentionKind
from inferasim.arch.gpu import GpuSpec

PHASES = ("prefill", "decode", "dpa-decode")
DECODE_PHASES = ("decode", "dpa-decode")
INDEXING = "indexing"
SELECTION = "selection"


FP8_MATH_KINDS = ("mla", "mla_dsa")
# Kinds whose KV heads are read by a small group of query heads: memory-bound in every decode
# phase, attention-DP included.
GROUPED_KV_KINDS = ("gqa", "gqa_block_sparse")


def attention_math_dtype(gpu: GpuSpec, *, phase: str, kv_dtype: str | None,
                         attention_kind: str | None) -> str:
    """The dtype the attention (not indexer) math runs in for this phase, KV dtype and kind."""
    if (phase in DECODE_PHASES and kv_dtype == "fp8" and gpu.vendor == "amd"
            and attention_kind in FP8_MATH_KINDS):
        return "fp8"
    return "bf16"


def attention_rate(gpu: GpuSpec, math_dtype: str = "bf16") -> float:
    """Attained FLOP/s of the attention terms on one GPU."""
    return gpu.peak_flops(math_dtype) * gpu.efficiency.attention


def indexer_rate(gpu: GpuSpec, *, index_dtype: str = "fp8",
                 indexer_cost_scale: float | None = None) -> float:
    """Attained FLOP/s of the indexer: its dtype's rate over the kernel's cost scale."""
    scale = gpu.sparse_indexer_cost_scale if indexer_cost_scale is None else indexer_cost_scale
    return gpu.peak_flops(index_dtype) * gpu.efficiency.attention / max(scale, 1e-9)


def selection_padding(gpu: GpuSpec, *, heads: int, attn_tp: int, kv_dtype: str) -> float:
    """How many times its own heads' selection work a rank's DSA kernel does: its heads
    (``heads / attn_tp``) rounded up to the kernel's multiple for this KV dtype, over them."""
    multiple = gpu.sparse_mla_head_multiple.get("fp8" if kv_dtype == "fp8" else "bf16")
    if not multiple:
        return 1.0
    local = heads / max(1, attn_tp)
    return math.ceil(local / multiple) * multiple / local


def kind_selection_padding(kind: AttentionKind, gpu: GpuSpec, *, attn_tp: int,
                           kv_dtype: str) -> float:
    """``selection_padding`` for a kind: DSA's alone runs FlashMLA's sparse kernels."""
    if kind.model.attention.kind != "mla_dsa":
        return 1.0
    return selection_padding(gpu, heads=kind.model.num_attention_heads, attn_tp=attn_tp,
                             kv_dtype=kv_dtype)


@attrs.frozen
class AttentionPricer:
    """The rates that turn one phase's attention work into seconds on one GPU, worked out
    once (a replay prices millions of steps at one deployment's rates)."""

    compute_rate: float      # attention FLOP/s over the attention-TP ranks
    index_rate: float        # the indexer's FLOP/s (not divided by TP)
    selection_scale: float   # the selection's compute, times this
    kv_bandwidth: float      # KV bytes/s of a term whose bytes the attention-TP ranks share
    bandwidth: float         # bytes/s of the indexer's reads (not shared)
    roofline: bool           # decode: each term is the larger of compute and memory

    def seconds(self, cost: AttentionCost) -> dict[str, np.ndarray]:
        """Seconds per sequence for each term."""
        out: dict[str, np.ndarray] = {}
        for term, flops in cost.flops.items():
            flops = np.asarray(flops, dtype=np.float64)
            if term == INDEXING:
                compute = flops / self.index_rate
                bandwidth = self.bandwidth
            else:
                compute = flops / self.compute_rate
                if term == SELECTION:
                    compute = compute * self.selection_scale
                bandwidth = self.kv_bandwidth
            if self.roofline:
                memory = np.asarray(cost.bytes.get(term, 0.0), dtype=np.float64) / bandwidth
                out[term] = np.maximum(compute, memory)
            else:
                out[term] = compute
        return out


def attention_pricer(gpu: GpuSpec, *, phase: str, attn_tp: int, kv_bytes_divisor: float,
                     math_dtype: str = "bf16", index_dtype: str = "fp8",
                     indexer_cost_scale: float | None = None, dpa_roofline: bool = False,
                     selection_pad: float = 1.0) -> AttentionPricer:
    """The pricer of one phase (``attention_seconds``'s arguments but the work)."""
    if phase not in PHASES:
        raise ValueError(phase)
    bw = gpu.hbm_bw * gpu.efficiency.memory
    return AttentionPricer(
        compute_rate=attention_rate(gpu, math_dtype) * attn_tp,
        index_rate=indexer_rate(gpu, index_dtype=index_dtype,
                                indexer_cost_scale=indexer_cost_scale),
        selection_scale=(gpu.sparse_prefill_cost_scale if phase == "prefill" else 1.0)
        * selection_pad,
        kv_bandwidth=bw * kv_bytes_divisor, bandwidth=bw,
        roofline=phase == "decode" or (dpa_roofline and phase == "dpa-decode"))


def attention_seconds(cost: AttentionCost, gpu: GpuSpec, *, phase: str, attn_tp: int,
                      kv_bytes_divisor: float, math_dtype: str = "bf16",
                      index_dtype: str = "fp8",
                      indexer_cost_scale: float | None = None,
                      dpa_roofline: bool = False,
                      selection_pad: float = 1.0) -> dict[str, np.ndarray]:
    """Seconds per sequence for each term.

    ``kv_bytes_divisor`` is how many ranks share the reading of the KV bytes (attn_tp for GQA
    heads split across ranks, 1 for a replicated MLA latent). ``math_dtype`` is the dtype of
    the attention terms' math (``attention_math_dtype``); ``index_dtype`` the indexer's;
    ``indexer_cost_scale`` overrides the GPU's kernel scale. ``dpa_roofline`` prices the
    dpa-decode phase as decode (the roofline) rather than by compute alone (GQA kinds).
    ``selection_pad`` multiplies the selection's compute (``selection_padding``).
    """
    return attention_pricer(gpu, phase=phase, attn_tp=attn_tp,
                            kv_bytes_divisor=kv_bytes_divisor, math_dtype=math_dtype,
                            index_dtype=index_dtype, indexer_cost_scale=indexer_cost_scale,
                            dpa_roofline=dpa_roofline, selection_pad=selection_pad).seconds(cost)


def kind_attention_pricer(kind: AttentionKind, gpu: GpuSpec, *, phase: str, attn_tp: int,
                          kv_bytes_divisor: float, kv_dtype: str,
                          indexer_cost_scale: float | None = None) -> AttentionPricer:
    """``attention_pricer`` at the kind's own math rates (attention and indexer dtypes)."""
    from inferasim.arch.sparse_attention import indexer_dtype

    name = kind.model.attention.kind
    math_dtype = attention_math_dtype(gpu, phase=phase, kv_dtype=kv_dtype, attention_kind=name)
    pad = kind_selection_padding(kind, gpu, attn_tp=attn_tp, kv_dtype=kv_dtype)
    return attention_pricer(gpu, phase=phase, attn_tp=attn_tp,
                            kv_bytes_divisor=kv_bytes_divisor, math_dtype=math_dtype,
                            index_dtype=indexer_dtype(kind),
                            indexer_cost_scale=indexer_cost_scale,
                            dpa_roofline=name in GROUPED_KV_KINDS, selection_pad=pad)


def kind_attention_seconds(kind: AttentionKind, cost: AttentionCost, gpu: GpuSpec, *,
                           phase: str, attn_tp: int, kv_bytes_divisor: float, kv_dtype: str,
                           indexer_cost_scale: float | None = None) -> dict[str, np.ndarray]:
    """``attention_seconds`` at the kind's own math rates (attention and indexer dtypes)."""
    return kind_attention_pricer(kind, gpu, phase=phase, attn_tp=attn_tp,
                                 kv_bytes_divisor=kv_bytes_divisor, kv_dtype=kv_dtype,
                                 indexer_cost_scale=indexer_cost_scale).seconds(cost)
