"""A prior: how far a part (and engine) runs from the analytic step, pooled over the regimes
of other models or layouts measured on it, for a target no anchor of its own regime prices.

Each regime the prior draws on is first calibrated on its own, against its own model's
analytic step (``CalibratedOracle`` on that regime's deployment). What is pooled is each
regime's *level* — its decode ratio at the lowest concurrency it measured, where a decode
step streams weights and KV and is most the part's and its kernels' — and its prefill
efficiency and prefill step overhead, each by the median over the regimes. The time a
regime's requests spent outside the engine is not carried: it is its client's and its
harness's (held out by model, carrying it took the TTFT error from -61% to +502% on
DeepSeek-R1 SGLang H200 priced from a gpt-oss run, and from -80% to +327% on MiniMax-M2.5),
except from the target's own model in the same harness on a colocated deployment: another
layout of the same model, measured by the same client, spends the same time outside the
engine (``frontend_from``; docs/anchors.md, "The time outside the engine, carried across
layouts"). The level is held flat in the batch: how a ratio moves with the batch is the
model's own (over the vLLM H200 grids a hybrid-attention model's ratio rose 6x where a
MoE's fell), so the target's batch trend is its analytic step's. Held out by model on those
grids, this reading beat the two others tried (each regime's whole ratio table pooled, trend
included; the geometric mean of each regime's table): docs/anchors.md, "A prior per part and
engine", has the three and the analytic model side by side.
"""

from __future__ import annotations

import math
from typing import Any

import attrs
import numpy as np

from inferasim.cost.ttft_model import PREFILL_SLOPE_LIMITS


@attrs.frozen
class RegimeReading:
    """One regime's own calibration, as the prior pools it."""

    label: str
    model: str
    anchors: int
    level: float                  # its decode ratio at its lowest measured concurrency
    batches: tuple[int, int]      # the sweep it was read over
    prefill_slope: float | None   # None: its prefill was not calibrated
    overhead_s: float
    oracle: Any = attrs.field(eq=False, repr=False)   # its CalibratedOracle
    harness: tuple = ()           # (source, client tool) its anchors were measured with
    disaggregated: bool = False
    speculative: str = "none"     # its speculative method
    ranks_apart: bool = False     # attention-DP ranks (dp_attention > 1)
    part: str | None = None       # the GPU part it ran on
    slope_pinned: bool = False    # its prefill fit stopped at a bound: no slope read

    def to_dict(self) -> dict[str, Any]:
        out = {"regime": self.label, "model": self.model, "anchors": self.anchors,
               "decode_level": round(self.level, 4),
               "concurrency": list(self.batches)}
        if self.prefill_slope is not None:
            out["prefill_slope"] = round(self.prefill_slope, 4)
        return out


def reading(label: str, record, oracle) -> RegimeReading | None:
    """A calibrated regime's reading (``record`` one of its anchors); None when its oracle
    calibrated nothing."""
    if not oracle.calibrated:
        return None
    table = oracle.decode_table()
    level = table[min(table)]
    slope = oracle.prefill_slope if oracle.calibration["prefill"] == "calibrated" else None
    lo, hi = PREFILL_SLOPE_LIMITS
    # a fit held at its bound is no reading of the prefill: the TTFT model did not describe
    # that regime (docs/anchors.md, "A prior per part and engine")
    pinned = slope is not None and not lo * 1.01 < slope < hi / 1.01
    reg, prov = record.regime, record.provenance
    return RegimeReading(label, reg.model or "?", len(oracle.points), level,
                         (min(table), max(table)), None if pinned else slope,
                         oracle.prefill_step_overhead_s, oracle, (prov.source, prov.tool),
                         bool(reg.disaggregated), reg.spec_method or "none",
                         (reg.dp_attention or 1) > 1, reg.gpu, pinned)


class PooledPrior:
    """The median over the regimes' readings (``readings`` non-empty)."""

    def __init__(self, level: str, readings: list[RegimeReading]):
        self.level = level
        self.readings = readings
        self.ratio = math.exp(float(np.median([math.log(r.level) for r in readings])))
        slopes = [r.prefill_slope for r in readings if r.prefill_slope is not None]
        self.prefill_calibrated = bool(slopes)
        self.prefill_slope = float(np.median(slopes)) if slopes else 1.0
        self.overhead_s = float(np.median([r.overhead_s for r in readings]))

    def frontend_from(self, model: str | None, speculative: str, ranks_apart: bool,
                      part: str | None = None) -> list[RegimeReading]:
        """The colocated regimes of ``model`` and the ``speculative`` method on ``part`` (None:
        any) that read a time outside the engine, all of one harness (the one most of them
        were measured with): what a colocated target of that model carries as its own. Empty
        for another model or part, or where none read one. (A speculative regime's TTFT beyond
        the model also holds what its verify steps are mispriced by: carried across methods it
        went +131% to +573%; another part is another machine.)"""
        own = [r for r in self.readings if model and r.model == model
               and r.speculative == speculative and r.ranks_apart == ranks_apart
               and (part is None or r.part == part) and not r.disaggregated
               and r.oracle.frontend_modelled]
        if not own:
            return []
        harnesses = [r.harness for r in own]
        most = max(set(harnesses), key=lambda h: (harnesses.count(h), str(h)))
        return [r for r in own if r.harness == most]

    @property
    def batches(self) -> tuple[int, int]:
        return (min(r.batches[0] for r in self.readings),
                max(r.batches[1] for r in self.readings))

    def to_dict(self) -> dict[str, Any]:
        return {"level": self.level, "decode_ratio": round(self.ratio, 4),
                "prefill_slope": round(self.prefill_slope, 4) if self.prefill_calibrated
                else None,
                "regimes": [r.to_dict() for r in self.readings]}
