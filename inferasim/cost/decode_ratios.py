"""The decode ratio table, a part of ``CalibratedOracle`` (``cost/calibrated.py``):
measured / analytic(anchor) per anchored batch at a verify width, read at a target batch by
``ratio_table.ratio_at`` (interpolated in log batch, the end trend carried past the sweep)
and, where the anchors measured one batch at several contexts, at the target's resident
context (``_context_slope``, ``_context_rows``)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from inferasim.cost.oracle import AnalyticOracle, StepBatch, StepCost
from inferasim.cost.ratio_table import pooled_trend, ratio_at, ratio_at_each

if TYPE_CHECKING:
    from inferasim.cost.anchor_reading import AnchorPoint


# Every shipped speculative (MTP) sweep's measured/analytic ratio grows with the batch, none
# of the others' does: log(ratio) over log(batch) is 0.12-0.41 across the nine MTP groups
# (pooled 0.20, median 0.23) against -0.1 to +0.1 without speculation. It is not the tokens
# per verify step falling with load (mean ITL over mean TPOT stays flat, 2.41 to 2.35 from c16
# to c64 on MI355X SGLang) but a verify step that grows faster than the analytic one, which is
# not modelled, so the pooled trend is carried where an MTP target's anchors give none
# (``ratio_at``), instead of holding the ratio flat (docs/anchors.md: leave-one-out TPOT p90
# 17.6% -> 13.1%).
SPEC_RATIO_BATCH_EXPONENT = 0.2

# The decode ratio's context trend (``_context_slope``) is read only from a concurrency whose
# anchors span at least this factor in context, and carries the ratio at most
# CONTEXT_RATIO_LIMIT away from the anchors' own context's: a guard, not a fit.
CONTEXT_TREND_MIN_SPAN = 2.0
CONTEXT_RATIO_LIMIT = 2.0
_LOG_CONTEXT_LIMIT = math.log(CONTEXT_RATIO_LIMIT)

# A prior's split ratio (``prior.SplitFit``) is priced at a grid of contexts this many to a
# factor of e (0.5% apart) and interpolated between them in log context: a macro-step's steps
# are not each an analytic step more, the ratio is the same whichever step asks first, and it
# stays continuous in the context, so a macro-step and the step-exact mode read one ratio.
SPLIT_CONTEXT_BINS_PER_E = 200


class DecodeRatios:
    """The decode ratio table (the module's docstring)."""

    def _table(self, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if width not in self._tables:
            by_batch: dict[int, list[float]] = {}
            ctx_by_batch: dict[int, list[float]] = {}
            for p in self.points:
                by_batch.setdefault(p.batch, []).append(self._log_ratio(p, width))
                ctx_by_batch.setdefault(p.batch, []).append(math.log(max(p.context, 1.0)))
            batches = np.array(sorted(by_batch), dtype=np.float64)
            ratios = np.array([math.exp(float(np.mean(by_batch[int(b)]))) for b in batches])
            log_ctx = np.array([float(np.mean(ctx_by_batch[int(b)])) for b in batches])
            self._tables[width] = (np.log(batches), ratios, log_ctx)
        return self._tables[width]

    def _log_ratio(self, p: AnchorPoint, width: int) -> float:
        """log(measured / analytic) of an anchor's decode step, its analytic step at ``width``."""
        den = self._anchor_step(self._oracles[p.regime_key], p.batch, p.context, width)
        return math.log(p.measured_s / den)

    def _scheduled(self, batch: int, oracle: AnalyticOracle) -> int:
        """An anchor's instance batch as the replay's oracle is asked it: whole, or under
        attention-DP one rank's share (ranks apart) or a lockstep group's."""
        if not self.rank_level:
            return batch
        share = self.group / oracle.scenario.parallel.dp_attention
        return max(1, math.ceil(batch * share) if self.group == 1 else round(batch * share))

    def _anchor_step(self, oracle: AnalyticOracle, batch: int, context: float,
                     width: int) -> float:
        """The analytic step of an anchor's ``batch`` (``_scheduled``) at ``context``: one
        step of it, or, where ranks step together, the group step of its sequences shared
        out evenly over the group's ranks (what ``step_group`` prices the replay's steps at)."""
        return self._anchor_cost(oracle, batch, context, width).seconds

    def _anchor_cost(self, oracle: AnalyticOracle, batch: int, context: float,
                     width: int) -> StepCost:
        if self.group == 1:
            return oracle.step(StepBatch(decode_context=np.full(batch, context), width=width))
        each, extra = divmod(batch, self.group)
        return oracle.step_group([
            StepBatch(decode_context=np.full(each + (i < extra), context), width=width)
            for i in range(self.group)])

    def _step_split(self, oracle: AnalyticOracle, batch: int, context: float,
                    width: int) -> tuple[float, float]:
        """``_anchor_step``'s analytic step as (its attention, the rest): what a prior's split
        prices apart."""
        cost = self._anchor_cost(oracle, batch, context, width)
        attention = sum(v for k, v in cost.breakdown.items() if k.startswith("attn_"))
        return attention, cost.seconds - attention

    def decode_splits(self) -> list[tuple[float, float, float]]:
        """Each anchored decode step as (analytic attention, the rest, measured) at the
        target's width: what a prior's split is fitted over."""
        return [(*self._step_split(self._oracles[p.regime_key], p.batch, p.context,
                                   self.width), p.measured_s) for p in self.points]

    def _split_at(self, n: int, width: int, k: int) -> float:
        key = (n, width, k)
        r = self._split_ratios.get(key)
        if r is None:
            context = math.exp(k / SPLIT_CONTEXT_BINS_PER_E)
            r = self._split_ratios[key] = self.prior.split.ratio(
                *self._step_split(self.analytic, n, context, width))
        return r

    def decode_ratio(self, n: int, width: int | None = None,
                     context: float | None = None) -> float:
        """measured/analytic(anchor) for a target batch of ``n`` decoding sequences at mean
        resident ``context`` (None: the anchors' own context at that batch)."""
        width = self.width if width is None else width
        if not self.calibrated or n <= 0:
            return 1.0
        if self.prior is not None and (self.prior.split is None or context is None
                                       or context <= 0):
            return self.prior.ratio
        if self.prior is None and (context is None or context <= 0):
            key = (n, width)
            r = self._ratio_cache.get(key)
            if r is None:
                r = ratio_at(math.log(n), *self._table(width), prior_slope=self._prior_slope,
                             one_sided=self._one_sided)
                self._ratio_cache[key] = r
            return r
        # at a context: the run's evaluation for a run of one (one implementation of both)
        return float(self.decode_ratios(n, width, np.array([float(context)]))[0])

    def decode_ratios(self, n: int, width: int, contexts: np.ndarray) -> np.ndarray:
        """``decode_ratio(n, width, c)`` for each of ``contexts``, in one evaluation: a
        macro-step reads one per step. An empty context (none resident) reads the ratio at
        the anchors' own context, as ``decode_ratio`` without one does."""
        if not self.calibrated or n <= 0:
            return np.ones(contexts.size)
        contexts = np.asarray(contexts, dtype=np.float64)
        if np.any(contexts <= 0):
            out = np.full(contexts.size, self.decode_ratio(n, width))
            fed = contexts > 0
            if fed.any():
                out[fed] = self.decode_ratios(n, width, contexts[fed])
            return out
        if self.prior is not None:
            if self.prior.split is None:
                return np.full(contexts.size, self.prior.ratio)
            x = np.log(contexts) * SPLIT_CONTEXT_BINS_PER_E
            k = np.floor(x)
            bins = {int(b): self._split_at(n, width, int(b))
                    for b in np.unique(np.concatenate([k, k + 1]))}
            lo = np.array([bins[int(b)] for b in k])
            hi = np.array([bins[int(b) + 1] for b in k])
            return lo + (hi - lo) * (x - k)
        rows = self._context_rows(width)
        slope = self._context_slope(width)
        if rows is not None:
            # each batch's log ratio at every context, then across the batches at n
            logb, _ratios, log_ctx = self._table(width)
            lc = np.log(contexts)
            at = np.column_stack([_log_ratios_at_contexts(xs, ys, lc, slope) for xs, ys in rows])
            return ratio_at_each(math.log(n), logb, at, log_ctx, prior_slope=self._prior_slope,
                                 one_sided=self._one_sided)
        r = self.decode_ratio(n, width)
        if not slope:
            return np.full(contexts.size, r)
        logb, _ratios, log_ctx = self._table(width)
        own = float(np.interp(math.log(n), logb, log_ctx))
        delta = np.clip(slope * (np.log(contexts) - own), -_LOG_CONTEXT_LIMIT,
                        _LOG_CONTEXT_LIMIT)
        return r * np.exp(delta)

    def _context_rows(self, width: int) -> list[tuple[list[float], list[float]]] | None:
        """Per batch of the ratio table (its order): the distinct log contexts its anchors
        ran at, ascending, and the mean log ratio at each; None where no batch was measured
        at two contexts or more (then the batch's one ratio and the context slope serve)."""
        if width not in self._rows:
            by: dict[int, dict[float, list[float]]] = {}
            for p in self.points:
                by.setdefault(p.batch, {}).setdefault(
                    math.log(max(p.context, 1.0)), []).append(self._log_ratio(p, width))
            rows = []
            for b in sorted(by):
                xs = sorted(by[b])
                rows.append((xs, [float(np.mean(by[b][x])) for x in xs]))
            self._rows[width] = rows if any(len(xs) > 1 for xs, _ in rows) else None
        return self._rows[width]

    def decode_table(self) -> dict[int, float]:
        """measured/analytic per anchored concurrency at the target's width (a prior's
        regimes are read by it)."""
        logb, ratios, _ = self._table(self.width)
        return {int(round(math.exp(b))): float(r) for b, r in zip(logb, ratios, strict=True)}

    def _trend_context(self, width: int, *contexts: np.ndarray) -> float | None:
        """The mean resident context of ``contexts`` (the sequences a step decodes) where the
        decode ratio follows the context (the anchors' context trend, or a prior's split),
        else None: computed only then, as it is asked every step."""
        if self.prior is not None:
            follows = self.prior.split is not None
        else:
            follows = bool(self._context_slope(width) or self._context_rows(width) is not None)
        if not follows:
            return None
        sizes = sum(c.size for c in contexts)
        return float(sum(float(c.sum()) for c in contexts) / sizes) if sizes else None

    def _context_slope(self, width: int) -> float:
        """How the decode ratio moves with the resident context where the anchors measured one
        batch at several contexts (the ISL grids): log ratio over log context, fitted within
        each concurrency (``pooled_trend``) so that the batch's effect stays out of it. The
        analytic step's own growth in the context is already in the ratio's denominator; this
        is what it misses (the ISL grids' decode grows with the prompt 1.5-2.5x faster than
        the analytic attention on the GLM-5 grid). 0 where no concurrency spans
        CONTEXT_TREND_MIN_SPAN in context."""
        slope = self._context_slopes.get(width)
        if slope is None:
            by_batch: dict[int, list[tuple[float, float]]] = {}
            for p in self.points:
                by_batch.setdefault(p.batch, []).append(
                    (math.log(max(p.context, 1.0)), self._log_ratio(p, width)))
            spanning = [rows for rows in by_batch.values()
                        if max(x for x, _ in rows) - min(x for x, _ in rows)
                        >= math.log(CONTEXT_TREND_MIN_SPAN)]
            slope, _used = pooled_trend(spanning)
            slope = self._context_slopes[width] = max(0.0, slope)
        return slope


def _log_ratios_at_contexts(xs: list[float], ys: list[float], lc: np.ndarray,
                            slope: float) -> np.ndarray:
    """One batch's log decode ratio at each log context ``lc``: interpolated between the two
    of its measured contexts ``xs`` (log ratios ``ys``) around it; outside them, the nearest
    one's carried by the context slope, bounded to CONTEXT_RATIO_LIMIT."""
    inside = np.interp(lc, xs, ys) if len(xs) > 1 else np.full(lc.size, ys[0])
    below = ys[0] + np.clip(slope * (lc - xs[0]), -_LOG_CONTEXT_LIMIT, _LOG_CONTEXT_LIMIT)
    above = ys[-1] + np.clip(slope * (lc - xs[-1]), -_LOG_CONTEXT_LIMIT, _LOG_CONTEXT_LIMIT)
    return np.where(lc < xs[0], below, np.where(lc > xs[-1], above, inside))
