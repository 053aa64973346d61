"""TensorRT-LLM's launch for a harvest plan: ``trtllm-serve`` with the PyTorch backend, its
flags for what it takes on the command line and an LLM-API options file for the rest
(attention DP, the KV cache's block size, dtype and reuse, chunked context, the capacity
scheduler's policy, MTP). Flags and option names read in TensorRT-LLM's ``trtllm-serve``
(``commands/serve.py``) and ``llmapi/llm_args.py`` with the search tool [3P]; the plan keeps
the file's text, and ``harvest run`` writes it beside the plan before it starts the server.

``server_args`` reads the file back into the spellings ``anchors.normalise`` reads from the
other engines' command lines, so ``harvest parse`` states the regime that ran.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from inferasim.config.errors import ConfigError

#: The options file, written in the plan's folder, where the server runs.
OPTIONS_FILE = "extra-llm-api-options.yaml"
_POLICIES = {"guaranteed-no-evict": "GUARANTEED_NO_EVICT", "max-utilization": "MAX_UTILIZATION"}


def launch(scenario: Any, *, model_path: str, host: str, port: int, max_model_len: int,
           dummy_weights: bool, accept_length: float | None,
           draft_model: str | None) -> tuple[list[str], dict[str, str], list[str]]:
    """(argv, files by name, notes) of ``trtllm-serve`` for the scenario."""
    eng, par, spec = scenario.engine, scenario.parallel, scenario.speculative
    notes: list[str] = []
    if eng.capacity_policy not in _POLICIES:
        raise ConfigError(f"TensorRT-LLM's capacity scheduler has no policy "
                          f"{eng.capacity_policy!r}", key="engine.capacity_policy")
    kv_cache: dict[str, Any] = {"enable_block_reuse": bool(eng.prefix_caching),
                                "tokens_per_block": int(eng.page_size)}
    if scenario.kv_dtype == "fp8":
        kv_cache["dtype"] = "fp8"
    options: dict[str, Any] = {
        "enable_attention_dp": par.dp_attention > 1,
        "enable_chunked_prefill": bool(eng.chunked_prefill),
        "kv_cache_config": kv_cache,
        "scheduler_config": {"capacity_scheduler_policy": _POLICIES[eng.capacity_policy]},
    }
    if spec.method not in ("none", "mtp"):
        raise ConfigError(f"harvest plans TensorRT-LLM with MTP or without speculation; "
                          f"{spec.method} is not planned", key="speculative.method")
    if spec.method == "mtp":
        options["speculative_config"] = {"decoding_type": "MTP",
                                         "num_nextn_predict_layers": int(spec.draft_tokens)}
    if accept_length is not None:
        raise ConfigError("no TensorRT-LLM option pins the acceptance that harvest knows of: "
                          "load real weights", key="--acceptance-length")
    if draft_model:
        raise ConfigError("MTP drafts with the checkpoint's own layers: no draft model",
                          key="--draft-model")
    if dummy_weights:
        options["load_format"] = "dummy"
        notes.append("[U] TensorRT-LLM's LLM API load_format: dummy (random weights)")
    if par.dp_attention > 1:
        notes.append("TensorRT-LLM's max_batch_size is per attention-DP rank under "
                     "enable_attention_dp, as the scenario's max_num_seqs")
    argv = ["trtllm-serve", model_path, "--host", host, "--port", str(port),
            "--backend", "pytorch", "--tp_size", str(par.tp), "--ep_size", str(par.ep),
            "--max_batch_size", str(eng.max_num_seqs),
            "--max_num_tokens", str(eng.max_num_batched_tokens),
            "--max_seq_len", str(max_model_len),
            "--kv_cache_free_gpu_memory_fraction", f"{eng.mem_fraction:g}",
            "--extra_llm_api_options", OPTIONS_FILE]
    return argv, {OPTIONS_FILE: yaml.safe_dump(options, sort_keys=False)}, notes


def server_args(args: Mapping[str, Any], files: Mapping[str, str]) -> dict[str, Any]:
    """What a ``trtllm-serve`` launch ran, in the other engines' spellings: its flags
    (``args``, parsed) with the options file's attention DP, block size, KV dtype and MTP."""
    out = dict(args)
    text = files.get(str(args.get("extra_llm_api_options", "")))
    options = yaml.safe_load(text) if text else None
    if not isinstance(options, Mapping):
        return out
    tp = int(args.get("tp_size", 1))
    out["attn_dp_size"] = tp if options.get("enable_attention_dp") else 1
    kv = options.get("kv_cache_config") or {}
    if kv.get("tokens_per_block"):
        out["page_size"] = kv["tokens_per_block"]
    if kv.get("dtype"):
        out["kv_cache_dtype"] = kv["dtype"]
    if "max_batch_size" in args:
        out["max_num_seqs"] = args["max_batch_size"]
    spec = options.get("speculative_config") or {}
    if str(spec.get("decoding_type", "")).upper() == "MTP":
        out["speculative_config"] = {"method": "mtp",
                                     "num_speculative_tokens": spec.get("num_nextn_predict_layers")}
    return out


def is_launch(argv: Sequence[str]) -> bool:
    return bool(argv) and argv[0] == "trtllm-serve"
