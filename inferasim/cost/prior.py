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

Where the regimes' decode steps tell the attention apart from the rest of the step (their
attention share spans ``SPLIT_MIN_SPAN``), the prior prices the two apart instead: one factor
on the analytic attention (the KV stream at the step's contexts) and one on everything else,
fitted over every decode step of every regime (``fit_split``). A flat level carries the
ratio a regime ran at a short step to a target whose step is mostly attention (MiniMax-M2.5 on
one MI355X, five sequences at 81k: 1.95x the analytic step, where the TP2 and Kimi regimes'
batch-one level is 1.43); the split carries each part of the step at its own rate.
A fit held at a bound is no reading (as the prefill's), and the level serves.
"""

from __future__ import annotations

import math
from typing import Any

import attrs
import numpy as np

from inferasim.cost.ttft_model import PREFILL_SLOPE_LIMITS, held_at_bound


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
    steps: tuple = ()             # (analytic attention s, the rest s, measured s) per point

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
    # a fit held at its bound is no reading of the prefill: the TTFT model did not describe
    # that regime (docs/anchors.md, "A prior per part and engine")
    pinned = slope is not None and held_at_bound(slope, PREFILL_SLOPE_LIMITS)
    reg, prov = record.regime, record.provenance
    return RegimeReading(label, reg.model or "?", len(oracle.points), level,
                         (min(table), max(table)), None if pinned else slope,
                         oracle.prefill_step_overhead_s, oracle, (prov.source, prov.tool),
                         bool(reg.disaggregated), reg.spec_method or "none",
                         (reg.dp_attention or 1) > 1, reg.gpu, pinned,
                         tuple(oracle.decode_splits()))


# The split's factors are kept within these bounds, as the prefill slope is: a fit that stops
# at one says the two-part model did not describe the steps, and the flat level serves.
SPLIT_LIMITS = PREFILL_SLOPE_LIMITS
# The decode steps must differ by at least this much in the share of their analytic step that
# is attention for the two factors to be told apart (the vLLM H200 grids of Qwen3.5, a hybrid
# model: 0.00-0.05, none; the MI355X AgentX ladders: 0.11-0.44).
SPLIT_MIN_SPAN = 0.2
_GAUSS_NEWTON_PASSES = 50


@attrs.frozen
class SplitFit:
    """A decode step priced as ``attention x`` its analytic attention ``+ rest x`` the rest."""

    attention: float
    rest: float
    steps: int                    # decode steps fitted over

    def ratio(self, attention_s: float, rest_s: float) -> float:
        """The step's ratio to its analytic whole, from the analytic split."""
        return (self.attention * attention_s + self.rest * rest_s) / (attention_s + rest_s)

    def to_dict(self) -> dict[str, Any]:
        return {"attention": round(self.attention, 4), "rest": round(self.rest, 4),
                "steps": self.steps}


def fit_split(readings: list[RegimeReading]) -> SplitFit | None:
    """The two factors minimising the squared log error of every regime's decode steps, each
    regime weighted as one (a 65-anchor grid does not outvote a two-anchor run); None where
    the steps' attention shares do not span SPLIT_MIN_SPAN or a factor stops at a bound."""
    rows = np.array([(a, r, m, 1.0 / len(read.steps)) for read in readings
                     for a, r, m in read.steps], dtype=np.float64).reshape(-1, 4)
    attn, rest, measured, weight = rows.T
    share = attn / np.maximum(attn + rest, 1e-300)
    if len(rows) < 2 or share.max() - share.min() < SPLIT_MIN_SPAN:
        return None
    lo, hi = (math.log(v) for v in SPLIT_LIMITS)
    w = np.sqrt(weight)
    x = np.zeros(2)   # log factors, from the analytic step
    for _ in range(_GAUSS_NEWTON_PASSES):
        fa, fr = np.exp(x)
        pred = fa * attn + fr * rest
        residual = w * (np.log(pred) - np.log(measured))
        jacobian = np.stack([w * fa * attn / pred, w * fr * rest / pred], axis=1)
        step = np.linalg.lstsq(jacobian, -residual, rcond=None)[0]
        x = np.clip(x + step, lo, hi)
        if np.abs(step).max() < 1e-9:
            break
    attention, other = np.exp(x)
    if held_at_bound(attention, SPLIT_LIMITS) or held_at_bound(other, SPLIT_LIMITS):
        return None
    return SplitFit(float(attention), float(other), len(rows))


class PooledPrior:
    """The median over the regimes' readings (``readings`` non-empty), and the decode split
    fitted over their steps where they tell the attention apart (``fit_split``)."""

    def __init__(self, level: str, readings: list[RegimeReading]):
        self.level = level
        self.readings = readings
        self.ratio = math.exp(float(np.median([math.log(r.level) for r in readings])))
        slopes = [r.prefill_slope for r in readings if r.prefill_slope is not None]
        self.prefill_calibrated = bool(slopes)
        self.prefill_slope = float(np.median(slopes)) if slopes else 1.0
        self.overhead_s = float(np.median([r.overhead_s for r in readings]))
        self.split = fit_split(readings)

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
                "decode_split": None if self.split is None else self.split.to_dict(),
                "prefill_slope": round(self.prefill_slope, 4) if self.prefill_calibrated
                else None,
                "regimes": [r.to_dict() for r in self.readings]}
