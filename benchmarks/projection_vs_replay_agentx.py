"""The closed form (``project``, agentic lanes as closed-loop sessions) against the replay
and the measurement, on every rung of the measured AgentX ladders: prefix hit rate and
output tok/s, each rung's scenario as ``validate agentx`` builds it (its recipe, outputs
matched to the measured runs), the shipped anchors, seed 42.

    python benchmarks/projection_vs_replay_agentx.py [--ladder TEXT] [--concurrency 8,16]
        [--no-replay]

Figures in docs/sweeps.md ("Agentic lanes")."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from inferasim.config.catalog import REPO_ROOT
from inferasim.report.run_report import replay_summary
from inferasim.serve.simulation import simulate
from inferasim.sweep.projection import project
from inferasim.validate.agentx import (
    corpus_output_ratio,
    matched_output_scales,
    read_ladders,
    rung_scenario,
    with_output_scales,
)

LADDERS = REPO_ROOT.parent / "shared/data/agentx-measured/agentx_dev_ladders.csv"


def _cell(hit: float, out: float) -> str:
    return f"{hit:.3f} / {out:.1f}" if math.isfinite(hit) else f"- / {out:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ladders", type=Path, default=LADDERS)
    ap.add_argument("--ladder", default="", help="only ladders whose label contains this")
    ap.add_argument("--concurrency", default=None, help="only these rungs, e.g. 8,16")
    ap.add_argument("--no-replay", action="store_true", help="the projection alone")
    args = ap.parse_args()
    if not args.ladders.is_file():
        sys.exit(f"{args.ladders}: not there (the shared data sits beside the checkout)")
    rungs = read_ladders(args.ladders)
    rungs = with_output_scales(rungs, matched_output_scales(rungs, corpus_output_ratio))
    wanted = {int(c) for c in args.concurrency.split(",")} if args.concurrency else None
    print("| ladder | c | projection | replay | measured |\n|---|---:|---|---|---|")
    for rung in rungs:
        if args.ladder not in rung.ladder or (wanted and rung.concurrency not in wanted):
            continue
        sc = rung_scenario(rung)
        proj = project(sc)
        replay = "-"
        if not args.no_replay:
            rep = replay_summary(simulate(sc))[1]
            replay = _cell(rep["prefix_hit_rate"], rep["output_tok_s"])
        m = rung.measured
        print(f"| {rung.ladder} | {rung.concurrency} | "
              f"{_cell(proj['prefix_hit_rate'], proj['output_tok_s'])} | {replay} | "
              f"{_cell(m['prefix_hit_rate'], m['output_tok_s'])} |", flush=True)


if __name__ == "__main__":
    main()
