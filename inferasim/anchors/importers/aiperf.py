"""AIPerf ``profile_export_aiperf.json`` -> one anchor.

Two schemas: AIPerf >= 0.8 puts each metric at the top level (``time_to_first_token:
{unit, avg, p50, p90, ...}``); older releases nest them under ``records`` by tag (``ttft``).
AIPerf's ``inter_token_latency`` is per request (latency - TTFT) / (tokens - 1), i.e. TPOT;
``inter_chunk_latency`` is the gap between streamed chunks, i.e. ITL. ISL and OSL are the means
of the run (for an agentic trace they summarise a wide distribution). The endpoint's model name
gives the model and, when its name declares one, the weight dtype; engine, GPU and parallelism
come from hints or a launch command.

An **agentic** export (AIPerf's ``inferencex-agentx-mvp`` scenario, or any trace replay whose
lanes wait between turns: ``use_end_to_start_delays``) is read as an AgentX ladder rung is
(``agentx_ladder.py``): the decode step is the mean ITL at the batch that decoded at once
(AIPerf's ``effective_decode_concurrency``, else output tok/s x mean ITL), and neither TTFT
nor TPOT is imported. Its TTFT is an uncached tail on a cached context plus the wait for a
slot, which the oracle's TTFT model (a lone random prompt) would misread as time outside the
engine; its TPOT counts the stalls behind other lanes' prompts. Where AIPerf's scrape of the
server's metrics lies beside the export (``server_metrics_export.csv``), its prefix counters
give the uncached prompt tokens each step carried and the hit rate, as a ladder rung's do
(``aiperf_server_metrics.py``; docs/anchors.md, "The tails in the decode steps").
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from inferasim.anchors.importers._common import (
    apply_hints,
    check_hints,
    integer,
    iso_date,
    num,
    read_json,
    regime_from_model_id,
    slug,
)
from inferasim.anchors.importers.aiperf_server_metrics import read_server_prefix, sibling
from inferasim.anchors.importers.vllm_bench import with_per_gpu
from inferasim.anchors.record import AnchorRecord, Measurements, Provenance, Regime, Workload
from inferasim.config.errors import ConfigError

_UNIT_SCALE = {"ms": 1e-3, "sec": 1.0, "s": 1.0, "ns": 1e-9, "us": 1e-6}
#: Metric -> tags it goes by (new schema first).
_NAMES = {
    "ttft": ("time_to_first_token", "ttft"),
    "tpot": ("inter_token_latency",),
    "itl": ("inter_chunk_latency",),
    "e2e": ("request_latency",),
    "isl": ("input_sequence_length",),
    "osl": ("output_sequence_length",),
    "out_tps": ("output_token_throughput",),
    "in_tps": ("input_token_throughput",),
    "total_tps": ("total_token_throughput",),
    "per_user": ("output_token_throughput_per_user",),
    "requests": ("request_count",),
    "decoding": ("effective_decode_concurrency",),
}
#: AIPerf scenarios that replay agentic sessions (lanes with think time between turns).
AGENTIC_SCENARIOS = ("inferencex-agentx-mvp",)


def _metrics(data: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    nested = data.get("records")
    source = nested if isinstance(nested, Mapping) else data
    return {k: v for k, v in source.items() if isinstance(v, Mapping) and "avg" in v}


def _stat(metrics: Mapping[str, Mapping[str, Any]], name: str, stat: str = "avg",
          seconds: bool = False) -> float | None:
    for tag in _NAMES[name]:
        entry = metrics.get(tag)
        if entry is None:
            continue
        value = num(entry.get(stat))
        if value is None:
            return None
        if seconds:
            scale = _UNIT_SCALE.get(str(entry.get("unit", "ms")).lower())
            if scale is None:
                return None
            value *= scale
        return value
    return None


def import_aiperf(path: str | Path, *, hints: Mapping[str, Any] | None = None,
                  server_args: Mapping[str, Any] | None = None) -> list[AnchorRecord]:
    """One anchor from an AIPerf profile export JSON."""
    data = read_json(path, "the profile_export_aiperf.json AIPerf writes")
    file = str(path)
    if not isinstance(data, Mapping):
        raise ConfigError("expected a JSON object (an AIPerf profile export)", file=file)
    metrics = _metrics(data)
    isl, osl = _stat(metrics, "isl"), _stat(metrics, "osl")
    if not metrics or isl is None or osl is None:
        raise ConfigError("no input/output_sequence_length metrics: not an AIPerf profile export",
                          file=file)
    config = data.get("input_config") if isinstance(data.get("input_config"), Mapping) else {}
    endpoint = config.get("endpoint", {}) if isinstance(config.get("endpoint"), Mapping) else {}
    names = endpoint.get("model_names") or []
    model_id = names[0] if isinstance(names, list) and names else None
    loadgen = config.get("loadgen", {}) if isinstance(config.get("loadgen"), Mapping) else {}
    inputs = config.get("input", {}) if isinstance(config.get("input"), Mapping) else {}
    dataset = inputs.get("public_dataset") or inputs.get("detected_loader")
    rate = num(loadgen.get("request_rate"))
    out_tps, in_tps = _stat(metrics, "out_tps"), _stat(metrics, "in_tps")
    total_tps = _stat(metrics, "total_tps")
    if total_tps is None and out_tps is not None and in_tps is not None:
        total_tps = out_tps + in_tps
    m = Measurements(
        ttft_mean_s=_stat(metrics, "ttft", "avg", True),
        ttft_median_s=_stat(metrics, "ttft", "p50", True),
        ttft_p90_s=_stat(metrics, "ttft", "p90", True),
        tpot_mean_s=_stat(metrics, "tpot", "avg", True),
        tpot_median_s=_stat(metrics, "tpot", "p50", True),
        tpot_std_s=_stat(metrics, "tpot", "std", True),
        itl_mean_s=_stat(metrics, "itl", "avg", True),
        itl_median_s=_stat(metrics, "itl", "p50", True),
        e2e_mean_s=_stat(metrics, "e2e", "avg", True),
        e2e_median_s=_stat(metrics, "e2e", "p50", True),
        server_tput_total=total_tps, server_tput_output=out_tps,
        interactivity=_stat(metrics, "per_user"),
        completed=integer(_stat(metrics, "requests")),
    )
    workload = Workload(isl=int(round(isl)), osl=int(round(osl)),
                        concurrency=integer(loadgen.get("concurrency")),
                        request_rate=rate if rate is not None and rate > 0 else None,
                        num_requests=integer(_stat(metrics, "requests")),
                        dataset=str(dataset) if dataset else None)
    if _agentic(config, inputs):
        m, workload, notes = _agentic_reading(metrics, workload, out_tps, m, file)
        metrics_file = sibling(file)
        prefix = read_server_prefix(metrics_file) if metrics_file is not None else None
        if prefix is not None:
            # the uncached tails each step carried beside its decodes (agentx_ladder.py)
            per_step = prefix.computed_tok_s * m.itl_mean_s
            workload = attrs.evolve(workload, prefix_hit_rate=prefix.hit_rate,
                                    prefill_per_step=per_step if per_step > 0 else None)
            notes = (*notes, f"its server's prefix cache hit {prefix.hit_rate:.3f} of the "
                     f"prompt tokens and computed {prefix.computed_tok_s:.0f} a second: "
                     f"{per_step:.0f} uncached prompt tokens a step beside its decodes "
                     f"({metrics_file.name})")
    else:
        notes = ()
    version = data.get("aiperf_version")
    prov = Provenance(source="aiperf", file=Path(file).name,
                      date=iso_date(data.get("start_time")),
                      tool=f"aiperf {version}" if version else "aiperf", notes=notes)
    regime = Regime(**{k: v for k, v in regime_from_model_id(model_id).items() if v is not None})
    record = AnchorRecord(id=f"aiperf-{slug(Path(file).stem)}", provenance=prov, regime=regime,
                          workload=workload, measurements=m, server_args=dict(server_args or {}))
    return [with_per_gpu(apply_hints(record, check_hints(hints), file=file))]


def _agentic(config: Mapping[str, Any], inputs: Mapping[str, Any]) -> bool:
    return config.get("scenario") in AGENTIC_SCENARIOS or inputs.get("use_end_to_start_delays") is True


def _agentic_reading(metrics, workload: Workload, out_tps: float | None, m: Measurements,
                     file: str) -> tuple[Measurements, Workload, tuple[str, ...]]:
    """The decode step of an agentic run at the batch that decoded at once; no TTFT, no
    TPOT (module docstring)."""
    itl = _stat(metrics, "itl", "avg", True)
    if itl is None or itl <= 0 or out_tps is None or out_tps <= 0:
        raise ConfigError("an agentic AIPerf export needs inter_chunk_latency and "
                          "output_token_throughput to read its decode step", file=file)
    batch = _stat(metrics, "decoding")
    basis = "AIPerf's effective_decode_concurrency"
    if batch is None or batch <= 0:
        batch, basis = out_tps * itl, "output tok/s x mean ITL"
    # the output stream only, as a ladder rung: the prompt tokens of an agentic run are
    # mostly cached, so its total throughput says nothing the decode step does not
    reading = Measurements(itl_mean_s=itl, server_tput_output=out_tps, completed=m.completed)
    note = (f"an agentic run: decode step read at the batch that decoded at once ({basis} = "
            f"{batch:.2f} of {workload.concurrency} lanes); ISL is the mean prompt per "
            "request, most of it cached; TTFT and TPOT not imported (an uncached tail on a "
            "cached context, and stalls behind other lanes' prompts)")
    return reading, attrs.evolve(workload, dataset="agentx", decode_batch=batch), (note,)
