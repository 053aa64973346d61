"""``inferasim price``: what attention costs at a few contexts, term by term, against dense.

    inferasim price glm-5.2 --gpu mi355x --context 131072,373760
    inferasim price deepseek-v4-pro --context 8k,128k,1m --phase decode --json
    inferasim price scenarios/my.yaml --phase prefill

For each context it shows the dense charge (the same model attending every context token on
every layer), the named terms of the attention actually run (dense, selection, indexing,
window, pool), their total and the total's ratio to dense. Times are GPU seconds on one
rank for one sequence: per decode step (``width`` verified tokens) for the decode phases, per
prefill token for prefill (the chunk that ends at the context, priced at the context already
resident). docs/attention.md gives the model.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
import numpy as np

from inferasim.arch.attention import AttentionKind, attention_for
from inferasim.arch.gpu import GpuSpec
from inferasim.arch.sparse_attention import (
    decode_attention_cost,
    dense_prefill_cost,
    indexer_dtype,
)
from inferasim.arch.spec import ModelSpec
from inferasim.config.catalog import load_entry
from inferasim.config.knobs import Knobs
from inferasim.config.typed import build_spec
from inferasim.cost.attention_time import (
    PHASES,
    attention_math_dtype,
    kind_attention_seconds,
    kind_selection_padding,
)

TERMS = ("dense", "selection", "indexing", "window", "pool", "linear")
DEFAULT_CONTEXTS = "8192,131072,373760"
DEFAULT_GPU = "mi355x"
_SUFFIX = {"k": 1024, "m": 1024 * 1024}


def _parse_contexts(ctx: click.Context, param: click.Parameter, value: str) -> list[int]:
    out = []
    for raw in value.split(","):
        text = raw.strip().lower()
        if not text:
            continue
        mult = 1
        if text[-1] in _SUFFIX:
            mult, text = _SUFFIX[text[-1]], text[:-1]
        try:
            n = int(text) * mult
        except ValueError:
            raise click.BadParameter(f"{raw.strip()!r} is not a token count (e.g. 131072 or 128k)",
                                     ctx=ctx, param=param) from None
        if n < 1:
            raise click.BadParameter(f"context must be at least 1 token, got {raw.strip()!r}",
                                     ctx=ctx, param=param)
        out.append(n)
    if not out:
        raise click.BadParameter("give at least one context", ctx=ctx, param=param)
    return out


def _catalog_spec(kind: str, cls: type, name: str, key: str):
    data, origins, _ = load_entry(kind, name, key=key, origin_file="command line")
    prefix = kind[:-1]
    return build_spec(cls, data, prefix=prefix, default_file=f"catalog {kind}/{name}.yaml",
                      origins={f"{prefix}.{k}": v for k, v in origins.items()})


def _is_scenario(target: str) -> bool:
    # a .json file is a checkpoint's config.json: a model (docs/models.md)
    return target.endswith((".yaml", ".yml")) or (
        Path(target).is_file() and not target.lower().endswith(".json"))


def _default_kv_dtype(model: ModelSpec) -> str:
    # DSA and DeepSeek-V4 declare an fp8 cache layout: their engines serve them with fp8 KV.
    return "fp8" if "fp8" in model.attention.kv_entry_bytes else "bf16"


def _resolve(target: str, gpu_name: str | None, kv_dtype: str | None, width: int | None,
             phase: str | None) -> dict:
    """Model, GPU and deployment facts from a catalog name or a scenario file."""
    if _is_scenario(target):
        from inferasim.config.loader import load_scenario

        sc = load_scenario(target)
        model = sc.model
        gpu = _catalog_spec("gpus", GpuSpec, gpu_name, "--gpu") if gpu_name else sc.gpu
        kind_name = model.attention.kind
        replicated = (kind_name.startswith("mla") or kind_name == "dsv4_compressed") \
            and not sc.engine.mla_latent_sharded
        dpa = sc.parallel.dp_attention > 1
        return {"model": model, "gpu": gpu, "kv_dtype": kv_dtype or sc.kv_dtype,
                "width": width or sc.speculative.verify_width,
                "phase": phase or ("dpa-decode" if dpa else "decode"),
                "attn_tp": sc.parallel.attn_tp,
                "kv_divisor": 1.0 if replicated else float(sc.parallel.attn_tp),
                "dpa_decode_scale": sc.engine.dpa_decode_attention_scale,
                "source": f"scenario {sc.name} ({target})"}
    model = _catalog_spec("models", ModelSpec, target, "MODEL")
    gpu = _catalog_spec("gpus", GpuSpec, gpu_name or DEFAULT_GPU, "--gpu")
    return {"model": model, "gpu": gpu, "kv_dtype": kv_dtype or _default_kv_dtype(model),
            "width": width or 1, "phase": phase or default_phase(model), "attn_tp": 1,
            "kv_divisor": 1.0, "dpa_decode_scale": None, "source": f"catalog model {target}",
            "gpu_assumed": gpu_name is None}


def default_phase(model: ModelSpec) -> str:
    """A MoE model is served with attention-DP ranks (its decode phase is dpa-decode); a
    dense model with tensor parallelism (decode)."""
    return "dpa-decode" if model.ffn.is_moe else "decode"


def _within_window(contexts: list[int], model: ModelSpec) -> tuple[list[int], list[int]]:
    """The contexts the model can hold, and the default ones it cannot (left out). A context
    the user asked for beyond the model's window is an error: no request reaches it."""
    beyond = [n for n in contexts if n > model.max_context]
    if not beyond:
        return contexts, []
    ctx = click.get_current_context()
    if ctx.get_parameter_source("contexts") is not click.core.ParameterSource.DEFAULT:
        raise click.BadParameter(
            f"{', '.join(map(str, beyond))} beyond {model.name}'s context window of "
            f"{model.max_context} tokens", ctx=ctx, param_hint="'--context'")
    kept = [n for n in contexts if n <= model.max_context]
    return kept or [model.max_context], beyond


def _floats(d: dict[str, np.ndarray], i: int) -> dict[str, float]:
    return {k: float(np.asarray(v)[i]) for k, v in d.items()}


def price_table(kind: AttentionKind, gpu: GpuSpec, contexts: list[int], *, phase: str,
                kv_dtype: str, width: int = 1, chunk: int = 8192, attn_tp: int = 1,
                kv_divisor: float = 1.0, dense: bool = False,
                indexer_cost_scale: float | None = None,
                dpa_decode_scale: float | None = None) -> list[dict]:
    """One row per context: the dense charge, the terms run, total and ratio to dense.
    ``dpa_decode_scale`` is the scenario's ``engine.dpa_decode_attention_scale``, applied to
    the dpa-decode phase only, as the oracle does."""
    ctx = np.asarray(contexts, dtype=np.float64)
    if phase == "prefill":
        c = np.minimum(ctx, float(chunk))
        resident = ctx - c
        cost = dense_prefill_cost(kind, c, resident, kv_dtype) if dense \
            else kind.prefill(c, resident, kv_dtype)
        ref = dense_prefill_cost(kind, c, resident, kv_dtype)
        per = c  # seconds per prefill token
    else:
        cost = decode_attention_cost(kind, ctx, width, kv_dtype, dense=dense,
                                     scale=dpa_decode_scale if phase == "dpa-decode" else None)
        ref = kind.dense_reference(ctx, width, kv_dtype)
        per = np.ones_like(ctx)  # seconds per decode step of one sequence
    kw = dict(phase=phase, attn_tp=attn_tp, kv_bytes_divisor=kv_divisor, kv_dtype=kv_dtype,
              indexer_cost_scale=indexer_cost_scale)
    secs = kind_attention_seconds(kind, cost, gpu, **kw)
    ref_secs = kind_attention_seconds(kind, ref, gpu, **kw)
    rows = []
    for i, n in enumerate(contexts):
        terms = {k: float(v[i] / per[i]) for k, v in secs.items()}
        dense_s = float(sum(v[i] for v in ref_secs.values()) / per[i])
        total = sum(terms.values())
        row = {"context": int(n), "dense_reference_s": dense_s, "terms_s": terms,
               "total_s": total, "ratio_to_dense": total / dense_s if dense_s else float("nan"),
               "flops": _floats(cost.flops, i), "bytes": _floats(cost.bytes, i),
               "dense_reference_flops": float(np.asarray(ref.total_flops())[i])}
        if phase == "prefill":
            row["chunk"] = int(np.asarray(c)[i])
            row["resident"] = int(np.asarray(resident)[i])
        rows.append(row)
    return rows


def _unit(phase: str, width: int, chunk: int) -> str:
    if phase == "prefill":
        return (f"GPU seconds per prefill token (the chunk of up to {chunk} tokens ending at "
                "the context, priced at the context already resident; compute-bound)")
    bound = "compute-bound, attention-DP rank" if phase == "dpa-decode" else "roofline, TP rank"
    return (f"GPU seconds per decode step of one sequence ({width} verified token"
            f"{'s' if width != 1 else ''}; {bound})")


def _fmt_us(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e6:.1f}"


@click.command("price")
@click.argument("target", metavar="MODEL|SCENARIO")
@click.option("--context", "contexts", default=DEFAULT_CONTEXTS, show_default=True,
              callback=_parse_contexts,
              help="Comma-separated contexts in tokens; k = 1024, m = 1024^2 (128k = 131072).")
@click.option("--phase", type=click.Choice(PHASES), default=None,
              help="Default: dpa-decode for a MoE model and a scenario with attention-DP, "
                   "decode for a dense model and a TP scenario.")
@click.option("--gpu", "gpu_name", default=None,
              help=f"GPU catalog name (default: the scenario's, or {DEFAULT_GPU} for a model).")
@click.option("--kv-dtype", type=click.Choice(["bf16", "fp8"]), default=None,
              help="Default: the scenario's; for a model fp8 when it declares an fp8 cache "
                   "layout (DSA, DeepSeek-V4), else bf16.")
@click.option("--width", type=click.IntRange(min=1), default=None,
              help="Tokens verified per decode step (1 + draft tokens).")
@click.option("--chunk", type=click.IntRange(min=1), default=8192, show_default=True,
              help="Prefill chunk size.")
@click.option("--indexer-cost-scale", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Override the GPU's sparse_indexer_cost_scale (1 = fused kernel).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def price(target, contexts, phase, gpu_name, kv_dtype, width, chunk, indexer_cost_scale,
          as_json):
    """Attention cost at each context: the terms run against the dense charge."""
    r = _resolve(target, gpu_name, kv_dtype, width, phase)
    model, gpu, phase = r["model"], r["gpu"], r["phase"]
    contexts, dropped = _within_window(contexts, model)
    kind = attention_for(model)
    dense = phase == "dpa-decode" and Knobs.from_env().dpa_decode_dense
    scale = gpu.sparse_indexer_cost_scale if indexer_cost_scale is None else indexer_cost_scale
    rows = price_table(kind, gpu, contexts, phase=phase, kv_dtype=r["kv_dtype"],
                       width=r["width"], chunk=chunk, attn_tp=r["attn_tp"],
                       kv_divisor=r["kv_divisor"], dense=dense, indexer_cost_scale=scale,
                       dpa_decode_scale=r["dpa_decode_scale"])
    math = attention_math_dtype(gpu, phase=phase, kv_dtype=r["kv_dtype"],
                                attention_kind=model.attention.kind)
    head = {
        "model": model.name, "attention_kind": model.attention.kind, "source": r["source"],
        "gpu": gpu.name, "isa": gpu.isa, "phase": phase, "kv_dtype": r["kv_dtype"],
        "attention_math_dtype": math, "indexer_dtype": indexer_dtype(kind),
        "indexer_cost_scale": scale, "width": r["width"], "attn_tp": r["attn_tp"],
        "dpa_decode_dense": dense, "unit": _unit(phase, r["width"], chunk),
        "ratio": "total attention time (indexing included) / dense attention time",
        "max_context": model.max_context, "gpu_assumed": r.get("gpu_assumed", False),
        "selection_padding": kind_selection_padding(kind, gpu, attn_tp=r["attn_tp"],
                                                    kv_dtype=r["kv_dtype"]),
    }
    if as_json:
        click.echo(json.dumps({**head, "contexts": rows}, indent=2))
        return
    click.echo(f"{model.name} ({model.attention.kind}) on {gpu.name} ({gpu.isa}), phase {phase}, "
               f"KV {r['kv_dtype']}, attention math {math}, indexer {head['indexer_dtype']} "
               f"x cost scale {scale:g}, attn_tp {r['attn_tp']}")
    if head["gpu_assumed"]:
        # --json says it in gpu_assumed
        click.echo(f"note: no --gpu given; priced on {gpu.name}, the default for a catalog "
                   "model")
    if head["selection_padding"] != 1.0:
        click.echo(f"sparse selection x{head['selection_padding']:g}: {gpu.name}'s sparse-MLA "
                   f"kernel pads a rank's {model.num_attention_heads / r['attn_tp']:g} query "
                   "heads to its multiple (docs/attention.md)")
    if dense:
        click.echo("INFERASIM_DPA_DECODE_DENSE=1: attention-DP decode charged dense")
    click.echo(f"microseconds = {head['unit']}; ratio = total / dense")
    if dropped:
        click.echo(f"default contexts beyond {model.name}'s window of {model.max_context} "
                   f"tokens left out: {', '.join(map(str, dropped))}")
    cols = ("context", "dense-ref", *TERMS, "total", "ratio")
    widths = (9, 11, *(10,) * len(TERMS), 11, 7)
    click.echo("".join(c.rjust(w) for c, w in zip(cols, widths, strict=True)))
    for row in rows:
        t = row["terms_s"]
        cells = [str(row["context"]), _fmt_us(row["dense_reference_s"]),
                 *(_fmt_us(t.get(k)) for k in TERMS), _fmt_us(row["total_s"]),
                 f"{row['ratio_to_dense']:.4f}"]
        click.echo("".join(c.rjust(w) for c, w in zip(cells, widths, strict=True)))
