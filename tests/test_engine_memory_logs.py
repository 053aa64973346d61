"""The KV pool each engine's memory rule gives, against every real engine startup log that
prints one (../shared/data/engine-outputs/engine-logs/; skipped when the data is absent).

Each log's configuration (model, TP/DP/EP, version, gpu-memory-utilization, block size, KV
dtype, max_num_batched_tokens, max_num_seqs, speculative method) is read from the log itself;
the GPU and the catalog model are named per file below, from the log's evidence. Weights come
from the model's own computation, not from the log's "Model loading took" line; the test
reports how far the two are apart. A log the rules cannot reproduce within 5 % is an xfail
that says why (docs/architecture.md, "KV memory").
"""

from __future__ import annotations

import json
import re

import attrs
import pytest

from inferasim.arch.memory import GIB, memory_plan
from inferasim.config.loader import load_scenario
from tests.conftest import shared_data

TOLERANCE = 0.05
LOGS = ("engine-outputs", "engine-logs")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@attrs.frozen
class LogCase:
    model: str
    gpu: str                       # the log does not always print it: the evidence is named
    weight_dtype: str | None = None
    xfail: str = ""
    expert_weight_dtype: str | None = None   # where the engine loaded the experts otherwise


CASES = {
    "vllm/inferencex_vllm-0.15.0_llama33-70b-fp4_tp1_startup-excerpt_ansi.log": LogCase(
        # NVFP4 needs Blackwell; 39.89 + 119.35 GiB + the profile run only fit 0.9 x B200
        "llama-3.3-70b", "b200", "nvfp4"),
    "vllm/inferencex_vllm-0.19.1_deepseek-r1-fp4_b200_tp4-ep4_startup-excerpt.log": LogCase(
        # the B200's 179.06 GiB comes from this log ('increase from 0.9000 to 0.9143' for a
        # 2.56 GiB estimate); ~2 GiB of its profile peak and non-torch memory stay unmodelled
        "deepseek-r1", "b200", "nvfp4"),
    "vllm/inferencex_vllm-0.20.0_deepseek-v4-pro_dp8-ep_mtp_startup-excerpt.log": LogCase(
        # 'increase from 0.9500 to 0.9824' for a 4.53 GiB estimate: ~139.8 GiB, an H200
        "deepseek-v4-pro", "h200",
        xfail="KV is 2.5 GiB of ~133 GiB budget, so 0.1 % of memory is 5 % of the pool; the "
              "modelled weights are 117.4 GiB against 125.15 GiB logged, and the printed 1,448 "
              "tokens is vLLM's hybrid-group figure (blocks / groups x block), not the "
              "compressed pool's token count"),
    "vllm/inferencex_vllm-0.21.0-rocm_minimax-m2.5-eagle3_tp8_startup-excerpt.log": LogCase(
        # ROCm build, gfx950 kernels loaded: MI355X (MI350X has the same 288 GB)
        "minimax-m2.5", "mi355x",
        xfail="+19 %: 0.92 x 288 GiB - 27.15 GiB weights - 191.72 GiB KV leaves 46 GiB to "
              "the profile run and non-torch memory; the model's dims explain ~8 GiB (the "
              "sampler warm-up over 2 x 1024 rows of a 200k vocabulary included) and the "
              "memory the ROCm stack holds unseen 5.1 GiB more (gpu.unaccounted_memory_gib, "
              "fitted to the Kimi log below). The log does not identify the rest; the EAGLE3 "
              "draft's own buffers are the likeliest [U]"),
    "vllm/inferencex_vllm-0.24.0-rocm_kimi-k2.7-mxfp4_mi355x_tp4_startup-excerpt.log": LogCase(
        # the log mi355x.yaml's unaccounted_memory_gib is fitted to (5.1 GiB): exact by
        # construction, a check that the fit stays where it was made, not a hold-out
        "kimi-k2.7", "mi355x", "mxfp4"),
    "sglang/llms-in-clouds_sglang-0.4.3.post4_qwq-32b_4xL4_tp4_startup.log": LogCase(
        "qwq-32b", "l4",
        xfail="+10 %: the pool is 2.85 GiB, 13 % of an L4, and SGLang's load took 15.54 GiB "
              "against 15.26 GiB of parameters (caching-allocator segments left from loading, "
              "not modelled): that 0.28 GiB is 10 % of the pool"),
}


def _read(rel: str) -> str:
    return ANSI.sub("", shared_data(*LOGS, rel).read_text(errors="replace"))


def _first(pattern: str, text: str, default=None, cast=str):
    found = re.search(pattern, text)
    return cast(found.group(1)) if found else default


def _int(s: str) -> int:
    return int(s.replace(",", ""))


def logged_kv_tokens(text: str) -> int | None:
    """The pool the engine printed: vLLM 'GPU KV cache size: N tokens', SGLang
    'max_total_num_tokens=N' or 'KV Cache is allocated. #tokens: N'."""
    for pattern in (r"GPU KV cache size: ([\d,]+) tokens", r"max_total_num_tokens=(\d+)",
                    r"#tokens: (\d+)"):
        value = _first(pattern, text, cast=_int)
        if value is not None:
            return value
    return None


def vllm_overrides(text: str) -> tuple[list[str], float | None]:
    """The scenario keys a vLLM startup log gives, and its logged weights (GiB)."""
    version = _first(r"version (\d+\.\d+\.\d+)", text)
    args = _first(r"non-default args: (\{.*)", text, "")
    tp = _first(r"'tensor_parallel_size': (\d+)", args, 1, int)
    dp = _first(r"'data_parallel_size': (\d+)", args, 1, int)
    ep = "'enable_expert_parallel': True" in args
    block = _first(r"'block_size': (\d+)", args, None, int) or _first(
        r"Setting kv cache block size to (\d+)", text, 16, int)
    batched = _first(r"max_num_batched_tokens=(\d+)", text, 8192, int)
    kv = _first(r"'kv_cache_dtype': '(fp8|auto)'", args, "auto")
    out = [f"engine.version={version}", f"engine.page_size={block}",
           f"engine.max_num_batched_tokens={batched}", f"engine.kv_dtype={kv}",
           f"parallel.tp={tp * dp}", f"parallel.dp_attention={dp}"]
    if ep:
        out.append(f"parallel.ep={tp * dp}")
    util = _first(r"'gpu_memory_utilization': ([\d.]+)", args, None, float)
    if util is not None:
        out.append(f"engine.mem_fraction={util}")
    seqs = _first(r"'max_num_seqs': (\d+)", args, None, int)
    if seqs is not None:
        out.append(f"engine.max_num_seqs={seqs}")
    method = _first(r"'method': '(\w+)'", args)
    if method:
        drafts = _first(r"'num_speculative_tokens': (\d+)", args, 1, int)
        out += [f"speculative.method={method}", f"speculative.draft_tokens={drafts}"]
    if "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0)" in text:
        out.append("engine.cuda_graph_memory=ignore")  # the log says the env var turned it off
    return out, _first(r"Model loading took ([\d.]+) GiB", text, None, float)


def sglang_keys(*, tp: int, fraction: float | None, chunk: int, kv: str) -> list[str]:
    """The scenario keys of an SGLang server's arguments, however they were reported."""
    return ["engine.name=sglang", f"parallel.tp={tp}", f"engine.mem_fraction={fraction}",
            f"engine.chunked_prefill_size={chunk}", f"engine.kv_dtype={kv}"]


def sglang_overrides(text: str) -> tuple[list[str], float | None]:
    out = sglang_keys(tp=_first(r"tp_size=(\d+)", text, 1, int),
                      fraction=_first(r"mem_fraction_static=([\d.]+)", text, None, float),
                      chunk=_first(r"chunked_prefill_size=(\d+)", text, 8192, int),
                      kv=_first(r"kv_cache_dtype='(\w+)'", text, "auto"))
    return out, _first(r"Load weight end\..*?mem usage=([\d.]+) GB", text, None, float)


def simulate(rel: str):
    text = _read(rel)
    case = CASES[rel]
    if rel.startswith("sglang/"):
        keys, logged_weights = sglang_overrides(text)
        # the startup log has no version banner; the source names 0.4.3.post4 (README)
        keys.append("engine.version=0.4.3.post4")
    else:
        keys, logged_weights = vllm_overrides(text)
    keys += [f"model.name={case.model}", f"gpu.name={case.gpu}"]
    if case.weight_dtype:
        keys.append(f"model.weight_dtype={case.weight_dtype}")
    scenario = load_scenario(None, keys, check_fit=False)
    return scenario, memory_plan(scenario), logged_kv_tokens(text), logged_weights


#: SGLang's own report of its pool: the server_info (max_total_num_tokens, memory_usage in
#: GiB) that sglang.bench_serving --output-details writes into its JSONL.
BENCH = ("engine-outputs", "sglang-bench-serving")
SERVER_INFO_CASES = {
    # logged weights 27.37 GiB a GPU at TP8: the MXFP4 experts loaded as bf16 on Hopper
    "benchmaq_sglang-0.5.8.post1_bench_serving_gptoss120b_h200_tp8_in8192_out128_c100.jsonl":
        LogCase("gpt-oss-120b", "h200", expert_weight_dtype="bf16"),
    "benchmaq_sglang-0.5.8.post1_bench_serving_gptoss120b_a100_tp4dp2_in2048_out128_c100.jsonl":
        # logged weights 54.62 GiB a GPU at TP4 (each of the two DP replicas holds the whole
        # model): the MXFP4 experts loaded as bf16 on Ampere, as on Hopper above
        LogCase("gpt-oss-120b", "a100", expert_weight_dtype="bf16"),
    "benchmaq_sglang-0.5.9_bench_serving_qwen3-8b_h100_tp8_in1024_out128_c100.jsonl":
        LogCase("qwen3-8b", "h100"),
}


def server_info(rel: str) -> dict:
    first = shared_data(*BENCH, rel).read_text().splitlines()[0]
    return json.loads(first)["server_info"]


def simulate_server_info(rel: str):
    info, case = server_info(rel), SERVER_INFO_CASES[rel]
    keys = sglang_keys(tp=info["tp_size"], fraction=info["mem_fraction_static"],
                       chunk=info["chunked_prefill_size"], kv=info["kv_cache_dtype"])
    keys += [f"engine.version={info['version']}", f"model.name={case.model}",
             f"gpu.name={case.gpu}"]
    scenario = load_scenario(None, keys, check_fit=False)
    if case.expert_weight_dtype:
        model = attrs.evolve(scenario.model, expert_weight_dtype=case.expert_weight_dtype)
        scenario = attrs.evolve(scenario, model=model)
    usage = info["internal_states"][0]["memory_usage"]
    return memory_plan(scenario), info["max_total_num_tokens"], usage["weight"]


@pytest.mark.parametrize("rel", [
    pytest.param(rel, marks=pytest.mark.xfail(strict=True, reason=case.xfail))
    if case.xfail else rel for rel, case in sorted(SERVER_INFO_CASES.items())])
def test_pool_and_weights_match_sglangs_own_report(rel):
    plan, reported, reported_weights = simulate_server_info(rel)
    err = plan.kv_pool_tokens / reported - 1
    weights = plan.weight_bytes_per_gpu / GIB / reported_weights - 1
    assert abs(err) <= TOLERANCE and abs(weights) <= 0.02, (
        f"{rel}: simulated {plan.kv_pool_tokens:,d} tokens, reported {reported:,d} "
        f"({err:+.1%}); weights {weights:+.1%} from the reported {reported_weights} GiB")


def test_every_sglang_report_of_its_pool_is_checked():
    reports = {p.name for p in shared_data(*BENCH).glob("*.jsonl")
               if '"max_total_num_tokens"' in p.read_text()}
    assert reports == set(SERVER_INFO_CASES)


def test_every_log_that_prints_a_kv_size_is_checked():
    root = shared_data(*LOGS)
    printed = {str(p.relative_to(root)) for p in root.rglob("*")
               if p.is_file() and logged_kv_tokens(ANSI.sub("", p.read_text(errors="replace")))}
    assert printed == set(CASES)


def _cases():
    # strict: a log the rules come to reproduce should lose its xfail and its explanation
    return [pytest.param(rel, marks=pytest.mark.xfail(strict=True, reason=CASES[rel].xfail))
            if CASES[rel].xfail else rel for rel in sorted(CASES)]


@pytest.mark.parametrize("rel", _cases())
def test_pool_matches_the_logged_kv_size(rel):
    _, plan, logged, logged_weights = simulate(rel)
    err = plan.kv_pool_tokens / logged - 1
    assert abs(err) <= TOLERANCE, (
        f"{rel}: simulated {plan.kv_pool_tokens:,d} tokens, logged {logged:,d} ({err:+.1%}); "
        f"weights {plan.weight_bytes_per_gpu / GIB:.2f} GiB (logged {logged_weights} GiB)")


@pytest.mark.parametrize("rel", sorted(CASES))
def test_computed_weights_stay_near_the_logged_load(rel):
    """The weights the pool is sized from, against what the engine logged loading: within
    2 % except DeepSeek-V4-Pro under DP8 (replicated attention and the MTP layer of its
    vLLM layout are not modelled; 6 % under)."""
    _, plan, _, logged_weights = simulate(rel)
    assert logged_weights is not None
    err = plan.weight_bytes_per_gpu / GIB / logged_weights - 1
    limit = 0.07 if "deepseek-v4" in rel else 0.02
    assert abs(err) <= limit, f"{rel}: weights {err:+.1%} from the logged load"
