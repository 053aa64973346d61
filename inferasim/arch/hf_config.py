"""A Hugging Face ``config.json`` read into a catalog model entry (the mapping
``scenarios/bases/models/*.yaml`` hold), so a model the catalog lacks can be priced from the
file its checkpoint ships: ``model.name: path/to/config.json``.

Each family is read by the fields its ``model_type`` defines (the transformers and vLLM
config classes of that name); a family not listed is refused by name rather than read by
guesswork. What the file does not say and the entry needs (a 4-bit scheme's coverage, the
sparse-attention cache layout) is assumed as the catalog assumes it for the same family,
and each assumption is named in the entry's ``source`` (docs/models.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from inferasim.config.errors import ConfigError

DENSE = ("llama", "mistral", "qwen2", "qwen3", "phi3", "granite", "olmo2", "exaone")
MOE_LOCAL = ("mixtral", "gpt_oss", "minimax_m2")  # num_local_experts
MOE_QWEN = ("qwen2_moe", "qwen3_moe")
MLA = ("deepseek_v2", "deepseek_v3", "kimi_k2", "deepseek_v32", "glm_moe_dsa")
GLM_MOE = ("glm4_moe",)
HYBRID = ("qwen3_next", "qwen3_5_moe_text", "qwen3_5_text")
FAMILIES = (*DENSE, *MOE_LOCAL, *MOE_QWEN, *MLA, *GLM_MOE, *HYBRID)
DSA = ("deepseek_v32", "glm_moe_dsa")  # MLA with a lightning indexer's top-k selection

# vLLM's dtype "auto" serves a float32 checkpoint in fp16 (its --dtype help)
TORCH_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp16"}


class _Reader:
    """Fields of one config mapping; a missing required field names the file and key."""

    def __init__(self, cfg: dict[str, Any], where: str, prefix: str = ""):
        self.cfg, self.where, self.prefix = cfg, where, prefix

    def need(self, key: str) -> Any:
        if key not in self.cfg or self.cfg[key] is None:
            raise ConfigError(f"a {self.cfg.get('model_type')} config needs {key!r}",
                              file=self.where, key=self.prefix + key)
        return self.cfg[key]

    def get(self, key: str, default: Any = None) -> Any:
        value = self.cfg.get(key)
        return default if value is None else value

    def int(self, key: str, default: int | None = None, least: int = 0) -> int:
        value = self.need(key) if default is None else self.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ConfigError(f"expected a whole number >= {least}, got {value!r}",
                              file=self.where, key=self.prefix + key)
        return value


def read_hf_config(path: Path, weight_dtype: str | None = None) -> tuple[dict[str, Any], str]:
    """The catalog entry ``path`` (a config.json) gives, and its name; ``weight_dtype``, where
    the scenario sets one, stands for whatever the quantization config says."""
    where = str(path)
    try:
        cfg = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the model config: {exc}", file=where,
                          key="model.name") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"not JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}",
                          file=where, key="model.name") from None
    if not isinstance(cfg, dict):
        raise ConfigError("expected a JSON object (a Hugging Face config.json)", file=where,
                          key="model.name")
    name = model_name(cfg, Path(path))
    entry = hf_entry(cfg, where, name, weight_dtype)
    if not entry["hf_id"] and Path(path).name == "config.json":
        # the checkpoint it came from: what harvest plan serves (--model-path)
        entry["hf_id"] = str(Path(path).resolve().parent)
    return entry, name


def model_name(cfg: dict[str, Any], path: Path) -> str:
    """``_name_or_path``'s last part, else the checkpoint's folder for a ``config.json``,
    else the file's stem; lower-case, as catalog names are."""
    named = cfg.get("_name_or_path")
    if isinstance(named, str) and named.strip("/"):
        return named.strip("/").rsplit("/", 1)[-1].lower()
    if path.name == "config.json" and path.parent.name:
        return path.parent.name.lower()
    return path.stem.lower()


def hf_entry(cfg: dict[str, Any], where: str, name: str,
             weight_dtype: str | None = None) -> dict[str, Any]:
    """The catalog entry of one config mapping (a multimodal config's ``text_config``)."""
    outer = cfg
    prefix = ""
    if isinstance(cfg.get("text_config"), dict):
        cfg, prefix = {**cfg["text_config"]}, "text_config."
        cfg.setdefault("tie_word_embeddings", outer.get("tie_word_embeddings"))
        cfg.setdefault("quantization_config", outer.get("quantization_config"))
    r = _Reader(cfg, where, prefix)
    kind = r.get("model_type", outer.get("model_type"))
    if kind not in FAMILIES:
        raise ConfigError(f"model_type {kind!r} is not a family inferasim reads from a "
                          f"config.json ({', '.join(FAMILIES)}); write a catalog entry "
                          "(scenarios/bases/models/*.yaml, docs/models.md) and name its file",
                          file=where, key=prefix + "model_type")
    notes: list[str] = []
    heads = r.int("num_attention_heads", least=1)
    hidden = r.int("hidden_size", least=1)
    entry: dict[str, Any] = {
        "name": name,
        "hf_id": str(outer.get("_name_or_path") or ""),
        "num_layers": r.int("num_hidden_layers", least=1),
        "hidden_size": hidden,
        "vocab_size": r.int("vocab_size", least=1),
        "num_attention_heads": heads,
        "num_kv_heads": r.int("num_key_value_heads", heads, least=1),
        "max_context": r.int("max_position_embeddings", least=1),
        "tie_embeddings": bool(r.get("tie_word_embeddings", False)),
        "mtp_layers": r.int("num_nextn_predict_layers", 0) or r.int("mtp_num_hidden_layers", 0)
        or r.int("num_mtp_modules", 0),
    }
    entry.update({"weight_dtype": weight_dtype} if weight_dtype else _dtypes(r, notes))
    if kind in MLA:
        entry["attention"] = _mla(r, kind, notes)
    else:
        entry["attention"] = _gqa(r, kind, heads, hidden)
    entry["ffn"] = _ffn(r, kind)
    entry["source"] = f"imported from {where} (model_type {kind})" + (
        f"; assumed: {'; '.join(notes)}" if notes else "")
    return entry


def _gqa(r: _Reader, kind: str, heads: int, hidden: int) -> dict[str, Any]:
    att: dict[str, Any] = {"kind": "gqa", "head_dim": r.int("head_dim", hidden // heads)}
    window, types = r.int("sliding_window", 0), r.get("layer_types")
    if types:
        sliding = sum(t == "sliding_attention" for t in types)
    elif kind in ("mistral", "mixtral"):  # a window, when set, on every layer
        sliding = r.int("num_hidden_layers") if window else 0
    else:
        if r.get("use_sliding_window"):  # Qwen2's per-layer windows
            raise ConfigError("use_sliding_window is not read; set it false or write a "
                              "catalog entry", file=r.where, key=r.prefix + "use_sliding_window")
        sliding = 0
    if window and sliding and window < r.int("max_position_embeddings"):
        att.update(sliding_window=window, sliding_layers=sliding)
    if kind in HYBRID:
        att["output_gate"] = bool(r.get("attn_output_gate", True))
        full = _full_layers(r)
        att["linear"] = {
            "layers": r.int("num_hidden_layers") - full,
            "key_heads": r.int("linear_num_key_heads"),
            "value_heads": r.int("linear_num_value_heads"),
            "key_head_dim": r.int("linear_key_head_dim"),
            "value_head_dim": r.int("linear_value_head_dim"),
            "conv_kernel": r.int("linear_conv_kernel_dim"),
        }
    return att


def _full_layers(r: _Reader) -> int:
    """Full-attention layers of a hybrid: ``layer_types`` when given, else every
    ``full_attention_interval``-th layer."""
    types = r.get("layer_types")
    if types:
        return sum(t == "full_attention" for t in types)
    return r.int("num_hidden_layers") // r.int("full_attention_interval")


def _mla(r: _Reader, kind: str, notes: list[str]) -> dict[str, Any]:
    nope, rope = r.int("qk_nope_head_dim"), r.int("qk_rope_head_dim")
    kv_lora = r.int("kv_lora_rank")
    att: dict[str, Any] = {
        "kind": "mla", "head_dim": nope + rope, "v_head_dim": r.int("v_head_dim"),
        "q_lora_rank": r.int("q_lora_rank", 0), "kv_lora_rank": kv_lora,
        "qk_nope_head_dim": nope, "qk_rope_head_dim": rope}
    if kind in DSA:
        att["kind"] = "mla_dsa"
        att["indexer"] = {"n_heads": r.int("index_n_heads"), "head_dim": r.int("index_head_dim"),
                          "topk": r.int("index_topk")}
        # FlashMLA's sparse layout: the latent in fp8 with an fp32 scale per 128, the rope
        # part kept in bf16 (DeepSeek-V3.2's 656 B, facts.md A.2)
        att["kv_entry_bytes"] = {"bf16": 2 * (kv_lora + rope),
                                 "fp8": kv_lora + 4 * (kv_lora // 128) + 2 * rope}
        notes.append("the sparse-attention cache in FlashMLA's fp8 layout")
    return att


def _ffn(r: _Reader, kind: str) -> dict[str, Any]:
    if kind in DENSE:
        return {"intermediate_size": r.int("intermediate_size")}
    if kind in MOE_LOCAL:
        per_token = "experts_per_token" if "num_experts_per_tok" not in r.cfg \
            else "num_experts_per_tok"  # gpt-oss's config.json spells it both ways
        return {"first_k_dense": 0, "n_routed_experts": r.int("num_local_experts"),
                "experts_per_token": r.int(per_token), "n_shared_experts": 0,
                "moe_intermediate_size": r.int("intermediate_size")}
    if kind in MOE_QWEN or kind in HYBRID:
        dense_layers = list(r.get("mlp_only_layers") or [])
        if r.int("decoder_sparse_step", 1) != 1 or dense_layers != list(range(len(dense_layers))):
            raise ConfigError("only leading dense layers are modelled (mlp_only_layers "
                              "0..k-1, decoder_sparse_step 1)", file=r.where,
                              key=r.prefix + "mlp_only_layers")
        shared = r.int("shared_expert_intermediate_size", 0)
        ffn = {"first_k_dense": len(dense_layers), "n_routed_experts": r.int("num_experts"),
               "experts_per_token": r.int("num_experts_per_tok"),
               "n_shared_experts": 1 if shared else 0,
               "moe_intermediate_size": r.int("moe_intermediate_size")}
        if shared:
            ffn["shared_intermediate_size"] = shared
        if dense_layers:
            ffn["intermediate_size"] = r.int("intermediate_size")
        return ffn
    # DeepSeek-style: leading dense layers, routed and shared experts of one width
    if r.int("moe_layer_freq", 1) != 1:
        raise ConfigError("only an expert layer every layer is modelled (moe_layer_freq 1)",
                          file=r.where, key=r.prefix + "moe_layer_freq")
    first = r.int("first_k_dense_replace", 0)
    ffn = {"first_k_dense": first, "n_routed_experts": r.int("n_routed_experts"),
           "experts_per_token": r.int("num_experts_per_tok"),
           "n_shared_experts": r.int("n_shared_experts", 0),
           "moe_intermediate_size": r.int("moe_intermediate_size")}
    if first:
        ffn["intermediate_size"] = r.int("intermediate_size")
    return ffn


def _dtypes(r: _Reader, notes: list[str]) -> dict[str, Any]:
    """``weight_dtype`` (and ``expert_weight_dtype``) from the quantization config, else the
    checkpoint's torch dtype."""
    base = TORCH_DTYPES.get(str(r.get("torch_dtype", r.get("dtype", "bfloat16"))), "bf16")
    q = r.get("quantization_config")
    if not q:
        return {"weight_dtype": base}
    if not isinstance(q, dict):
        raise ConfigError("expected a mapping", file=r.where, key=r.prefix + "quantization_config")
    method = str(q.get("quant_method", "")).lower()
    key = r.prefix + "quantization_config.quant_method"
    if method == "fp8":
        return {"weight_dtype": "fp8"}
    if method == "mxfp4":  # gpt-oss: the experts in MXFP4, the rest as the checkpoint
        return {"weight_dtype": base, "expert_weight_dtype": "mxfp4"}
    if method == "modelopt":
        algo = str(q.get("quant_algo", "")).upper()
        if algo in ("NVFP4", "FP8"):
            return {"weight_dtype": algo.lower()}
        raise ConfigError(f"modelopt quant_algo {algo!r} is not read (NVFP4, FP8)",
                          file=r.where, key=r.prefix + "quantization_config.quant_algo")
    if method == "quark":  # AMD's MXFP4 checkpoints
        notes.append("quark means MXFP4 weights")
        return {"weight_dtype": "mxfp4"}
    if method == "compressed-tensors":
        kinds = {((g.get("weights") or {}).get("num_bits"), (g.get("weights") or {}).get("type"))
                 for g in (q.get("config_groups") or {}).values() if isinstance(g, dict)}
        if kinds == {(4, "int")}:
            notes.append("compressed-tensors int4 on the routed experts only (Kimi-K2.5's "
                         "W4A16)")
            return {"weight_dtype": base, "expert_weight_dtype": "int4"}
        if kinds == {(4, "float")}:
            return {"weight_dtype": "nvfp4"}
        if kinds == {(8, "float")}:
            return {"weight_dtype": "fp8"}
        if kinds == {(8, "int")}:
            return {"weight_dtype": "int8"}
    if method in ("gptq", "awq") and q.get("bits") in (4, 8):
        notes.append(f"{method} quantizes every linear layer")
        return {"weight_dtype": f"int{q['bits']}"}
    raise ConfigError(f"quant_method {method!r} is not read (fp8, mxfp4, modelopt, quark, "
                      "compressed-tensors int4/int8/fp8/nvfp4, 4- or 8-bit GPTQ and AWQ); set "
                      "model.weight_dtype, or write a catalog entry", file=r.where, key=key)
