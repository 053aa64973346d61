"""Measured AgentX ladders (``agentx_dev_ladders.csv``: one row per concurrency rung of an
agentic-coding run, whole-server aggregates) -> decode anchors.

An agentic rung is not a closed loop of random prompts. Its lanes think between turns, and
most of each prompt is cached, so two of its figures are read differently:

- **The decode step** is the mean ITL, at the batch that decoded at once: Little's law on
  the output stream, output tok/s x mean ITL (a lane is decoding for that share of the run).
  At four lanes MiniMax-M2.5 FP8 on 2 x MI355X decoded 1.4 sequences at a time, not four.
  The context is the mean prompt per request (input tok/s x duration / requests) plus half
  the mean output.
- **The TTFT is not imported.** It is the prefill of an uncached tail on top of a cached
  context, plus the wait for a slot, and the oracle's TTFT model reads a lone random prompt.
  The replay prices the prefill itself.

The KV dtype the rows do not record is taken from the deployment's launch recipe where one is
shipped (``config.recipes``: MiniMax-M2.5 and GLM-5.1 on MI355X run an fp8 cache): the
analytic step an anchor is read against streams the KV at that width, and a prior reads the
ladder's steps at its own KV, not the target's.

Rungs past a ladder's KV cliff are read as **mixed steps**. There every prompt is computed,
the server is saturated (TTFTs of minutes), and each step carries a share of prompt chunks
beside its decodes: ``Workload.prefill_per_step`` = input tok/s x miss rate x mean ITL
uncached tokens per step. The mean ITL is then that mixed step, and it calibrates the
prefill, not the decode (``CalibratedOracle``: what the step took beyond its decodes, priced
by the ladder's decode anchors, over the analytic prefill of those tokens). A ladder without a
hit rate gives no miss rate, so its rungs past the cliff are left out. The cliff is the first
rung where the server's hit rate falls from at least 0.5 to below 0.2 (on a ladder without a
hit rate, where the mean TTFT grows more than 5x): the same rule ``validate agentx`` judges
the cliff by. ``below_cliff=True`` keeps only the rungs before it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from inferasim.anchors import normalise as nz
from inferasim.anchors.importers._common import (
    apply_hints,
    check_hints,
    need_file,
    num,
    per_gpu,
    read_csv_whole,
    regime_from_model_id,
    slug,
    truthy,
    unique_ids,
)
from inferasim.anchors.record import AnchorRecord, Measurements, Provenance, Regime, Workload
from inferasim.config.catalog import native_four_bit
from inferasim.config.errors import ConfigError
from inferasim.config.recipes import recipe_kv_dtype

TOOL = "AIPerf InferenceX AgentX scenario (agentic-coding lanes over the AgentX corpus)"
COLUMNS = ("model", "hw", "framework", "image", "precision", "tp", "conc", "mean_ttft",
           "mean_itl", "output_tput_tps", "input_tput_tps", "num_requests_successful",
           "duration_seconds")
#: The cliff: a hit rate from at least CLIFF_ABOVE to below CLIFF_BELOW in one rung, or
#: (no hit rate recorded) a mean TTFT more than CLIFF_TTFT_GROWTH times the rung before.
CLIFF_ABOVE, CLIFF_BELOW, CLIFF_TTFT_GROWTH = 0.5, 0.2, 5.0


def cliff_between(rungs: Sequence[Mapping[str, float]]) -> tuple[int, int] | None:
    """The two rungs either side of a ladder's cliff: dicts with ``concurrency``,
    ``prefix_hit_rate`` (NaN where unrecorded) and ``ttft_mean_s``."""
    ordered = sorted(rungs, key=lambda r: r["concurrency"])
    by_ttft = any(math.isnan(r["prefix_hit_rate"]) for r in ordered)
    for a, b in zip(ordered, ordered[1:], strict=False):
        if by_ttft:
            if b["ttft_mean_s"] > CLIFF_TTFT_GROWTH * a["ttft_mean_s"]:
                return a["concurrency"], b["concurrency"]
        elif a["prefix_hit_rate"] >= CLIFF_ABOVE and b["prefix_hit_rate"] < CLIFF_BELOW:
            return a["concurrency"], b["concurrency"]
    return None


def weight_dtype(precision: str, hw: str, where: str, native: str | None = None) -> str:
    """The ladder's precision column as a weight dtype: fp4 is the model's own 4-bit format
    where its checkpoint ships one (``native``: gpt-oss's MXFP4 experts, on every part), else
    MXFP4 on AMD parts and NVFP4 on NVIDIA's."""
    p = precision.strip().lower()
    if p == "fp4":
        if native in ("mxfp4", "nvfp4"):
            return native
        return "mxfp4" if hw.lower().startswith("mi") else "nvfp4"
    if p in ("fp8", "mxfp4", "nvfp4", "bf16", "int4"):
        return p
    raise ConfigError(f"precision {precision!r} is not one of fp4, fp8, mxfp4, nvfp4, int4, "
                      "bf16", file=where, key="precision")


def ladder_engine(row) -> str:
    """The engine a ladder row ran: its framework column in the anchors' spelling
    (``trtllm`` is ``trt``), else the engine its image names."""
    framework = row.get("framework")
    if framework is None or (isinstance(framework, float) and math.isnan(framework)) \
            or not str(framework).strip():
        return nz.engine_from_image(str(row.get("image") or "")) or ""
    return nz.normalise_engine(str(framework)) or ""


def gpu_part(hw: str) -> str:
    """The part a ladder's ``hw`` names: a runner's name ("b200-nb", "cluster:mi355x-amds")
    read as the anchors read it, else the name as written."""
    return nz.normalise_gpu(hw) or hw.strip().lower()


def import_agentx_ladder(path: str | Path, hints: Mapping[str, Any] | None = None, *,
                         below_cliff: bool = False) -> list[AnchorRecord]:
    path = need_file(path)
    file = str(path)
    hints = check_hints(hints)
    frame = read_csv_whole(path)
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise ConfigError(f"missing columns {missing}; an AgentX ladder row needs "
                          f"{list(COLUMNS)}", file=file)
    ladders: dict[tuple, list[tuple[int, Any]]] = {}
    for i, row in frame.iterrows():
        key = tuple(str(row.get(c)) for c in ("model", "hw", "framework", "image", "precision",
                                             "tp", "ep", "dp_attention"))
        ladders.setdefault(key, []).append((i, row))
    records = []
    # the recipe's KV dtype, unless the user's hint names one
    kv_cache: dict[tuple, tuple[str, Path] | None] | None = \
        None if "kv_dtype" in hints else {}
    for rows in ladders.values():
        cut = cliff_between([{"concurrency": int(num(r["conc"]) or 0),
                              "prefix_hit_rate": _or_nan(r.get("server_gpu_cache_hit_rate")),
                              "ttft_mean_s": num(r["mean_ttft"]) or 0.0} for _, r in rows])
        for i, row in rows:
            past = cut is not None and int(num(row["conc"]) or 0) > cut[0]
            hit = num(row.get("server_gpu_cache_hit_rate"))
            if past and (below_cliff or hit is None):
                continue
            records.append(apply_hints(_record(row, i, file, mixed=past, kv_cache=kv_cache),
                                       hints, file=file))
    return unique_ids(records)


def _or_nan(value: Any) -> float:
    out = num(value)
    return math.nan if out is None else out


def _recipe_kv(regime: Regime, cache: dict) -> tuple[str, Path] | None:
    key = (regime.engine, regime.gpu, regime.model, regime.weight_dtype, regime.tp)
    if key not in cache:
        cache[key] = recipe_kv_dtype(*key) if all(k is not None for k in key) else None
    return cache[key]


def _record(row, i: int, file: str, *, mixed: bool, kv_cache: dict | None) -> AnchorRecord:
    where = f"{file} (row {i + 2})"

    def need(key: str) -> float:
        value = num(row[key])
        if value is None or value <= 0:
            raise ConfigError(f"expected a positive number, got {row[key]!r}", file=where,
                              key=key)
        return value

    conc, tp = int(need("conc")), int(need("tp"))
    itl, out_tps, in_tps = need("mean_itl"), need("output_tput_tps"), need("input_tput_tps")
    requests, duration = need("num_requests_successful"), need("duration_seconds")
    hw = gpu_part(str(row["hw"]))
    model = regime_from_model_id(str(row["model"]))
    ep = int(num(row.get("ep")) or 1)
    dpa = tp if truthy(row.get("dp_attention")) else 1
    regime = Regime(model=model["model"], engine=ladder_engine(row),
                    gpu=hw, weight_dtype=weight_dtype(str(row["precision"]), hw, where,
                                                      native_four_bit(model["model"])),
                    spec_method="none", tp=tp, ep=ep, dp_attention=dpa, max_num_seqs=conc,
                    num_gpus=tp)
    recipe = _recipe_kv(regime, kv_cache) if kv_cache is not None else None
    if recipe is not None:
        regime = attrs.evolve(regime, kv_dtype=recipe[0])
    isl = max(1, int(round(in_tps * duration / requests)))
    osl = max(1, int(round(out_tps * duration / requests)))
    hit = num(row.get("server_gpu_cache_hit_rate"))
    # Every step carries the uncached prompt tokens beside its decodes, below the cliff too:
    # there a few dozen a step on average, each request's uncached tail on a cached prompt of
    # ~80k (docs/anchors.md, "The tails in the decode steps"). The caller passes ``mixed``
    # only for a rung that records its hit rate.
    prefill = in_tps * (1.0 - hit) * itl if hit is not None else None
    prefill = prefill if prefill and prefill > 0 else None
    if mixed:
        notes = [f"an agentic rung past its KV cliff (server hit rate {hit:.3f}): a mixed "
                 f"step of {out_tps * itl:.2f} decodes and {prefill or 0:.0f} uncached prompt "
                 "tokens on average; it calibrates the prefill; TTFT not imported"]
    else:
        notes = ["an agentic rung: decode step read at the batch that decoded at once "
                 f"(output tok/s x mean ITL = {out_tps * itl:.2f} of {conc} lanes)"
                 + (f" beside {prefill:.0f} uncached prompt tokens a step" if prefill else "")
                 + "; ISL is the mean prompt per request, most of it cached"
                 + (f" (server hit rate {hit:.3f})" if hit is not None else "")
                 + "; TTFT not imported (an uncached tail on a cached context)"]
    if recipe is not None:
        notes.append(f"KV dtype {recipe[0]} from its launch recipe ({recipe[1].name}); the "
                     "rows do not record it")
    image = str(row["image"]).strip()
    return AnchorRecord(
        id=f"agentx-{slug(str(row['model']).rsplit('/', 1)[-1])}-{regime.engine}-{hw}-tp{tp}"
           f"-c{conc}",
        provenance=Provenance(source="agentx-ladder", file=file, image=image or None,
                              tool=TOOL, notes=tuple(notes)),
        regime=regime,
        workload=Workload(isl=isl, osl=osl, concurrency=conc, num_requests=int(requests),
                          dataset="agentx", decode_batch=out_tps * itl,
                          prefill_per_step=prefill, prefix_hit_rate=hit),
        measurements=Measurements(itl_mean_s=itl, tput_per_gpu_output=per_gpu(out_tps, tp),
                                  tput_per_gpu_input=per_gpu(in_tps, tp),
                                  completed=int(requests)),
    )
