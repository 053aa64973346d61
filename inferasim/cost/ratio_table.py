"""The measured/analytic decode ratio across concurrency: interpolated inside the anchors'
sweep, its end trend carried (bounded) past it, or held where the anchors give no trend of
their own (``inferasim.cost.calibrated`` explains the transport)."""

from __future__ import annotations

import math

import numpy as np

# A trend carried past the measured sweep may change the end ratio by at most this factor.
EXTRAPOLATION_LIMIT = 1.5
# Without speculation a trend is carried past the sweep only where it raises the ratio: every
# five-point sweep's measured/analytic ratio is U-shaped in the batch (lowest at c16-c32), so a
# segment falling towards an end turns up past it rather than going on down. Leave-one-out,
# the InferenceMAX history (432 points): throughput p90 21.9% -> 19.8%, TPOT p90 17.0% ->
# 15.6%; the shipped anchors: throughput p90 14.4% -> 14.1%, TPOT p90 13.6% -> 12.9%, the
# medians within 0.3 point but the TTFT at the sweep ends (5.9% -> 6.7%). Speculative sweeps
# keep both directions: their ratio falls towards low batch (docs/anchors.md).
# A trend is carried past the sweep only between anchors whose decode contexts are within this
# factor of each other: the shipped groups that mix 1k/1k with 1k/8k rows (contexts about
# 1.5k and 5k) extrapolated their cross-shape trend to 18-36% TPOT errors (docs/anchors.md).
TREND_CONTEXT_SPAN = 2.0


def trend_held(log_ctx: np.ndarray, i: int, j: int) -> bool:
    """The end segment between anchors ``i`` and ``j`` ran at contexts more than
    TREND_CONTEXT_SPAN apart: its trend mixes batch and context, so it is not carried."""
    return abs(log_ctx[j] - log_ctx[i]) > math.log(TREND_CONTEXT_SPAN)


def pooled_trend(sweeps: list[list[tuple[float, float]]]) -> tuple[float, int]:
    """The slope of log ratio over log batch shared by ``sweeps`` (each a list of (log batch,
    log ratio) at one build and shape), fitted by least squares within each sweep so that
    their levels, which differ between builds, do not enter it; and how many sweeps spanned
    two batches or more (0: no trend, the slope is 0)."""
    num = den = 0.0
    used = 0
    for rows in sweeps:
        xs = np.array([x for x, _ in rows])
        ys = np.array([y for _, y in rows])
        dx = xs - xs.mean()
        if not np.any(dx):
            continue
        used += 1
        num += float(dx @ (ys - ys.mean()))
        den += float(dx @ dx)
    return (num / den if den else 0.0), used


def extrapolation(log_ctx: np.ndarray, prior_slope: float = 0.0, one_sided: bool = False,
                  prior_source: str = "the speculative sweeps' shared trend") -> str:
    """How the ratio is carried past each end of the sweep (see ``ratio_at``);
    ``prior_source`` says where ``prior_slope`` comes from."""
    rule = f"carried as batch^{prior_slope:.3g}" if prior_slope else "held flat"
    prior = f"{rule} ({prior_source})" if prior_slope else rule
    if log_ctx.size < 2:
        return f"one concurrency: the ratio is {prior} at every other batch"
    carried = ("trend carried where it raises the ratio, bounded" if one_sided
               else "trend carried, bounded")
    low, high = (prior if trend_held(log_ctx, i, j) else carried
                 for i, j in ((0, 1), (-2, -1)))
    how = f"{low} at both ends" if low == high else f"{low} below, {high} above"
    if prior in how:
        how += (f"; {rule} where the end anchors' contexts differ by more than "
                f"{TREND_CONTEXT_SPAN:g}x")
    return f"past the sweep: {how}"


def ratio_at(x: float, xs: np.ndarray, ratios: np.ndarray,
             log_ctx: np.ndarray | None = None, prior_slope: float = 0.0,
             one_sided: bool = False) -> float:
    """measured/analytic at log-batch ``x``: interpolated in log space inside the sweep;
    outside it, the end segment's trend carried on (a predictor that goes flat past the
    data is wrong in the direction the data was already moving), bounded to a factor of
    EXTRAPOLATION_LIMIT of the end ratio. Where the anchors give no trend of their own (one
    concurrency, or an end segment whose two anchors ran at contexts more than
    TREND_CONTEXT_SPAN apart, ``log_ctx`` being their log mean context, so that their trend
    mixes the batch's effect with the context's) ``prior_slope`` is carried instead: 0 holds
    the end ratio flat. ``one_sided``: a trend that would lower the ratio past the end is held
    flat instead (see the note on EXTRAPOLATION_LIMIT)."""
    return float(ratio_at_each(x, xs, np.log(np.asarray(ratios, dtype=np.float64)),
                               log_ctx, prior_slope, one_sided)[0])


def ratio_at_each(x: float, xs: np.ndarray, log_ratios: np.ndarray,
                  log_ctx: np.ndarray | None = None, prior_slope: float = 0.0,
                  one_sided: bool = False) -> np.ndarray:
    """``ratio_at(x, xs, exp(row), ...)`` for each row of ``log_ratios`` (one row of log
    ratios per batch of ``xs``, e.g. the batches' ratios read at each step's context), in one
    evaluation: the same interpolation, end trend and bounds, row by row."""
    logr = np.atleast_2d(np.asarray(log_ratios, dtype=np.float64))
    if xs.size > 1 and xs[0] <= x <= xs[-1]:
        k = min(int(np.searchsorted(xs, x, side="right")) - 1, xs.size - 2)
        w = (x - xs[k]) / (xs[k + 1] - xs[k])
        return np.exp(logr[:, k] + (logr[:, k + 1] - logr[:, k]) * w)
    i, j = (0, 1) if x < xs[0] else (-2, -1)
    end_at = i if x < xs[0] else j
    if xs.size == 1:
        i = j = end_at = 0
    end, x_end = logr[:, end_at], xs[end_at]
    if xs.size == 1 or (log_ctx is not None and trend_held(log_ctx, i, j)):
        slope = np.full(logr.shape[0], prior_slope)
    else:
        slope = (logr[:, j] - logr[:, i]) / (xs[j] - xs[i])
    if one_sided:
        slope = np.where(slope * (x - x_end) < 0, 0.0, slope)
    bound = math.log(EXTRAPOLATION_LIMIT)
    return np.exp(end + np.clip(slope * (x - x_end), -bound, bound))
