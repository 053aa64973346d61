"""The anchor-calibrated step-cost oracle: measured steps transported by the whole analytic step.

    target step = measured step x analytic(target) / analytic(anchor)

Both analytic terms are the model's **whole** step (GEMMs, attention, KV stream, collectives
and the fixed per-step cost) at the width the target verifies at (1 + draft tokens) — never a
bare forward pass (design.md, behaviour.md 3 "Transport by the whole step").

- ``analytic(anchor)`` is the analytic oracle for the anchor's own regime (its TP/EP/attention-DP
  /DCP and KV dtype; an axis the anchor does not record is unknown and taken from the target —
  skipped, never guessed) evaluated at the anchor's steady decode batch: ``concurrency``
  sequences (per replica, capped at the engine's running limit) at the mean context
  ``isl + osl / 2``.
- The ratio measured/analytic(anchor) is taken per target batch: with several anchors it is
  interpolated in log(concurrency) between the two nearest; past the ends of the measured sweep
  the end segment's trend is carried on, bounded to a factor EXTRAPOLATION_LIMIT of the end
  ratio (a predictor that goes flat outside the data errs in the direction the data was
  already moving); without speculation only where it raises the ratio (the ratio is U-shaped
  in the batch, so a falling end segment turns up past the sweep). Anchors at one
  concurrency share the geometric mean of their ratios. Where the anchors give no trend (one
  concurrency, or end anchors whose contexts differ by more than TREND_CONTEXT_SPAN) the
  trend of the regime's sweeps on other builds is carried when the store holds any (set
  aside for their level, their ratio's slope in the batch is the same deployment's); else
  the ratio is held flat, except for a speculative target: every measured MTP sweep's ratio
  grows with the batch, and their pooled trend (SPEC_RATIO_BATCH_EXPONENT) is carried.
- The KV stream scales with the target's KV width: ``analytic(target)`` prices the target's own
  KV dtype, so the KV delta from the anchor's context and batch to the target's is carried at
  that width — fp8 and bf16 KV do not project alike.
- A mixed step is ``r_decode x D + r_prefill x (T - D)``: ``T`` the target's whole analytic
  step, ``D`` the same step without its prefill chunks.

The work is split by job, each a part of ``CalibratedOracle``: reading the anchors in their own
regimes (``cost/anchor_reading.py``), the decode ratio table (``cost/decode_ratios.py``), the
prefill, TTFT and time outside the engine (``cost/prefill_reading.py``); this module prices the
steps with them and writes the report.

With no usable anchor the oracle is the analytic one, and ``calibration`` says why.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from inferasim.anchors.acceptance import target_osl, with_acceptance
from inferasim.arch.memory import model_memory_plan
from inferasim.config.knobs import Knobs
from inferasim.config.scenario import Scenario
from inferasim.cost.anchor_reading import AnchorPoint, AnchorReading
from inferasim.cost.calibration_report import calibration_report
from inferasim.cost.decode_ratios import SPEC_RATIO_BATCH_EXPONENT, DecodeRatios
from inferasim.cost.kv_ceiling import KvCeiling, read_ceiling
from inferasim.cost.mixed_steps import ShareFit, StepParts
from inferasim.cost.oracle import AnalyticOracle, StepBatch, StepCost
from inferasim.cost.prefill_reading import NOT_READ, PrefillReading
from inferasim.cost.prior import PooledPrior
from inferasim.cost.ttft_model import TtftRow


class CalibratedOracle(AnchorReading, DecodeRatios, PrefillReading):
    """``AnalyticOracle``'s interface (``step``, ``decode_steps``, ``calibration``), with each
    step transported from the usable anchors of ``store`` for ``scenario``."""

    def __init__(self, scenario: Scenario, store=None, knobs: Knobs | None = None, *,
                 anchors=None, rank_level: bool = False, carry_prefill: bool = True):
        """``store``: an ``AnchorStore`` (``None`` = none: analytic). ``anchors``: a
        ``TargetAnchors`` already computed for this scenario (skips ``store.for_target``).
        ``rank_level``: batches are one attention-DP rank's own (ranks simulated apart); an
        anchor's batch is then its concurrency shared over the ranks. ``carry_prefill``:
        where the anchors cannot identify the prefill slope, carry one from the store's
        regimes that do (``cost/prefill_prior.py``); off for the oracles that read them."""
        self.carry_prefill = carry_prefill
        # how this regime's own anchors identified the prefill slope ("prompt lengths",
        # "mixed steps"), None where they did not; and the slope carried instead, if any
        self.identified_slope: str | None = None
        self.carried_slope = None
        self._carried_memo = NOT_READ   # _carry_slope's answer, read once
        # A speculative target's acceptance, where its scenario states none, is the anchors'
        # (anchors/acceptance.py): a verify step's tokens are read before anything is priced.
        scenario, self.acceptance = with_acceptance(scenario, store if store is not None else ())
        self.scenario = scenario
        self.knobs = knobs or Knobs()
        self.rank_level = rank_level
        # Ranks stepping together (INFERASIM_DES_LOCKSTEP): a step is priced at the group's
        # combined batch, so an anchor's step is read against its ranks' group step too.
        self.group = self.knobs.lockstep_group(scenario.parallel.dp_attention) \
            if rank_level else 1
        self.analytic = self._analytic(scenario)
        self.width = scenario.speculative.verify_width
        spec = scenario.speculative
        self._advance = spec.tokens_per_step
        # the output length that rate stands for (an anchor of another length emitted more or
        # fewer tokens a step: anchors/acceptance.OUTPUT_LENGTH_EXPONENT)
        self._advance_osl = spec.acceptance_osl or target_osl(scenario)
        # Where the anchors give no trend of their own, a speculative regime's ratio carries
        # the one every measured speculative sweep shows (SPEC_RATIO_BATCH_EXPONENT).
        self._prior_slope = SPEC_RATIO_BATCH_EXPONENT if spec.method != "none" else 0.0
        self._prior_source = "the speculative sweeps' shared trend"
        # Without speculation a trend past the sweep is carried only where it raises the ratio
        # (ratio_table.EXTRAPOLATION_LIMIT's note).
        self._one_sided = spec.method == "none"
        self._oracles: dict[tuple, AnalyticOracle] = {}
        self._models: dict[tuple, Any] = {}   # a prior's anchors' catalog models
        self._parts: dict[str, Any] = {}      # ...and their parts, where not the target's
        self._lone_prefills: dict[tuple, float] = {}
        self._wave_prefills: dict[tuple, float] = {}
        self._batched_prefills: dict[tuple, Any] = {}
        self._pools: dict[tuple, int] = {}
        self._ratio_cache: dict[tuple[int, int], float] = {}
        self._split_ratios: dict[tuple[int, int, int], float] = {}   # a prior's, by context bin
        self._context_slopes: dict[int, float] = {}
        self._rows: dict[int, list | None] = {}   # _context_rows per verify width
        self._notes: list[str] = []
        if self.acceptance is not None and self.acceptance.level != "scenario":
            self._notes.append(self.acceptance.note())
        self.points: list[AnchorPoint] = []
        # the lowest-concurrency anchor's TTFT per ISL the prefill fit read
        self.prefill_points: list[TtftRow] = []
        self.kv_ceiling: KvCeiling | None = None
        self.prefill_slope = 1.0
        self._stall_scale = 1.0   # the prefill slope the stalls are priced at
        self._beside: dict[tuple, float] = {}   # _modelled_stall's analytic chunks
        # Engine seconds every step that prefills pays on top of the transported analytic
        # step, read from the decode stalls the anchors measured (``_prefill_stalls``).
        self.prefill_step_overhead_s = 0.0
        self._stall_points: list[tuple[float, float, float]] = []
        # Seconds between a client sending a request and the scheduler seeing it (TTFT and
        # end-to-end latency carry it, the engine does not): 0 unless the prefill fit found it.
        self.frontend_latency_s = 0.0
        self._latency_table: tuple[np.ndarray, np.ndarray] | None = None
        self._latency_memo: dict[int, float] = {}
        self._frontend_from: list = []   # a prior's regimes the latency is carried from
        self.result = anchors
        self._store = store
        if self.result is None and store is not None:
            self.result = store.for_target(scenario, prior=scenario.sim.prior != "none")
        self._usable: list = []
        self._mixed: list = []          # mixed-step anchors: the prefill's (_fit_mixed_prefill)
        self._mixed_readings: list[tuple[str, float]] = []
        # each mixed step split into its decodes and prompt tokens, and the two factors
        # fitted over them where they tell the two apart (mixed_steps.py)
        self._step_parts: dict[str, StepParts] = {}
        self._share_fit: ShareFit | None = None
        # No anchor of the target's regime: the other regimes on its part, pooled (prior.py)
        self.prior: PooledPrior | None = None
        if self.result is not None:
            self._usable = self._priced(self.result.usable)
            if self.result.prior_level is not None:
                self.prior = self._pool_prior(self._usable)
            else:
                self._mixed = [r for r in self._usable
                               if r.workload.prefill_per_step is not None]
                self._split_mixed_steps()
                self._collect(self._usable)
        self.calibrated = bool(self.points) or self.prior is not None
        # The decode ratio table at the target's width, per measured concurrency.
        # per verify width: log batch, measured/analytic, log mean context of those anchors
        self._tables: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        if self.prior is not None:
            self.prefill_slope = self.prior.prefill_slope
            self.prefill_step_overhead_s = self.prior.overhead_s
            if not self.prior.prefill_calibrated:
                self.carried_slope = self._carry_slope()
                if self.carried_slope is not None:
                    self.prefill_slope = self.carried_slope.slope
            # The time outside the engine is a harness's own, not the part's: carried only
            # from the target model's other colocated layouts on its part in one harness
            # (prior.py).
            self._frontend_from = [] if scenario.topology.kind == "disaggregated" \
                else self.prior.frontend_from(scenario.model.name, scenario.speculative.method,
                                              scenario.parallel.dp_attention > 1,
                                              scenario.gpu.name)
            self._frontend_modelled = bool(self._frontend_from)
            if self._frontend_modelled:
                self.frontend_latency_s = float(np.median(
                    [r.oracle.frontend_latency_s for r in self._frontend_from]))
            self._prefill_calibrated = self.prior.prefill_calibrated \
                or self.carried_slope is not None
            self.calibration = self._report()
            return
        if self.calibrated and self.result.set_aside and self._wants_prior():
            self._borrow_trend(self.result.set_aside)
        if self.calibrated:
            # reads the decode ratios (the wait). Refused coverage keeps the slope at 1: the
            # prefill stays analytic, the time outside the engine is still the anchors'.
            self._fit_prefill(self._usable, fit_slope=self.result.prefill_calibrated)
            self._restall()
        # the pool the target's own deployment ran at, where its anchors show one
        self.kv_ceiling = self._target_ceiling() if self.calibrated else None
        self._frontend_modelled = bool(self.calibrated and self.prefill_points)
        self._prefill_calibrated = self._frontend_modelled and self.result.prefill_calibrated
        if self.calibrated and not self._prefill_calibrated and self._mixed:
            self._fit_mixed_prefill()
        if self.carried_slope is not None and self.identified_slope is None:
            self._prefill_calibrated = True
        else:
            self.carried_slope = None
        self.calibration = self._report()

    def _scales(self, batch: StepBatch) -> tuple[float, float | None]:
        """How the analytic step is transported: ``(ratio, None)`` when one ratio scales the
        whole step (decode only: the decode ratio; prefill only: the prefill ratio), else
        ``(decode ratio, prefill ratio)`` for the decode part and the rest of a mixed step."""
        rd = self.decode_ratio(batch.n_decode, batch.width,
                               self._trend_context(batch.width, batch.decode_context))
        if not batch.prefill_tokens.size:
            return rd, None
        rp = self.prefill_ratio(batch)
        if batch.n_decode == 0:
            return rp, None
        return rd, rp

    def step(self, batch: StepBatch) -> StepCost:
        whole = self.analytic.step(batch)
        if not self.calibrated:
            return whole
        rd, rp = self._scales(batch)
        if rp is None:
            cost = StepCost(seconds=rd * whole.seconds,
                            breakdown={k: rd * v for k, v in whole.breakdown.items()})
        else:
            dec = self.analytic.step(_decode_part(batch))
            breakdown = {}
            for k, v in whole.breakdown.items():
                d = dec.breakdown.get(k, 0.0)
                breakdown[k] = rd * d + rp * (v - d)
            cost = StepCost(seconds=rd * dec.seconds + rp * (whole.seconds - dec.seconds),
                            breakdown=breakdown)
        return self._with_overhead(cost, batch.prefill_tokens.size > 0)

    def _with_overhead(self, cost: StepCost, prefills: bool) -> StepCost:
        """``cost`` plus the prefill step overhead when the step prefills."""
        if not prefills or not self.prefill_step_overhead_s:
            return cost
        return StepCost(seconds=cost.seconds + self.prefill_step_overhead_s,
                        breakdown={**cost.breakdown,
                                   "prefill_overhead": self.prefill_step_overhead_s})

    def step_seconds(self, batch: StepBatch) -> float:
        """``step(batch).seconds`` without the breakdown (see ``AnalyticOracle.step_seconds``)."""
        whole = self.analytic.step_seconds(batch)
        if not self.calibrated:
            return whole
        rd, rp = self._scales(batch)
        extra = self.prefill_step_overhead_s if batch.prefill_tokens.size else 0.0
        if rp is None:
            return rd * whole + extra
        dec = self.analytic.step_seconds(_decode_part(batch))
        return rd * dec + rp * (whole - dec) + extra

    def step_group(self, batches: list[StepBatch]) -> StepCost:
        """Lockstep attention-DP ranks: the analytic group step, transported like one step of
        the combined batch (decode ratio at the combined decode count, or the prefill ratio
        when any rank prefills). A group of one rank is that rank's step."""
        if len(batches) == 1:
            return self.step(batches[0])
        whole = self.analytic.step_group(batches)
        if not self.calibrated:
            return whole
        ratio, prefills = self._group_ratio(batches)
        return self._with_overhead(
            StepCost(seconds=ratio * whole.seconds,
                     breakdown={k: ratio * v for k, v in whole.breakdown.items()}), prefills)

    def step_group_seconds(self, batches: list[StepBatch]) -> float:
        """``step_group(batches).seconds`` without the breakdown (the group's per-step price)."""
        if len(batches) == 1:
            return self.step_seconds(batches[0])
        whole = self.analytic.step_group_seconds(batches)
        if not self.calibrated:
            return whole
        ratio, prefills = self._group_ratio(batches)
        return ratio * whole + (self.prefill_step_overhead_s if prefills else 0.0)

    def group_decode_steps(self, contexts: list[np.ndarray | None], width: int) -> np.ndarray:
        """``step_group_seconds`` of consecutive decode-only group steps (see the analytic
        oracle's), each transported at the combined decode count."""
        whole = self.analytic.group_decode_steps(contexts, width)
        if not self.calibrated:
            return whole
        n = sum(c.shape[1] for c in contexts if c is not None)
        ranks = [c for c in contexts if c is not None and c.size]
        if self._trend_context(width, *(c[0] for c in ranks)) is None:
            return self.decode_ratio(n, width) * whole
        # the ratio follows the context: each step's at its own (the mean over the ranks'
        # sequences, per step), as the step-exact mode reads it
        means = sum(c.sum(axis=1) for c in ranks) / n
        return whole * self.decode_ratios(n, width, means)

    def _group_ratio(self, batches: list[StepBatch]) -> tuple[float, bool]:
        """The ratio a group step is transported by, and whether any rank prefills."""
        prefilling = next((b for b in batches if b.prefill_tokens.size), None)
        if prefilling is None:
            width = batches[0].width
            ctx = self._trend_context(width, *(b.decode_context for b in batches if b.n_decode))
            return self.decode_ratio(sum(b.n_decode for b in batches), width, ctx), False
        return self.prefill_ratio(prefilling), True  # the prefill ratio is one figure

    def decode_steps(self, ctx0: np.ndarray, steps: int, advance: float | np.ndarray,
                     width: int) -> np.ndarray:
        times = self.analytic.decode_steps(ctx0, steps, advance, width)
        if not self.calibrated:
            return times
        n = int(ctx0.size)
        first = self._trend_context(width, ctx0)
        if first is None:
            times *= self.decode_ratio(n, width)   # a fresh array: in place
            return times
        # The ratio follows the context: step j's at its own mean context, as the step-exact
        # mode reads it (one ratio for the whole run does not equal the steps it stands for).
        grow = float(np.mean(advance)) if isinstance(advance, np.ndarray) else float(advance)
        times *= self.decode_ratios(n, width, first + np.arange(steps) * grow)
        return times

    def _target_ceiling(self) -> KvCeiling | None:
        """The measured pool of the target's deployment: the ceiling of the build most of its
        anchors come from, read at the target's own layout and KV dtype."""
        mine = self._anchor_key(self.scenario)
        by_build: dict[str | None, list] = {}
        for record in self._usable:
            if self._anchor_oracle(record)[1] == mine:
                by_build.setdefault(record.provenance.build, []).append(record)
        if not by_build:
            return None
        build = max(by_build, key=lambda b: (len(by_build[b]), b or ""))
        sc = self._oracles[mine].scenario
        return read_ceiling(by_build[build], self._model_pool(mine),
                            sc.engine.chunked_prefill_size, sc.speculative.tokens_per_step)

    @property
    def kv_reserve_gib(self) -> float:
        """GiB per GPU the measured pool says the engine holds beyond the memory model: what
        leaves the target's pool at the ceiling's size (0 without a ceiling)."""
        if self.kv_ceiling is None:
            return 0.0
        plan = model_memory_plan(self._oracles[self._anchor_key(self.scenario)].scenario)
        gap = plan.kv_pool_tokens - self.kv_ceiling.pool_tokens
        return max(0.0, gap * plan.kv_bytes_per_token / 2**30)

    def _report(self) -> dict[str, Any]:
        report = calibration_report(self)
        if self.acceptance is not None:
            report["speculative_acceptance"] = self.acceptance.to_dict()
        return report


def _decode_part(batch: StepBatch) -> StepBatch:
    """A mixed step's decodes alone: the part the decode ratio transports."""
    return StepBatch(decode_context=batch.decode_context, width=batch.width)


def with_measured_pool(scenario: Scenario, oracle) -> Scenario:
    """``scenario`` with the KV pool its anchors ran at (``CalibratedOracle.kv_ceiling``): the
    memory the engine held beyond the memory model, per GPU, reserved on top of
    ``engine.reserve_gib``. A pool the scenario states is left as it is."""
    reserve = getattr(oracle, "kv_reserve_gib", 0.0)
    if not reserve or scenario.engine.kv_pool_tokens is not None:
        return scenario
    eng = scenario.engine
    return attrs.evolve(scenario, engine=attrs.evolve(eng, reserve_gib=eng.reserve_gib + reserve))


def oracle_for(scenario: Scenario, knobs: Knobs | None = None, store=None, *,
               rank_level: bool = False):
    """The oracle a replay uses: calibrated from ``store`` (default: the anchors the scenario
    names in ``sim.anchors``, else the shipped ``anchors/``) when it has usable anchors for
    ``scenario``, else analytic — the report says which and why."""
    if store is None:
        from inferasim.anchors.loading import scenario_store

        store = scenario_store(scenario)
    return CalibratedOracle(scenario, store, knobs, rank_level=rank_level)
