"""``harvest parse``: anchors from a harvest folder (or any folder of benchmark result files).

In a harvest folder (``plan.json`` + ``run.json``) the regime is taken from what ran:

- the server's launch arguments (``regime_from_server_args``): parallel layout, KV dtype, page
  size, max running sequences, and the speculative method and depth by the engine's own flags;
- the engine's log (``logs.parse_engine_log``): the attention backend it chose, the KV dtype it
  stored and its KV cache size (kept in ``server_args`` as ``kv_cache_tokens``), its version;
- the GPU tools' output (``gpu.txt``): the GPU part. A part no tool named stays unknown;
- what the launch args cannot say (vLLM data-parallel without expert parallel is attention-DP
  or replicas) comes from the plan, with a provenance note.

Only probes ``run.json`` records as ``ok`` become anchors; a failed probe is listed as skipped
with its reason. The decode step is ``AnchorRecord.decode_step``: mean TPOT whenever median ITL
shows a coalescing stream (or the run speculated), else median ITL.

In any other folder every file is read by its content: ``vllm bench serve`` /
``benchmark_serving.py`` JSON, SGLang ``bench_serving`` JSONL, AIPerf ``profile_export_aiperf``
JSON, an InferenceX processed ``agg_*`` JSON. Logs, GPU tool output and unknown formats are
skipped with a reason; so is a run that completed no request, and a result that names no model
(unknown on every axis, it would be usable for any target).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from inferasim.anchors import normalise as nz
from inferasim.anchors.importers._common import slug, unique_ids
from inferasim.anchors.importers.aiperf import import_aiperf
from inferasim.anchors.importers.inferencemax import import_inferencemax
from inferasim.anchors.importers.sglang_bench import import_sglang_bench
from inferasim.anchors.importers.vllm_bench import record_from_result, with_per_gpu
from inferasim.anchors.record import AnchorRecord, Provenance, Regime
from inferasim.anchors.regime import settle
from inferasim.config.errors import ConfigError
from inferasim.harvest import gpu_detect, trt_launch
from inferasim.harvest.logs import parse_engine_log
from inferasim.harvest.plan import PLAN_FILE, read_plan

ANCHOR_OUT = "anchors.json"
#: Axes the plan may supply when the launch args cannot state them (never the GPU part or the
#: kernel family: those must be observed).
PLAN_FILLS = ("model", "weight_dtype", "dp_attention", "ep", "tp", "spec_method", "draft_tokens",
              "page_size", "max_num_seqs", "kv_dtype")


@attrs.frozen
class Skipped:
    file: str
    reason: str


@attrs.frozen
class ParseResult:
    records: tuple[AnchorRecord, ...]
    skipped: tuple[Skipped, ...] = ()
    # What the folder's context files said (server log facts, GPU part) in a harvest folder.
    context: dict[str, Any] = attrs.field(factory=dict)


# ---------------------------------------------------------------- result files


def _load(path: Path) -> Any:
    if path.suffix == ".jsonl":
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
        return [json.loads(ln) for ln in lines]
    return json.loads(path.read_text(errors="replace"))


def result_kind(data: Any) -> str | None:
    """Which tool wrote a loaded result (None: not a result file harvest reads)."""
    if isinstance(data, list):
        first = data[0] if data else None
        if isinstance(first, Mapping) and "completed" in first and "backend" in first:
            return "sglang-bench"
        return None
    if not isinstance(data, Mapping):
        return None
    if "completed" in data and ("total_input_tokens" in data or "total_output_tokens" in data):
        return "vllm-bench"
    if "input_sequence_length" in data or (isinstance(data.get("records"), Mapping)
                                           and "ttft" in data["records"]):
        return "aiperf"
    if "hw" in data and "tput_per_gpu" in data:
        return "inferencemax"
    return None


def result_completed(path: str | Path) -> tuple[int, str]:
    """(completed requests, why) of a client's result file; 0 when absent, unreadable or failed."""
    path = Path(path)
    if not path.is_file():
        return 0, f"no result file {path.name} (the client wrote none)"
    try:
        data = _load(path)
    except (ValueError, OSError) as exc:
        return 0, f"unreadable result file ({exc})"
    kind = result_kind(data)
    if kind == "vllm-bench":
        n = int(data.get("completed") or 0)
    elif kind == "sglang-bench":
        n = sum(int(d.get("completed") or 0) for d in data)
    elif kind == "aiperf":
        entry = data.get("request_count") or (data.get("records") or {}).get("request_count") or {}
        n = int(float(entry.get("avg") or 0)) if isinstance(entry, Mapping) else 0
    else:
        return 0, "the result file is not a format harvest reads"
    return n, ("ok" if n else "0 requests completed: a failed run, not a measurement")


def read_results(path: Path) -> list[AnchorRecord]:
    """Anchors of one result file by its content; ``ConfigError`` says why there are none."""
    try:
        data = _load(path)
    except ValueError as exc:
        raise ConfigError(f"not JSON ({str(exc).splitlines()[0]})", file=str(path)) from None
    kind = result_kind(data)
    if kind == "vllm-bench":
        completed = int(data.get("completed") or 0)
        if not completed:
            raise ConfigError("0 requests completed: a failed run, not a measurement",
                              file=str(path))
        return [settle(record_from_result(data, file=str(path)))]
    if kind == "sglang-bench":
        return import_sglang_bench(path)
    if kind == "aiperf":
        return import_aiperf(path)
    if kind == "inferencemax":
        return import_inferencemax(path)
    raise ConfigError("not a benchmark result format harvest reads", file=str(path))


def _context_reason(path: Path) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"unreadable ({exc})"
    if path.suffix == ".md" and path.stem.lower() == "readme":
        return "documentation, not a result file"
    facts = parse_engine_log(text)
    if facts.get("server_args") or facts.get("kv_cache_tokens"):
        return "engine log: context (args, backend, KV size), not a measurement"
    if gpu_detect.parts_in_text(text):
        return "GPU tool output: context (the part), not a measurement"
    return "not a result file"


# ---------------------------------------------------------------- harvest folders


def _plan_args(plan: Mapping[str, Any]) -> dict[str, Any]:
    argv = plan["server"]["argv"]
    args = nz.parse_server_command(argv)
    if trt_launch.is_launch(argv):
        args = trt_launch.server_args(args, plan["server"].get("files", {}))
    return args


def harvest_regime(record: AnchorRecord, *, plan: Mapping[str, Any], args: Mapping[str, Any],
                   log: Mapping[str, Any], gpu_part: str | None) -> tuple[Regime, list[str]]:
    """The regime that ran: launch args, then the log, then the GPU tools; plan fills last."""
    engine = plan["server"]["engine"]
    notes: list[str] = []
    fields = {k: v for k, v in attrs.asdict(record.regime).items() if v is not None}
    fields.update(nz.regime_from_server_args(args, engine))
    fields["engine"] = engine
    if log.get("attention_backend"):
        fields["attention_backend"] = log["attention_backend"]
        fields.pop("kernel_family", None)
        notes.append(f"attention backend {log['attention_backend']} from the engine log")
    kv = nz.kv_dtype(log.get("kv_cache_dtype"))
    if kv:
        fields["kv_dtype"] = kv
    if gpu_part:
        fields["gpu"] = gpu_part
        fields["gpu_isa"] = nz.gpu_isa(gpu_part)
    else:
        notes.append("GPU part not named by any GPU tool: left unknown")
    planned = plan.get("regime", {})
    for key in PLAN_FILLS:
        if fields.get(key) is None and planned.get(key) not in (None, ""):
            fields[key] = planned[key]
            notes.append(f"{key} {planned[key]} from the plan (the launch args do not state it)")
    if fields.get("spec_method") == "none":
        fields.pop("draft_tokens", None)
    known = {f.name for f in attrs.fields(Regime)}
    return Regime(**{k: v for k, v in fields.items() if k in known}), notes


def parse_harvest(folder: Path) -> ParseResult:
    from inferasim.harvest.run import GPU_FILE, RUN_FILE, SERVER_LOG, VERSION_FILE

    plan = read_plan(folder)
    run_path = folder / RUN_FILE
    if not run_path.is_file():
        raise ConfigError("no run.json: this plan has not been run ('inferasim harvest run')",
                          file=str(folder))
    run = json.loads(run_path.read_text())
    statuses = {p["id"]: p for p in run.get("probes", [])}
    log = parse_engine_log((folder / SERVER_LOG).read_text(errors="replace")) \
        if (folder / SERVER_LOG).is_file() else {}
    gpu_text = (folder / GPU_FILE).read_text(errors="replace") if (folder / GPU_FILE).is_file() else ""
    gpu_part, gpu_how = gpu_detect.detect_part(gpu_text)
    version = log.get("version") or (run.get("engine_version") or {}).get("version")
    if not version and (folder / VERSION_FILE).is_file():
        lines = (folder / VERSION_FILE).read_text().strip().splitlines()
        version = lines[-1].strip() if lines else None
    args = _plan_args(plan)
    if log.get("server_args"):
        # What the engine itself says it ran fills what the command line left implicit.
        for key, value in log["server_args"].items():
            args.setdefault(key, value)
    for key in ("kv_cache_tokens", "kv_cache_blocks"):
        if log.get(key):
            args[key] = log[key]
    launched_other = plan["server"].get("launch") not in (None, plan["server"]["argv"])
    records: list[AnchorRecord] = []
    skipped: list[Skipped] = []
    name = slug(plan.get("scenario", {}).get("name", folder.name))
    for probe in plan["probes"]:
        if probe.get("kind") == "warmup":
            continue  # a warm-up run is never a measurement
        status = statuses.get(probe["id"], {"status": "not-run"})
        if status.get("status") != "ok":
            skipped.append(Skipped(probe["result"], f"probe {probe['id']} {status.get('status')}"
                                   + (f": {status['reason']}" if status.get("reason") else "")))
            continue
        try:
            found = read_results(folder / probe["result"])
        except ConfigError as exc:
            skipped.append(Skipped(probe["result"], exc.message))
            continue
        for i, rec in enumerate(found):
            regime, notes = harvest_regime(rec, plan=plan, args=args, log=log, gpu_part=gpu_part)
            if launched_other:
                notes.append("the server was launched by a substitute command (plan "
                             "server.launch); the regime is the planned engine command's")
            prov = Provenance(source="harvest", file=probe["result"], date=rec.provenance.date,
                              engine_version=version, tool=plan["client"]["tool"],
                              notes=tuple(notes + [f"seed {probe.get('seed')}",
                                                   f"gpu: {gpu_how}"]))
            rid = f"harvest-{name}-{probe['id']}" + (f"-{i + 1}" if len(found) > 1 else "")
            rec = attrs.evolve(rec, id=rid, provenance=prov, regime=regime,
                               server_args={k: v for k, v in args.items()
                                            if isinstance(v, (str, int, float, bool))})
            records.append(with_per_gpu(settle(rec)))
    context = {"gpu": gpu_part, "gpu_how": gpu_how, "engine_version": version,
               "attention_backend": log.get("attention_backend"),
               "kv_cache_tokens": log.get("kv_cache_tokens"), "run_status": run.get("status")}
    return ParseResult(tuple(unique_ids(records)), tuple(skipped), context)


def parse_folder(folder: Path) -> ParseResult:
    files = [folder] if folder.is_file() else sorted(
        p for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".")
        and p.name != ANCHOR_OUT)
    records: list[AnchorRecord] = []
    skipped: list[Skipped] = []
    for path in files:
        if path.suffix not in (".json", ".jsonl"):
            skipped.append(Skipped(str(path), _context_reason(path)))
            continue
        try:
            found = read_results(path)
        except ConfigError as exc:
            skipped.append(Skipped(str(path), exc.message))
            continue
        except (ValueError, KeyError, TypeError) as exc:
            skipped.append(Skipped(str(path), f"unreadable: {type(exc).__name__}: {exc}"))
            continue
        for record in found:
            if record.regime.model is None:
                # Unknown on every axis it would be usable for any target: not filed.
                skipped.append(Skipped(str(path), f"{record.id}: the file names no model "
                                       "(import it with 'anchors import --meta model=...')"))
            else:
                records.append(settle(record))
    return ParseResult(tuple(unique_ids(records)), tuple(skipped))


def parse_path(path: str | Path) -> ParseResult:
    """A harvest folder (``plan.json`` present), a folder of result files, or one file."""
    path = Path(path)
    if not path.exists():
        raise ConfigError("not found", file=str(path))
    if path.is_dir() and (path / PLAN_FILE).is_file():
        return parse_harvest(path)
    return parse_folder(path)
