"""Gated DeltaNet (linear-attention) layers of a hybrid model: state size, work and weights.

A linear layer keeps no per-token KV. Each sequence holds, per layer, what vLLM allocates for
it (``MambaStateShapeCalculator.gated_delta_net_state_shape`` in
vllm/model_executor/layers/mamba/mamba_utils.py): a recurrent state of
(value_heads / tp, value_head_dim, key_head_dim) and a conv history of
(conv_kernel - 1, conv_channels / tp). Both take the model dtype unless
``mamba_ssm_cache_dtype`` / ``mamba_cache_dtype`` say otherwise
(``MambaStateDtypeCalculator.gated_delta_net_state_dtype``: "auto" is the model dtype).

Work, per sequence: a decode token updates and reads the state once per layer (constant in
context, memory-bound on the state read and write); a prefill chunk runs the chunked delta
rule, linear in the chunk's tokens and blind to what is resident (the state carries it).
"""

from __future__ import annotations

import numpy as np

from inferasim.arch.dtypes import bytes_per_element
from inferasim.arch.spec import LinearAttentionSpec

# One recurrent step per value head touches each state element about 7 times: the decay
# (1 multiply), S k (2), the rank-1 delta update (2) and the read-out S q (2).
DECODE_FLOPS_PER_STATE_ELEMENT = 7.0
# The chunked rule per token and value head: three state-sized products (w S, q S and the
# k^T u update, 2 FLOPs per element each) [U: a count of the algorithm, not of a kernel].
PREFILL_STATE_FLOPS_PER_ELEMENT = 6.0


def _per_rank(count: int, attn_tp: int) -> float:
    # Fewer heads than ranks: each rank still keeps one (as GQA KV heads are replicated).
    return max(1.0, count / attn_tp)


def recurrent_state_bytes(lin: LinearAttentionSpec, attn_tp: int = 1) -> float:
    """One layer's recurrent state for one sequence on one rank."""
    return _per_rank(lin.value_heads, attn_tp) * lin.key_head_dim * lin.value_head_dim \
        * bytes_per_element(lin.state_dtype)


def conv_state_bytes(lin: LinearAttentionSpec, attn_tp: int = 1) -> float:
    """One layer's causal-conv history for one sequence on one rank."""
    return (lin.conv_kernel - 1) * lin.conv_channels / attn_tp * bytes_per_element(lin.conv_dtype)


def state_bytes_per_seq(lin: LinearAttentionSpec, attn_tp: int = 1) -> float:
    """Every linear layer's state for one sequence on one rank: the same at any context."""
    return lin.layers * (recurrent_state_bytes(lin, attn_tp) + conv_state_bytes(lin, attn_tp))


def _state_elements(lin: LinearAttentionSpec) -> float:
    return float(lin.value_heads * lin.key_head_dim * lin.value_head_dim)


def decode_cost(lin: LinearAttentionSpec, ctx: np.ndarray, width: int) -> tuple[np.ndarray,
                                                                                  np.ndarray]:
    """(FLOPs, bytes) per sequence of one decode step, all linear layers, before parallel
    division: ``width`` recurrent steps, one read and one write of the whole state."""
    ones = np.ones_like(ctx, dtype=np.float64)
    flops = lin.layers * DECODE_FLOPS_PER_STATE_ELEMENT * _state_elements(lin) * width
    byts = 2.0 * state_bytes_per_seq(lin)
    return flops * ones, byts * ones


def prefill_cost(lin: LinearAttentionSpec, chunk: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(FLOPs, bytes) per sequence of a prefill chunk, all linear layers, before parallel
    division. Per token and value head: the state products plus the intra-chunk block
    (k k^T, q k^T, the WY solve's w and u), C x (3 key + 2 value) dims x 2 FLOPs."""
    chunk = np.asarray(chunk, dtype=np.float64)
    c = lin.chunk_size
    per_head = PREFILL_STATE_FLOPS_PER_ELEMENT * lin.key_head_dim * lin.value_head_dim \
        + 2.0 * c * (3 * lin.key_head_dim + 2 * lin.value_head_dim)
    flops = lin.layers * lin.value_heads * per_head * chunk
    # The state is read and written once, and materialised at every chunk boundary.
    byts = state_bytes_per_seq(lin) * (2.0 + np.ceil(chunk / c))
    return flops, byts


def projection_params(lin: LinearAttentionSpec, hidden: int) -> int:
    """Weights of one linear layer: the q/k/v/z input projections, the per-head beta and
    decay (a) projections, the conv filters, and the output projection."""
    value_dim = lin.value_heads * lin.value_head_dim
    key_dim = lin.key_heads * lin.key_head_dim
    in_proj = hidden * (2 * key_dim + 2 * value_dim + 2 * lin.value_heads)
    conv = lin.conv_channels * lin.conv_kernel
    return in_proj + conv + value_dim * hidden
