"""Memory per GPU: weights by dtype and parallelism, KV bytes per token, and the KV pool size.

Pool tokens = the KV budget the engine's memory rule leaves (``engine.memory_rule``,
inferasim.arch.engine_memory: HBM x fraction - weights - activation peak - non-torch -
CUDA graphs - margins), divided by the KV bytes a token adds per GPU (sliding-window bytes
are charged per sequence, not per token), unless the scenario gives the pool the engine
really allocated (``engine.kv_pool_tokens``).
"""

from __future__ import annotations

import math

import attrs

from inferasim.arch.attention import attention_for
from inferasim.arch.dtypes import FOUR_BIT, bytes_per_element
from inferasim.arch.engine_memory import (
    SGLANG_SWA_FULL_TOKENS_RATIO,
    MemoryBreakdown,
    memory_breakdown,
)
from inferasim.arch.params import param_counts
from inferasim.arch.spec import ModelSpec
from inferasim.config.scenario import Scenario

GIB = 1024**3


def linear_dtypes(model: ModelSpec, weight_dtype: str) -> dict[str, str]:
    """Which dtype each group of weights is multiplied in (the GEMM work model's view).

    4-bit checkpoints quantize the FFN/expert weights; attention projections stay fp8
    (the NVFP4 and MXFP4 DeepSeek checkpoints exclude them), embeddings stay bf16.
    """
    expert = model.expert_weight_dtype or weight_dtype
    rest = "fp8" if weight_dtype in FOUR_BIT else weight_dtype
    ffn = weight_dtype
    return {"embedding": "bf16", "attention": rest, "dense_ffn": ffn, "shared_experts": ffn,
            "routed_experts": expert, "router": "bf16"}


def stored_dtypes(model: ModelSpec, weight_dtype: str) -> dict[str, str]:
    """Which dtype each group of weights is stored in on the GPU (the weight memory).

    A 4-bit checkpoint of a MoE model quantizes the routed experts only and keeps what it
    excludes unquantized, bf16 (facts.md B.3: NVIDIA's NVFP4 DeepSeek checkpoints exclude the
    MLA projections, V4-NVFP4 quantizes ``*.ffn.experts`` only). The vLLM logs bear this out:
    nvidia/DeepSeek-R1-0528-FP4 at TP4 loads 94.08 GiB and amd/Kimi-K2.7-Code-MXFP4 at TP4
    130.42 GiB, within 1 % of this and 3-5 % above the fp8-attention reading
    ``linear_dtypes`` keeps for the GEMM model. A 4-bit checkpoint of a dense model
    quantizes every linear layer (nvidia/Llama-3.3-70B-Instruct-FP4: 39.89 GiB at TP1).
    Embeddings and the router stay bf16. A model whose 4-bit checkpoints quantize the shared
    experts too says so (``ModelSpec.four_bit_shared_experts``: AMD's GLM-5.1 MXFP4).
    """
    if weight_dtype not in FOUR_BIT:
        dtypes = linear_dtypes(model, weight_dtype)
        return {**dtypes, "mtp": dtypes["dense_ffn"]}
    rest = "bf16" if model.ffn.is_moe else weight_dtype
    shared = weight_dtype if model.four_bit_shared_experts else rest
    # the MTP module is mostly its experts: charged at the experts' 4 bits, as before [U]
    return {"embedding": "bf16", "attention": rest, "dense_ffn": rest, "shared_experts": shared,
            "routed_experts": weight_dtype, "router": "bf16", "mtp": weight_dtype}


@attrs.frozen
class MemoryPlan:
    weight_bytes_per_gpu: float
    kv_bytes_per_token: float          # per GPU, all layers
    kv_bytes_per_token_layer: float    # per full-attention layer, before parallel division
    kv_fixed_bytes_per_seq: float      # bounded windows per GPU
    # those windows in tokens of the pool, whole pages: what each running request holds
    # besides its context (the replay charges it at admission)
    kv_window_pool_tokens: int
    kv_budget_bytes: float             # what is left for KV on one GPU
    kv_pool_tokens: int
    kv_pool_from: str                  # "memory model" or "engine.kv_pool_tokens"
    # how the engine's memory rule divides the GPU (budget, activation peak, graphs, ...)
    memory: MemoryBreakdown | None = None
    # what the engine divides its budget by to count the pool's tokens, where that is not
    # kv_bytes_per_token (SGLang's sliding-window pool rides on the full pool's count)
    kv_pool_bytes_per_token: float | None = None


def expert_slots(scenario: Scenario) -> int:
    """The routed experts' slots over the EP ranks: the experts and EPLB's redundant copies."""
    return scenario.model.ffn.n_routed_experts + scenario.parallel.redundant_experts


def expert_slot_scale(scenario: Scenario) -> float:
    """The routed experts' slots over the experts: 1 without EPLB's redundant copies."""
    n = scenario.model.ffn.n_routed_experts
    return expert_slots(scenario) / n if n else 1.0


def weight_bytes_per_gpu(scenario: Scenario) -> float:
    model, par = scenario.model, scenario.parallel
    counts = param_counts(model)
    dt = stored_dtypes(model, scenario.weight_dtype)
    b = bytes_per_element
    per_gpu = (counts.embedding + counts.lm_head) * b(dt["embedding"]) / par.tp
    # Attention weights are replicated on every attention-DP rank.
    per_gpu += counts.attention * b(dt["attention"]) / par.attn_tp
    per_gpu += counts.dense_ffn * b(dt["dense_ffn"]) / par.tp
    per_gpu += counts.shared_experts * b(dt["shared_experts"]) / par.tp
    # Experts split by EP (whole experts) and TP within an EP group: either way 1/tp each, of
    # the expert slots (EPLB's redundant copies take memory like the experts they copy).
    per_gpu += counts.routed_experts * expert_slot_scale(scenario) * b(dt["routed_experts"]) \
        / par.tp
    per_gpu += counts.router * b(dt["router"])
    if scenario.speculative.method == "mtp":
        per_gpu += counts.mtp * b(dt["mtp"]) / par.tp
    return per_gpu


def window_pool_tokens(fixed_bytes: float, bytes_per_token: float, page_size: int) -> int:
    """A request's bounded windows (sliding-window layers, a compressed layer's raw window)
    in tokens of the pool, whole pages: the windows come out of the same KV memory as the
    context, as an engine's hybrid allocator takes a window group's blocks from one pool."""
    if fixed_bytes <= 0 or bytes_per_token <= 0:
        return 0
    tokens = math.ceil(fixed_bytes / bytes_per_token)
    return -(-tokens // page_size) * page_size


def counted_model(scenario: Scenario) -> ModelSpec:
    """The model as the engine's memory rule counts its pool's tokens.

    SGLang sizes an MLA pool (DSA included) by the raw latent, (kv_lora_rank + rope) x the
    cache dtype's bytes plus the index keys, whatever layout the buffer then takes
    (``DefaultPoolConfigurator._compute_cell_size``, formerly ``profile_max_num_token``): the
    FlashMLA fp8 entry of 656 bytes is allocated at 576 bytes' count on CUDA, and on ROCm with
    the TileLang DSA backends the buffer is the raw 576 bytes itself
    (``calculate_mla_kv_cache_dim``). vLLM counts its pages as laid out. DeepSeek-V4's pools
    have their own configurator in SGLang and keep their entry."""
    model = scenario.model
    att = model.attention
    if (scenario.engine.memory_rule == "sglang-static" and att.kind in ("mla", "mla_dsa")
            and att.kv_entry_bytes):
        return attrs.evolve(model, attention=attrs.evolve(att, kv_entry_bytes={}))
    return model


def memory_plan(scenario: Scenario) -> MemoryPlan:
    par, eng = scenario.parallel, scenario.engine
    kind = attention_for(counted_model(scenario))
    kv_dtype = scenario.kv_dtype
    per_token = kind.kv_bytes_per_token(kv_dtype, attn_tp=par.attn_tp, dcp=par.dcp,
                                        latent_sharded=eng.mla_latent_sharded)
    fixed = kind.kv_fixed_bytes_per_seq(kv_dtype, attn_tp=par.attn_tp)
    window_tokens = window_pool_tokens(fixed, per_token, eng.page_size)
    counted = per_token
    if _sglang_swa_pool(scenario):
        # the windows live in SGLang's SWA pool, which the full pool's count pays for
        counted += SGLANG_SWA_FULL_TOKENS_RATIO * kind.window_bytes_per_token(
            kv_dtype, attn_tp=par.attn_tp)
        window_tokens = 0
    weights = weight_bytes_per_gpu(scenario)
    memory = memory_breakdown(scenario, weights)
    budget = memory.kv_bytes
    if eng.kv_pool_tokens is not None:
        pool, source = int(eng.kv_pool_tokens), "engine.kv_pool_tokens"
    else:
        pool, source = max(0, int(budget // counted)), "memory model"
        pool -= pool % eng.page_size
    return MemoryPlan(weight_bytes_per_gpu=weights, kv_bytes_per_token=per_token,
                      kv_bytes_per_token_layer=kind.kv_bytes_per_token_layer(kv_dtype),
                      kv_fixed_bytes_per_seq=fixed,
                      kv_window_pool_tokens=window_tokens,
                      kv_budget_bytes=budget,
                      kv_pool_tokens=pool, kv_pool_from=source, memory=memory,
                      kv_pool_bytes_per_token=counted)


def _sglang_swa_pool(scenario: Scenario) -> bool:
    """Whether SGLang keeps the model's sliding-window layers in a pool of their own (a
    hybrid sliding-window model; linear-attention hybrids have their own state pool)."""
    att = scenario.model.attention
    return (scenario.engine.memory_rule == "sglang-static" and att.sliding_layers > 0
            and att.sliding_window > 0 and att.linear is None)


def model_memory_plan(scenario: Scenario) -> MemoryPlan:
    """The memory model's plan for ``scenario``, a pool it states (``engine.kv_pool_tokens``)
    set aside: what the deployment's own memory gives, to set a measured pool against."""
    eng = scenario.engine
    if eng.kv_pool_tokens is None:
        return memory_plan(scenario)
    return memory_plan(attrs.evolve(scenario, engine=attrs.evolve(eng, kv_pool_tokens=None)))
