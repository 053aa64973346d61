"""The disaggregated closed form (``project_disaggregated``) against the replay of the same
xPyD deployment: DeepSeek-R1 NVFP4 on 16 B200 under Dynamo SGLang, TP4 pools split 1P3D,
2P2D and 3P1D, at 16-768 clients, with the shipped anchors and analytic. Prints each
point's error (projection over replay, minus 1) and the medians per oracle.

    python benchmarks/projection_vs_replay_disagg.py [--duration-s 300]

Figures in docs/sweeps.md ("Disaggregated deployments")."""

from __future__ import annotations

import argparse

import numpy as np

from inferasim.config.catalog import REPO_ROOT
from inferasim.config.knobs import Knobs
from inferasim.config.loader import load_scenario
from inferasim.report.run_report import replay_summary
from inferasim.serve.simulation import simulate
from inferasim.sweep.projection import project_disaggregated

SCENARIO = REPO_ROOT / "scenarios/inferencemax/dsr1-b200-dynamo-sglang-nvfp4-disagg.yaml"
SPLITS = ((1, 3), (2, 2), (3, 1))
CLIENTS = (16, 64, 256, 768)
METRICS = ("total_tok_s_per_gpu", "interactivity_tok_s", "ttft_mean_s")


def errors(sets: list[str]) -> dict[str, float]:
    sc = load_scenario(SCENARIO, sets)
    proj = project_disaggregated(sc, Knobs())
    _, rep = replay_summary(simulate(sc, Knobs()))
    out = {k: proj[k] / rep[k] - 1.0 for k in METRICS}
    out["ttft_vs_median"] = proj["ttft_mean_s"] / rep["ttft_p50_s"] - 1.0
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration-s", type=float, default=300.0)
    args = ap.parse_args()
    for anchors in ("shipped", "none"):
        rows = []
        for x, y in SPLITS:
            for conc in CLIENTS:
                sets = [f"workload.concurrency={conc}", f"workload.duration_s={args.duration_s}",
                        "parallel.tp=4", "parallel.ep=4", "topology.prefill.parallel.tp=4",
                        "topology.prefill.parallel.ep=4", f"topology.prefill.instances={x}",
                        f"topology.decode.instances={y}"]
                if anchors == "none":
                    sets.append("sim.anchors=none")
                e = errors(sets)
                rows.append(e)
                print(f"{anchors:8s} {x}P{y}D c{conc:<4d} "
                      + "  ".join(f"{k} {v:+.1%}" for k, v in e.items()), flush=True)
        print(f"{anchors}: median abs (signed) over {len(rows)}: " + "  ".join(
            f"{k} {np.median([abs(r[k]) for r in rows]):.1%} "
            f"({np.median([r[k] for r in rows]):+.1%})" for k in rows[0]), flush=True)


if __name__ == "__main__":
    main()
