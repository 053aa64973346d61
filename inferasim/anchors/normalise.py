"""Spellings -> regime values. Each decision is one small table; anything not in a table stays
as the tool wrote it (its own regime) or, for dtypes, reads as unknown.

The rule throughout: an axis we cannot argue stays ``None`` (unknown, skipped by regime
distance), never a guess that could refuse a matching anchor or admit a wrong one.
See docs/anchors.md for the reasoning behind every row.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

# ---------------------------------------------------------------- engines

#: Spelling -> engine. mori-sglang is SGLang with AMD's MoRI stack: it shards the MLA latent,
#: so its KV pool differs from SGLang's and the two never share anchors. Disaggregated
#: frameworks (dynamo-*, *-disagg) are their own regime: a colocated instance is not what
#: they measured (``ORCHESTRATED`` names the engine their workers run). An engine spelled
#: nowhere here keeps its spelling, and is refused for every engine inferasim prices.
ENGINE_SPELLINGS: dict[str, str] = {
    "vllm": "vllm",
    "vllm-openai": "vllm",
    "vllm-openai-rocm": "vllm",
    "vllm-rocm": "vllm",
    "sglang": "sglang",
    "sgl": "sglang",
    "mori-sglang": "mori-sglang",
    "sglang-mori": "mori-sglang",
    "atom": "atom",
    "rocm-atom": "atom",
    "trt": "trt",
    "trtllm": "trt",
    "trt-llm": "trt",
    "tensorrt-llm": "trt",
    "tensorrt_llm": "trt",
    "dynamo-sglang": "dynamo-sglang",
    "dynamo-trt": "dynamo-trt",
    "dynamo-vllm": "dynamo-vllm",
    "sglang-disagg": "sglang-disagg",
    "vllm-disagg": "vllm-disagg",
}

#: Docker image repository -> engine (used only when a record names no engine).
IMAGE_ENGINES: tuple[tuple[str, str], ...] = (
    ("rocm/atom", "atom"),
    ("lmsysorg/sglang", "sglang"),
    ("vllm/vllm-openai", "vllm"),
    ("rocm/vllm", "vllm"),
    ("tensorrt-llm", "trt"),
)


def _key(text: str) -> str:
    return text.strip().lower().replace("_", "-")


def normalise_engine(spelling: str | None) -> str | None:
    if spelling is None or not str(spelling).strip():
        return None
    key = _key(str(spelling))
    return ENGINE_SPELLINGS.get(key, key)


#: Frameworks that run an engine's disaggregated pools: framework -> (orchestrator, engine).
ORCHESTRATED: dict[str, tuple[str, str]] = {
    "dynamo-sglang": ("dynamo", "sglang"),
    "dynamo-trt": ("dynamo", "trt"),
    "dynamo-vllm": ("dynamo", "vllm"),
}


def orchestrated_engine(engine: str | None, orchestrator: str) -> str | None:
    """The framework a deployment of ``engine`` under ``orchestrator`` is spelled as:
    ``dynamo-trt`` for TensorRT-LLM workers under Dynamo, the engine itself natively."""
    name = normalise_engine(engine)
    for framework, pair in ORCHESTRATED.items():
        if pair == (orchestrator, name):
            return framework
    return name


def worker_engine(framework: str | None) -> tuple[str, str] | None:
    """(orchestrator, engine) of a framework spelling: ("dynamo", "trt") for dynamo-trt,
    ("native", the engine) for an engine; None when unknown."""
    name = normalise_engine(framework)
    if name is None:
        return None
    return ORCHESTRATED.get(name, ("native", name))


def modelled(framework: str | None) -> bool:
    """Whether inferasim can run what a framework spelling deployed: an engine of its
    catalog, natively or under an orchestrator it models."""
    from inferasim.config.scenario import ENGINES

    pair = worker_engine(framework)
    return pair is not None and pair[1] in ENGINES


def engine_from_image(image: str | None) -> str | None:
    if not image:
        return None
    low = image.lower()
    for repo, engine in IMAGE_ENGINES:
        if repo in low:
            return engine
    return None


# ---------------------------------------------------------------- attention kernel families

#: Flag spelling -> kernel family. AITER's MLA, unified-attention, sparse-MLA and DeepSeek-V4
#: backends are one family ("aiter"): a spelling difference among them must not refuse an
#: anchor. AITER's FA backend (a separate FlashAttention port) and AITER's Triton MLA (a
#: Triton decode kernel) are their own families.
KERNEL_FAMILIES: dict[str, str] = {
    "aiter": "aiter",
    "aiter_mla": "aiter",
    "aiter_unified": "aiter",
    "aiter_unified_attn": "aiter",
    "rocm_aiter_mla": "aiter",
    "rocm_aiter_unified_attn": "aiter",
    "rocm_aiter_mla_sparse": "aiter",
    "rocm_aiter_dsv4": "aiter",
    "rocm_aiter_deepseek_v4": "aiter",
    "aiter_dsv4": "aiter",
    "rocm_aiter_fa": "aiter-fa",
    "aiter_fa": "aiter-fa",
    "rocm_aiter_triton_mla": "triton-mla",
    "triton_mla": "triton-mla",
    "triton": "triton",
    "triton_attn": "triton",
    "rocm_attn": "rocm-attn",
    "flashinfer": "flashinfer",
    "flashinfer_mla": "flashinfer-mla",
    "flashinfer_mla_sparse": "flashinfer-mla-sparse",
    "flashmla": "flashmla",
    "flash_mla": "flashmla",
    "flashmla_sparse": "flashmla-sparse",
    "cutlass_mla": "cutlass-mla",
    "trtllm_mla": "trtllm-mla",
    "trtllm_mha": "trtllm-mha",
    "flash_attn": "flash-attn",
    "fa3": "flash-attn",
    "fa4": "fa4",
    "flash_attn_mla": "flash-attn-mla",
    "nsa": "nsa",
    "dsa": "nsa",
    "torch_native": "torch-native",
}


def kernel_family(spelling: str | None) -> str | None:
    """The attention kernel family of an engine's backend flag; unknown spellings are their own."""
    if spelling is None or not str(spelling).strip():
        return None
    key = str(spelling).strip().lower().replace("-", "_")
    if key in ("auto", "none", "default"):
        return None
    if key in KERNEL_FAMILIES:
        return KERNEL_FAMILIES[key]
    if "aiter" in key and "fa" not in key.split("_") and "triton" not in key:
        return "aiter"
    return key.replace("_", "-")


# ---------------------------------------------------------------- weight and KV dtypes

#: Quantization method -> weight dtype. Toolchain names (Quark emits fp8 and fp4 alike,
#: compressed-tensors packs int4 or mxfp4, ModelOpt fp8 or nvfp4) read as unknown (None):
#: regime distance skips them instead of refusing the checkpoint's own measurements.
QUANT_METHOD_DTYPES: dict[str, str | None] = {
    "quark": None,
    "compressed-tensors": None,
    "modelopt": None,
    "gptq": None,
    "auto-round": None,
    "bitsandbytes": None,
    "torchao": None,
    "gguf": None,
    "fp8": "fp8",
    "fp8-e4m3": "fp8",
    "fp8-e4m3fn": "fp8",
    "fbgemm-fp8": "fp8",
    "ptpc-fp8": "fp8",
    "w8a8-fp8": "fp8",
    "modelopt-fp8": "fp8",
    "mxfp4": "mxfp4",
    "w4a4-mxfp4": "mxfp4",
    "nvfp4": "nvfp4",
    "modelopt-fp4": "nvfp4",
    "fp4": "fp4",
    "int8": "int8",
    "w8a8-int8": "int8",
    "int4": "int4",
    "awq": "int4",
    "bf16": "bf16",
    "bfloat16": "bf16",
    "fp16": "fp16",
    "float16": "fp16",
}

#: "fp4" is a family: it matches a checkpoint's own 4-bit float target (mxfp4 or nvfp4).
FP4_FAMILY = ("fp4", "mxfp4", "nvfp4")


def weight_dtype(method: str | None) -> str | None:
    if method is None or not str(method).strip():
        return None
    return QUANT_METHOD_DTYPES.get(_key(str(method)))


def weight_dtype_for_precision(precision: str | None, vendor: str | None) -> str | None:
    """InferenceMAX ``precision``: fp4 is MXFP4 on AMD (amd/*-MXFP4 checkpoints), NVFP4 on
    NVIDIA (nvidia/*-FP4 checkpoints); with no vendor it stays the fp4 family."""
    dtype = weight_dtype(precision)
    if dtype == "fp4":
        return {"amd": "mxfp4", "nvidia": "nvfp4"}.get(vendor or "", "fp4")
    return dtype


def weight_dtypes_match(anchor: str, target: str) -> bool:
    if anchor == target:
        return True
    return "fp4" in (anchor, target) and anchor in FP4_FAMILY and target in FP4_FAMILY


#: ``kv_cache_dtype`` -> KV dtype. ``auto`` follows the model's stack dtype, which the
#: record does not say: unknown.
KV_DTYPES: dict[str, str | None] = {
    "auto": None,
    "fp8": "fp8",
    "fp8-e4m3": "fp8",
    "fp8-e5m2": "fp8",
    "fp8-ds-mla": "fp8",
    "bf16": "bf16",
    "bfloat16": "bf16",
    "fp16": "fp16",
    "float16": "fp16",
}


def kv_dtype(spelling: str | None) -> str | None:
    if spelling is None or not str(spelling).strip():
        return None
    return KV_DTYPES.get(_key(str(spelling)))


# ---------------------------------------------------------------- speculative methods

#: SGLang runs DeepSeek MTP as ``EAGLE``/``NEXTN`` without a draft model; with a draft model
#: ``EAGLE`` is EAGLE proper. Each method keeps its own name (not collapsed to MTP).
SPEC_METHODS: dict[str, str] = {
    "none": "none",
    "mtp": "mtp",
    "nextn": "mtp",
    "deepseek-mtp": "mtp",
    "eagle3": "eagle3",
    "eagle": "eagle",
    "dspark": "dspark",
    "ngram": "ngram",
    "medusa": "medusa",
    "draft-model": "draft-model",
}


def spec_method(spelling: str | None, *, has_draft_model: bool | None = None) -> str | None:
    if spelling is None:
        return None
    key = _key(str(spelling))
    if key in ("", "null", "false"):
        return "none"
    method = SPEC_METHODS.get(key, key)
    if method == "eagle" and has_draft_model is False:
        return "mtp"
    return method


# ---------------------------------------------------------------- GPU parts

#: Part -> (vendor, ISA). gfx942 = MI300X/MI325X, gfx950 = MI350X/MI355X.
GPU_PARTS: dict[str, tuple[str, str]] = {
    "mi300x": ("amd", "gfx942"),
    "mi300a": ("amd", "gfx942"),
    "mi325x": ("amd", "gfx942"),
    "mi350x": ("amd", "gfx950"),
    "mi355x": ("amd", "gfx950"),
    "a100": ("nvidia", "sm80"),
    "l4": ("nvidia", "sm89"),
    "l40s": ("nvidia", "sm89"),
    "h100": ("nvidia", "sm90"),
    "h200": ("nvidia", "sm90"),
    "h20": ("nvidia", "sm90"),
    "b200": ("nvidia", "sm100"),
    "gb200": ("nvidia", "sm100"),
    "b300": ("nvidia", "sm103"),
    "gb300": ("nvidia", "sm103"),
}

_PART_RE = re.compile(r"\b(g?b[23]00|h[12]00|h20|a100|l40s|l4|mi3[0-9]{2}[xa]?)\b", re.I)


def normalise_gpu(name: str | None) -> str | None:
    """A GPU part from a name ("MI355X", "AMD Instinct MI355 OAM", "NVIDIA H100 80GB HBM3")."""
    if name is None or not str(name).strip():
        return None
    low = str(name).strip().lower()
    if low in GPU_PARTS:
        return low
    match = _PART_RE.search(low.replace("_", " ").replace("-", " "))
    if not match:
        return None
    part = match.group(1).lower()
    if part in ("mi355", "mi350", "mi325", "mi300"):
        part += "x"
    return part if part in GPU_PARTS else None


def gpu_vendor(part: str | None) -> str | None:
    return GPU_PARTS[part][0] if part in GPU_PARTS else None


def gpu_isa(part: str | None) -> str | None:
    return GPU_PARTS[part][1] if part in GPU_PARTS else None


def gpu_from_image(image: str | None) -> tuple[str | None, str | None, str | None]:
    """(part, isa, vendor) an image tag argues for. An ``mi35x`` or ``mi355x`` tag is built
    for gfx950 and names MI355X; ``mi350x`` is gfx950 too, but ATOM's MI350x images serve
    MI355X as well, so the part stays unknown; ``mi30x`` is gfx942 (MI300X or MI325X: part
    unknown); ``rocm`` says AMD and a CUDA tag (``cu130``) says NVIDIA, without a part."""
    if not image:
        return None, None, None
    tag = image.lower()
    if re.search(r"mi355x?\b|mi35x", tag):
        return "mi355x", "gfx950", "amd"
    if re.search(r"mi35\dx?\b", tag):
        return None, "gfx950", "amd"
    if re.search(r"mi30x|mi300x?\b|mi325x?\b", tag):
        return None, "gfx942", "amd"
    if "rocm" in tag or "/atom" in tag:
        return None, None, "amd"
    if re.search(r"\bcu1\d+|cuda|nvcr\.io|-cu\d", tag):
        return None, None, "nvidia"
    return None, None, None


# ---------------------------------------------------------------- engine builds

_VERSION_RE = re.compile(r"v?(\d+\.\d+(?:\.\d+)?(?:rc\d+)?(?:\.post\d+)?)")
_ATOM_RE = re.compile(r"atom[-_]?v?(\d[\w.]*?)(?:[-_]|$)")


def image_tag(image: str | None) -> str | None:
    if not image or ":" not in image.rsplit("/", 1)[-1]:
        return None
    return image.rsplit(":", 1)[1]


def engine_version_from_image(image: str | None) -> str | None:
    """The engine's own version in an image tag: ``v0.5.12-rocm700-mi35x`` -> 0.5.12;
    ATOM tags carry ``atom0.1.1`` or ``atom20260511`` after the ROCm version."""
    tag = image_tag(image)
    if not tag:
        return None
    if "atom" in (image or "").lower():
        match = _ATOM_RE.search(tag)
        return match.group(1) if match else None
    match = _VERSION_RE.match(tag) or _VERSION_RE.search(tag)
    return match.group(1) if match else None


def build_matches(target_version: str, image: str | None, engine_version: str | None) -> bool:
    """Whether an anchor ran the target's engine build, compared at the precision the target
    states: a full image, an image tag, or a bare version."""
    want = target_version.strip()
    if ":" in want:
        return image == want
    if image and image_tag(image) == want:
        return True
    bare = want.removeprefix("v")
    if engine_version and engine_version.removeprefix("v") == bare:
        return True
    if image and _VERSION_RE.fullmatch(want):
        return engine_version_from_image(image) == bare
    return False


# ---------------------------------------------------------------- models

#: Model ids, short names and InferenceMAX keys -> catalog names.
MODEL_ALIASES: dict[str, str] = {
    "dsr1": "deepseek-r1",
    "deepseek-r1": "deepseek-r1",
    "deepseek-r1-0528": "deepseek-r1",
    "deepseek-v3": "deepseek-v3",
    "deepseek-v3.2": "deepseek-v3.2",
    "deepseek-v3.2-exp": "deepseek-v3.2",
    "deepseek-v4-flash": "deepseek-v4-flash",
    "deepseek-v4-pro": "deepseek-v4-pro",
    "dsv4-pro": "deepseek-v4-pro",
    "glm5": "glm-5",
    "glm-5": "glm-5",
    "glm-5.1": "glm-5.1",
    "glm-5.2": "glm-5.2",
    "minimaxm2.5": "minimax-m2.5",
    "minimax-m2.5": "minimax-m2.5",
    "minimax-m3": "minimax-m3",
    "kimik2.5": "kimi-k2.5",
    "kimi-k2.5": "kimi-k2.5",
    "kimik2.7": "kimi-k2.7",
    "kimi-k2.7": "kimi-k2.7",
    "qwen3-235b-a22b": "qwen3-235b-a22b",
    "qwen3.5-397b-a17b": "qwen3.5-397b-a17b",
    "llama-3.1-8b": "llama-3.1-8b",
    "meta-llama-3.1-8b": "llama-3.1-8b",
    "llama-3.1-70b": "llama-3.1-70b",
    "meta-llama-3.1-70b": "llama-3.1-70b",
    "llama-3.1-405b": "llama-3.1-405b",
    "llama-3.3-70b": "llama-3.3-70b",
    "gpt-oss-120b": "gpt-oss-120b",
    "gpt-oss-20b": "gpt-oss-20b",
    "qwen3-8b": "qwen3-8b",
    "qwq-32b": "qwq-32b",
}

#: Name suffixes that describe the build of a checkpoint, not which model it is.
_MODEL_SUFFIXES = ("-instruct", "-fp8", "-mxfp4", "-nvfp4", "-fp4", "-int4", "-w4a16", "-0528",
                   "-code", "-thinking", "-bf16", "-dynamic")
_NAME_DTYPES = (("mxfp4", "mxfp4"), ("nvfp4", "nvfp4"), ("fp8", "fp8"), ("int4", "int4"))


def _model_basename(model_id: str) -> str:
    text = model_id.strip().rstrip("/")
    hub = re.search(r"models--([^/]+?)--([^/]+)", text)
    if hub:
        return hub.group(2)
    return text.rsplit("/", 1)[-1]


def model_name(model_id: str | None) -> str | None:
    """A catalog-style model name from an HF id, a local path or a short key."""
    if model_id is None or not str(model_id).strip():
        return None
    name = _model_basename(str(model_id)).lower().replace("_", "-")
    if name in MODEL_ALIASES:
        return MODEL_ALIASES[name]
    changed = True
    while changed:
        changed = False
        for suffix in _MODEL_SUFFIXES:
            if name.endswith(suffix):
                name = name[: -len(suffix)]
                changed = True
    return MODEL_ALIASES.get(name, name)


def weight_dtype_from_model_id(model_id: str | None) -> str | None:
    """The dtype a checkpoint's own name declares (``GLM-5-FP8``, ``Kimi-K2.7-Code-MXFP4``;
    ``nvidia/*-FP4`` is NVFP4)."""
    if not model_id:
        return None
    base = _model_basename(str(model_id)).lower()
    for token, dtype in _NAME_DTYPES:
        if re.search(rf"(^|[-_]){token}($|[-_])", base):
            return dtype
    if re.search(r"(^|[-_])fp4($|[-_])", base):
        return "nvfp4" if str(model_id).lower().startswith("nvidia/") else "fp4"
    return None


# ---------------------------------------------------------------- server arguments


def parse_server_command(command: str | Sequence[str]) -> dict[str, Any]:
    """A launch command (``vllm serve M --tensor-parallel-size=4 --enable-expert-parallel``)
    -> {snake_case flag: value}; a bare flag is True and the served model is ``model``."""
    tokens = shlex.split(command) if isinstance(command, str) else list(command)
    args: dict[str, Any] = {}
    i = 0
    positional: list[str] = []
    while i < len(tokens):
        tok = tokens[i]
        if tok.startswith("-") and len(tok) > 1 and not _is_number(tok):
            flag, eq, value = tok.lstrip("-").partition("=")
            key = flag.replace("-", "_")
            if eq:
                args[key] = value
            elif i + 1 < len(tokens) and (not tokens[i + 1].startswith("-")
                                          or _is_number(tokens[i + 1])):
                args[key] = tokens[i + 1]
                i += 1
            else:
                args[key] = True
        else:
            positional.append(tok)
        i += 1
    if "model" not in args and "model_path" not in args:
        served = [p for p in positional
                  if "/" in p or p not in ("serve", "vllm", "python", "python3", "trtllm-serve")]
        if "serve" in positional:
            after = positional[positional.index("serve") + 1:]
            served = after or served
        if served:
            args["model"] = served[0]
    return args


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _arg(args: Mapping[str, Any], *names: str) -> Any:
    for name in names:
        if name in args and args[name] is not None:
            return args[name]
    return None


def _as_int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return None


def _as_bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def attention_dp_from_args(args: Mapping[str, Any], engine: str | None = None) -> int | None:
    """Attention-DP size from server args.

    ``--attn-dp-size N`` says it outright. ``--enable-dp-attention`` (SGLang, ATOM) makes the
    ``--dp``/``--dp-size`` groups attention-DP; without it SGLang's ``--dp`` makes replicas
    (size 1). vLLM's ``--data-parallel-size N`` is attention-DP when experts are parallel
    (``--enable-expert-parallel``); for a dense model it is replicas, which the args alone do
    not tell, so it stays unknown. No DP flag at all is size 1.
    """
    if not args:
        return None
    explicit = _as_int(_arg(args, "attn_dp_size", "attention_dp_size"))
    if explicit:
        return explicit
    dp = _as_int(_arg(args, "data_parallel_size", "dp_size", "dp"))
    if _as_bool(_arg(args, "enable_dp_attention") or False):
        return dp if dp else None
    if not dp or dp == 1:
        return 1
    if normalise_engine(engine) == "vllm" or "data_parallel_size" in args:
        return dp if _as_bool(_arg(args, "enable_expert_parallel") or False) else None
    return 1


def regime_from_server_args(args: Mapping[str, Any], engine: str | None = None) -> dict[str, Any]:
    """The regime axes a server's arguments state (only those they state).

    ``tp`` is the GPUs of one instance (as in a scenario). SGLang's ``--tp`` already counts
    them all; vLLM and ATOM multiply ``--tensor-parallel-size`` by an attention-DP
    ``--data-parallel-size``. DP that is not attention-DP makes replicas.
    """
    out: dict[str, Any] = {}
    eng = normalise_engine(engine)
    tp = _as_int(_arg(args, "tensor_parallel_size", "tp_size", "tp"))
    if tp is None and ("model" in args or "model_path" in args):
        tp = 1  # a whole launch command without a TP flag runs the engines' default, TP1
    dp = _as_int(_arg(args, "data_parallel_size", "dp_size", "dp")) or 1
    dpa = attention_dp_from_args(args, eng)
    if dpa is not None:
        out["dp_attention"] = dpa
    sglang_style = eng in ("sglang", "mori-sglang") or (eng is None and "tp_size" in args)
    if tp:
        if sglang_style or dp == 1:
            out["tp"] = tp
            replicas = 1 if (dpa or 1) > 1 else dp
        elif dpa is not None and dpa > 1:
            out["tp"] = tp * dp
            replicas = 1
        elif dpa == 1:
            out["tp"] = tp
            replicas = dp
        else:
            replicas = None
        out["num_gpus"] = out["tp"] * replicas if replicas else tp * dp
        if replicas and replicas > 1:
            out["replicas"] = replicas
    ep = _as_int(_arg(args, "expert_parallel_size", "ep_size", "ep"))
    if ep:
        out["ep"] = ep
    elif _as_bool(_arg(args, "enable_expert_parallel") or False) and tp:
        out["ep"] = tp if sglang_style else tp * dp
    dcp = _as_int(_arg(args, "decode_context_parallel_size", "dcp_size", "dcp"))
    if dcp:
        out["dcp"] = dcp
    backend = _arg(args, "decode_attention_backend", "attention_backend")
    if isinstance(backend, str) and backend:
        out["attention_backend"] = backend
    kv = kv_dtype(_arg(args, "kv_cache_dtype"))
    if kv:
        out["kv_dtype"] = kv
    quant = _arg(args, "quantization")
    if isinstance(quant, str) and weight_dtype(quant):
        out["weight_dtype"] = weight_dtype(quant)
    out.update(_spec_from_args(args))
    page = _as_int(_arg(args, "page_size", "block_size"))
    if page:
        out["page_size"] = page
    seqs = _as_int(_arg(args, "max_num_seqs", "max_running_requests"))
    if seqs:
        out["max_num_seqs"] = seqs
    recv = _as_int(_arg(args, "scheduler_recv_interval"))
    if recv:
        out["scheduler_recv_interval"] = recv
    model = _arg(args, "model", "model_path")
    if isinstance(model, str):
        out["model"] = model_name(model)
    return out


def _spec_from_args(args: Mapping[str, Any]) -> dict[str, Any]:
    """Speculative method and draft depth; no speculative flag at all means none (every engine
    decodes without speculation by default)."""
    config = args.get("speculative_config")
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except ValueError:
            config = None
    if isinstance(config, Mapping):
        out = {"spec_method": spec_method(config.get("method"),
                                          has_draft_model=bool(config.get("model")))}
        tokens = _as_int(config.get("num_speculative_tokens") or config.get("num_spec_tokens"))
        if tokens:
            out["draft_tokens"] = tokens
        return out
    algo = _arg(args, "speculative_algorithm", "method")
    if algo is None:
        return {"spec_method": "none"}
    draft_model = _arg(args, "speculative_draft_model_path", "speculative_model")
    out = {"spec_method": spec_method(algo, has_draft_model=bool(draft_model))}
    steps = _as_int(_arg(args, "speculative_num_steps", "num_speculative_tokens"))
    width = _as_int(_arg(args, "speculative_num_draft_tokens"))
    if steps:
        out["draft_tokens"] = steps
    elif width:
        out["draft_tokens"] = width - 1
    return out
