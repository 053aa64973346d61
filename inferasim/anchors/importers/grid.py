"""InferenceX experimental ISL x concurrency grids (vLLM ``benchmark_serving`` rows) -> anchors.

``token_position_decode_slo_results.csv`` has one row per result file: ``config_tag``, isl,
osl, conc, medians of TTFT/TPOT/E2E in seconds and server-wide throughput. The CSV does not
state the deployment, so each known ``config_tag`` maps to what its folder README says
(``GRID_CONFIGS``); an unknown tag keeps only what the row states (model id) plus the
user's hints.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from inferasim.anchors.importers._common import (
    apply_hints,
    check_hints,
    integer,
    iso_date,
    need_file,
    num,
    per_gpu,
    read_csv_whole,
    regime_from_model_id,
    slug,
    unique_ids,
)
from inferasim.anchors.record import AnchorRecord, Measurements, Provenance, Regime, Workload
from inferasim.config.errors import ConfigError

REPO_URL = ("https://github.com/SemiAnalysisAI/InferenceX/blob/"
            "db160f82b26f4d8d5fa10852a2ba95fffd8bd19b/")
ORIGIN_URL = REPO_URL + "experimental/token_position_decode_slo"
TOOL = "InferenceX benchmark_serving_random.py (vLLM benchmark_serving fork), random dataset"

#: config_tag -> (regime facts, image). From the grid README: GLM-5-FP8 on vllm-openai:nightly
#: (Feb 2026), TP8, MTP with 1 speculative token, GPU type not stated; MiniMax-M2.5 on 8xH200
#: as TP8 + expert parallel (tep8) or DP8 + EP (dep8: eight attention-DP ranks, experts over
#: all eight); Qwen3.5-397B-A17B on 8xH200 TP8 with prefix caching.
GRID_CONFIGS: dict[str, tuple[dict[str, Any], str | None]] = {
    "glm5_fp8_vllm_tp8": ({"engine": "vllm", "gpu": "h200", "weight_dtype": "fp8", "tp": 8,
                           "dp_attention": 1,
                           "spec_method": "mtp", "draft_tokens": 1, "num_gpus": 8},
                          "vllm/vllm-openai:nightly"),
    "minimax_m25_vllm_tep8": ({"engine": "vllm", "gpu": "h200", "weight_dtype": "fp8", "tp": 8,
                               "ep": 8, "dp_attention": 1, "spec_method": "none",
                               "num_gpus": 8}, None),
    "minimax_m25_vllm_dep8": ({"engine": "vllm", "gpu": "h200", "weight_dtype": "fp8", "tp": 8,
                               "ep": 8, "dp_attention": 8, "spec_method": "none",
                               "num_gpus": 8}, None),
    "qwen35_vllm_tp8": ({"engine": "vllm", "gpu": "h200", "tp": 8, "ep": 1, "dp_attention": 1,
                         "spec_method": "none", "num_gpus": 8}, None),
}

#: Notes a config's every record carries: what was inferred rather than read.
GRID_NOTES: dict[str, tuple[str, ...]] = {
    "glm5_fp8_vllm_tp8": (
        "GPU inferred as H200: the folder README names only the Slurm partition ('main'); "
        "the grid's other configs ran on 8xH200, and FP8 GLM-5 (about 750 GB of weights) "
        "does not fit eight 80 GB parts",),
}
#: The sweep scripts pass no --random-range-ratio: vLLM benchmark_serving's default draws
#: every prompt at ISL tokens and every output at OSL (fixed lengths).
RANGE_RATIO = 1.0

REQUIRED = ("config_tag", "isl", "osl", "conc", "median_ttft", "median_tpot")


def row_to_record(row: Mapping[str, Any], *, file: str) -> AnchorRecord:
    tag = str(row["config_tag"])
    facts, image = GRID_CONFIGS.get(tag, ({}, None))
    from_model = regime_from_model_id(row.get("model_id"))
    merged = {k: v for k, v in from_model.items() if v is not None}
    merged.update(facts)
    regime = Regime(**merged)
    gpus = regime.num_gpus
    out_tps, in_tps = num(row.get("output_throughput")), num(row.get("input_throughput"))
    total = out_tps + in_tps if out_tps is not None and in_tps is not None else None
    isl, osl, conc = integer(row["isl"]), integer(row["osl"]), integer(row["conc"])
    m = Measurements(
        ttft_median_s=num(row.get("median_ttft")), tpot_median_s=num(row.get("median_tpot")),
        e2e_median_s=num(row.get("median_e2el")),
        tput_per_gpu_total=per_gpu(total, gpus), tput_per_gpu_output=per_gpu(out_tps, gpus),
        tput_per_gpu_input=per_gpu(in_tps, gpus), server_tput_total=total,
        server_tput_output=out_tps, completed=integer(row.get("completed")),
    )
    rel = row.get("path")
    url = REPO_URL + str(rel) if isinstance(rel, str) and rel else ORIGIN_URL
    prov = Provenance(source="grid", file=Path(file).name, url=url, date=iso_date(row.get("date")),
                      image=image, tool=TOOL, notes=list(GRID_NOTES.get(tag, ())))
    return AnchorRecord(
        id=f"grid-{slug(tag)}-{isl}-{osl}-c{conc}", provenance=prov, regime=regime,
        workload=Workload(isl=isl, osl=osl, concurrency=conc,
                          num_requests=integer(row.get("num_prompts")), dataset="random",
                          range_ratio=RANGE_RATIO),
        measurements=m)


def import_grid(path: str | Path, *, hints: Mapping[str, Any] | None = None) -> list[AnchorRecord]:
    """Anchors from the ISL x concurrency grid CSV."""
    path = need_file(path)
    hints = check_hints(hints)
    frame = read_csv_whole(path)
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        raise ConfigError(f"not an ISL x concurrency grid: missing column(s) {', '.join(missing)}",
                          file=str(path))
    records = [apply_hints(row_to_record(row, file=str(path)), hints, file=str(path))
               for row in frame.to_dict(orient="records")
               if integer(row.get("completed")) != 0]
    return unique_ids(records)
