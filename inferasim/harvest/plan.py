"""``harvest plan``: the exact server and client commands that measure the regime a scenario
describes (behaviour.md 2: the anchor measures the deployment it is labelled with).

A plan is a JSON file: the regime it is meant to measure, one server command (the engine's own
launcher and flag spellings, engines.md), the GPU and version capture commands, and a list of
probes (client commands). Paths inside a plan are relative to the plan's folder: ``harvest run``
executes there. Every probe run draws its own seed (a fixed seed resends the same prompts, the
prefix cache serves them and the prefill probe prices only the uncached tail).

Flag spellings and where each comes from (``[V]`` read in the engine's source or a recipe,
``[U]`` an assumption to check on the build you run) are listed in docs/harvest.md and repeated
in each plan's ``assumptions``.
"""

from __future__ import annotations

import hashlib
import json
import math
import shlex
from pathlib import Path
from typing import Any

from inferasim.anchors import normalise as nz
from inferasim.config.errors import ConfigError
from inferasim.harvest import trt_launch

PLAN_SCHEMA = 1
PLAN_FILE = "plan.json"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000

CLIENTS = ("vllm-bench", "sglang-bench", "aiperf", "atom-bench", "trt-bench")
#: The client each engine's image carries. ATOM's image has neither vLLM nor SGLang: its load
#: generator is the legacy vLLM ``benchmark_serving.py`` that ATOM vendors.
DEFAULT_CLIENT = {"vllm": "vllm-bench", "sglang": "sglang-bench", "mori-sglang": "sglang-bench",
                  "atom": "atom-bench", "trt": "trt-bench"}

#: Output tokens of a prefill probe request: enough for a TPOT, short enough to keep it prefill.
PREFILL_OSL = 16
#: A prefill probe fits a context curve only with at least this many distinct prompt lengths
#: (the store asks for 3; one more leaves a point to spare after a failed probe).
PREFILL_MIN_POINTS = 4
PREFILL_MAX_POINTS = 6
PREFILL_MIN_ISL = 128


def _speculative_alias(engine: str, method: str) -> str:
    """The engine's own name for a speculative method (engines.md 7: vLLM's methods are
    eagle, eagle3, mtp, ngram, draft_model, medusa, suffix and dflash; DSpark is ATOM's)."""
    names = {
        "vllm": {"mtp": "mtp", "eagle3": "eagle3"},
        "sglang": {"mtp": "NEXTN", "eagle3": "EAGLE3"},
        "mori-sglang": {"mtp": "NEXTN", "eagle3": "EAGLE3"},
        "atom": {"mtp": "mtp", "eagle3": "eagle3", "dspark": "dspark"},
    }[engine]
    if method not in names:
        raise ConfigError(f"{engine} has no speculative method {method!r} (it offers "
                          f"{', '.join(sorted(names))})", key="speculative.method")
    return names[method]


# ---------------------------------------------------------------- attention backend spellings


def _vllm_backend(value: str, attn_kind: str, vendor: str | None) -> str | None:
    """vLLM's ``--attention-backend`` name for a scenario's backend (any engine's spelling)."""
    if not value:
        return None
    low = value.strip().lower()
    mla = attn_kind in ("mla", "mla_dsa")
    if low == "aiter":
        if attn_kind == "mla_dsa":
            return "ROCM_AITER_MLA_SPARSE"
        if attn_kind == "dsv4_compressed":
            return None  # [U] vLLM picks its DeepSeek-V4 backend itself; no flag is passed
        return "ROCM_AITER_MLA" if mla else "ROCM_AITER_UNIFIED_ATTN"
    if low == "triton":
        return "TRITON_MLA" if mla else "TRITON_ATTN"
    if low == "flashinfer":
        return "FLASHINFER_MLA" if mla else "FLASHINFER"
    if low in ("fa3", "flash_attn", "flash-attn"):
        return "FLASH_ATTN_MLA" if mla else "FLASH_ATTN"
    return value.strip().upper().replace("-", "_")


def _sglang_backend(value: str, attn_kind: str) -> str | None:
    """SGLang's ``--attention-backend`` name (lower case: aiter, triton, fa3, flashinfer, ...)."""
    if not value:
        return None
    family = nz.kernel_family(value)
    table = {"aiter": "aiter", "triton": "triton", "triton-mla": "triton", "flashinfer": "flashinfer",
             "flashinfer-mla": "flashinfer", "flash-attn": "fa3", "flashmla": "flashmla",
             "cutlass-mla": "cutlass_mla", "trtllm-mla": "trtllm_mla", "nsa": "nsa", "fa4": "fa4"}
    return table.get(family or "", value.strip().lower())


# ---------------------------------------------------------------- helpers


def _round_up(value: int, step: int) -> int:
    return int(math.ceil(value / step) * step)


def prefill_isls(target: int) -> list[int]:
    """Distinct prompt lengths up to the target: halvings of it (>= 64 tokens), at least
    ``PREFILL_MIN_POINTS`` of them (evenly spaced when the target is too short to halve)."""
    if target < PREFILL_MIN_POINTS:
        raise ConfigError(f"target prompt length {target} is too short for a prefill probe")
    points = sorted({target >> k for k in range(PREFILL_MAX_POINTS) if (target >> k) >= PREFILL_MIN_ISL})
    if len(points) < PREFILL_MIN_POINTS:
        points = sorted({max(1, round(target * i / PREFILL_MIN_POINTS))
                         for i in range(1, PREFILL_MIN_POINTS + 1)})
    return points[-PREFILL_MAX_POINTS:]


def concurrency_ladder(batch: int) -> list[int]:
    """1, 2, 4, ... below the batch, then the batch itself: the sweep reaches the target."""
    if batch < 1:
        raise ConfigError(f"decode batch {batch} must be at least 1")
    ladder = []
    c = 1
    while c < batch:
        ladder.append(c)
        c *= 2
    ladder.append(batch)
    return ladder


def expected_accept_length(draft_tokens: int, acceptance: float) -> float:
    """Mean tokens per verify step (bonus token included) for a per-position acceptance rate,
    the same formula the simulator prices with (SpeculativeSpec.tokens_per_step)."""
    return 1.0 + sum(acceptance ** i for i in range(1, draft_tokens + 1))


def seed_base_for(name: str) -> int:
    """A deterministic base seed per scenario (plans are reproducible files); every probe
    and repeat adds its own offset, so no two client runs share a seed."""
    return int(hashlib.sha256(name.encode()).hexdigest()[:8], 16) % 1_000_000 * 1000


def shell(argv: list[str], env: dict[str, str] | None = None) -> str:
    words = [f"{k}={shlex.quote(v)}" for k, v in sorted((env or {}).items())]
    return " ".join(words + [shlex.quote(a) for a in argv])


# ---------------------------------------------------------------- the server command


def server_command(scenario: Any, *, model_path: str, host: str, port: int, trust_remote_code: bool,
                   dummy_weights: bool, accept_length: float | None, draft_model: str | None,
                   max_model_len: int
                   ) -> tuple[list[str], dict[str, str], list[str], dict[str, str]]:
    """(argv, environment, assumptions, files by name) of the engine's launch command for the
    scenario: files the server reads (TensorRT-LLM's options), written beside the plan."""
    engine = scenario.engine.name
    par, spec = scenario.parallel, scenario.speculative
    tp, ep, dpa = par.tp, par.ep, par.dp_attention
    attn_tp = tp // dpa
    kind = scenario.model.attention.kind
    vendor = getattr(scenario.gpu, "vendor", None)
    page, seqs = scenario.engine.page_size, scenario.engine.max_num_seqs
    kv = scenario.engine.kv_dtype  # "auto" keeps the engine's own default (no flag)
    env: dict[str, str] = {}
    notes: list[str] = []
    files: dict[str, str] = {}
    method = spec.method if spec.method != "none" else None
    k = spec.draft_tokens
    if method and k < 1:
        raise ConfigError(f"speculative.method {method} needs speculative.draft_tokens >= 1",
                          key="speculative.draft_tokens")
    if draft_model and not method:
        raise ConfigError("a draft model is for speculative decoding; the scenario's "
                          "speculative.method is none", key="--draft-model")
    if method == "eagle3" and not draft_model:
        raise ConfigError("EAGLE3 runs a separate draft model: give its path with --draft-model",
                          key="speculative.method")
    if par.dcp > 1:
        raise ConfigError("decode context parallelism (parallel.dcp > 1) is not planned by "
                          "harvest yet", key="parallel.dcp")

    if engine == "vllm":
        argv = ["vllm", "serve", model_path, "--host", host, "--port", str(port)]
        if dpa > 1:
            argv += ["--tensor-parallel-size", str(attn_tp), "--data-parallel-size", str(dpa)]
        else:
            argv += ["--tensor-parallel-size", str(tp)]
        if ep > 1:
            if ep != tp:
                raise ConfigError(f"vLLM's expert parallelism spans all TP x DP ranks ({tp}); "
                                  f"parallel.ep={ep} cannot be launched", key="parallel.ep")
            argv.append("--enable-expert-parallel")
        elif dpa > 1:
            notes.append("vLLM --data-parallel-size without --enable-expert-parallel: the launch "
                         "args alone do not say attention-DP; parse takes it from this plan")
        if kv == "fp8":
            argv += ["--kv-cache-dtype", "fp8"]
        argv += ["--block-size", str(page), "--max-num-seqs", str(seqs),
                 "--max-model-len", str(max_model_len)]
        backend = _vllm_backend(scenario.engine.attention_backend, kind, vendor)
        if backend:
            argv += ["--attention-backend", backend]
        if vendor == "amd" and nz.kernel_family(scenario.engine.attention_backend) in ("aiter", "aiter-fa"):
            env["VLLM_ROCM_USE_AITER"] = "1"
        if method:
            config: dict[str, Any] = {"method": _speculative_alias("vllm", method)}
            if draft_model:
                config["model"] = draft_model
            config["num_speculative_tokens"] = k
            if accept_length is not None:
                config["rejection_sample_method"] = "synthetic"
                config["synthetic_acceptance_length"] = accept_length
                notes.append("[U] vLLM pins acceptance with speculative-config "
                             "rejection_sample_method=synthetic + synthetic_acceptance_length "
                             "(seen in InferenceX recipes; check your build has it)")
            argv += ["--speculative-config", json.dumps(config, separators=(",", ":"))]
        if dummy_weights:
            argv += ["--load-format", "dummy"]
    elif engine in ("sglang", "mori-sglang"):
        argv = ["python", "-m", "sglang.launch_server", "--model-path", model_path,
                "--host", host, "--port", str(port), "--tp-size", str(tp)]
        if dpa > 1:
            argv += ["--enable-dp-attention", "--dp-size", str(dpa)]
        if ep > 1:
            argv += ["--ep-size", str(ep)]
        if engine == "mori-sglang":
            if ep > 1:
                argv += ["--moe-a2a-backend", "mori"]
            notes.append("[U] mori-sglang: SGLang built with AMD's MoRI stack (its own image); "
                         "the launcher is sglang.launch_server, MoRI EP via --moe-a2a-backend mori. "
                         "The engine axis of the parsed anchors comes from this plan")
        if kv == "fp8":
            argv += ["--kv-cache-dtype", "fp8_e4m3"]
        # A user max_running_requests is divided over the attention-DP ranks (engines.md 5).
        argv += ["--page-size", str(page), "--max-running-requests", str(seqs * dpa),
                 "--context-length", str(max_model_len)]
        if scenario.engine.scheduler_recv_interval > 1:
            argv += ["--scheduler-recv-interval", str(scenario.engine.scheduler_recv_interval)]
        backend = _sglang_backend(scenario.engine.attention_backend, kind)
        if backend:
            argv += ["--attention-backend", backend]
        if vendor == "amd":
            env["SGLANG_USE_AITER"] = "1"
        if method:
            argv += ["--speculative-algorithm", _speculative_alias(engine, method)]
            if method == "eagle3":
                argv += ["--speculative-draft-model-path", str(draft_model)]
            # top-k 1: draft tokens = steps + 1 (SGLang's own auto choice for DeepSeek, engines.md 7)
            argv += ["--speculative-num-steps", str(k), "--speculative-eagle-topk", "1",
                     "--speculative-num-draft-tokens", str(k + 1)]
            if accept_length is not None:
                env["SGLANG_SIMULATE_ACC_LEN"] = f"{accept_length:g}"
                notes.append("[U] SGLang pins acceptance with the environment variable "
                             "SGLANG_SIMULATE_ACC_LEN (named in ATOM's docs as SGLang's knob)")
        if dummy_weights:
            argv += ["--load-format", "dummy"]
    elif engine == "atom":
        argv = ["python", "-m", "atom.entrypoints.openai_server", "--model", model_path,
                "--host", host, "--server-port", str(port)]
        if dpa > 1:
            # Explicit attention-DP layout: TP within a DP group x DP groups (ATOM rewrites
            # ``-tp N --enable-dp-attention`` to the same dp=N, tp=1).
            argv += ["--tensor-parallel-size", str(attn_tp), "--data-parallel-size", str(dpa),
                     "--enable-dp-attention"]
        else:
            argv += ["--tensor-parallel-size", str(tp)]
        if ep > 1:
            if ep != tp:
                raise ConfigError(f"ATOM's expert parallelism spans all ranks ({tp}); "
                                  f"parallel.ep={ep} cannot be launched", key="parallel.ep")
            argv.append("--enable-expert-parallel")
        argv += ["--kv_cache_dtype", "fp8" if scenario.kv_dtype == "fp8" else "bf16"]
        if kind == "dsv4_compressed":
            notes.append("ATOM's DeepSeek-V4 path sets its own block size (v4_block_size): "
                         "--block-size is not passed")
        else:
            argv += ["--block-size", str(page)]
        argv += ["--max-num-seqs", str(seqs), "--max-model-len", str(max_model_len)]
        if nz.kernel_family(scenario.engine.attention_backend) not in (None, "aiter"):
            raise ConfigError(f"ATOM always runs AITER kernels; engine.attention_backend "
                              f"{scenario.engine.attention_backend!r} cannot be launched",
                              key="engine.attention_backend")
        if method:
            argv += ["--method", _speculative_alias("atom", method),
                     "--num-speculative-tokens", str(k)]
            if draft_model:
                argv += ["--draft-model", draft_model]
            if accept_length is not None:
                argv += ["--spec-decode-acceptance-length", f"{accept_length:g}"]
        if dummy_weights:
            argv.append("--load_dummy")
    elif engine == "trt":
        argv, files, more = trt_launch.launch(
            scenario, model_path=model_path, host=host, port=port, max_model_len=max_model_len,
            dummy_weights=dummy_weights, accept_length=accept_length, draft_model=draft_model)
        notes += more
    else:
        raise ConfigError(f"no launcher known for engine {engine!r}", key="engine.name")
    if trust_remote_code:
        argv.append("--trust_remote_code" if engine == "trt" else "--trust-remote-code")
    return argv, env, notes, files


# ---------------------------------------------------------------- client commands


def client_command(tool: str, *, model_path: str, host: str, port: int, isl: int, osl: int,
                   concurrency: int, num_prompts: int, seed: int, result: str,
                   trust_remote_code: bool) -> tuple[list[str], str]:
    """(argv, result path) of one client run: fixed-length random prompts, closed loop."""
    base = f"http://{host}:{port}"
    result_dir, _, result_name = result.rpartition("/")
    common = ["--dataset-name", "random", "--random-input-len", str(isl),
              "--random-output-len", str(osl)]
    if tool in ("vllm-bench", "atom-bench", "trt-bench"):
        head = {"vllm-bench": ["vllm", "bench", "serve"],
                "atom-bench": ["python", "-m", "atom.benchmarks.benchmark_serving"],
                # TensorRT-LLM's image carries its port of vLLM's client, same flags and JSON
                "trt-bench": ["python", "-m", "tensorrt_llm.serve.scripts.benchmark_serving"]
                }[tool]
        # The range ratio means different things: current `vllm bench serve` (and
        # TensorRT-LLM's port) draws lengths in [L(1-r), L(1+r)] (0 = fixed), while the
        # legacy client ATOM vendors draws them in [rL, L] (1 = fixed; 0 would draw prompts
        # of any length down to zero).
        ratio = "1.0" if tool == "atom-bench" else "0"
        backend = "openai" if tool == "trt-bench" else "vllm"
        argv = head + ["--backend", backend, "--base-url", base, "--endpoint", "/v1/completions",
                       "--model", model_path] + common + [
            "--random-range-ratio", ratio, "--num-prompts", str(num_prompts),
            "--max-concurrency", str(concurrency), "--request-rate", "inf", "--ignore-eos",
            "--seed", str(seed), "--percentile-metrics", "ttft,tpot,itl,e2el",
            "--save-result", "--result-dir", result_dir, "--result-filename", result_name]
        if trust_remote_code:
            argv.append("--trust-remote-code")
        return argv, result
    if tool == "sglang-bench":
        result = result.removesuffix(".json") + ".jsonl"
        # SGLang's range ratio is the lower bound's fraction: 1.0 = every prompt at full length.
        argv = ["python", "-m", "sglang.bench_serving", "--backend", "sglang", "--host", host,
                "--port", str(port), "--model", model_path] + common + [
            "--random-range-ratio", "1.0", "--num-prompts", str(num_prompts),
            "--max-concurrency", str(concurrency), "--request-rate", "inf",
            "--seed", str(seed), "--output-file", result]
        return argv, result
    if tool == "aiperf":
        artifact = result.removesuffix(".json")
        argv = ["aiperf", "profile", "--model", model_path, "--url", base,
                "--endpoint-type", "completions", "--streaming",
                "--synthetic-input-tokens-mean", str(isl), "--synthetic-input-tokens-stddev", "0",
                "--output-tokens-mean", str(osl), "--output-tokens-stddev", "0",
                "--extra-inputs", "ignore_eos:true", "--concurrency", str(concurrency),
                "--request-count", str(num_prompts), "--random-seed", str(seed),
                "--output-artifact-dir", artifact]
        if trust_remote_code:
            argv.append("--tokenizer-trust-remote-code")
        return argv, f"{artifact}/profile_export_aiperf.json"
    raise ConfigError(f"unknown client {tool!r}; known: {', '.join(CLIENTS)}", key="--client")


def version_command(engine: str) -> list[str]:
    if engine == "vllm":
        return ["vllm", "--version"]
    if engine in ("sglang", "mori-sglang"):
        return ["python", "-c", "import sglang; print(sglang.__version__)"]
    if engine == "trt":
        return ["python", "-c", "import tensorrt_llm; print(tensorrt_llm.__version__)"]
    return ["python", "-c", "import importlib.metadata as m, atom; "
            "print(getattr(atom, '__version__', None) or m.version('atom'))"]


def gpu_commands(vendor: str | None) -> list[list[str]]:
    amd = [["amd-smi", "static", "--asic", "--vram"], ["rocm-smi", "--showproductname"]]
    nvidia = [["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv"]]
    if vendor == "amd":
        return amd
    if vendor == "nvidia":
        return nvidia
    return amd + nvidia


# ---------------------------------------------------------------- the plan


def _target_context(scenario: Any, target_isl: int | None) -> tuple[int, int, int, list[str]]:
    """(prefill target ISL, decode ISL, decode OSL, notes)."""
    wl = scenario.workload
    notes = []
    if wl.format == "random":
        isl, osl = wl.isl, wl.osl
    else:
        isl = min(scenario.context_limit // 2, wl.synthetic.max_prompt_tokens)
        osl = 1024
        notes.append(f"workload {wl.format!r} has no single prompt length: prefill probe up to "
                     f"{isl} tokens, decode sweep at ISL 1024 / OSL {osl} (--target-isl to change)")
    prefill_target = target_isl or isl
    decode_isl = isl if wl.format == "random" else 1024
    return prefill_target, decode_isl, osl, notes


def build_plan(scenario: Any, *, scenario_ref: str, overrides: list[str] | tuple[str, ...] = (),
               repeats: int = 1, client: str | None = None, dummy_weights: bool = False,
               acceptance_length: float | None = None, draft_model: str | None = None,
               model_path: str | None = None, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
               trust_remote_code: bool = True, seed_base: int | None = None,
               target_isl: int | None = None, prompts_per_client: int = 4,
               prefill_prompts: int = 8, probe_timeout_s: float = 3600.0,
               health_timeout_s: float = 1800.0, generated_by: str | None = None
               ) -> dict[str, Any]:
    """The plan (a JSON-ready dict) measuring the scenario's regime."""
    if repeats < 1:
        raise ConfigError("must be at least 1", key="--repeats")
    if target_isl is not None and target_isl < 1:
        raise ConfigError(f"must be at least 1, got {target_isl}", key="--target-isl")
    engine = scenario.engine.name
    if scenario.topology.kind != "colocated":
        from inferasim.config.loader import pool_scenario

        layouts = "; ".join(
            f"{role}: " + " ".join(f"--set parallel.{k}={getattr(pool.parallel, k)}"
                                   for k in ("tp", "ep", "dp_attention"))
            for role, pool in ((r, pool_scenario(scenario, r, check_fit=False))
                               for r in ("prefill", "decode")))
        raise ConfigError("harvest measures one colocated server, not a disaggregated "
                          "deployment: plan each pool's layout as its own colocated scenario "
                          f"(--set topology.kind=colocated with {layouts})",
                          key="topology.kind")
    tool = client or DEFAULT_CLIENT[engine]
    if tool not in CLIENTS:
        raise ConfigError(f"unknown client {tool!r}; known: {', '.join(CLIENTS)}", key="--client")
    if engine == "atom" and tool in ("vllm-bench", "sglang-bench"):
        raise ConfigError(f"ATOM's image has neither vLLM nor SGLang: use its vendored client "
                          f"(atom-bench) or aiperf, not {tool}", key="--client")
    spec = scenario.speculative
    speculative = spec.method != "none"
    if acceptance_length is None and speculative and dummy_weights and (spec.acceptance or 0) > 0:
        acceptance_length = round(expected_accept_length(spec.draft_tokens, spec.acceptance), 3)
    if acceptance_length is not None:
        if not speculative:
            raise ConfigError("acceptance is pinned only for a speculative plan "
                              "(speculative.method is none)", key="--acceptance-length")
        if not 1.0 <= acceptance_length <= spec.draft_tokens + 1:
            raise ConfigError(f"must lie in [1, draft_tokens + 1 = {spec.draft_tokens + 1}]",
                              key="--acceptance-length")
    if dummy_weights and speculative and acceptance_length is None:
        raise ConfigError("dummy weights with speculative decoding would accept ~no draft token "
                          "and file the non-speculative rate under a speculative label: pin the "
                          "acceptance (--acceptance-length AL, or speculative.acceptance in the "
                          "scenario) or load real weights", key="--dummy-weights")
    model_path = model_path or scenario.model.hf_id or scenario.model.name
    prefill_target, decode_isl, decode_osl, notes = _target_context(scenario, target_isl)
    isls = prefill_isls(prefill_target)
    wl = scenario.workload
    batch = min(wl.concurrency, scenario.engine.max_num_seqs * scenario.parallel.dp_attention)
    if batch < wl.concurrency:
        notes.append(f"concurrency {wl.concurrency} exceeds max_num_seqs x attention-DP = {batch}: "
                     "the sweep stops at the batch the engine can run")
    ladder = concurrency_ladder(batch)
    need = max(isls[-1] + PREFILL_OSL, decode_isl + decode_osl)
    max_model_len = min(_round_up(need + 64, 1024), scenario.context_limit)
    if need > scenario.context_limit:
        raise ConfigError(f"the probes need a context of {need} tokens; {scenario.model.name} "
                          f"is served up to {scenario.context_limit}", key="workload.isl")
    argv, env, assumptions, files = server_command(
        scenario, model_path=model_path, host=host, port=port,
        trust_remote_code=trust_remote_code, dummy_weights=dummy_weights,
        accept_length=acceptance_length, draft_model=draft_model, max_model_len=max_model_len)
    if tool == "sglang-bench":
        assumptions.append("[U] sglang.bench_serving has no --trust-remote-code flag (0.5.9 "
                           "Namespace); it loads the tokenizer itself with remote code trusted")
    if engine == "atom":
        assumptions.append("ATOM flags read in ROCm/ATOM atom/model_engine/arg_utils.py: "
                           "--server-port, --kv_cache_dtype, --block-size, --max-num-seqs, "
                           "--enable-dp-attention, --method {mtp,eagle3,dspark}, "
                           "--num-speculative-tokens, --draft-model, "
                           "--spec-decode-acceptance-length, --load_dummy")
        assumptions.append("[U] ATOM's --max-num-seqs is taken as per attention-DP rank, like "
                           "vLLM's; ATOM's health endpoint is /health")
    base = seed_base if seed_base is not None else seed_base_for(scenario.name)
    probes: list[dict[str, Any]] = []

    def add(kind: str, pid: str, isl: int, osl: int, conc: int, n: int, rep: int) -> None:
        seed = base + len(probes) + 1
        pargv, result = client_command(tool, model_path=model_path, host=host, port=port,
                                       isl=isl, osl=osl, concurrency=conc, num_prompts=n,
                                       seed=seed, result=f"results/{pid}.json",
                                       trust_remote_code=trust_remote_code)
        probes.append({"id": pid, "kind": kind, "repeat": rep, "isl": isl, "osl": osl,
                       "concurrency": conc, "num_prompts": n, "seed": seed, "argv": pargv,
                       "command": shell(pargv), "result": result, "timeout_s": probe_timeout_s})

    # One warm-up run first (kernels compiled, graphs captured, caches touched): recorded by
    # ``run``, never parsed into an anchor.
    add("warmup", "warmup", min(isls[0], 256), PREFILL_OSL, 1, 4, 0)
    for rep in range(1, repeats + 1):
        for isl in isls:
            add("prefill", f"prefill-isl{isl}-r{rep}", isl, PREFILL_OSL, 1, prefill_prompts, rep)
        for conc in ladder:
            add("decode", f"decode-c{conc}-r{rep}", decode_isl, decode_osl, conc,
                max(conc * prompts_per_client, 8), rep)

    regime = {
        "model": nz.model_name(scenario.model.name), "model_path": model_path, "engine": engine,
        "gpu": scenario.gpu.name, "gpu_isa": scenario.gpu.isa,
        "attention_backend": scenario.engine.attention_backend or None,
        "kernel_family": nz.kernel_family(scenario.engine.attention_backend)
        or ("aiter" if engine == "atom" else None),
        "weight_dtype": scenario.model.weight_dtype, "kv_dtype": scenario.kv_dtype,
        "spec_method": spec.method, "draft_tokens": spec.draft_tokens if speculative else None,
        "tp": scenario.parallel.tp, "ep": scenario.parallel.ep,
        "dp_attention": scenario.parallel.dp_attention, "dcp": scenario.parallel.dcp,
        "page_size": scenario.engine.page_size, "max_num_seqs": scenario.engine.max_num_seqs,
        "scheduler_recv_interval": scenario.engine.scheduler_recv_interval
        if engine.endswith("sglang") else None,
    }
    return {
        "schema_version": PLAN_SCHEMA,
        "generated_by": generated_by or " ".join(["inferasim harvest plan", scenario_ref]
                                                 + [f"--set {o}" for o in overrides]),
        "scenario": {"name": scenario.name, "ref": scenario_ref, "overrides": list(overrides)},
        "regime": regime,
        "speculative": {"method": spec.method, "draft_tokens": spec.draft_tokens,
                        "draft_model": draft_model, "dummy_weights": dummy_weights,
                        "acceptance_pinned": acceptance_length},
        # files the server reads ("files", written beside the plan): TensorRT-LLM's options
        "server": {"engine": engine, "argv": argv, "env": env, "command": shell(argv, env),
                   **({"files": files} if files else {}),
                   "health_url": f"http://{host}:{port}/health",
                   "health_timeout_s": health_timeout_s},
        "client": {"tool": tool, "trust_remote_code": trust_remote_code},
        "capture": {"version": version_command(engine),
                    "gpu": gpu_commands(getattr(scenario.gpu, "vendor", None))},
        "coverage": {"prefill_isls": isls, "prefill_target_isl": prefill_target,
                     "decode_isl": decode_isl, "decode_osl": decode_osl,
                     "decode_ladder": ladder, "target_batch": batch, "repeats": repeats,
                     "max_model_len": max_model_len},
        "probes": probes,
        "assumptions": assumptions,
        "notes": notes,
    }


# ---------------------------------------------------------------- files


def write_plan(plan: dict[str, Any], folder: str | Path) -> Path:
    from inferasim.report.atomic import write_text_atomic

    return write_text_atomic(Path(folder) / PLAN_FILE, json.dumps(plan, indent=1) + "\n")


def read_plan(folder: str | Path) -> dict[str, Any]:
    folder = Path(folder)
    path = folder / PLAN_FILE if folder.is_dir() else folder
    if not path.is_file():
        raise ConfigError(f"no {PLAN_FILE} (write one with 'inferasim harvest plan')",
                          file=str(folder))
    try:
        plan = json.loads(path.read_text())
    except ValueError as exc:
        raise ConfigError(f"not valid JSON ({exc})", file=str(path)) from None
    if not isinstance(plan, dict) or plan.get("schema_version") != PLAN_SCHEMA:
        raise ConfigError(f"not a harvest plan (schema_version {PLAN_SCHEMA} expected)",
                          file=str(path))
    for key in ("server", "probes", "regime"):
        if key not in plan:
            raise ConfigError(f"missing key {key!r}", file=str(path))
    _check_plan_shape(plan, str(path))
    return plan


def _is_argv(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(a, str) for a in value)


def _check_plan_shape(plan: dict[str, Any], path: str) -> None:
    """The keys ``harvest run`` reads, each where and as it expects them: a hand-edited plan
    fails here, naming the key, and not part-way through a run."""
    server = plan["server"]
    if not isinstance(server, dict) or not _is_argv(server.get("argv")):
        raise ConfigError("expected a list of strings (the server's command)",
                          file=path, key="server.argv")
    if not isinstance(server.get("health_url"), str):
        raise ConfigError("expected the server's health URL", file=path,
                          key="server.health_url")
    if "launch" in server and server["launch"] is not None and not _is_argv(server["launch"]):
        raise ConfigError("expected a list of strings (the launch command)", file=path,
                          key="server.launch")
    files = server.get("files", {})
    if not isinstance(files, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and k and "/" not in k and "\\" not in k
            and k not in (".", "..") for k, v in files.items()):
        raise ConfigError("expected a mapping of plain file names (no folder) to their text",
                          file=path, key="server.files")
    timeout = server.get("health_timeout_s", 1800)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) \
            or not math.isfinite(timeout) or timeout <= 0:
        raise ConfigError(f"expected a number of seconds above 0, got {timeout!r}", file=path,
                          key="server.health_timeout_s")
    client = plan.get("client") or {}
    for key, env in (("server.env", server.get("env", {})),
                     ("client.env", client.get("env", {}) if isinstance(client, dict) else None)):
        if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                for k, v in env.items()):
            raise ConfigError("expected a mapping of variable names to string values",
                              file=path, key=key)
    capture = plan.get("capture", {})
    if not isinstance(capture, dict):
        raise ConfigError("expected a mapping (gpu: commands, version: a command)", file=path,
                          key="capture")
    gpu = capture.get("gpu", [])
    if not isinstance(gpu, list) or not all(_is_argv(c) for c in gpu):
        raise ConfigError("expected a list of commands (each a list of strings)", file=path,
                          key="capture.gpu")
    if capture.get("version", []) != [] and not _is_argv(capture.get("version")):
        raise ConfigError("expected a command (a list of strings)", file=path,
                          key="capture.version")
    probes = plan["probes"]
    if not isinstance(probes, list):
        raise ConfigError("expected a list of probes", file=path, key="probes")
    for i, probe in enumerate(probes):
        if not isinstance(probe, dict):
            raise ConfigError("expected a mapping", file=path, key=f"probes[{i}]")
        for key, ok in (("id", isinstance(probe.get("id"), str)),
                        ("argv", _is_argv(probe.get("argv"))),
                        ("result", isinstance(probe.get("result"), str))):
            if not ok:
                raise ConfigError(f"expected {'a list of strings' if key == 'argv' else 'a string'}",
                                  file=path, key=f"probes[{i}].{key}")


def render(plan: dict[str, Any]) -> str:
    """The plan as a performance engineer reads it: the shell commands, in order."""
    cov = plan["coverage"]
    lines = [f"# harvest plan: {plan['scenario']['name']} ({plan['generated_by']})",
             f"# regime: {json.dumps({k: v for k, v in plan['regime'].items() if v is not None})}",
             f"# prefill probe ISLs {cov['prefill_isls']} (target {cov['prefill_target_isl']}); "
             f"decode ladder {cov['decode_ladder']} at ISL {cov['decode_isl']} / OSL "
             f"{cov['decode_osl']}; {cov['repeats']} repeat(s), a fresh seed per run"]
    for note in plan.get("notes", []):
        lines.append(f"# note: {note}")
    for note in plan.get("assumptions", []):
        lines.append(f"# assumption: {note}")
    lines.append("")
    lines.append("# GPU part and engine build")
    lines += [shell(c) for c in plan["capture"]["gpu"]]
    lines.append(shell(plan["capture"]["version"]))
    lines.append("")
    for name, text in plan["server"].get("files", {}).items():
        lines.append(f"cat > {shlex.quote(name)} <<'EOF'\n{text.rstrip()}\nEOF")
    lines.append("# server (its own process group; wait for health before the probes)")
    lines.append(plan["server"]["command"] + " > server.log 2>&1 &")
    lines.append(f"until curl -sf {plan['server']['health_url']}; do sleep 5; done")
    lines.append("")
    lines.append("# probes")
    for probe in plan["probes"]:
        lines.append(f"mkdir -p {shlex.quote(probe['result'].rpartition('/')[0] or '.')} && "
                     f"{probe['command']}")
    return "\n".join(lines)
