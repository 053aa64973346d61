"""The non-attention work of a step: GEMM FLOPs and weight bytes per GPU, and TP/EP traffic.

Everything is a function of two counts (tokens in the forward, tokens sampled), so the
oracle can price a steady decode batch for many steps with one evaluation.
"""

from __future__ import annotations

import attrs

from inferasim.arch.dtypes import bytes_per_element
from inferasim.arch.memory import expert_slot_scale, expert_slots, linear_dtypes
from inferasim.arch.params import (
    attention_params_per_layer,
    attention_projection_params,
    indexer_layers,
    param_counts,
)
from inferasim.config.scenario import Scenario


@attrs.frozen
class GemmGroup:
    """Weights multiplied by every token of a step (per GPU)."""

    name: str
    flops_per_token: float
    weight_bytes: float
    dtype: str
    # Fraction of the weights a step of T tokens touches: 1 for dense weights; routed experts
    # touch 1 - (1 - k/n)^T of theirs.
    experts: int = 0
    experts_per_token: int = 0


@attrs.frozen
class StepWork:
    groups: tuple[GemmGroup, ...]
    lm_head_flops_per_sample: float
    lm_head_bytes: float
    allreduce_bytes_per_token: float   # per layer boundary, per GPU
    allreduces_per_step: int           # collectives per forward
    tp: int
    alltoall_bytes_per_token: float    # expert-parallel dispatch + combine, per GPU
    # ranks of the all-to-all: the share of its traffic that leaves a scale-up domain
    # depends on it (arch/interconnect.py)
    ep: int = 1
    # Under attention DP each GPU dispatches to its experts its own rank's tokens only, and
    # the FFN collectives above (tp ranks) move every rank's; the attention output is
    # reduced within its attention-TP group (``attn_allreduces_per_step`` over ``attn_tp``
    # ranks, one rank's tokens).
    attn_allreduces_per_step: int = 0
    attn_tp: int = 1
    # Dispatch-and-combine rounds per forward: one per MoE layer under EP, each its own pair
    # of kernels that waits for its peers, so each pays the hops' latency (the bytes above
    # are the sum over the rounds).
    alltoalls_per_step: int = 0


def step_work(scenario: Scenario) -> StepWork:
    model, par = scenario.model, scenario.parallel
    counts = param_counts(model)
    dt = linear_dtypes(model, scenario.weight_dtype)
    b = bytes_per_element
    per_layer = attention_params_per_layer(model)
    attn_proj = attention_projection_params(model)
    attn_idx = per_layer["indexer"] * indexer_layers(model)
    groups = [
        GemmGroup("gemm_attention", 2.0 * (attn_proj + attn_idx) / par.attn_tp,
                  (attn_proj + attn_idx) * b(dt["attention"]) / par.attn_tp, dt["attention"]),
    ]
    if counts.dense_ffn:
        groups.append(GemmGroup("gemm_dense_ffn", 2.0 * counts.dense_ffn / par.tp,
                                counts.dense_ffn * b(dt["dense_ffn"]) / par.tp, dt["dense_ffn"]))
    if counts.shared_experts:
        groups.append(GemmGroup("gemm_shared_experts", 2.0 * counts.shared_experts / par.tp,
                                counts.shared_experts * b(dt["shared_experts"]) / par.tp,
                                dt["shared_experts"]))
    if counts.routed_experts:
        # EPLB's redundant slots hold copies of busy experts: a step streams each slot it
        # routes to, so the slots are the experts the weights are read over
        groups.append(GemmGroup("gemm_moe", 2.0 * counts.routed_active / par.tp,
                                counts.routed_experts * expert_slot_scale(scenario)
                                * b(dt["routed_experts"]) / par.tp,
                                dt["routed_experts"], experts=expert_slots(scenario),
                                experts_per_token=model.ffn.experts_per_token))
    lm_params = counts.lm_head or counts.embedding
    hidden_bytes = model.hidden_size * 2.0  # activations cross ranks in bf16
    # Two reductions per layer (after attention, after the FFN) under tensor parallelism.
    # With attention DP the attention's is within its attention-TP group, on a rank's tokens,
    # and the FFN's (a gather before a TP-sharded FFN, a scatter after: one all-reduce's
    # traffic) over all tp ranks on every rank's tokens.
    n_allreduce = 2 * model.num_layers if par.tp > 1 else 0
    n_attn_allreduce = 0
    if par.dp_attention > 1:
        n_allreduce = model.num_layers if par.tp > 1 else 0
        n_attn_allreduce = model.num_layers if par.attn_tp > 1 else 0
    a2a = 0.0
    moe_layers = 0
    if par.ep > 1 and model.ffn.is_moe:
        moe_layers = model.num_layers - model.ffn.first_k_dense
        # Under EP the MoE output is combined by the all-to-all, not reduced.
        n_allreduce -= moe_layers
        # Dispatch (fp8) and combine (bf16) of each token to its k experts, the remote share.
        a2a = moe_layers * model.ffn.experts_per_token * model.hidden_size * 3.0 \
            * (par.ep - 1) / par.ep
    return StepWork(groups=tuple(groups), lm_head_flops_per_sample=2.0 * lm_params / par.tp,
                    lm_head_bytes=lm_params * 2.0 / par.tp, allreduce_bytes_per_token=hidden_bytes,
                    allreduces_per_step=n_allreduce, tp=par.tp, alltoall_bytes_per_token=a2a,
                    ep=par.ep if a2a else 1, attn_allreduces_per_step=n_attn_allreduce,
                    attn_tp=par.attn_tp, alltoalls_per_step=moe_layers)
