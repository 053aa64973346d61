"""Replay measured AgentX ladders (one row per concurrency rung) and set the replay beside
the measurement: the engine's prefix-hit counter, output tok/s, mean and p90 TTFT.

Each ladder is one deployment (model, GPU, engine build, precision, TP/EP/attention-DP);
each rung replays it with the settings of the harness the runs were launched with
(``scenarios/agentic/_agentx-harness-2026-05.yaml``: the AgentX corpus without its subagents,
lanes, think times capped at 60 s, the server's responses sent back, 1800 s, seed 42), the server's
``max-num-seqs`` equal to the concurrency as the published runs set it, the engine's own
defaults from the catalog, and the deployment's serving recipe where one is shipped
(``scenarios/agentic/_recipe-<engine>-<gpu>-<model>.yaml``). Nothing is fitted to the ladder:
the one workload figure matched (``matched_output_scales``: output per prompt token, where the
runs used another snapshot of the corpus) is read from the file's other ladders.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import pandas as pd

from inferasim.anchors import normalise as nz
from inferasim.anchors.importers.agentx_ladder import (
    cliff_between,
    gpu_part,
    ladder_engine,
    weight_dtype,
)
from inferasim.anchors.normalise import engine_version_from_image
from inferasim.config.catalog import CATALOG_DIR, catalog_names, native_four_bit
from inferasim.config.errors import ConfigError, warn
from inferasim.config.recipes import AGENTIC_DIR, recipe_path
from inferasim.config.yaml_tree import load_tree

HARNESS = AGENTIC_DIR / "_agentx-harness-2026-05.yaml"
REQUIRED = ("model", "hw", "framework", "image", "precision", "tp", "conc", "mean_ttft",
            "p90_ttft", "output_tput_tps")
DEPLOYMENT = ("model", "hw", "framework", "image", "precision", "tp", "ep", "dp_attention")
# the corpus beside the ladders in the shared data layout (agentx-measured/ next to agentx-traces/)
CORPUS = Path("..") / "agentx-traces" / "traces_v8_present.jsonl.gz"


@attrs.frozen
class Rung:
    ladder: str                 # the deployment, as a label
    concurrency: int
    overrides: tuple[str, ...]  # --set keys on the harness scenario
    measured: dict[str, float]
    # (output tokens, prompt tokens) the run served, where the row records its input
    # throughput and duration: the workload's output per prompt token (matched_output_scales)
    run_tokens: tuple[float, float] | None = None


def _model_name(hf: str, file: str) -> str:
    """The catalog model a Hugging Face id names: its own id, or a quantized repackaging
    (``amd/GLM-5.1-MXFP4``) of one, matched by the base name."""
    names = catalog_names("models")
    normalised = nz.model_name(hf)  # the anchors' reading: Kimi-K2.7-Code-MXFP4 is kimi-k2.7
    if normalised in names:
        return normalised
    base = hf.rsplit("/", 1)[-1].lower()
    for suffix in ("-mxfp4", "-nvfp4", "-fp8", "-fp4", "-bf16"):
        base = base.removesuffix(suffix)
    for name in names:
        data, _ = load_tree(CATALOG_DIR / "models" / f"{name}.yaml")
        ids = {name.lower(), str(data.get("hf_id", "")).lower()}
        stems = {i.rsplit("/", 1)[-1] for i in ids}
        stems |= {s.removesuffix("-fp8").removesuffix("-bf16") for s in stems}
        if hf.lower() in ids or base in stems:
            return name
    raise ConfigError(f"no catalog model for {hf!r} (scenarios/bases/models/)", file=file,
                      key="model")


def _number(row, key: str, where: str) -> float:
    try:
        return float(row[key])
    except (TypeError, ValueError):
        raise ConfigError(f"expected a number, got {row[key]!r}", file=where, key=key) from None


def _count(row, key: str, where: str) -> int:
    value = _number(row, key, where)
    if value != int(value) or value < 1:
        raise ConfigError(f"expected a whole number of at least 1, got {row[key]!r}",
                          file=where, key=key)
    return int(value)


def _flag(value: Any) -> bool:
    return str(value).strip().lower() in ("true", "1", "yes")


def read_ladders(csv_path: str | Path, trace: str | None = None) -> list[Rung]:
    """The rungs of every ladder in a measured-ladder CSV, in file order."""
    path = Path(csv_path)
    file = str(path)
    if not path.is_file():
        raise ConfigError("the ladder file is not there", file=file)
    try:
        frame = pd.read_csv(path)
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as exc:
        raise ConfigError(f"not a readable CSV: {exc}", file=file) from None
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        raise ConfigError(f"missing columns {missing}; a ladder row needs {list(REQUIRED)}",
                          file=file)
    if trace is None:
        corpus = (path.parent / CORPUS).resolve()
        trace = str(corpus) if corpus.is_file() else None
    rungs = []
    models: dict[str, str | None] = {}
    unknown: dict[str, ConfigError] = {}  # a model the catalog lacks: its ladder is skipped
    for i, row in frame.iterrows():
        where = f"{file} (row {i + 2})"
        hf = str(row["model"])
        if hf not in models:  # the catalog is read once per model, not once per rung
            try:
                models[hf] = _model_name(hf, where)
            except ConfigError as exc:
                models[hf], unknown[hf] = None, exc
        model = models[hf]
        if model is None:
            continue
        gpu = gpu_part(str(row["hw"]))
        engine = ladder_engine(row)
        version = engine_version_from_image(str(row["image"])) or ""
        conc = _count(row, "conc", where)
        tp = _count(row, "tp", where)
        ep = _count(row, "ep", where) if "ep" in row and not pd.isna(row["ep"]) else 1
        dpa = tp if "dp_attention" in row and _flag(row["dp_attention"]) else 1
        sets = [f"model.name={model}",
                f"model.weight_dtype="
                f"{weight_dtype(str(row['precision']), gpu, where, native_four_bit(model))}",
                f"gpu.name={gpu}", f"engine.name={engine}", f"engine.version={version}",
                f"parallel.tp={tp}", f"parallel.ep={ep}", f"parallel.dp_attention={dpa}",
                f"workload.concurrency={conc}", f"engine.max_num_seqs={conc}"]
        if trace is not None:
            sets.append(f"workload.trace={trace}")
        label = f"{model} {row['precision']} {tp}x{gpu} {engine} {version}".strip()
        hit = row.get("server_gpu_cache_hit_rate", float("nan"))
        measured = {"prefix_hit_rate": _number(row, "server_gpu_cache_hit_rate", where)
                    if not pd.isna(hit) else math.nan,
                    "output_tok_s": _number(row, "output_tput_tps", where),
                    # the server's prompt throughput: past the cliff its prefill rate, which
                    # does not depend on how much output the corpus's requests carry
                    "input_tok_s": _number(row, "input_tput_tps", where)
                    if "input_tput_tps" in row and not pd.isna(row["input_tput_tps"])
                    else math.nan,
                    "ttft_mean_s": _number(row, "mean_ttft", where),
                    "ttft_p90_s": _number(row, "p90_ttft", where)}
        rungs.append(Rung(label, conc, tuple(sets), measured, _run_tokens(row, measured, where)))
    if unknown and not rungs:
        raise next(iter(unknown.values()))
    for exc in unknown.values():
        warn(f"{exc}: its rungs are not replayed")
    return rungs


def _run_tokens(row, measured: dict[str, float], where: str) -> tuple[float, float] | None:
    if "duration_seconds" not in row or pd.isna(row["duration_seconds"]) \
            or math.isnan(measured["input_tok_s"]):
        return None
    duration = _number(row, "duration_seconds", where)
    return measured["output_tok_s"] * duration, measured["input_tok_s"] * duration


@attrs.frozen
class OutputScale:
    """The factor on a ladder's corpus outputs that gives it the measured runs' output per
    prompt token, and where that figure was read."""

    scale: float
    measured: float   # output per prompt token the runs served
    corpus: float     # the same over the corpus as the ladder's scenario replays it
    source: str       # "the other ladders" or "its own rungs"


def matched_output_scales(rungs: Sequence[Rung], corpus_ratio,
                          every: Sequence[Rung] | None = None) -> dict[str, OutputScale]:
    """Per ladder, the output scale that gives the replayed corpus the output per prompt
    token of the measured runs, read from the file's *other* ladders (they replayed the same
    corpus through the same harness, so the figure is the workload's, not the server's; a
    ladder is never matched to its own rows unless the file holds no other). A ladder whose
    rows record no input throughput and duration, or a file where none does, is not scaled.
    ``corpus_ratio(rung)``: the corpus's output per prompt token as that rung replays it;
    ``every``: the file's rungs the figure is read from (default ``rungs``), so a ladder
    replayed alone (``--ladder``) is still matched to the others."""
    totals: dict[str, list[float]] = {}
    for r in rungs if every is None else every:
        if r.run_tokens is not None:
            t = totals.setdefault(r.ladder, [0.0, 0.0])
            t[0] += r.run_tokens[0]
            t[1] += r.run_tokens[1]
    out: dict[str, OutputScale] = {}
    for r in rungs:
        if r.ladder in out or not totals:
            continue
        others = [t for label, t in totals.items() if label != r.ladder]
        source = "the other ladders"
        if not others:
            others, source = list(totals.values()), "its own rungs"
        prompt = sum(t[1] for t in others)
        corpus = corpus_ratio(r)
        if prompt <= 0 or corpus <= 0:
            continue
        measured = sum(t[0] for t in others) / prompt
        out[r.ladder] = OutputScale(measured / corpus, measured, corpus, source)
    return out


def with_output_scales(rungs: Sequence[Rung], scales: dict[str, OutputScale]) -> list[Rung]:
    """Each rung with its ladder's output scale set (before the user's own --set keys)."""
    return [attrs.evolve(r, overrides=(*r.overrides,
                                       f"workload.output_scale={scales[r.ladder].scale:.6g}"))
            if r.ladder in scales else r for r in rungs]


def corpus_output_ratio(rung: Rung, overrides: Sequence[str] = ()) -> float:
    """The corpus's output per prompt token as ``rung``'s scenario replays it unscaled."""
    from inferasim.workload.agentx import replayed_corpus

    return replayed_corpus(rung_scenario(rung, overrides), 1.0).output_per_prompt_token()


def rung_recipe(rung: Rung) -> Path | None:
    """The serving recipe a rung's deployment replays with, or None (the engine's defaults)."""
    keys = _rung_keys(rung)
    return recipe_path(keys["engine.name"], keys["gpu.name"], keys["model.name"],
                       keys["model.weight_dtype"])


def rung_scenario(rung: Rung, overrides: Sequence[str] = ()):
    """The rung's scenario: the deployment's serving recipe where one is shipped (a scenario
    extending the harness), else the harness, with the rung's keys and then the user's."""
    from inferasim.config.loader import load_scenario

    return load_scenario(rung_recipe(rung) or HARNESS, [*rung.overrides, *overrides])


#: The override a rung takes where its recipe's receive interval meets attention-DP ranks.
RECV_EVERY_STEP = "engine.scheduler_recv_interval=1"


def _replayable(rung: Rung, overrides: Sequence[str]) -> Rung:
    """``rung`` where its scenario resolves; where only its recipe's receive interval is
    refused (a recipe read for one layout meets a ladder of attention-DP ranks, where the
    replay does not model it: InferenceX's SGLang scripts pass one), the rung reading new
    requests every step. Anything else the loader refuses is raised."""
    try:
        rung_scenario(rung, overrides)
        return rung
    except ConfigError as exc:
        if exc.key != "engine.scheduler_recv_interval" or "attention-DP" not in exc.message:
            raise
    every_step = attrs.evolve(rung, overrides=(*rung.overrides, RECV_EVERY_STEP))
    rung_scenario(every_step, overrides)
    return every_step


def expressible_rungs(rungs: Sequence[Rung], overrides: Sequence[str] = ()) -> list[Rung]:
    """The rungs whose deployment resolves to a scenario (weights that fit, a layout the
    catalog allows); each ladder that does not is warned about once and left out. When none
    does, the first error is raised: then it is the file's or the user's keys, not one
    deployment."""
    kept: list[Rung] = []
    failed: dict[str, ConfigError] = {}
    unread: set[str] = set()   # ladders replayed without their recipe's receive interval
    for rung in rungs:
        if rung.ladder in failed:
            continue
        try:
            replayed = _replayable(rung, overrides)
        except ConfigError as exc:
            failed[rung.ladder] = exc
            continue
        if replayed is not rung:
            unread.add(rung.ladder)
        kept.append(replayed)
    for ladder in sorted(unread - set(failed)):
        warn(f"{ladder}: its recipe's engine.scheduler_recv_interval is not modelled with "
             "attention-DP ranks; replayed reading new requests every step")
    if failed and not kept:
        raise next(iter(failed.values()))
    for ladder, exc in failed.items():
        warn(f"{ladder}: not replayed: {exc}")
    return kept


METRICS = ("prefix_hit_rate", "output_tok_s", "input_tok_s", "ttft_mean_s", "ttft_p90_s")


def compare_row(rung: Rung, summary: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {"ladder": rung.ladder, "concurrency": rung.concurrency}
    for m in METRICS:
        row[f"measured_{m}"] = rung.measured[m]
        row[f"simulated_{m}"] = float(summary[m])
    row["simulated_first_admission_hit_rate"] = float(summary["first_admission_hit_rate"])
    row["simulated_host_hit_rate"] = float(summary.get("host_hit_rate", 0.0))
    row["simulated_storage_hit_rate"] = float(summary.get("storage_hit_rate", 0.0))
    row["simulated_miss_rate"] = max(0.0, 1.0 - row["simulated_first_admission_hit_rate"]
                                     - row["simulated_host_hit_rate"]
                                     - row["simulated_storage_hit_rate"])
    row["simulated_requests"] = int(summary["requests_completed"])
    row["simulated_preemptions"] = int(summary["preemptions"])
    return row


def median_row(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One rung's rows (one per seed) as one: every simulated figure its median over them;
    with several, the hit rate's range and the seeds' count beside it."""
    import numpy as np

    if len(rows) == 1:
        return dict(rows[0])
    out = dict(rows[0])
    for key in out:
        if key.startswith("simulated_"):
            out[key] = float(np.median([r[key] for r in rows]))
    hits = [r["simulated_prefix_hit_rate"] for r in rows]
    out["simulated_prefix_hit_rate_range"] = [min(hits), max(hits)]
    out["seeds"] = len(rows)
    return out


def cliff(rows: Sequence[dict[str, Any]], prefix: str) -> tuple[int, int] | None:
    """Where one ladder falls off, measured or simulated (``prefix``): the rungs either side
    of the first step whose hit rate drops from >= 0.5 to < 0.2; on a ladder whose
    measurement records no hit rate, whose mean TTFT grows more than 5x (both sides judged
    alike)."""
    by_ttft = any(math.isnan(r["measured_prefix_hit_rate"]) for r in rows)
    # the shares below the GPU's (compare_row's partition: GPU + tiers + miss = 1)
    tiered = prefix == "simulated" and any(
        1.0 - r["simulated_first_admission_hit_rate"] - r["simulated_miss_rate"] > 0
        for r in rows)

    def hit(r: dict[str, Any]) -> float:
        if by_ttft:
            return math.nan
        # with offload tiers the cliff is where the cache as a whole (GPU, host, storage)
        # stops serving the prompts, not where the GPU's share falls
        if tiered:
            return 1.0 - r["simulated_miss_rate"]
        return r[f"{prefix}_prefix_hit_rate"]

    return cliff_between([{"concurrency": r["concurrency"], "prefix_hit_rate": hit(r),
                           "ttft_mean_s": r[f"{prefix}_ttft_mean_s"]} for r in rows])


def _ladder_key(model: str | None, engine: str | None, gpu: str | None, tp: int | None,
                weight: str | None) -> tuple:
    return (model, engine, gpu, int(tp or 0), weight)


def _rung_keys(rung: Rung) -> dict[str, str]:
    return dict(s.split("=", 1) for s in rung.overrides)


def _rung_deployment(rung: Rung) -> tuple:
    keys = _rung_keys(rung)
    return _ladder_key(keys["model.name"], keys["engine.name"], keys["gpu.name"],
                       int(keys["parallel.tp"]), keys["model.weight_dtype"])


def _record_deployment(record) -> tuple:
    r = record.regime
    return _ladder_key(r.model, r.engine, r.gpu, r.tp, r.weight_dtype)


def held_out_anchors(rungs: Sequence[Rung], csv_path: str | Path, folder: Path,
                     every: Sequence[Rung] | None = None) -> dict[int, Path]:
    """For each rung below its ladder's measured cliff (the rungs
    ``anchors import --from agentx-ladder`` keeps), an anchor file of the same ladder's
    other rungs: the index of the rung in ``rungs`` -> that file. The rung is then replayed
    calibrated by its neighbours alone, never by itself. ``every``: the file's rungs the
    cliffs are read from (default: read again from ``csv_path``), as
    ``matched_output_scales`` takes them."""
    from inferasim.anchors.importers.agentx_ladder import import_agentx_ladder
    from inferasim.anchors.store import write_anchor_file

    anchors = import_agentx_ladder(csv_path)   # its rungs past the cliff as mixed steps
    by_ladder: dict[tuple, list] = {}
    for a in anchors:
        by_ladder.setdefault(_record_deployment(a), []).append(a)
    # the cliff of each whole ladder in the file, as the importer finds it, not of the rungs
    # asked for (two rungs past it alone would show none)
    every = read_ladders(csv_path) if every is None else every
    last_below = {label: _last_below_cliff([r for r in every if r.ladder == label])
                  for label in {r.ladder for r in rungs}}
    out: dict[int, Path] = {}
    for i, rung in enumerate(rungs):
        top = last_below[rung.ladder]
        mine = by_ladder.get(_rung_deployment(rung), [])
        own = [a for a in mine if a.workload.concurrency == rung.concurrency]
        others = [a for a in mine if a.workload.concurrency != rung.concurrency]
        if not own or rung.concurrency > top \
                or not any(a.workload.concurrency <= top for a in others):
            continue
        path = folder / f"rung-{i}.json"
        write_anchor_file(path, others, generated_by="validate agentx --hold-out rung")
        out[i] = path
    return out


def _last_below_cliff(rungs: Sequence[Rung]) -> float:
    """The highest concurrency before one ladder's measured cliff (every rung where it has
    none)."""
    cut = cliff_between([{"concurrency": r.concurrency,
                          "prefix_hit_rate": r.measured.get("prefix_hit_rate", math.nan),
                          "ttft_mean_s": r.measured.get("ttft_mean_s", 0.0)} for r in rungs])
    return math.inf if cut is None else cut[0]


def _rung_key(rung: Rung) -> tuple:
    """A rung's run: its deployment and engine build."""
    return _rung_deployment(rung), _rung_keys(rung).get("engine.version") or None


def _record_key(record) -> tuple:
    """The run an anchor measured: its deployment and engine build."""
    return _record_deployment(record), record.provenance.engine_version or None


def ladder_held_out_stores(rungs: Sequence[Rung], overrides: Sequence[str], folder: Path
                           ) -> tuple[list[Path | None], int]:
    """For each rung, an anchor file of the store its scenario calibrates from less every
    anchor of its own ladder's deployment and build (model, engine, GPU, TP, weights and
    engine version: the ladder's rungs, and any other record of that run), so a ladder is
    priced as one no anchor measured: by the prior of its part and engine, or analytically.
    Another build's anchors of the same deployment stay: they are not the measurement being
    predicted. ``None`` where the scenario uses no anchors. Also how many were held out."""
    from inferasim.anchors.loading import scenario_store
    from inferasim.anchors.store import write_anchor_file

    files: dict[tuple, Path | None] = {}
    held = 0
    out: list[Path | None] = []
    for rung in rungs:
        key = _rung_key(rung)
        if key not in files:
            store = scenario_store(rung_scenario(rung, overrides))
            if store is None:
                files[key] = None
            else:
                kept = [a for a in store.records if _record_key(a) != key]
                held += len(store.records) - len(kept)
                path = folder / f"ladder-{len(files)}.json"
                write_anchor_file(path, kept, generated_by="validate agentx --hold-out ladder")
                files[key] = path
        out.append(files[key])
    return out, held


def _error_cell(errors: Sequence[float]) -> dict[str, float | None]:
    """Median absolute and signed error of ``errors`` (predicted / measured - 1)."""
    import numpy as np

    errs = np.asarray(errors, dtype=float)
    if not errs.size:
        return {"median_abs": None, "median_signed": None}
    return {"median_abs": float(np.median(np.abs(errs))), "median_signed": float(np.median(errs))}


def _errors(rows: Sequence[dict[str, Any]], metric: str) -> list[float]:
    """simulated / measured - 1 of ``metric`` on every row that measured it (not NaN, not 0)."""
    return [r[f"simulated_{metric}"] / r[f"measured_{metric}"] - 1.0
            for r in rows if r[f"measured_{metric}"] > 0]


def held_out_errors(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """Median absolute and signed error of output tok/s and mean TTFT over ``rows``."""
    out = {}
    for metric in ("output_tok_s", "ttft_mean_s"):
        errs = _errors(rows, metric)
        out[metric] = {"n": len(errs), **_error_cell(errs)}
    return out


def ladder_scores(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The table against issue 28's and 29's bars, over ``rows`` (one ladder or several):
    before each ladder's measured cliff, the median absolute and signed error of output tok/s
    and mean TTFT; past it, how many rungs have output tok/s within 30% and mean TTFT within
    a factor of 2, and the median error of input tok/s (the prefill rate there, whatever the
    corpus's output lengths); on every rung that records one, how many simulated hit rates sit
    within 0.05 of the measured."""
    before: list[dict[str, Any]] = []
    past: list[dict[str, Any]] = []
    for label in dict.fromkeys(r["ladder"] for r in rows):
        mine = [r for r in rows if r["ladder"] == label]
        edge = cliff(mine, "measured")
        for r in mine:
            (past if edge is not None and r["concurrency"] > edge[0] else before).append(r)

    out: dict[str, Any] = {"before_cliff": {"rungs": len(before)}, "past_cliff": {"rungs": len(past)}}
    for metric in ("output_tok_s", "ttft_mean_s"):
        out["before_cliff"][metric] = _error_cell(_errors(before, metric))
    out_past, ttft_past = _errors(past, "output_tok_s"), _errors(past, "ttft_mean_s")
    out["past_cliff"].update(
        output_within_30pct=sum(abs(x) <= 0.30 for x in out_past),
        ttft_within_2x=sum(0.5 <= 1 + x <= 2.0 for x in ttft_past),
        input_tok_s=_error_cell(_errors(past, "input_tok_s")))
    hits = [abs(r["simulated_prefix_hit_rate"] - r["measured_prefix_hit_rate"]) for r in rows
            if not math.isnan(r["measured_prefix_hit_rate"])]
    out["hit_rate"] = {"rungs": len(hits), "within_0.05": sum(h <= 0.05 for h in hits),
                       "max_abs": max(hits) if hits else None}
    return out
