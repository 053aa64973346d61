"""Engine defaults that follow the deployment: SGLang's own rules for ``mem_fraction_static``
and ``chunked_prefill_size`` (engines.md 1.2, SGLang 0.5.3-0.5.23, as 0.5.10 computes them),
vLLM's gpu_memory_utilization by release (engines.md 1.1: 0.9 up to 0.19, 0.92 from 0.20) and
its token budget and running limit by part and release (engines.md 3.1).

SGLang sizes its KV pool from ``mem_fraction_static``, which it derives, when the server is
not given one, from the GPU's memory, the parallel layout, the CUDA-graph batch tier and the
speculative method; one catalog figure cannot stand for every part (0.772 on MI355X, 0.887 on
H200). Applied where the scenario leaves the key unset (``EngineSpec.deployment_defaults``).
"""

from __future__ import annotations

import math

import attrs

from inferasim.config.versions import version_tuple

MIB = 2**20

# (below this many GiB of GPU memory, chunked_prefill_size, cuda_graph_max_bs at TP < 4, at
# TP >= 4): SGLang 0.5.10's tiers (server_args.py); the last row is >= 160 GiB.
_TIERS = (
    (20, 2048, 8, 8),
    (35, 2048, 24, 80),
    (60, 4096, 32, 160),
    (90, 8192, 256, 512),
    (160, 8192, 256, 512),
    (math.inf, 16384, 512, 512),
)
# Extra reserve per speculative method, MiB (0.5.10: EAGLE-family drafts, MTP included).
_SPECULATIVE_MIB = {"mtp": 4096, "eagle3": 4096, "dspark": 4096}
_PIECEWISE_GRAPH_MLA_MIB = 1536
_FLOOR_MIB = 10 * 1024       # the reserve is at least 10 GiB on parts above 60 GiB
_AITER_FACTOR = 0.85         # ROCm, aiter attention, context above 8192 tokens
_AITER_MIN_CONTEXT = 8192


def _tier(gpu_bytes: float) -> tuple[int, int, int]:
    gib = gpu_bytes / 2**30
    for below, chunk, graph_small_tp, graph in _TIERS:
        if gib < below:
            return chunk, graph_small_tp, graph
    raise AssertionError("unreachable: the last tier is unbounded")


def sglang_chunked_prefill_size(gpu_bytes: float) -> int:
    """SGLang's default chunked_prefill_size for a GPU of ``gpu_bytes`` (before any DP split)."""
    return _tier(gpu_bytes)[0]


def sglang_mem_fraction(*, gpu_bytes: float, vendor: str, tp: int, dp_attention: int,
                        chunked_prefill_size: int, mla: bool, speculative: str,
                        context_len: int) -> float:
    """SGLang 0.5.10's default ``mem_fraction_static`` (engines.md 1.2):

        reserved = 512 + max(chunk, 2048) x 1.5 + graph_bs x 2 + tp / 8 x 1024 MiB
                   (+ graph_bs x dp x 3, + graph_bs x dp x 1.5 past 300, with attention-DP)
                   (+ 1.5 GiB of piecewise CUDA graphs for MLA on CUDA without DP)
                   (+ 4 GiB with an EAGLE-family draft), at least 10 GiB above 60 GiB
        fraction = (gpu - reserved) / gpu, x 0.85 on ROCm with aiter past an 8k context.

    The piecewise graphs of non-MLA models reserve ``len(pcg_tokens) x 8`` MiB, a list not
    recorded here, so they count nothing [U]."""
    gpu_mib = gpu_bytes / MIB
    _, graph_small_tp, graph = _tier(gpu_bytes)
    graph_bs = graph_small_tp if tp < 4 else graph
    reserved = 512 + max(chunked_prefill_size, 2048) * 1.5 + graph_bs * 2 + tp / 8 * 1024
    if dp_attention > 1:
        reserved += graph_bs * dp_attention * 3
        if graph_bs > 300:
            reserved += graph_bs * dp_attention * 1.5
    elif mla and vendor != "amd":  # piecewise graphs are off on HIP and with DP attention
        reserved += _PIECEWISE_GRAPH_MLA_MIB
    reserved += _SPECULATIVE_MIB.get(speculative, 0)
    if gpu_mib > 60 * 1024:
        reserved = max(reserved, _FLOOR_MIB)
    fraction = round((gpu_mib - reserved) / gpu_mib, 3)
    if vendor == "amd" and context_len > _AITER_MIN_CONTEXT:
        fraction = round(fraction * _AITER_FACTOR, 4)
    return fraction


def sglang_running_per_rank(server_limit: int, ranks: int | None) -> int:
    """A ``--max-running-requests`` given to (or defaulted for) a whole SGLang server, as each
    attention-DP rank runs it: SGLang divides the value among its ranks (engines.md 1.2)."""
    return max(1, int(server_limit) // max(1, int(ranks or 1)))


def sglang_max_running_requests(pool_tokens: int, context_len: int) -> int:
    """SGLang's default max_running_requests per scheduler (engines.md 1.2): its request pool,
    ``pool / context x 512`` clamped to 2048..4096, at most half the KV pool's tokens."""
    req_pool = min(4096, max(2048, int(pool_tokens / context_len * 512)))
    return max(1, min(req_pool, pool_tokens // 2))


# vLLM's serve defaults for the step's token budget and the running limit by GPU and release
# (engines.md 3.1, "Defaults that differ by version": arg_utils' batch defaults, 0.10-0.33):
# parts of at least 70 GiB but the A100 take 8192 tokens and 1024 sequences, others 2048 and
# 256; from 0.28 parts of at least 160 GiB take 16384 tokens.
_VLLM_LARGE_GIB = 70
_VLLM_HUGE_GIB = 160
_VLLM_HUGE_FROM = (0, 28)


def vllm_batch_defaults(gpu_name: str, gpu_bytes: float, version: str | None
                        ) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) ``vllm serve`` takes when not given them."""
    gib = gpu_bytes / 2**30
    large = gib >= _VLLM_LARGE_GIB and not gpu_name.lower().startswith("a100")
    tokens, seqs = (8192, 1024) if large else (2048, 256)
    v = version_tuple(version or "")
    if v is not None and v >= _VLLM_HUGE_FROM and gib >= _VLLM_HUGE_GIB:
        tokens = 16384
    return tokens, seqs


def derived_defaults(scenario, set_keys) -> dict[str, float | int]:
    """The engine keys the scenario's engine derives from its deployment and the scenario
    does not set (``set_keys``: the engine keys the scenario file and overrides give)."""
    eng = scenario.engine
    out: dict[str, float | int] = {}
    speculative = scenario.speculative.method != "none"
    if speculative and "max_num_seqs" not in set_keys and eng.speculative_max_num_seqs:
        # a whole server's limit, divided among its attention-DP ranks as a value the user
        # sets is; max_num_seqs is a rank's
        out["max_num_seqs"] = sglang_running_per_rank(eng.speculative_max_num_seqs,
                                                      scenario.parallel.dp_attention)
    if eng.name == "vllm":
        tokens, seqs = vllm_batch_defaults(scenario.gpu.name, scenario.gpu.hbm_bytes,
                                           eng.version)
        if "max_num_batched_tokens" not in set_keys and tokens != eng.max_num_batched_tokens:
            out["max_num_batched_tokens"] = tokens
            if "chunked_prefill_size" not in set_keys:
                out["chunked_prefill_size"] = tokens
        if "max_num_seqs" not in set_keys and "max_num_seqs" not in out \
                and seqs != eng.max_num_seqs:
            out["max_num_seqs"] = seqs
    if eng.memory_rule == "vllm-profile" and "mem_fraction" not in set_keys:
        # gpu_memory_utilization's default follows the release (engines.md 1.1)
        from inferasim.arch.engine_memory import vllm_gpu_memory_utilization

        util = vllm_gpu_memory_utilization(eng.version)
        if util is not None and util != eng.mem_fraction:
            out["mem_fraction"] = util
    if eng.deployment_defaults != "sglang":
        return out
    chunk = eng.chunked_prefill_size
    if "chunked_prefill_size" not in set_keys:
        chunk = out["chunked_prefill_size"] = sglang_chunked_prefill_size(scenario.gpu.hbm_bytes)
    if "mem_fraction" not in set_keys:
        out["mem_fraction"] = sglang_mem_fraction(
            gpu_bytes=scenario.gpu.hbm_bytes, vendor=scenario.gpu.vendor,
            tp=scenario.parallel.tp, dp_attention=scenario.parallel.dp_attention,
            chunked_prefill_size=chunk, mla=scenario.model.attention.kind.startswith("mla"),
            speculative=scenario.speculative.method, context_len=scenario.context_limit)
    if "max_num_seqs" not in set_keys and not speculative:
        # sized by the KV pool the derived figures give (the memory model needs the engine)
        from inferasim.arch.memory import memory_plan

        sized = attrs.evolve(scenario, engine=attrs.evolve(eng, **out))
        pool = memory_plan(sized).kv_pool_tokens
        if pool > 0:
            out["max_num_seqs"] = sglang_max_running_requests(pool, scenario.context_limit)
    return out
