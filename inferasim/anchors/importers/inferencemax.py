"""InferenceMAX / InferenceX dashboard results -> anchors.

Reads the dashboard API JSON (a list of rows with a nested ``metrics`` mapping), its flattened
CSV (``benchmarks_flat.csv``, ``benchmarks_history_flat.csv``) or one post-processed ``agg_*``
result (a single mapping with ``hw``, ``tp``, ``ep`` ...). Latencies are seconds already;
throughputs are per GPU.

By default only single-node, colocated rows are kept. ``include_disaggregated`` keeps the
disaggregated and multi-node rows too, as ``topology: disaggregated`` records: the framework's
spelling (``dynamo-trt``, ``mori-sglang``) as engine, the decode pool's layout as tp/ep/
attention-DP, the prefill pool's in the ``prefill_*`` fields, both pools' worker counts, and
the decode step read at each decode worker's share of the clients. The per-row regime states
engine, GPU part, precision, TP, EP, attention-DP and the speculative method; kernel family,
KV dtype and draft depth are not recorded (unknown), except that ATOM always runs AITER
(stamped by ``regime.settle``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from inferasim.anchors import normalise as nz
from inferasim.anchors.importers import launch_recipes
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


def _pool_layout(row: Mapping[str, Any], role: str, notes: list[str]
                 ) -> tuple[int | None, int | None, int | None, int | None]:
    """(tp, ep, attention-DP, workers) of one pool of a disaggregated row. The row's GPUs per
    worker (``num_<role>_gpu / <role>_num_workers``) are the worker's TP where its recorded
    tp disagrees (the GB200 SGLang rows record tp 1 on 4- to 48-GPU workers; noted); EP is
    kept where it divides that TP, else taken as it. Workers None: not recorded (0)."""
    tp = integer(_get(row, f"{role}_tp"))
    ep = integer(_get(row, f"{role}_ep"))
    dpa_flag = _get(row, f"{role}_dp_attention")
    workers = integer(_get(row, f"{role}_num_workers")) or None
    gpus = integer(_get(row, f"num_{role}_gpu"))
    if workers and gpus and gpus % workers == 0 and tp != gpus // workers:
        notes.append(f"{role} tp {gpus // workers}: {gpus} GPUs over {workers} worker(s) "
                     f"(the row records tp {tp})")
        tp = gpus // workers
    if tp and ep and tp % ep:
        notes.append(f"{role} ep {tp}: the row's ep {ep} does not divide its tp {tp}")
        ep = tp
    dpa = (tp if truthy(dpa_flag) else 1) if dpa_flag is not None and tp else None
    return tp, ep, dpa, workers


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
    notes: list[str] = []
    pools: dict[str, Any] = {"topology": "colocated"}
    decode_batch = None
    if not is_colocated_single_node(row):
        tp, ep, dpa, decode_workers = _pool_layout(row, "decode", notes)
        ptp, pep, pdpa, prefill_workers = _pool_layout(row, "prefill", notes)
        if prefill_workers and decode_workers:
            gpus = (integer(_get(row, "num_prefill_gpu")) or 0) + \
                (integer(_get(row, "num_decode_gpu")) or 0) or None
        else:
            # no worker counts (0): one set of GPUs, counted in both pools' columns
            notes.append("no worker counts recorded (num_workers 0): the pools' layout is "
                         "not known")
        pools = {"topology": "disaggregated", "prefill_tp": ptp, "prefill_ep": pep,
                 "prefill_dp_attention": pdpa, "prefill_workers": prefill_workers,
                 "decode_workers": decode_workers}
        if conc and decode_workers:
            decode_batch = conc / decode_workers  # each decode worker's share of the clients
    limit = launch_recipes.running_limit(
        engine, pools["topology"] == "disaggregated", gpu=gpu, precision=precision, isl=isl,
        osl=osl, spec=spec, conc=conc, tp=tp, ep=ep, dpa=dpa,
        prefill_workers=pools.get("prefill_workers"), decode_workers=pools.get("decode_workers"))
    if limit:
        pools["max_num_seqs"], note = limit
        notes.append(note)
    trt = launch_recipes.colocated_trt_flags(gpu, precision, isl, osl, conc, spec, tp, dpa) \
        if engine == "trt" and pools["topology"] == "colocated" else None
    if trt is not None:
        pools["max_num_tokens"] = trt.max_num_tokens
        if trt.max_batch_size:
            pools["max_num_seqs"] = trt.max_batch_size
        if trt.batch_wait:
            pools["batch_wait_timeout_iters"], pools["batch_wait_max_tokens_ratio"] = \
                trt.batch_wait
        notes.append(trt.note())
    budget = launch_recipes.colocated_sglang_budget(gpu, precision, isl, osl, conc) \
        if engine == "sglang" and pools["topology"] == "colocated" else None
    if budget is not None:
        pools["max_num_tokens"] = budget
        notes.append(f"chunked-prefill-size and max-prefill-tokens {budget}, from the launch "
                     f"script ({launch_recipes.SGLANG_BUDGET_SOURCE})")
    regime = Regime(
        model=model_raw, engine=engine, gpu=gpu,
        weight_dtype=nz.weight_dtype_for_precision(precision, nz.gpu_vendor(gpu)),
        spec_method=spec, tp=tp, ep=ep, dp_attention=dpa, num_gpus=gpus,
        scheduler_recv_interval=recipe_recv_interval(engine, gpu, conc, precision, tp), **pools,
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
                      run_url=_text(_get(row, "run_url")), date=date, image=image, tool=TOOL,
                      notes=tuple(notes))
    layout = [f"tp{tp}", f"ep{ep}", "dpa" if (dpa or 1) > 1 else ""]
    if regime.disaggregated:
        pdpa = "dpa" if (regime.prefill_dp_attention or 1) > 1 else ""
        layout = [f"p{regime.prefill_workers or 0}xtp{regime.prefill_tp}ep{regime.prefill_ep}"
                  f"{pdpa}", f"d{regime.decode_workers or 0}x" + "".join(layout)]
    key = "-".join(p for p in (
        "imax", gpu or nz.model_name(hardware) or "gpu", engine or "engine",
        (precision or "dtype").lower(), spec if spec not in (None, "none") else "",
        *layout, f"{isl}-{osl}", f"c{conc}", date or "") if p)
    return AnchorRecord(id=key, provenance=prov, regime=regime,
                        workload=Workload(isl=isl, osl=osl, concurrency=conc,
                                          num_requests=conc * 10 if conc else None,
                                          dataset="random", decode_batch=decode_batch),
                        measurements=m)


# The InferenceX B200 DeepSeek-R1 SGLang launch scripts (dsr1_fp8_b200.sh, dsr1_fp4_b200*.sh)
# pass ``--scheduler-recv-interval 10`` below 16 clients and 30 from 16 on; the rows do not
# record it, so the recipe's rule is stamped (docs/anchors.md, "SGLang's receive interval").
# The B300 scripts (dsr1_fp8_b300*.sh, dsr1_fp4_b300.sh @ 8eec0d4) are the B200 ones as is.
RECIPE_RECV_INTERVAL_GPUS = ("b200", "b300")
RECIPE_RECV_INTERVAL = ((16, 30), (0, 10))   # (from this many clients, interval)


# The FP8 script's TP4 server (run only at 8k/1k) reads every 10 steps whatever the load.
RECIPE_RECV_INTERVAL_FP8_TP4 = 10


def recipe_recv_interval(engine: str | None, gpu: str | None, conc: int | None,
                         precision: str | None = None, tp: int | None = None) -> int | None:
    """The receive interval the InferenceX recipe gave this row's server, None where the
    recipe is not known to set one."""
    if engine != "sglang" or gpu not in RECIPE_RECV_INTERVAL_GPUS or not conc:
        return None
    if (precision or "").lower() == "fp8" and tp == 4:
        return RECIPE_RECV_INTERVAL_FP8_TP4
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
