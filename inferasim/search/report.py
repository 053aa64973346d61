"""What a search writes: every candidate as a row (stage, why, projected and replayed figures,
calibration, money and energy), the frontier, the winners as scenarios ready to run, a chart.

Files in ``--out`` (replaced whole, as a sweep's are): ``candidates.csv`` (+ ``.parquet``),
``frontier.csv``, ``search.json``, ``best-<objective>.yaml``, ``frontier.png``; wall times
go to ``timing.json`` only, so the rest is byte-identical between two runs of one search
whatever executor ran it.
"""

from __future__ import annotations

import json
import math
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from inferasim.arch.layout import reservation_problem, serving_caveat
from inferasim.config.loader import scenario_to_dict
from inferasim.report import strict_json
from inferasim.report.atomic import RESULT_MARKER, atomic_dir
from inferasim.search.economics import unpriced_parts
from inferasim.search.replay import FAILED
from inferasim.search.run import REPRIEVED, SearchResult, pareto
from inferasim.search.sla import OBJECTIVES, Sla
from inferasim.sweep.ladder import write_table

REPLAYED_KEYS = ("total_tok_s_per_gpu", "output_tok_s_per_gpu", "interactivity_tok_s",
                 "ttft_p50_s", "ttft_p90_s", "tpot_p90_ms", "e2e_p90_s", "requests_completed",
                 "calibration.mode", "price_per_gpu_hour", "cost_per_mtok_usd", "power_w_per_gpu",
                 "power_source", "gpu_busy", "joules_per_token", "tok_s_per_mw")
PROJECTED_KEYS = ("total_tok_s_per_gpu", "interactivity_tok_s", "ttft_mean_s", "tpot_mean_ms")


def frame(result: SearchResult, sla: Sla) -> pd.DataFrame:
    replayed = sorted(result.records)
    front = pareto([(i, float(result.records[i].get("total_tok_s_per_gpu", math.nan)),
                     float(result.records[i].get("interactivity_tok_s", math.nan)))
                    for i in replayed])
    audited = set(result.audited)
    rows = []
    for cand, verdict in zip(result.candidates, result.verdicts, strict=True):
        i = cand.index
        row: dict[str, Any] = {"candidate": i, "deployment": cand.deployment.label,
                               "concurrency": cand.concurrency if cand.closed_loop else None,
                               "gpus": cand.gpus}
        row.update(dict(cand.deployment.overrides))
        row["stage"] = ("audited" if i in audited else verdict.stage)
        row["reason"] = verdict.reason
        proj = verdict.projection or {}
        for key in PROJECTED_KEYS:
            row[f"projected.{key}"] = proj.get(key, math.nan)
        rec = result.records.get(i)
        if rec is not None and FAILED in rec:
            row["reason"] = f"served nothing: {rec[FAILED]}"
        elif rec is not None and rec.get("requests_failed"):
            row["reason"] = (f"refused {rec['requests_failed']} request(s): "
                             f"{rec.get('requests_failed_example', '')}")
        for key in REPLAYED_KEYS:
            row[key] = rec.get(key, math.nan) if rec is not None else math.nan
        row["meets_sla"] = bool(rec is not None and sla.met(rec))
        row["on_frontier"] = i in front
        row["best_for"] = ",".join(o for o in OBJECTIVES if result.best.get(o) == i)
        rows.append(row)
    return pd.DataFrame(rows)


def summary(result: SearchResult, sla: Sla, objective: str, margin: float, gpus: int,
            refused: int) -> dict[str, Any]:
    stages = [v.stage for v in result.verdicts]
    best = {}
    for obj, i in result.best.items():
        if i is None:
            best[obj] = None
            continue
        rec = result.records[i]
        key = OBJECTIVES[obj][0]
        best[obj] = {"candidate": i, "deployment": result.candidates[i].label,
                     "value": rec.get(key), "total_tok_s_per_gpu": rec.get("total_tok_s_per_gpu"),
                     "interactivity_tok_s": rec.get("interactivity_tok_s"),
                     "calibration": rec.get("calibration.mode"),
                     "scenario": f"best-{obj}.yaml",
                     # what the real server does beyond the scenario (vLLM's start-up
                     # check, TensorRT-LLM's reservation)
                     "caveat": serving_caveat(result.candidates[i].scenario)}
    return {
        "gpus": gpus, "sla": dict(sla.bounds), "objective": objective, "margin": margin,
        "candidates": len(result.candidates), "refused_deployments": refused,
        "pruned": stages.count("pruned"), "replayed": len(result.records),
        "survivors": stages.count("replay"), "audited": len(result.audited),
        # replayed and served nothing (every request refused): why, per candidate
        "failed": [{"candidate": i, "deployment": result.candidates[i].label,
                    "reason": rec[FAILED]} for i, rec in sorted(result.records.items())
                   if FAILED in rec],
        "reprieved": sum(v.reason == REPRIEVED for v in result.verdicts),
        "audit": [{"candidate": i, "replay_agrees_it_loses": ok, "why": why}
                  for i, ok, why in result.audit_agrees],
        "projection_median_abs_error_pct": result.projection_error,
        "best": best,
    }


def refusal_note(result: SearchResult) -> str | None:
    """One line when replayed candidates refused part of their workload (they meet no SLA):
    how many, and the first one's reason."""
    refused = [(i, rec) for i, rec in sorted(result.records.items())
               if FAILED not in rec and rec.get("requests_failed")]
    if not refused:
        return None
    i, rec = refused[0]
    return (f"{len(refused)} replayed candidate(s) refused part of the workload and meet no "
            f"SLA (the first, {result.candidates[i].label}: "
            f"{rec.get('requests_failed_example', '')})")


def reservation_note(result: SearchResult) -> str | None:
    """One line when TensorRT-LLM candidates ran fewer requests than their clients because
    the clients send no max_tokens (``layout.reservation_problem``): why they lost."""
    held = [c for c in result.candidates if reservation_problem(c.scenario)]
    if not held:
        return None
    return (f"{len(held)} candidate(s) under TensorRT-LLM's GUARANTEED_NO_EVICT reserve each "
            "request's whole sequence, as the workload's clients send no max_tokens, and run "
            "fewer requests than their clients; workload.synthetic.max_tokens says what the "
            "clients send")


def price_note(result: SearchResult, prices: Mapping[str, float]) -> str | None:
    """One line when some candidates' parts have no GPU-hour price (neither the catalog's nor
    a ``--price``): their cost per million tokens is unknown, not zero."""
    missing = unpriced_parts((c.scenario for c in result.candidates), prices)
    if not missing:
        return None
    return (f"$/Mtok unknown for {', '.join(missing)}: no sourced GPU-hour price in the "
            f"catalog; pass --price {missing[0]}=USD")


def best_scenario(tree: dict[str, Any], result: SearchResult, objective: str) -> str:
    i = result.best[objective]
    head = (f"# Written by inferasim search: the best deployment for {objective}\n"
            f"# ({result.candidates[i].label}). Run it with: inferasim run THIS_FILE\n")
    caveat = serving_caveat(result.candidates[i].scenario)
    if caveat:
        head += "".join(f"# {line}\n" for line in textwrap.wrap(
            f"Note: as deployed, {caveat}", 88, break_on_hyphens=False))
    return head + yaml.safe_dump(tree, sort_keys=False)


def write(out_dir: str | Path, table: pd.DataFrame, info: dict[str, Any],
          trees: dict[str, dict[str, Any]], result: SearchResult, timing: dict[str, Any],
          *, plots: bool = True, title: str = "", base=None) -> list[str]:
    with atomic_dir(out_dir) as tmp:
        if base is not None:
            (tmp / RESULT_MARKER).write_text(yaml.safe_dump(scenario_to_dict(base),
                                                            sort_keys=False))
        write_table(table, tmp, "candidates")
        front = table[table.on_frontier].sort_values("interactivity_tok_s")
        front.to_csv(tmp / "frontier.csv", index=False)
        (tmp / "search.json").write_text(strict_json.dumps(info, indent=2) + "\n")
        for obj, tree in trees.items():
            (tmp / f"best-{obj}.yaml").write_text(best_scenario(tree, result, obj))
        walls = {str(i): w for i, w in sorted(result.walls.items())}
        (tmp / "timing.json").write_text(json.dumps({**timing, "replay_wall_s": walls},
                                                    indent=2) + "\n")
        if plots:
            plot_frontier(table, tmp / "frontier.png", title)
        return sorted(p.name for p in tmp.iterdir())


def plot_frontier(table: pd.DataFrame, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rep = table[table.stage != "pruned"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for mode, marker in (("anchored", "o"), ("prior", "^"), ("analytic", "x")):
        pts = rep[rep["calibration.mode"] == mode]
        ax.scatter(pts.interactivity_tok_s, pts.total_tok_s_per_gpu, marker=marker, s=18,
                   alpha=0.6, label=f"replayed ({mode})")
    front = rep[rep.on_frontier].sort_values("interactivity_tok_s")
    ax.plot(front.interactivity_tok_s, front.total_tok_s_per_gpu, "-", lw=1.5, label="frontier")
    best = rep[rep.best_for.str.contains("throughput_per_gpu", na=False)]
    ax.scatter(best.interactivity_tok_s, best.total_tok_s_per_gpu, marker="*", s=160,
               color="red", label="chosen", zorder=5)
    ax.set_xlabel("interactivity (tok/s per user)")
    ax.set_ylabel("throughput (tok/s per GPU)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)


def table_text(table: pd.DataFrame, limit: int = 15) -> str:
    """The replayed candidates, those meeting the SLA first (the winners among them), then by
    throughput per GPU."""
    rep = table[table.stage != "pruned"].sort_values(["meets_sla", "total_tok_s_per_gpu"],
                                                     ascending=False)
    cols = [("candidate", "#", "{}"), ("deployment", "deployment", "{}"),
            ("concurrency", "conc", "{}"), ("total_tok_s_per_gpu", "tok/s/GPU", "{:.0f}"),
            ("interactivity_tok_s", "tok/s/user", "{:.1f}"), ("ttft_p90_s", "TTFT p90 s", "{:.2f}"),
            ("cost_per_mtok_usd", "$/Mtok", "{:.3f}"), ("joules_per_token", "J/tok", "{:.2f}"),
            ("calibration.mode", "calibration", "{}"), ("meets_sla", "SLA", "{}"),
            ("best_for", "best for", "{}")]
    rows = [[h for _, h, _ in cols]]
    for _, r in rep.head(limit).iterrows():
        cells = []
        for key, _, fmt in cols:
            v = r[key]
            try:
                blank = v is None or (isinstance(v, float) and math.isnan(v))
                cells.append("-" if blank else fmt.format(v))
            except (TypeError, ValueError):
                cells.append(str(v))
        rows.append(cells)
    widths = [max(len(r[i]) for r in rows) for i in range(len(cols))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows)
