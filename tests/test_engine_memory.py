"""Each engine's KV-budget rule, term by term (inferasim.arch.engine_memory; engines.md 1)."""

from __future__ import annotations

import math

import pytest

from inferasim.arch.activation import SAMPLER_LOGIT_COPIES, activation_peak
from inferasim.arch.engine_memory import (
    ATOM_SAFETY_FRACTION,
    COMM_BUFFER_BYTES,
    DEVICE_CONTEXT_BYTES,
    GIB,
    SGLANG_SWA_FULL_TOKENS_RATIO,
    VLLM_DSA_PREFILL_BUFFER_ENTRIES,
    capture_sizes,
    cuda_graph_bytes,
    profile_peak,
    version_tuple,
    vllm_gpu_memory_utilization,
    vllm_subtracts_graphs,
)
from inferasim.arch.memory import memory_plan
from inferasim.config.loader import load_scenario


def plan(*overrides):
    sc = load_scenario(None, list(overrides), check_fit=False)
    return sc, memory_plan(sc)


def test_fixed_reserve_is_fraction_less_weights_and_reserve():
    sc, p = plan("engine.memory_rule=fixed-reserve", "engine.reserve_gib=6")
    m = p.memory
    assert m.budget_bytes == pytest.approx(sc.gpu.hbm_bytes * sc.engine.mem_fraction)
    assert m.kv_bytes == pytest.approx(m.budget_bytes - p.weight_bytes_per_gpu - 6 * GIB)
    assert m.activation_peak_bytes == m.cuda_graph_bytes == m.non_torch_bytes == 0


def test_vllm_profile_subtracts_peak_non_torch_and_graphs_from_the_ceiled_budget():
    sc, p = plan("parallel.tp=2", "engine.version=0.24")
    m = p.memory
    assert m.rule == "vllm-profile"
    assert m.budget_bytes == math.ceil(sc.gpu.hbm_bytes * 0.92)
    assert m.activation_peak_bytes == pytest.approx(profile_peak(sc).peak_bytes)
    assert m.non_torch_bytes == COMM_BUFFER_BYTES                     # two ranks talk
    assert m.cuda_graph_bytes == pytest.approx(cuda_graph_bytes(32, 1024, 1))
    assert m.kv_bytes == pytest.approx(m.budget_bytes - p.weight_bytes_per_gpu
                                       - m.activation_peak_bytes - m.non_torch_bytes
                                       - m.cuda_graph_bytes)
    assert p.kv_budget_bytes == pytest.approx(m.kv_bytes)
    # reserve_gib stays an explicit margin on top of the rule
    _, extra = plan("parallel.tp=2", "engine.version=0.24", "engine.reserve_gib=2")
    assert extra.memory.kv_bytes == pytest.approx(m.kv_bytes - 2 * GIB)


def test_vllm_keeps_the_dsa_indexer_prefill_buffer_out_of_the_kv_budget():
    dsa = ("model.name=glm-5", "model.weight_dtype=fp8", "gpu.name=h200", "parallel.tp=8")
    sc, p = plan(*dsa)
    # 40 index keys of 132 B per token of the model's context (202,752): about 1 GiB a GPU
    want = VLLM_DSA_PREFILL_BUFFER_ENTRIES * 202_752 * 132
    assert p.memory.workspace_bytes == pytest.approx(want)
    assert p.memory.kv_bytes == pytest.approx(
        p.memory.budget_bytes - p.weight_bytes_per_gpu - p.memory.activation_peak_bytes
        - p.memory.non_torch_bytes - p.memory.cuda_graph_bytes - want)
    # a dense-MLA model keeps none, nor does SGLang's static rule
    assert plan("model.name=deepseek-r1", "gpu.name=h200", "parallel.tp=8")[1] \
        .memory.workspace_bytes == 0
    assert plan(*dsa, "engine.name=sglang")[1].memory.workspace_bytes == 0


def test_vllm_graph_estimate_by_version_vendor_and_setting():
    assert vllm_subtracts_graphs("0.20.0", "nvidia")
    assert vllm_subtracts_graphs("v0.24", "nvidia")
    assert not vllm_subtracts_graphs("0.19.1", "nvidia")      # estimated, not applied
    assert not vllm_subtracts_graphs("0.17.0", "nvidia")      # captured after the KV
    assert not vllm_subtracts_graphs("0.24.0", "amd")         # skipped on ROCm
    assert not vllm_subtracts_graphs("0.24.0", "amd", "subtract")
    assert not vllm_subtracts_graphs("0.24.0", "nvidia", "ignore")
    assert vllm_subtracts_graphs("0.19.0", "nvidia", "subtract")
    assert vllm_subtracts_graphs("", "nvidia")                # unreadable: current
    _, old = plan("engine.version=0.19.1")
    _, rocm = plan("gpu.name=mi355x", "engine.version=0.24")
    assert old.memory.cuda_graph_bytes == rocm.memory.cuda_graph_bytes == 0


def test_vllm_utilization_default_follows_the_release():
    assert vllm_gpu_memory_utilization("0.15.0") == 0.9
    assert vllm_gpu_memory_utilization("0.19.1") == 0.9
    assert vllm_gpu_memory_utilization("0.20.0") == 0.92
    assert vllm_gpu_memory_utilization("nightly") is None
    sc, _ = plan("engine.version=0.15.0")
    assert sc.engine.mem_fraction == 0.9
    given, _ = plan("engine.version=0.15.0", "engine.mem_fraction=0.8")
    assert given.engine.mem_fraction == 0.8                   # a given figure stands
    assert version_tuple("v0.21.0-rocm") == (0, 21)


def test_sglang_static_takes_its_fraction_of_the_free_memory():
    sc, p = plan("engine.name=sglang", "engine.mem_fraction=0.85", "parallel.tp=4",
                 "model.name=llama-3.1-70b")
    m = p.memory
    free = sc.gpu.hbm_bytes - DEVICE_CONTEXT_BYTES - COMM_BUFFER_BYTES
    assert m.budget_bytes == pytest.approx(free * 0.85)
    assert m.kv_bytes == pytest.approx(free * 0.85 - p.weight_bytes_per_gpu)
    assert m.activation_peak_bytes == m.cuda_graph_bytes == 0  # inside 1 - fraction
    _, one = plan("engine.name=sglang", "engine.mem_fraction=0.85")
    assert one.memory.budget_bytes == pytest.approx(
        (sc.gpu.hbm_bytes - DEVICE_CONTEXT_BYTES) * 0.85)     # no peers, no NCCL


def test_sglang_counts_a_dsa_pool_by_the_raw_latent_and_vllm_by_its_layout():
    dsa = ("model.name=glm-5", "model.weight_dtype=fp8", "gpu.name=h200", "parallel.tp=8",
           "engine.kv_dtype=fp8")
    _, sgl = plan(*dsa, "engine.name=sglang")
    _, vll = plan(*dsa, "engine.name=vllm")
    layers = 78
    # SGLang: (512 + 64) fp8 bytes + a 132-byte index key, per layer; vLLM: the 656-byte
    # FlashMLA entry it lays its pages out in, + the same index key
    assert sgl.kv_bytes_per_token == pytest.approx(layers * (576 + 132))
    assert vll.kv_bytes_per_token == pytest.approx(layers * (656 + 132))
    assert sgl.kv_pool_tokens == int(sgl.kv_budget_bytes // (layers * 708))
    # a dense-MLA model has no second layout: SGLang counts what it always did
    _, r1 = plan("model.name=deepseek-r1", "gpu.name=h200", "parallel.tp=8",
                 "engine.name=sglang", "engine.kv_dtype=fp8")
    assert r1.kv_bytes_per_token == pytest.approx(61 * 576)


def test_sglang_keeps_sliding_windows_in_a_pool_the_full_pool_pays_for():
    oss = ("model.name=gpt-oss-120b", "gpu.name=h200", "parallel.tp=8", "engine.kv_dtype=bf16")
    _, sgl = plan(*oss, "engine.name=sglang")
    _, vll = plan(*oss, "engine.name=vllm")
    full = 18 * 256.0                 # 18 full layers, one 64-wide K and V head a GPU, bf16
    assert sgl.kv_bytes_per_token == vll.kv_bytes_per_token == pytest.approx(full)
    assert sgl.kv_pool_bytes_per_token == pytest.approx(full * (1 + SGLANG_SWA_FULL_TOKENS_RATIO))
    assert sgl.kv_pool_tokens == int(sgl.kv_budget_bytes // sgl.kv_pool_bytes_per_token)
    # SGLang's windows sit in their own pool; vLLM charges each running request its window
    assert sgl.kv_window_pool_tokens == 0 and vll.kv_window_pool_tokens == 128


def test_atom_profile_adds_a_safety_margin_and_keeps_graphs_on_rocm():
    sc, p = plan("engine.name=atom", "gpu.name=mi355x", "model.name=deepseek-r1",
                 "parallel.tp=8")
    m = p.memory
    assert m.budget_bytes == pytest.approx(sc.gpu.hbm_bytes * 0.9)
    assert m.safety_bytes == pytest.approx(ATOM_SAFETY_FRACTION * sc.gpu.hbm_bytes)
    assert m.cuda_graph_bytes == pytest.approx(cuda_graph_bytes(61, 512, 1))
    assert m.cuda_graph_bytes > 0
    assert m.activation_peak_bytes == pytest.approx(profile_peak(sc).peak_bytes)
    # ... and the memory the ROCm stack holds unseen (mi355x.yaml's unaccounted_memory_gib)
    assert m.unaccounted_bytes > 0
    assert m.unaccounted_bytes == pytest.approx(sc.gpu.unaccounted_memory_gib * GIB)
    assert m.kv_bytes == pytest.approx(
        m.budget_bytes - p.weight_bytes_per_gpu - m.activation_peak_bytes
        - m.non_torch_bytes - m.cuda_graph_bytes - m.safety_bytes - m.unaccounted_bytes)


def test_capture_sizes_match_the_logged_graph_counts():
    # vLLM 0.19.1 DeepSeek-R1 (max_num_seqs 1024): "FULL=51 (largest=512)"; 0.20.0 V4-Pro
    # with one MTP draft: "FULL=50 (largest=512)"
    assert len(capture_sizes(1024, 1)) == 51 and max(capture_sizes(1024, 1)) == 512
    assert len(capture_sizes(512, 2)) == 50
    assert capture_sizes(4, 1) == [1, 2, 4, 8]


def test_activation_peak_terms():
    sc, _ = plan("model.name=deepseek-r1", "gpu.name=b200", "parallel.tp=4")
    model = sc.model
    common = dict(tokens=8192, tp=4, attn_tp=4, speculative=False)
    few = activation_peak(model, sampler_rows=4, ep=1, **common)
    many = activation_peak(model, sampler_rows=1024, ep=1, **common)
    # the sampler warm-up: rows x vocab fp32 logits and their copies
    assert many.sampler_bytes - few.sampler_bytes == pytest.approx(
        1020 * model.vocab_size * (4 * SAMPLER_LOGIT_COPIES + 2 / 4))
    assert many.peak_bytes >= many.sampler_bytes
    spec = activation_peak(model, sampler_rows=1024, ep=1, **{**common, "speculative": True})
    assert spec.sampler_bytes == pytest.approx(2 * many.sampler_bytes)
    # whole experts on a rank under EP: the fused-MoE workspace at full expert width
    ep = activation_peak(model, sampler_rows=4, ep=4, **common)
    assert ep.layer_bytes > few.layer_bytes
    half = activation_peak(model, sampler_rows=4, ep=1, **{**common, "tokens": 4096})
    assert half.forward_bytes == pytest.approx(few.forward_bytes / 2)


def test_vllm_would_not_start_where_one_full_context_request_does_not_fit():
    import warnings

    from inferasim.arch.layout import context_problem
    from inferasim.config.errors import ConfigWarning

    # Kimi-K2.5 INT4 on 8 x H100 at 0.95: ~148k tokens of pool against a 262,144 context
    keys = ["model.name=kimi-k2.5", "model.weight_dtype=int4", "gpu.name=h100",
            "parallel.tp=8", "engine.kv_dtype=fp8", "engine.mem_fraction=0.95",
            "engine.version=0.22.0", "engine.max_num_seqs=8"]
    tight = load_scenario(None, ["engine.name=vllm", *keys], check_fit=False)
    assert "refuse to start" in context_problem(tight)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_scenario(None, ["engine.name=vllm", *keys])
    assert any(isinstance(w.message, ConfigWarning) and "refuse to start" in str(w.message)
               for w in caught)
    # SGLang starts anyway (it sizes its pool without that check); a roomier layout fits
    sglang = [k for k in keys if not k.startswith("engine.version")]
    assert context_problem(load_scenario(None, ["engine.name=sglang", *sglang],
                                         check_fit=False)) is None
    assert context_problem(load_scenario(None, ["engine.name=vllm", "gpu.name=h200",
                                                *keys[:2], *keys[3:]])) is None
