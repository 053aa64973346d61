"""How far each measured decode step ran from its analytic price, by layout kind.

For every shipped DeepSeek-R1 anchor without speculative decoding that records a median
TPOT, the analytic step of its deployment (its family's scenario in its layout, the decode
pool's for a disaggregated row) at the batch a rank holds in steady state (the clients over
the decode workers and ranks, capped by the recorded running limit) and the mean context
(ISL + OSL / 2), against the measured median TPOT. Grouped by engine and by whether the
ranks stand apart (attention DP) or not: the evidence for reading attention-DP regimes apart
in a prior (docs/anchors.md, "Attention-DP regimes read apart").

    python benchmarks/analytic_ratio_by_layout.py [-v]

The batch is an estimate (a disaggregated decode worker may queue clients past its limit,
which the measured TPOT then holds), so the figures are a reading of the analytic model,
not a validation; ``anchors validate --hold-out layout`` is that.
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-v", action="store_true", help="list each attention-DP point")
    args = ap.parse_args()

    from inferasim.anchors.loading import default_store
    from inferasim.config.errors import ConfigError
    from inferasim.config.loader import pool_scenario
    from inferasim.cost.oracle import AnalyticOracle, StepBatch
    from inferasim.validate.anchors import anchor_workload, base_scenario, load_templates

    templates = load_templates()
    groups: dict[tuple[str, bool], list[tuple]] = defaultdict(list)
    for rec in default_store().records:
        reg, meas, wl = rec.regime, rec.measurements, rec.workload
        if reg.model != "deepseek-r1" or reg.spec_method not in (None, "none") \
                or not meas.tpot_median_s:
            continue
        try:
            sc = anchor_workload(base_scenario(rec, templates)[1], rec)
            workers = 1
            if sc.topology.kind == "disaggregated":
                sc, workers = pool_scenario(sc, "decode"), reg.decode_workers or 1
            oracle = AnalyticOracle(sc)
        except ConfigError:
            continue
        ranks = sc.parallel.dp_attention
        per_rank = wl.concurrency / workers / ranks
        if sc.engine.max_num_seqs:
            per_rank = min(per_rank, sc.engine.max_num_seqs / ranks)
        ctx = np.full(max(1, round(per_rank)), wl.isl + wl.osl / 2.0)
        if ranks > 1:
            cost = oracle.step_group([StepBatch(decode_context=ctx) for _ in range(ranks)])
        else:
            cost = oracle.step(StepBatch(decode_context=ctx))
        groups[(reg.engine, ranks > 1)].append(
            (meas.tpot_median_s / cost.seconds, reg.gpu, reg.weight_dtype, sc.parallel.tp,
             ranks, round(per_rank), meas.tpot_median_s * 1e3, cost.seconds * 1e3))
    print("engine           ranks      points  measured / analytic step: median (p25-p75)")
    for (engine, apart), rows in sorted(groups.items()):
        ratios = [r[0] for r in rows]
        print(f"{engine:16s} {'apart' if apart else 'one':9s} {len(rows):7d}  "
              f"{np.median(ratios):.2f} ({np.percentile(ratios, 25):.2f}-"
              f"{np.percentile(ratios, 75):.2f})")
        if args.v and apart:
            for r in sorted(rows):
                print("    {:.2f} {} {} tp{} dpa{} {} a rank: {:.1f} ms measured, {:.1f} "
                      "analytic".format(*r))
    every = {apart: [r[0] for (_, a), rows in groups.items() if a == apart for r in rows]
             for apart in (False, True)}
    for apart, ratios in every.items():
        print(f"all {'attention-DP' if apart else 'one-rank'} points: {len(ratios)}, median "
              f"{np.median(ratios):.2f}")


if __name__ == "__main__":
    main()
