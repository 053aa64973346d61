"""InferenceMAX / InferenceX dashboard results -> anchors.

Reads the dashboard API JSON (a list of rows with a nested ``metrics`` mapping), its flattened
CSV (``benchmarks_flat.csv``, ``benchmarks_history_flat.csv``) or one post-processed ``agg_*``
result (a single mapping with ``hw``, ``tp``, ``ep`` ...). Latencies are seconds already;
throughputs are per GPU.

By default only single-node, colocated rows are kept: a disaggregated or multi-node row did not
measure an engine instance that inferasim's colocated replay can be calibrated on. Engines
keep their spelling (``trt``, ``dynamo-sglang``): they are refused for every engine inferasim
models. The per-row regime states engine, GPU part, precision, TP, EP, attention-DP and the
speculative method; kernel family, KV dtype and draft depth are not recorded (unknown), except
that ATOM always runs AITER (stamped by ``regime.settle``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from inferasim.anchors import normalise as nz
from inferasim.anchors.importers._common import (
    apply_hints,
    check_hints,
    integer,
    iso_date,
    need_file,
    num,
    read_csv_whole,
    read_json,
    truthy,
    unique_ids,
)
from inferasim.anchors.record import AnchorRecord, Measurements, Provenance, Regime, Workload
from inferasim.config.errors import ConfigError

ORIGIN_URL = ("https://github.com/vngcloud/InferenceX-app/blob/"
              "528c4146b8f502fcbce8df7870a935a970cbae25/"
              "packages/app/cypress/fixtures/api/benchmarks.json")
TOOL = "InferenceX utils/bench_serving (vLLM benchmark_serving fork), random dataset"


def _rows(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".csv":
        return read_csv_whole(path).to_dict(orient="records")
    data = read_json(path, "InferenceMAX results (.json, or .csv)")
    if isinstance(data, Mapping):
        data = [data]
    if not isinstance(data, list) or not all(isinstance(r, Mapping) for r in data):
        raise ConfigError("expected a list of InferenceMAX result rows", file=str(path))
    rows = []
    for row in data:
        flat = {k: v for k, v in row.items() if k != "metrics"}
        metrics = row.get("metrics")
        if isinstance(metrics, Mapping):
            flat.update(metrics)
        rows.append(flat)
    return rows


def _get(row: Mapping[str, Any], *names: str) -> Any:
    for name in names:
        value = row.get(name)
        if value is not None and not (isinstance(value, float) and pd.isna(value)):
            return value
    return None


def _text(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return None
    text = str(value).strip()
    return text or None


def is_colocated_single_node(row: Mapping[str, Any]) -> bool:
    if truthy(_get(row, "disagg")) or truthy(_get(row, "is_multinode")):
        return False
    ptp, dtp = integer(_get(row, "prefill_tp")), integer(_get(row, "decode_tp"))
    return ptp is None or dtp is None or ptp == dtp


def row_to_record(row: Mapping[str, Any], *, file: str) -> AnchorRecord:
    hardware = _text(_get(row, "hardware", "hw"))
    gpu = nz.normalise_gpu(hardware)
    framework = _text(_get(row, "framework"))
    engine = nz.normalise_engine(framework)
    precision = _text(_get(row, "precision"))
    spec = nz.spec_method(_text(_get(row, "spec_method", "spec_decoding")) or "none")
    tp = integer(_get(row, "decode_tp", "tp"))
    ep = integer(_get(row, "decode_ep", "ep"))
    dpa_flag = _get(row, "decode_dp_attention", "dp_attention")
    # An InferenceMAX dp-attention run puts every TP rank in its own attention-DP group.
    dpa = (tp if truthy(dpa_flag) else 1) if dpa_flag is not None else None
    isl, osl, conc = (integer(_get(row, "isl")), integer(_get(row, "osl")),
                      integer(_get(row, "conc")))
    if isl is None or osl is None:
        raise ConfigError("row without isl/osl", file=file)
    image = _text(_get(row, "image"))
    date = iso_date(_get(row, "date", "ts"))
    gpus = integer(_get(row, "num_decode_gpu")) or tp
    model_raw = _text(_get(row, "model"))
    regime = Regime(
        model=model_raw, engine=engine, gpu=gpu,
        weight_dtype=nz.weight_dtype_for_precision(precision, nz.gpu_vendor(gpu)),
        spec_method=spec, tp=tp, ep=ep, dp_attention=dpa, num_gpus=gpus,
        scheduler_recv_interval=recipe_recv_interval(engine, gpu, conc),
    )
    m = Measurements(
        ttft_mean_s=num(_get(row, "mean_ttft")), ttft_median_s=num(_get(row, "median_ttft")),
        ttft_p90_s=num(_get(row, "p90_ttft")),
        tpot_mean_s=num(_get(row, "mean_tpot")), tpot_median_s=num(_get(row, "median_tpot")),
        tpot_std_s=num(_get(row, "std_tpot")),
        itl_mean_s=num(_get(row, "mean_itl")), itl_median_s=num(_get(row, "median_itl")),
        e2e_mean_s=num(_get(row, "mean_e2el")), e2e_median_s=num(_get(row, "median_e2el")),
        tput_per_gpu_total=num(_get(row, "tput_per_gpu")),
        tput_per_gpu_output=num(_get(row, "output_tput_per_gpu")),
        tput_per_gpu_input=num(_get(row, "input_tput_per_gpu")),
        interactivity=num(_get(row, "mean_intvty", "median_intvty")),
        power_w_per_gpu=num(_get(row, "avg_power_w")),
    )
    prov = Provenance(source="inferencemax", file=Path(file).name, url=ORIGIN_URL,
                      run_url=_text(_get(row, "run_url")), date=date, image=image, tool=TOOL)
    key = "-".join(p for p in (
        "imax", gpu or nz.model_name(hardware) or "gpu", engine or "engine",
        (precision or "dtype").lower(), spec if spec not in (None, "none") else "",
        f"tp{tp}", f"ep{ep}", "dpa" if (dpa or 1) > 1 else "", f"{isl}-{osl}", f"c{conc}",
        date or "") if p)
    return AnchorRecord(id=key, provenance=prov, regime=regime,
                        workload=Workload(isl=isl, osl=osl, concurrency=conc,
                                          num_requests=conc * 10 if conc else None,
                                          dataset="random"),
                        measurements=m)


# The InferenceX B200 DeepSeek-R1 SGLang launch scripts (dsr1_fp8_b200.sh, dsr1_fp4_b200*.sh)
# pass ``--scheduler-recv-interval 10`` below 16 clients and 30 from 16 on; the rows do not
# record it, so the recipe's rule is stamped (docs/anchors.md, "SGLang's receive interval").
RECIPE_RECV_INTERVAL_GPUS = ("b200",)
RECIPE_RECV_INTERVAL = ((16, 30), (0, 10))   # (from this many clients, interval)


def recipe_recv_interval(engine: str | None, gpu: str | None, conc: int | None) -> int | None:
    """The receive interval the InferenceX recipe gave this row's server, None where the
    recipe is not known to set one."""
    if engine != "sglang" or gpu not in RECIPE_RECV_INTERVAL_GPUS or not conc:
        return None
    return next(every for least, every in RECIPE_RECV_INTERVAL if conc >= least)


def import_inferencemax(path: str | Path, *, hints: Mapping[str, Any] | None = None,
                        include_disaggregated: bool = False) -> list[AnchorRecord]:
    """Anchors from an InferenceMAX results file (single-node colocated rows unless asked)."""
    path = need_file(path)
    hints = check_hints(hints)
    rows = _rows(path)
    if rows and not any(k in rows[0] for k in ("hardware", "hw")):
        raise ConfigError("not an InferenceMAX results file (no 'hardware'/'hw' column)",
                          file=str(path))
    kept = [r for r in rows if include_disaggregated or is_colocated_single_node(r)]
    records = [apply_hints(row_to_record(r, file=str(path)), hints, file=str(path))
               for r in kept]
    return unique_ids(records)
