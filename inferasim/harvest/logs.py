"""What an engine's own startup log says it ran: its arguments, build, attention backend, KV
cache size, KV dtype and speculative configuration.

- vLLM: the version banner, ``non-default args: {...}`` (a Python dict), ``Initializing a V1 LLM
  engine (vX) with config: ... speculative_config=SpeculativeConfig(method=..., num_spec_tokens=N)``,
  the attention backend it chose (``Using X attention backend out of potential backends``,
  ``Using X backend (selected via --attention-backend)``, ``Overriding with X``), ``Using fp8 data
  type to store kv cache`` and ``GPU KV cache size: N tokens`` (one line per DP engine).
- SGLang: ``server_args=ServerArgs(...)`` (every resolved argument) and
  ``max_total_num_tokens=N`` / ``KV Cache is allocated. #tokens: N``.
- ATOM: ``Memory budget: ... block_bytes=B, num_kvcache_blocks=N`` (engines.md 1.3).
- TensorRT-LLM: ``TensorRT-LLM version: X`` and its KV cache manager's ``Allocated G GiB for
  max tokens in paged KV cache (N)`` (one line per rank), and ``Adjusted max_seq_len to N``
  where the pool holds less than the context (docs/engines.md).

The first attention-backend line of the main model wins: vision encoders, prefill-only MLA
backends and later draft-model lines are not the decode backend the anchor is priced on.
"""

from __future__ import annotations

import ast
import re
from typing import Any

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_REPR = re.compile(r"<[^<>]*>")
_VLLM_VERSION = (re.compile(r"V1 LLM engine \(v([0-9][\w.+-]*)\)"),
                 re.compile(r"█\s+version\s+([0-9][\w.+-]*)"),
                 re.compile(r"vLLM API server version\s+([0-9][\w.+-]*)"))
_VLLM_BACKEND = (re.compile(r"Using (\w+) backend \(selected via --attention-backend\)"),
                 re.compile(r"Using (\w+) attention backend out of potential backends"),
                 re.compile(r"Overriding with (\w+) out of potential backends"))
_BACKEND_SKIP = ("ViT", "MMEncoder", "prefill backend", "vision")
_VLLM_KV = re.compile(r"GPU KV cache size: ([\d,]+) tokens")
_VLLM_SPEC = re.compile(r"speculative_config=SpeculativeConfig\(method='([\w-]+)'(?:, model='([^']*)')?"
                        r".*?num_spec_tokens=(\d+)")
_VLLM_FP8_KV = re.compile(r"Using (fp8\w*) data type to store kv cache")
_SGL_TOKENS = (re.compile(r"max_total_num_tokens=(\d+)"), re.compile(r"#tokens: (\d+)"))
_SGL_VERSION = re.compile(r"sglang(?:==|\s+version[:\s]+|\s+v)([0-9][\w.+-]*)", re.I)
_ATOM_BLOCKS = re.compile(r"num_kvcache_blocks=(\d+)")
_ATOM_BLOCK_BYTES = re.compile(r"block_bytes=(\d+)")
_TRT_VERSION = re.compile(r"TensorRT-LLM version:?\s+v?([0-9][\w.+-]*)")
_TRT_KV = re.compile(r"for max tokens in paged KV cache \((\d+)\)")
_TRT_SEQ_CAP = re.compile(r"Adjusted max_seq_len to (\d+)")


def _literal(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return None


def _server_args_dump(line: str) -> dict[str, Any]:
    """``ServerArgs(a=1, b='x', ...)`` -> {a: 1, b: 'x'} (non-literal values dropped)."""
    start = line.find("ServerArgs(")
    text = line[start:].rstrip()
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        return {}
    call = tree.body
    if not isinstance(call, ast.Call):
        return {}
    return {kw.arg: _literal(kw.value) for kw in call.keywords if kw.arg}


def _dict_after(line: str, marker: str) -> dict[str, Any]:
    """A logged Python dict; values that are not literals (``<Enum: 1>``, ``Config(...)``) drop."""
    text = _REPR.sub("None", line[line.find(marker) + len(marker):].strip())
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        return {}
    if not isinstance(tree.body, ast.Dict):
        return {}
    out = {}
    for key, value in zip(tree.body.keys, tree.body.values, strict=False):
        name = _literal(key) if key is not None else None
        if isinstance(name, str):
            out[name] = _literal(value)
    return out


def parse_engine_log(text: str) -> dict[str, Any]:
    """Facts the log states; a key is present only when the log states it."""
    out: dict[str, Any] = {}
    lines = _ANSI.sub("", text).splitlines()
    args: dict[str, Any] = {}
    kv_tokens: list[int] = []
    for line in lines:
        if "non-default args:" in line and not args:
            args = _dict_after(line, "non-default args:")
            out["engine"] = "vllm"
        elif "server_args=ServerArgs(" in line and not args:
            args = _server_args_dump(line)
            out["engine"] = "sglang"
        if "version" not in out:
            for pattern in _VLLM_VERSION:
                m = pattern.search(line)
                if m:
                    out["version"] = m.group(1)
                    out.setdefault("engine", "vllm")
                    break
        if "attention_backend" not in out and not any(s in line for s in _BACKEND_SKIP):
            for pattern in _VLLM_BACKEND:
                m = pattern.search(line)
                if m:
                    out["attention_backend"] = m.group(1)
                    break
        m = _VLLM_KV.search(line) or _TRT_KV.search(line)
        if m:
            kv_tokens.append(int(m.group(1).replace(",", "")))
        if "version" not in out:
            m = _TRT_VERSION.search(line)
            if m:
                out["version"], out["engine"] = m.group(1), "trt"
        m = _TRT_SEQ_CAP.search(line)
        if m:
            out["max_seq_len_capped"] = int(m.group(1))
        m = _VLLM_SPEC.search(line)
        if m and "speculative" not in out:
            out["speculative"] = {"method": m.group(1), "num_speculative_tokens": int(m.group(3))}
            if m.group(2):
                out["speculative"]["model"] = m.group(2)
        m = _VLLM_FP8_KV.search(line)
        if m:
            out["kv_cache_dtype"] = m.group(1)
        if "kv_cache_tokens" not in out:
            for pattern in _SGL_TOKENS:
                m = pattern.search(line)
                if m:
                    out["kv_cache_tokens"] = int(m.group(1))
                    break
        m = _ATOM_BLOCKS.search(line)
        if m:
            out["kv_cache_blocks"] = int(m.group(1))
            b = _ATOM_BLOCK_BYTES.search(line)
            if b:
                out["kv_block_bytes"] = int(b.group(1))
        if "version" not in out and "sglang" in line.lower():
            m = _SGL_VERSION.search(line)
            if m:
                out["version"] = m.group(1)
    if kv_tokens:
        # One line per data-parallel engine (vLLM) or rank (TensorRT-LLM): a rank's own pool.
        out["kv_cache_tokens"] = kv_tokens[0]
        out["kv_cache_tokens_per_rank"] = kv_tokens
    if args:
        args = {k: v for k, v in args.items() if v is not None}
        if "model" not in args and "model_tag" in args:
            args["model"] = args["model_tag"]
        out["server_args"] = args
        backend = args.get("decode_attention_backend") or args.get("attention_backend")
        if backend and "attention_backend" not in out:
            out["attention_backend"] = backend
        if args.get("kv_cache_dtype") and "kv_cache_dtype" not in out:
            out["kv_cache_dtype"] = args["kv_cache_dtype"]
    if "speculative" in out and isinstance(out.get("server_args"), dict):
        out["server_args"].setdefault("speculative_config", out["speculative"])
    return out
