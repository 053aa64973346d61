"""vLLM ``bench serve`` / ``benchmark_serving.py --save-result`` JSON -> one anchor.

Two dialects: ``{mean,median,p90,...}_{ttft,tpot,itl,e2el}_ms`` (upstream and the InferenceX
fork) and InferenceX's ``benchmark_serving_random.py`` with seconds and no suffix
(``median_ttft``). ISL and OSL are the realised means (total tokens / completed requests).

The client's ``backend``/``endpoint_type`` names the API it spoke, not the server (dstack ran
``vllm bench serve`` against SGLang), so engine, GPU and parallelism come only from the user's
hints or a launch command (``server_args``); the model id gives the model and, when its name
declares one (``-FP8``), the weight dtype.
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
    ms,
    num,
    per_gpu,
    read_json,
    regime_from_model_id,
    slug,
)
from inferasim.anchors.record import AnchorRecord, Measurements, Provenance, Regime, Workload
from inferasim.config.errors import ConfigError


def _metric(data: Mapping[str, Any], stat: str, name: str) -> float | None:
    if f"{stat}_{name}_ms" in data:
        return ms(data.get(f"{stat}_{name}_ms"))
    return num(data.get(f"{stat}_{name}"))


def _rate(value: Any) -> float | None:
    out = num(value)
    return out if out is not None and out > 0 else None


def record_from_result(data: Mapping[str, Any], *, file: str, server_args: Mapping[str, Any]
                       | None = None, source: str = "vllm-bench") -> AnchorRecord:
    completed = integer(data.get("completed"))
    if not completed:
        raise ConfigError(f"{completed or 0} requests completed: no measurement to import",
                          file=file)
    total_in, total_out = num(data.get("total_input_tokens")), num(data.get("total_output_tokens"))
    if total_in is None or total_out is None:
        raise ConfigError("no total_input_tokens/total_output_tokens: not a vLLM benchmark result",
                          file=file)
    regime = Regime(**{k: v for k, v in regime_from_model_id(data.get("model_id")).items()
                       if v is not None})
    args = dict(server_args or {})
    out_tps = num(data.get("output_throughput"))
    total_tps = num(data.get("total_token_throughput"))
    if total_tps is None and out_tps is not None and num(data.get("input_throughput")) is not None:
        total_tps = out_tps + num(data.get("input_throughput"))
    m = Measurements(
        ttft_mean_s=_metric(data, "mean", "ttft"), ttft_median_s=_metric(data, "median", "ttft"),
        ttft_p90_s=_metric(data, "p90", "ttft"),
        tpot_mean_s=_metric(data, "mean", "tpot"), tpot_median_s=_metric(data, "median", "tpot"),
        tpot_std_s=_metric(data, "std", "tpot"),
        itl_mean_s=_metric(data, "mean", "itl"), itl_median_s=_metric(data, "median", "itl"),
        e2e_mean_s=_metric(data, "mean", "e2el"), e2e_median_s=_metric(data, "median", "e2el"),
        server_tput_total=total_tps, server_tput_output=out_tps, completed=completed,
    )
    conc = integer(data.get("max_concurrency"))
    workload = Workload(isl=int(round(total_in / completed)), osl=int(round(total_out / completed)),
                        concurrency=conc, request_rate=_rate(data.get("request_rate")),
                        num_requests=integer(data.get("num_prompts")),
                        dataset=data.get("dataset_name") if isinstance(data.get("dataset_name"), str)
                        else None)
    tool = "vllm bench serve" if "endpoint_type" in data else "vLLM benchmark_serving.py"
    prov = Provenance(source=source, file=Path(file).name, date=iso_date(data.get("date")),
                      tool=tool)
    return AnchorRecord(id=f"{source}-{slug(Path(file).stem)}", provenance=prov, regime=regime,
                        workload=workload, measurements=m, server_args=args)


def with_per_gpu(record: AnchorRecord) -> AnchorRecord:
    """Per-GPU throughput once the GPU count is known (from hints or server args)."""
    m, gpus = record.measurements, record.regime.num_gpus or record.regime.tp
    if not gpus or m.tput_per_gpu_total is not None:
        return record
    ratio_in = None
    if m.server_tput_total is not None and m.server_tput_output is not None:
        ratio_in = m.server_tput_total - m.server_tput_output
    return attrs.evolve(record, measurements=attrs.evolve(
        m, tput_per_gpu_total=per_gpu(m.server_tput_total, gpus),
        tput_per_gpu_output=per_gpu(m.server_tput_output, gpus),
        tput_per_gpu_input=per_gpu(ratio_in, gpus)))


def import_vllm_bench(path: str | Path, *, hints: Mapping[str, Any] | None = None,
                      server_args: Mapping[str, Any] | None = None) -> list[AnchorRecord]:
    """One anchor from a vLLM benchmark result JSON."""
    data = read_json(path, "the JSON file `vllm bench serve --save-result` writes")
    if not isinstance(data, Mapping):
        raise ConfigError("expected a JSON object (one vLLM benchmark result)", file=str(path))
    record = record_from_result(data, file=str(path), server_args=server_args)
    record = apply_hints(record, check_hints(hints), file=str(path))
    return [with_per_gpu(record)]
