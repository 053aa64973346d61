"""Does the search pick what measurement would? Checked on InferenceMAX's own table.

For each GPU and ISL/OSL of an InferenceMAX results file, the candidates are the colocated
single-node configurations it measured (with ``include_disaggregated``, its disaggregated
deployments too), at the concurrencies it measured. Each candidate is
predicted with its own row held out (``anchors validate``'s leave-one-out: the replay, or its
closed form past 256 clients, calibrated on the other rows of its regime), so no pick reads
the measurement it is judged by. Three SLAs are set at interactivity levels on the measured
frontier (its 25th, 50th and 75th percentile); for each, the search's rule (``pick_best``:
the highest predicted throughput per GPU among candidates predicted to meet the floor) picks
one, and its *measured* throughput is set against the best measured configuration meeting
the floor. Done means the pick is within ``TOLERANCE`` of that best.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from inferasim.anchors.store import AnchorStore
from inferasim.config.knobs import Knobs
from inferasim.search.run import pareto, pick_best
from inferasim.search.sla import Sla

TOLERANCE = 0.10
LEVELS = (25.0, 50.0, 75.0)


@attrs.frozen
class Point:
    anchor: str
    config: str
    concurrency: int
    measured_tput: float
    measured_intvty: float
    predicted_tput: float
    predicted_intvty: float


@attrs.frozen
class Pick:
    gpu: str
    shape: str
    level: float                 # interactivity floor, tok/s per user
    candidates: int
    best: Point | None           # best measured meeting the floor
    picked: Point | None         # the search's pick from predictions
    picked_meets: bool           # the pick's measured interactivity meets the floor

    @property
    def ratio(self) -> float | None:
        if self.best is None or self.picked is None:
            return None
        return self.picked.measured_tput / self.best.measured_tput

    @property
    def ok(self) -> bool:
        """Within TOLERANCE of the best, and meeting the floor as measured: a pick that
        beats the best by missing the SLA is a miss."""
        r = self.ratio
        return r is not None and r >= 1.0 - TOLERANCE and self.picked_meets


def _intvty(tpot: float | None) -> float:
    return 1.0 / tpot if tpot and tpot > 0 else math.nan


def points(records, knobs: Knobs | None = None) -> dict[tuple[str, str], list[Point]]:
    """Leave-one-out predictions of every scored row, grouped by (GPU, ISL/OSL). A row whose
    throughput contradicts its own latency (``left_out``) is no candidate: which of its
    figures is wrong cannot be told, so it can be neither the best nor a pick."""
    from inferasim.validate.anchors import group_label, validate_store

    by_id = {r.id: r for r in records}
    groups: dict[tuple[str, str], list[Point]] = {}
    for result in validate_store(AnchorStore(list(records)), knobs=knobs, hold_out="point"):
        for p in result.predictions:
            if p.excluded:
                continue
            rec = by_id[p.anchor]
            m = rec.measurements
            measured_i = m.interactivity if m.interactivity else _intvty(m.tpot_s)
            point = Point(p.anchor, group_label(rec, with_build=True), p.concurrency,
                          float(p.measured["tput_per_gpu"] or math.nan), float(measured_i),
                          float(p.predicted["tput_per_gpu"] or math.nan),
                          _intvty(p.predicted["tpot"]))
            key = (rec.regime.gpu or "?", f"{p.isl}/{p.osl}")
            groups.setdefault(key, []).append(point)
    return groups


def left_out(records) -> list[tuple[str, str]]:
    """The rows ``points`` leaves out, each with why."""
    return [(r.id, why) for r in records if (why := r.little_mismatch())]


def levels(group: Sequence[Point], how: str = "range") -> list[float]:
    """Three interactivity floors on the measured frontier: at 25, 50 and 75% of the way
    along its interactivity span (``range``: between its points, so the best configuration
    meeting a floor meets it with room), or at the 25/50/75th percentile of its points'
    values (``points``: mostly on a point, where the best meets the floor with none and a
    prediction 1% pessimistic drops it)."""
    front = pareto([(i, p.measured_tput, p.measured_intvty) for i, p in enumerate(group)])
    values = sorted(group[i].measured_intvty for i in front)
    if not values:
        return []
    if how == "points":
        return sorted({float(np.percentile(values, q)) for q in LEVELS})
    lo, hi = values[0], values[-1]
    return sorted({lo + (hi - lo) * q / 100.0 for q in LEVELS})


def picks(groups: dict[tuple[str, str], list[Point]], how: str = "range") -> list[Pick]:
    out = []
    for (gpu, shape), group in sorted(groups.items()):
        for level in levels(group, how):
            sla = Sla((("interactivity_tok_s", level),))
            measured = {i: {"interactivity_tok_s": p.measured_intvty,
                            "total_tok_s_per_gpu": p.measured_tput} for i, p in enumerate(group)}
            predicted = {i: {"interactivity_tok_s": p.predicted_intvty,
                             "total_tok_s_per_gpu": p.predicted_tput} for i, p in enumerate(group)}
            best = pick_best(list(measured), measured, sla)["throughput_per_gpu"]
            chosen = pick_best(list(predicted), predicted, sla)["throughput_per_gpu"]
            picked = group[chosen] if chosen is not None else None
            out.append(Pick(gpu, shape, level, len(group),
                            group[best] if best is not None else None, picked,
                            picked is not None and picked.measured_intvty >= level))
    return out


def report(found: Sequence[Pick], dropped: Sequence[tuple[str, str]] = ()) -> dict[str, Any]:
    scored = [p for p in found if p.ratio is not None]
    return {
        "tolerance": TOLERANCE,
        "left_out": [{"anchor": a, "why": why} for a, why in dropped],
        "picks": len(found),
        "within_tolerance": sum(p.ok for p in found),
        "no_pick": sum(p.picked is None for p in found),
        "median_ratio": float(np.median([p.ratio for p in scored])) if scored else None,
        "rows": [{"gpu": p.gpu, "shape": p.shape, "interactivity_floor": p.level,
                  "candidates": p.candidates,
                  "best_measured": None if p.best is None else attrs.asdict(p.best),
                  "picked": None if p.picked is None else attrs.asdict(p.picked),
                  "picked_meets_floor": p.picked_meets, "ratio": p.ratio, "ok": p.ok}
                 for p in found],
    }


def load_records(path: str | Path, *, include_disaggregated: bool = False):
    from inferasim.anchors.importers.inferencemax import import_inferencemax

    return import_inferencemax(path, include_disaggregated=include_disaggregated)
