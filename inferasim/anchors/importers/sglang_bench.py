"""SGLang ``python -m sglang.bench_serving --output-file`` JSONL -> one anchor per line.

Recent clients (0.5.x) embed ``server_info``: the server's resolved arguments, its version and
``internal_states`` (the resolved decode attention backend). Those give the engine (SGLang),
its version, TP/DP/EP and attention-DP, the kernel family, KV dtype, the quantization flag and
the speculative algorithm. Older lines (2024) carry medians only. The GPU part is never in the
file (``device`` says only ``cuda``): give it as a hint. ``request_rate`` ``Infinity`` with a
``max_concurrency`` is a closed loop; a finite rate is an open loop.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from inferasim.anchors import normalise as nz
from inferasim.anchors.importers._common import (
    apply_hints,
    check_hints,
    integer,
    ms,
    need_file,
    num,
    per_gpu,
    regime_from_model_id,
    slug,
)
from inferasim.anchors.record import AnchorRecord, Measurements, Provenance, Regime, Workload
from inferasim.config.errors import ConfigError
from inferasim.config.paths import read_text

#: Server arguments kept on the record (the full dump holds ~400 keys).
KEPT_SERVER_ARGS = (
    "model_path", "tp_size", "dp_size", "ep_size", "enable_dp_attention", "attn_cp_size",
    "attention_backend", "decode_attention_backend", "prefill_attention_backend",
    "nsa_prefill_backend", "nsa_decode_backend", "kv_cache_dtype", "quantization", "dtype",
    "page_size", "max_running_requests", "max_total_num_tokens", "chunked_prefill_size",
    "max_prefill_tokens", "mem_fraction_static", "context_length", "schedule_policy",
    "disable_radix_cache", "enable_mixed_chunk", "stream_interval", "cuda_graph_max_bs",
    "moe_a2a_backend", "moe_runner_backend", "speculative_algorithm",
    "speculative_draft_model_path", "speculative_num_steps", "speculative_eagle_topk",
    "speculative_num_draft_tokens", "disaggregation_mode", "device", "version",
)


def _server_args(info: Mapping[str, Any]) -> dict[str, Any]:
    states = info.get("internal_states")
    resolved = states[0] if isinstance(states, list) and states and isinstance(states[0], Mapping) else {}
    args: dict[str, Any] = {}
    for key in KEPT_SERVER_ARGS:
        value = resolved.get(key) if resolved.get(key) is not None else info.get(key)
        if value is not None and value != "":
            args[key] = value
    if "speculative_algorithm" in info and "speculative_algorithm" not in args:
        args["speculative_algorithm"] = None
    return args


def line_to_record(data: Mapping[str, Any], *, file: str, index: int) -> AnchorRecord:
    completed = integer(data.get("completed"))
    if not completed:
        raise ConfigError(f"line {index + 1}: no completed requests: no measurement to import",
                          file=file)
    total_in, total_out = num(data.get("total_input_tokens")), num(data.get("total_output_tokens"))
    if total_in is None or total_out is None:
        raise ConfigError(f"line {index + 1}: no total_input_tokens/total_output_tokens: not an "
                          "SGLang bench_serving result", file=file)
    info = data.get("server_info") if isinstance(data.get("server_info"), Mapping) else None
    args = _server_args(info) if info else {}
    model_id = args.get("model_path")
    regime = Regime(engine="sglang" if info else None,
                    **{k: v for k, v in regime_from_model_id(model_id).items() if v is not None})
    from_args = nz.regime_from_server_args(args, "sglang") if args else {}
    gpus = from_args.get("num_gpus")
    out_tps, in_tps = num(data.get("output_throughput")), num(data.get("input_throughput"))
    total_tps = num(data.get("total_throughput"))
    if total_tps is None and out_tps is not None and in_tps is not None:
        total_tps = out_tps + in_tps
    m = Measurements(
        ttft_mean_s=ms(data.get("mean_ttft_ms")), ttft_median_s=ms(data.get("median_ttft_ms")),
        ttft_p90_s=ms(data.get("p90_ttft_ms")),
        tpot_mean_s=ms(data.get("mean_tpot_ms")), tpot_median_s=ms(data.get("median_tpot_ms")),
        tpot_std_s=ms(data.get("std_tpot_ms")),
        itl_mean_s=ms(data.get("mean_itl_ms")), itl_median_s=ms(data.get("median_itl_ms")),
        e2e_mean_s=ms(data.get("mean_e2e_latency_ms")),
        e2e_median_s=ms(data.get("median_e2e_latency_ms")),
        tput_per_gpu_total=per_gpu(total_tps, gpus), tput_per_gpu_output=per_gpu(out_tps, gpus),
        tput_per_gpu_input=per_gpu(in_tps, gpus),
        server_tput_total=total_tps, server_tput_output=out_tps,
        accept_length=num(data.get("accept_length")), completed=completed,
    )
    rate = num(data.get("request_rate"))
    workload = Workload(
        isl=int(round(total_in / completed)), osl=int(round(total_out / completed)),
        concurrency=integer(data.get("max_concurrency")),
        request_rate=rate if rate is not None and rate > 0 else None,
        num_requests=completed,
        dataset=data.get("dataset_name") if isinstance(data.get("dataset_name"), str) else None)
    version = info.get("version") if info else None
    prov = Provenance(source="sglang-bench", file=Path(file).name,
                      engine_version=str(version) if version else None,
                      tool="sglang.bench_serving", notes=())
    return AnchorRecord(id=f"sglang-bench-{slug(Path(file).stem)}-{index + 1}", provenance=prov,
                        regime=regime, workload=workload, measurements=m, server_args=args)


def import_sglang_bench(path: str | Path, *, hints: Mapping[str, Any] | None = None
                        ) -> list[AnchorRecord]:
    """One anchor per result line of a bench_serving JSONL file."""
    path = need_file(path)
    hints = check_hints(hints)
    records = []
    for i, line in enumerate(read_text(path, "SGLang bench_serving JSONL").splitlines()):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except ValueError as exc:
            raise ConfigError(f"line {i + 1} is not JSON ({exc})", file=str(path)) from None
        if not isinstance(data, Mapping):
            raise ConfigError(f"line {i + 1}: expected a JSON object", file=str(path))
        records.append(apply_hints(line_to_record(data, file=str(path), index=i), hints,
                                   file=str(path)))
    if not records:
        raise ConfigError("no result lines", file=str(path))
    from inferasim.anchors.importers.vllm_bench import with_per_gpu

    return [with_per_gpu(r) for r in records]
