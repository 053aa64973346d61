"""How each engine sizes its KV budget on one GPU (``engine.memory_rule``; engines.md 1, 9).

- ``fixed-reserve``: HBM x mem_fraction - weights - reserve_gib (inferasim's original rule).
- ``vllm-profile`` (vLLM V1, engines.md 1.1, ``gpu_worker.py::determine_available_memory``):
  ceil(HBM x gpu_memory_utilization) - weights - the profile run's activation peak at
  max_num_batched_tokens - the DSA indexer's prefill buffer (DSA models) - non-torch memory
  (communicator buffers) - the CUDA-graph estimate where the version subtracts it (CUDA
  only, from 0.20; never on ROCm).
- ``sglang-static`` (SGLang, engines.md 1.2, ``profile_max_num_token``): the free memory
  after torch.distributed init x mem_fraction_static - weights; that free memory is HBM less
  the device context and the communicator buffers.
- ``atom-profile`` (ATOM, engines.md 1.3, ``model_runner.py::get_num_blocks``): HBM x 0.9 -
  weights - warm-up activation peak - non-torch - CUDA-graph estimate - 2 % of HBM.

``engine.reserve_gib`` is subtracted on top of every rule: the whole reserve under
``fixed-reserve``, an explicit extra margin under the others (ATOM's ``extra_reserve``).
Every rank of an instance is alike here, so the minimum over ranks vLLM and SGLang take is
the one rank's figure.
"""

from __future__ import annotations

import math

import attrs

from inferasim.arch.activation import ActivationPeak, activation_peak
from inferasim.config import versions

GIB = 1024**3
MIB = 1024**2
MEMORY_RULES = ("fixed-reserve", "vllm-profile", "sglang-static", "atom-profile",
                "trt-free-fraction")

# Communicator buffers per rank when a rank has peers (NCCL/RCCL): the SGLang 0.4.3.post4
# log's "Init torch distributed ends. mem usage=0.13 GB" at TP4 (engine-logs/sglang/). A
# log-derived prior; vLLM counts it in non_torch_increase, ATOM in non_torch, SGLang in the
# free memory it starts from.
COMM_BUFFER_BYTES = 0.13 * GIB
# The CUDA context and runtime, outside the memory vLLM's baseline snapshot leaves out but
# inside what SGLang measures as not free. FITTED to the one SGLang log (4 x L4: 21.63 GB
# free after distributed init of 22.49 GiB, less the 0.13 GB NCCL took); no other SGLang
# startup log is at hand to hold it out on.
DEVICE_CONTEXT_BYTES = 0.73 * GIB
# CUDA-graph memory per captured graph per layer: the mean of the two logged estimates,
# "Estimated CUDA graph memory: 2.56 GiB" (vLLM 0.19.1, DeepSeek-R1, 51 graphs, 61 layers:
# 0.84 MiB) and "4.53 GiB" (vLLM 0.20.0, DeepSeek-V4-Pro, 50 graphs, 61 layers: 1.52 MiB).
# Log-derived; neither log subtracts it, so no KV figure checks it.
GRAPH_BYTES_PER_GRAPH_LAYER = 1.18 * MIB
# SGLang keeps a hybrid sliding-window model's windowed layers in a pool of their own, of
# swa_full_tokens_ratio x the full pool's tokens, and sizes the full pool so both fit
# (``HybridSWAPoolConfigurator``; ``server_args.swa_full_tokens_ratio`` defaults to 0.8).
# Checked on SGLang 0.5.8.post1's own report (tests/test_engine_memory_logs.py).
SGLANG_SWA_FULL_TOKENS_RATIO = 0.8
MAX_CAPTURE_SIZE = 512        # vLLM's default max_cudagraph_capture_size cap
ATOM_SAFETY_FRACTION = 0.02   # of total memory (engines.md 1.3)
# vLLM subtracts its CUDA-graph estimate from this release on (VLLM_MEMORY_PROFILER_
# ESTIMATE_CUDAGRAPHS defaults to 1 in the 0.20.0 wheel; engines.md 1.1).
VLLM_GRAPH_ESTIMATE_FROM = (0, 20)
# gpu_memory_utilization's default: 0.9 up to 0.19, 0.92 from 0.20 (engines.md 1.1).
VLLM_UTIL_092_FROM = (0, 20)
# vLLM's DSA indexer keeps a prefill gather buffer of 40 entries per token of max_model_len,
# each an index key (128 fp8 + a 4-byte scale), sized to fit inside the FlashMLA sparse
# prefill workspace (5 x max_model_len latents of 576 bf16): both are allocated before the
# profile run ends and stay out of the KV budget (vllm/v1/attention/backends/mla/
# indexer.py, get_max_prefill_buffer_size: 825 MB for DeepSeek-V3.2's 163,840 tokens).
VLLM_DSA_PREFILL_BUFFER_ENTRIES = 40


@attrs.frozen
class MemoryBreakdown:
    """One GPU's memory as the engine's rule divides it; bytes."""

    rule: str
    total_bytes: float
    budget_bytes: float            # what the engine lets itself use (HBM x fraction)
    weight_bytes: float
    activation_peak_bytes: float = 0.0
    non_torch_bytes: float = 0.0
    cuda_graph_bytes: float = 0.0
    safety_bytes: float = 0.0
    reserve_bytes: float = 0.0     # engine.reserve_gib
    workspace_bytes: float = 0.0   # attention workspaces the engine keeps (vLLM's DSA buffer)
    unaccounted_bytes: float = 0.0  # the part's gpu.unaccounted_memory_gib

    def kept(self) -> list[tuple[str, float]]:
        """What the rule keeps out of the KV budget beside the weights, named, in order."""
        return [("activation peak", self.activation_peak_bytes),
                ("workspace", self.workspace_bytes), ("non-torch", self.non_torch_bytes),
                ("CUDA graphs", self.cuda_graph_bytes), ("safety", self.safety_bytes),
                ("reserve", self.reserve_bytes), ("unaccounted", self.unaccounted_bytes)]

    @property
    def kv_bytes(self) -> float:
        return self.budget_bytes - self.weight_bytes - sum(v for _, v in self.kept())


def version_tuple(version: str) -> tuple[int, int] | None:
    """(major, minor) of a version string such as ``0.24``, ``v0.21.0-rocm``; None if none."""
    full = versions.version_tuple(version)
    return None if full is None else full[:2]


def vllm_gpu_memory_utilization(version: str) -> float | None:
    """vLLM's default gpu_memory_utilization for ``version``; None when it cannot be read."""
    parsed = version_tuple(version)
    if parsed is None:
        return None
    return 0.92 if parsed >= VLLM_UTIL_092_FROM else 0.9


def vllm_subtracts_graphs(version: str, vendor: str, setting: str = "auto") -> bool:
    """Whether vLLM takes its CUDA-graph estimate out of the KV budget: never on ROCm (the
    estimate is skipped there, ``gpu_worker.py``), else per ``setting`` (``subtract`` or
    ``ignore``: the environment variable's 1 or 0) or, on ``auto``, from 0.20 (an unreadable
    version counts as current)."""
    if vendor == "amd":
        return False
    if setting != "auto":
        return setting == "subtract"
    parsed = version_tuple(version)
    return parsed is None or parsed >= VLLM_GRAPH_ESTIMATE_FROM


def capture_sizes(max_num_seqs: int, verify_width: int) -> list[int]:
    """vLLM's default decode CUDA-graph sizes: 1, 2, 4, then every 8 to 256, then every 16,
    up to min(2 x max_num_seqs x tokens per request, 512); with a speculative method only
    multiples of the verify width."""
    top = min(MAX_CAPTURE_SIZE, 2 * max_num_seqs * verify_width)
    sizes = [1, 2, 4, *range(8, 256, 8), *range(256, MAX_CAPTURE_SIZE + 1, 16)]
    return [s for s in sizes if s <= top and s % verify_width == 0]


def cuda_graph_bytes(num_layers: int, max_num_seqs: int, verify_width: int) -> float:
    return len(capture_sizes(max_num_seqs, verify_width)) * num_layers \
        * GRAPH_BYTES_PER_GRAPH_LAYER


def vllm_workspace_bytes(model, max_model_len: int) -> float:
    """The attention workspace vLLM keeps beside the KV cache: the DSA indexer's prefill
    buffer at its ``max_model_len``; 0 for other kinds."""
    att = model.attention
    if att.kind != "mla_dsa" or att.indexer is None:
        return 0.0
    return float(VLLM_DSA_PREFILL_BUFFER_ENTRIES * max_model_len
                 * att.indexer.key_bytes_per_token)


def comm_bytes(ranks: int) -> float:
    return COMM_BUFFER_BYTES if ranks > 1 else 0.0


def profile_peak(scenario) -> ActivationPeak:
    """The profiling run's activation peak: a forward of max_num_batched_tokens and a
    sampler warm-up of min(max_num_seqs, tokens) rows."""
    eng, par = scenario.engine, scenario.parallel
    tokens = eng.max_num_batched_tokens
    return activation_peak(scenario.model, tokens=tokens,
                           sampler_rows=min(eng.max_num_seqs, tokens), tp=par.tp,
                           attn_tp=par.attn_tp, ep=par.ep,
                           speculative=scenario.speculative.method != "none")


def weight_share(engine) -> float:
    """The share of the GPU an engine's memory rule lets its weights take: its fraction, but
    for TensorRT-LLM's, which is of the memory left after them."""
    return 1.0 if engine.memory_rule == "trt-free-fraction" else engine.mem_fraction


def memory_breakdown(scenario, weight_bytes: float) -> MemoryBreakdown:
    """The KV budget of one GPU under the scenario's ``engine.memory_rule``."""
    eng, gpu = scenario.engine, scenario.gpu
    total = float(gpu.hbm_bytes)
    reserve = eng.reserve_gib * GIB
    rule = eng.memory_rule
    if rule == "fixed-reserve":
        return MemoryBreakdown(rule=rule, total_bytes=total,
                               budget_bytes=total * eng.mem_fraction,
                               weight_bytes=weight_bytes, reserve_bytes=reserve)
    ranks = scenario.parallel.tp
    # Every rule below measures or fractions the memory the device has; what the stack holds
    # there unseen comes off the pool whichever way the engine counts (vLLM's profile sees
    # it as non-torch growth, SGLang as memory no longer free after loading).
    unaccounted = gpu.unaccounted_memory_gib * GIB
    if rule == "sglang-static":
        # rest = post - pre x (1 - f) with post = pre - weights, i.e. pre x f - weights
        free_before_weights = total - DEVICE_CONTEXT_BYTES - comm_bytes(ranks)
        return MemoryBreakdown(rule=rule, total_bytes=total,
                               budget_bytes=free_before_weights * eng.mem_fraction,
                               weight_bytes=weight_bytes, reserve_bytes=reserve,
                               unaccounted_bytes=unaccounted)
    peak = profile_peak(scenario).peak_bytes
    graphs = cuda_graph_bytes(scenario.model.num_layers, eng.max_num_seqs,
                              scenario.speculative.verify_width)
    if rule == "vllm-profile":
        if not vllm_subtracts_graphs(eng.version, gpu.vendor, eng.cuda_graph_memory):
            graphs = 0.0
        return MemoryBreakdown(rule=rule, total_bytes=total,
                               budget_bytes=float(math.ceil(total * eng.mem_fraction)),
                               weight_bytes=weight_bytes, activation_peak_bytes=peak,
                               non_torch_bytes=comm_bytes(ranks), cuda_graph_bytes=graphs,
                               reserve_bytes=reserve, unaccounted_bytes=unaccounted,
                               workspace_bytes=vllm_workspace_bytes(scenario.model,
                                                                      scenario.context_limit))
    if rule == "atom-profile":
        if eng.cuda_graph_memory == "ignore":
            graphs = 0.0
        return MemoryBreakdown(rule=rule, total_bytes=total,
                               budget_bytes=total * eng.mem_fraction,
                               weight_bytes=weight_bytes, activation_peak_bytes=peak,
                               non_torch_bytes=comm_bytes(ranks), cuda_graph_bytes=graphs,
                               safety_bytes=ATOM_SAFETY_FRACTION * total,
                               reserve_bytes=reserve, unaccounted_bytes=unaccounted)
    if rule == "trt-free-fraction":
        # TensorRT-LLM sizes its KV cache as free_gpu_memory_fraction of what is free after
        # the weights and a profiling forward of max_num_tokens (KvCacheConfig; the PyTorch
        # backend's estimate). The rest of the free memory is headroom it leaves.
        free = total - weight_bytes - peak - comm_bytes(ranks) - unaccounted
        return MemoryBreakdown(rule=rule, total_bytes=total, budget_bytes=total,
                               weight_bytes=weight_bytes, activation_peak_bytes=peak,
                               non_torch_bytes=comm_bytes(ranks),
                               safety_bytes=max(0.0, (1.0 - eng.mem_fraction) * free),
                               reserve_bytes=reserve, unaccounted_bytes=unaccounted)
    raise ValueError(f"unknown engine.memory_rule {rule!r}; expected one of "
                     f"{', '.join(MEMORY_RULES)}")
