"""A deployment search at the size issue 31 asks: DeepSeek-R1 on a 16-GPU budget, 1k/1k.

    python benchmarks/bench_search.py [--gpu b200] [--gpus 16] [--jobs 2] [--duration 300]
                                      [--sla interactivity_tok_s=40] [--out DIR]

Runs ``inferasim search`` on the InferenceMAX DeepSeek-R1 B200 SGLang scenario's workload
(random 1k/1k prompts, the harness's 0.8 length spread) over the whole default space
(vLLM, SGLang and TensorRT-LLM; every TP/EP/attention-DP layout that fits; colocated and
every xPyD split; MTP or not; the concurrency ladder) with an empty replay cache, and
prints: candidates, deployments refused, pruned, replayed, the wall time, the time per
replay (mean and max of the replays' own wall times) and the audit's agreement. A second
run on the same cache is timed too: it must replay nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from click.testing import CliRunner

REPO = Path(__file__).resolve().parents[1]
SCENARIO = REPO / "scenarios" / "inferencemax" / "dsr1-b200-sglang-fp8-tp8.yaml"


def run(args, cache: Path, out: Path, *extra: str) -> tuple[float, dict, dict]:
    from inferasim.cli.main import cli

    argv = ["search", str(SCENARIO), "--gpus", str(args.gpus), "--sla", args.sla,
            "--set", f"gpu.name={args.gpu}", "--set", f"workload.duration_s={args.duration}",
            # the recipe's receive interval is SGLang's and excludes attention-DP: searched
            # layouts start from each engine's own defaults
            "--set", "engine.scheduler_recv_interval=1",
            "--cache", str(cache), "--out", str(out), "--jobs", str(args.jobs), "--json",
            "--no-plots", *extra]
    started = time.perf_counter()
    result = CliRunner().invoke(cli, argv, catch_exceptions=False)
    wall = time.perf_counter() - started
    if result.exit_code != 0:
        sys.exit(f"search failed ({result.exit_code}): {result.output[-2000:]}")
    info = json.loads((out / "search.json").read_text())
    timing = json.loads((out / "timing.json").read_text())
    return wall, info, timing


def _exhaustive(args, tmp: Path, out: Path, info: dict) -> dict:
    """Every candidate replayed: does the pruned search choose what it would, and does every
    pruned candidate lose in its own replay (miss the SLA or trail the winner)?"""
    import pandas as pd

    full = tmp / "exhaustive"
    wall, full_info, timing = run(args, tmp / "cache-exhaustive", full, "--margin", "1e9",
                                  "--audit", "0")
    pruned = pd.read_csv(out / "candidates.csv").set_index("candidate")
    replayed = pd.read_csv(full / "candidates.csv").set_index("candidate")
    winner = info["best"]["throughput_per_gpu"]
    top = float(replayed.loc[winner["candidate"], "total_tok_s_per_gpu"]) if winner else float("nan")
    gone = replayed.loc[pruned.index[pruned.stage == "pruned"]]
    beats = gone[gone.meets_sla & (gone.total_tok_s_per_gpu > top)]
    return {"wall_s": round(wall, 1), "replayed": full_info["replayed"],
            "best": {k: (v or {}).get("deployment") for k, v in full_info["best"].items()},
            "same_choice": full_info["best"] == info["best"],
            "pruned_checked": int(len(gone)), "pruned_meeting_sla": int(gone.meets_sla.sum()),
            "pruned_that_beat_the_winner": int(len(beats))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", default="b200")
    ap.add_argument("--gpus", type=int, default=16)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--duration", type=float, default=300.0)
    ap.add_argument("--sla", default="interactivity_tok_s=40")
    ap.add_argument("--out", default=None, help="Keep the search's output folder here.")
    ap.add_argument("--exhaustive", action="store_true",
                    help="Also replay every candidate (no pruning, on its own cache) and check "
                         "that each pruned candidate loses in its replay.")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "cache"
        out = Path(args.out) if args.out else Path(tmp) / "out"
        wall, info, timing = run(args, cache, out)
        again, info2, timing2 = run(args, cache, Path(tmp) / "again")
        exhaustive = _exhaustive(args, Path(tmp), out, info) if args.exhaustive else None
    walls = [float(v) for v in timing["replay_wall_s"].values()]
    report = {
        "candidates": info["candidates"], "refused_deployments": info["refused_deployments"],
        "pruned": info["pruned"], "replayed": info["replayed"], "audited": info["audited"],
        "reprieved": info["reprieved"],
        "audit_agrees": sum(a["replay_agrees_it_loses"] for a in info["audit"]),
        "wall_s": round(wall, 1), "workers": timing["workers"],
        "replay_s_mean": round(sum(walls) / len(walls), 2) if walls else None,
        "replay_s_max": round(max(walls), 2) if walls else None,
        "projection_median_abs_error_pct": info["projection_median_abs_error_pct"],
        "best": {k: (v or {}).get("deployment") for k, v in info["best"].items()},
        "second_run_wall_s": round(again, 1),
        "second_run_replays_run": timing2["replays_run"],
        "same_choice": info2["best"] == info["best"],
    }
    if exhaustive is not None:
        report["exhaustive"] = exhaustive
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
