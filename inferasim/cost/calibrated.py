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
- Prefill and TTFT: the lowest-concurrency anchor at each ISL (its TTFT is closest to a lone
  prefill) is read as ``TTFT = latency + sojourn(slope x prefill(isl)) + wait``: ``prefill``
  the analytic lone-prompt prefill in the engine's chunks, ``sojourn`` that engine time plus
  the queueing behind the other clients' prompts in the closed loop (``closed_loop_sojourn``),
  ``wait`` half a calibrated decode step of the other clients (an arrival waits for the step
  in flight). With three or more ISLs slope and latency are fitted (least squares, latency >=
  0, slope within PREFILL_SLOPE_LIMITS); with fewer, the probe cannot tell a slower prefill
  from a fixed latency, so the slope is 1 and the excess is latency. When the store refuses
  the probe's coverage of the target's ISL the slope is 1 too (the prefill stays analytic and
  the report says so) and the latency is still read: it is time per request.
  The slope scales the prefill part of every step (engine time: it delays the decodes a mixed
  or prefill-exclusive step holds). Where the anchors' median ITL is the decode step (not a
  coalesced stream) their mean TPOT above it is the time prefills held the decodes up; per
  prompt of the other clients, what exceeds the slope's prefill is a fixed engine cost every
  prefilling step pays (``prefill_step_overhead_s``, ``_prefill_stalls``), and it leaves the
  latency. The latency is the request's time outside the engine steps
  (tokenisation, HTTP, the server's input pipeline): each request reaches the scheduler that
  much after the client sends it, so TTFT and end-to-end latency carry it and the engine does
  not. It follows the load: each closed-loop anchor's TTFT beyond the model is tabled by its
  concurrency and read at the number of requests open when one is sent. The InferenceMAX
  SGLang rows need this split: their median TTFT at ISL 1024 is 100-450 ms, nearly flat in
  concurrency, while a 1k-token prefill of DeepSeek-R1 on eight GPUs is 20-40 ms of engine
  time; priced as engine time whole it would stall the decodes by more than the measured TPOT
  allows. The decode stalls (above) say how much of it is engine time where the rows show
  them: on the AMD rows, most of it. Past the measured loads the latency follows a power law
  in concurrency (``latency_at_load``).
- A mixed step is ``r_decode x D + r_prefill x (T - D)``: ``T`` the target's whole analytic
  step, ``D`` the same step without its prefill chunks.

With no usable anchor the oracle is the analytic one, and ``calibration`` says why.
"""

from __future__ import annotations

import bisect
import math
from typing import Any

import attrs
import numpy as np

from inferasim.anchors.acceptance import carry_tokens_per_step, target_osl, with_acceptance
from inferasim.arch.memory import model_memory_plan
from inferasim.config.errors import ConfigError
from inferasim.config.knobs import Knobs
from inferasim.config.loader import catalog_gpu, catalog_model, rank_scenario
from inferasim.config.scenario import ParallelSpec, Scenario
from inferasim.cost.calibration_report import calibration_report
from inferasim.cost.kv_ceiling import KvCeiling, read_ceiling
from inferasim.cost.mixed_steps import ShareFit, StepParts, fit_shares, step_parts
from inferasim.cost.oracle import AnalyticOracle, StepBatch, StepCost
from inferasim.cost.prior import PooledPrior, reading
from inferasim.cost.ratio_table import pooled_trend, ratio_at, trend_held
from inferasim.cost.ttft_model import (
    PREFILL_SLOPE_LIMITS,
    TtftRow,
    fit_ttft,
    latency_at,
    latency_at_load,
    requests_held,
    slot_wait,
)

_EMPTY = np.zeros(0, dtype=np.float64)


@attrs.frozen
class AnchorPoint:
    """One anchor as the oracle uses it: its steady decode batch and its measured step."""

    id: str
    batch: int              # sequences per engine instance (per rank, or per lockstep group)
    context: float          # mean resident context, isl + osl / 2
    measured_s: float       # seconds of one (verify) step
    regime_key: tuple


class CalibratedOracle:
    """``AnalyticOracle``'s interface (``step``, ``decode_steps``, ``calibration``), with each
    step transported from the usable anchors of ``store`` for ``scenario``."""

    def __init__(self, scenario: Scenario, store=None, knobs: Knobs | None = None, *,
                 anchors=None, rank_level: bool = False):
        """``store``: an ``AnchorStore`` (``None`` = none: analytic). ``anchors``: a
        ``TargetAnchors`` already computed for this scenario (skips ``store.for_target``).
        ``rank_level``: batches are one attention-DP rank's own (ranks simulated apart); an
        anchor's batch is then its concurrency shared over the ranks."""
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
        self._pools: dict[tuple, int] = {}
        self._ratio_cache: dict[tuple[int, int], float] = {}
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
            self._prefill_calibrated = self.prior.prefill_calibrated
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
        self.calibration = self._report()

    def _split_mixed_steps(self) -> None:
        """Each mixed step's decodes and prompt tokens, analytic, and the two factors fitted
        over them (``mixed_steps.fit_shares``) where both kinds of step are present."""
        for record in self._mixed:
            if record.decode_step_s is None:
                continue
            oracle, _ = self._anchor_oracle(record)
            self._step_parts[record.id] = step_parts(record, oracle, self.width)
        self._share_fit = fit_shares(list(self._step_parts.values()))
        if self._share_fit is not None:
            fit = self._share_fit
            self._notes.append(
                f"{fit.steps} agentic step(s) read as decodes and uncached prompt tokens "
                f"together: decodes x{fit.decode_ratio:.2f}, prompt tokens x"
                f"{fit.prompt_slope:.2f} of the analytic; each decode-led step's tokens are "
                "taken off its decode reading at that slope")

    def _fit_mixed_prefill(self) -> None:
        """The prefill slope from the steps led by their prompt tokens (a saturated rung's
        mean ITL, each step its decodes and a share of prompt chunks). Where the mixed steps
        tell decodes and prompt tokens apart it is their joint fit's; else, per step, what it
        took beyond its decodes, priced at the decode ratio of this regime's decode anchors,
        over the analytic price of its prompt tokens, and the median over the steps. Within
        PREFILL_SLOPE_LIMITS either way."""
        readings = []
        for record in self._mixed:
            parts = self._step_parts.get(record.id)
            if parts is None or not parts.prompt_led:
                continue
            ratio = self._share_fit.decode_ratio if self._share_fit is not None \
                else self.decode_ratio(parts.batch)
            prefill = parts.measured_s - ratio * parts.decodes_s
            if parts.prompt_s <= 0 or prefill <= 0:
                self._notes.append(f"{record.id}: its mixed step is no longer than its decodes "
                                   "priced alone; it reads no prefill")
                continue
            readings.append((record.id, prefill / parts.prompt_s))
        if not readings:
            return
        lo, hi = PREFILL_SLOPE_LIMITS
        slope = self._share_fit.prompt_slope if self._share_fit is not None \
            else float(np.median([r for _, r in readings]))
        self.prefill_slope = float(np.clip(slope, lo, hi))
        self._prefill_calibrated = True
        self._mixed_readings = readings

    def _pool_prior(self, records) -> PooledPrior | None:
        """Each regime among ``records`` calibrated on its own deployment (its model, layout
        and KV, the target's engine settings), then pooled (``PooledPrior``)."""
        from inferasim.anchors.store import TargetAnchors, prefill_coverage

        groups: dict[tuple, list] = {}
        for record in records:
            reg = record.regime
            groups.setdefault(self._anchor_oracle(record)[1] + (reg.engine,), []).append(record)
        readings = []
        target = self.result.target
        moe = self.scenario.model.ffn.is_moe
        other_kind: set[str] = set()
        for key, group in groups.items():
            if self._anchor_scenario(group[0]).model.ffn.is_moe != moe:
                # Every anchored model is a mixture of experts: what a prior carries was held
                # out on those alone, and carried to a dense model it read its decode 4-5x
                # slow (docs/anchors.md, "A prior per part and engine").
                other_kind.add(group[0].regime.model or "?")
                continue
            ok, _ = prefill_coverage(group, target.isl)
            own = TargetAnchors(target=target, usable=tuple(group), refused=(),
                                prefill_calibrated=ok)
            sub = CalibratedOracle(self._anchor_scenario(group[0]), self._store, self.knobs,
                                   anchors=own, rank_level=self.rank_level)
            label = (f"{group[0].regime.model} {key[-1]} {key[7]} tp{key[0]} ep{key[1]} "
                     f"dpa{key[2]} kv {key[4]}")
            read = reading(label, group[0], sub)
            if read is not None:
                readings.append(read)
        if other_kind:
            kinds = ("dense", "mixture-of-experts") if moe else ("mixture-of-experts", "dense")
            self._notes.append(
                f"prior regimes of {', '.join(sorted(other_kind))} are left out: a {kinds[1]} "
                f"model's prior is no {kinds[0]} model's (none held out supports it)")
        if not readings:
            self._notes.append("no regime of the prior calibrates a decode step")
            return None
        return PooledPrior(self.result.prior_level, readings)

    def _analytic(self, scenario: Scenario) -> AnalyticOracle:
        if self.rank_level:
            return AnalyticOracle(scenario, self.knobs, rank_level=True)
        return AnalyticOracle(scenario, self.knobs)

    # -- anchors -> points --------------------------------------------------------------
    def _anchor_scenario(self, record) -> Scenario:
        """The target with the anchor's regime: its layout and KV dtype, and, for a prior
        (``TargetAnchors.prior_level``), its own model and weights (the analytic step it is
        read against is its model's, not the target's). The engine's settings stay the
        target's."""
        reg, sc = record.regime, self.scenario
        par = sc.parallel
        tp, ep, dpa = reg.tp, reg.ep, reg.dp_attention
        if reg.disaggregated and sc.pool_role == "prefill":
            # a prefill pool reads the prefill pool the anchor measured
            tp, ep, dpa = reg.prefill_tp, reg.prefill_ep, reg.prefill_dp_attention
        parallel = ParallelSpec(tp=tp or par.tp, ep=ep or par.ep,
                                dp_attention=dpa or par.dp_attention, dcp=reg.dcp or par.dcp)
        engine = attrs.evolve(sc.engine, kv_dtype=reg.kv_dtype or sc.kv_dtype)
        model, gpu = sc.model, sc.gpu
        if self.result.prior_level is not None:
            dtype = reg.weight_dtype if reg.weight_dtype not in (None, "fp4") else None
            model = self._models.get((reg.model, dtype))
            if model is None:  # read from the catalog once per model and dtype
                model = self._models[(reg.model, dtype)] = catalog_model(reg.model, dtype)
            if reg.gpu is not None and reg.gpu != gpu.name:
                # a prior from another part of the ISA reads its step against its own part
                gpu = self._parts.get(reg.gpu)
                if gpu is None:
                    gpu = self._parts[reg.gpu] = catalog_gpu(reg.gpu)
        return attrs.evolve(sc, model=model, gpu=gpu, parallel=parallel, engine=engine)

    @staticmethod
    def _anchor_key(sc: Scenario) -> tuple:
        return (sc.parallel.tp, sc.parallel.ep, sc.parallel.dp_attention, sc.parallel.dcp,
                sc.kv_dtype, sc.model.name, sc.model.weight_dtype, sc.gpu.name)

    def _anchor_oracle(self, record) -> tuple[AnalyticOracle, tuple]:
        sc = self._anchor_scenario(record)
        key = self._anchor_key(sc)
        if key not in self._oracles:
            self._oracles[key] = self._analytic(sc)
        return self._oracles[key], key

    def _priced(self, records) -> list:
        """The records whose own deployment the analytic model can price: all of the
        target's regime; of a prior, those whose model the catalog holds at that layout."""
        if self.result is None or self.result.prior_level is None:
            return list(records)
        kept, dropped = [], set()
        for record in records:
            try:
                self._pool_tokens(record)   # builds its analytic oracle too
            except (ConfigError, ValueError) as exc:
                dropped.add(f"{record.regime.model}: {str(exc).splitlines()[0]}")
                continue
            kept.append(record)
        for why in sorted(dropped):
            self._notes.append(f"prior anchors of {why} are left out")
        return kept

    def _lone_prefill(self, record) -> float:
        """The analytic lone prefill of the anchor's prompt in its own regime, remembered per
        regime and ISL: the decode, stall and TTFT readings all ask it."""
        oracle, key = self._anchor_oracle(record)
        memo = (key, int(record.workload.isl))
        seconds = self._lone_prefills.get(memo)
        if seconds is None:
            seconds = self._lone_prefills[memo] = _analytic_prefill_seconds(oracle, memo[1])
        return seconds

    def _waves(self, record) -> bool:
        """The anchor's closed-loop clients send their prompts in waves (``_wave_prefill``):
        onto ranks that step together, or with fixed lengths (every client finishes with
        the others and sends with them; the replay of a fixed-length target does the same).
        Held out of the ISL grids (fixed lengths), their TTFT read in waves predicted the
        long prompts' within 10% (median), read as a random closed loop 45% high."""
        return self.group > 1 or record.workload.range_ratio == 1.0

    def _wave_prefill(self, record, clients: int) -> float:
        """Mean engine seconds from a wave's arrival to each of its prompts' first token, where
        the anchor's ``clients`` closed-loop clients reach ranks that step together: with
        fixed lengths every client finishes in the same step and sends its next prompt with
        the others, each rank takes its share of them, and every group step runs the GEMMs
        over all the ranks' chunks (a prompt alone on its rank still waits for theirs). The
        ranks fill each step's token budget with their prompts' chunks in arrival order."""
        oracle, key = self._anchor_oracle(record)
        isl = int(record.workload.isl)
        memo = (key, isl, clients)
        seconds = self._wave_prefills.get(memo)
        if seconds is not None:
            return seconds
        sc = rank_scenario(oracle.scenario)
        eng = sc.engine
        budget = max(1, int(eng.max_num_batched_tokens if eng.scheduler == "unified"
                            else eng.chunked_prefill_size))
        ranks = oracle.scenario.parallel.dp_attention
        each, extra = divmod(clients, ranks)
        # per busy rank, the tokens each of its prompts has computed
        done = [[0] * (each + (r < extra)) for r in range(min(clients, ranks))]
        clock, finished = 0.0, []
        while any(d[-1] < isl for d in done):
            batches, closing = [], 0
            for rank in done:
                chunks, resident, samples, room = [], [], 0, budget
                for i, computed in enumerate(rank):
                    if computed >= isl or room <= 0:
                        continue
                    c = min(isl - computed, room)
                    chunks.append(float(c))
                    resident.append(float(computed))
                    room -= c
                    rank[i] += c
                    if rank[i] >= isl:
                        samples += 1
                batches.append(StepBatch(prefill_tokens=np.array(chunks),
                                         prefill_resident=np.array(resident),
                                         prefill_samples=samples))
                closing += samples
            clock += oracle.step_group(batches).seconds
            finished += [clock] * closing
        seconds = self._wave_prefills[memo] = float(np.mean(finished))
        return seconds

    def _collect(self, usable) -> None:
        skipped_open, kv_assumed, accepted = self._read_points(usable, self.points)
        if skipped_open:
            self._notes.append(f"{len(skipped_open)} usable anchor(s) without a closed-loop "
                               "concurrency or a decode step do not calibrate decode")
        if accepted and self.scenario.speculative.method != "none":
            # The verify step is the anchors'; the tokens it emits are the target's acceptance.
            self._notes.append(
                f"anchors' verify steps emitted {np.mean(accepted):.2f} tokens (mean ITL / mean "
                f"TPOT, or the client's figure); the target's acceptance emits "
                f"{self._advance:.2f}")
        if kv_assumed:
            self._notes.append(
                "anchors do not record their KV dtype (skipped): read as the target's "
                f"{self.scenario.kv_dtype}; the KV delta to the target's context and batch is "
                "priced at that width")

    def _read_points(self, records, points: list[AnchorPoint]
                     ) -> tuple[list[str], bool, list[float]]:
        """Append each record's decode point to ``points``; return the ids that give none,
        whether a KV dtype was assumed, and the accept lengths the records measured."""
        spec_target = self.scenario.speculative.method != "none"
        skipped_open, kv_assumed, accepted = [], False, []
        for record in records:
            parts = self._step_parts.get(record.id)
            if record.workload.prefill_per_step is not None and (parts is None
                                                                  or parts.prompt_led):
                continue  # a step led by its prompt tokens calibrates the prefill
            step, basis = record.decode_step
            w, reg = record.workload, record.regime
            if step is None or w.concurrency is None or w.concurrency < 1:
                skipped_open.append(record.id)
                continue
            if record.little_mismatch():
                # Which of its figures is wrong cannot be told; none of them calibrates (the
                # anchor store's notes say so, for anchors check as for the run).
                continue
            oracle, key = self._anchor_oracle(record)
            if reg.kv_dtype is None:
                kv_assumed = True
            replicas = reg.replicas or 1
            # the sequences that decoded at once: the clients, or where lanes think and wait
            # between their decodes, the batch the record measured (Workload.decode_batch)
            decoding = w.decode_batch if w.decode_batch is not None else w.concurrency
            batch = max(1, min(int(round(decoding / replicas)),
                               self._running_cap(record, oracle)))
            batch = self._scheduled(batch, oracle)
            measured = float(step)
            if parts is not None:
                # its uncached tail's tokens, at the mixed steps' fitted slope (else analytic)
                measured -= parts.prompt_s * (self._share_fit.prompt_slope
                                              if self._share_fit is not None else 1.0)
                if measured <= 0:
                    continue
            if "tpot" in (basis or "") and w.osl > 1 and reg.spec_method in (None, "none"):
                # A step read from TPOT carries the stalls the other clients' prefills caused,
                # which the replay simulates again; speculative rows are left as they are
                # (docs/anchors.md: taking them out there moved two MTP groups the wrong way).
                measured -= self._modelled_stall(record, measured, batch)
            if spec_target or (reg.spec_method not in (None, "none")):
                # Mean TPOT is seconds per emitted token; a verify step emits accept_length,
                # else the target's tokens a step carried to the anchor's output length.
                own = record.accept_length
                if own:
                    accepted.append(own)
                measured *= own or carry_tokens_per_step(
                    self._advance, self._advance_osl, w.osl, self.width)
            points.append(AnchorPoint(record.id, batch, w.isl + w.osl / 2.0, measured, key))
        return skipped_open, kv_assumed, accepted

    def _wants_prior(self) -> bool:
        """The anchors give no trend of their own somewhere: one concurrency, or an end
        segment whose anchors ran at contexts too far apart (``ratio_at``)."""
        logb, _ratios, log_ctx = self._table(self.width)
        return logb.size < 2 or trend_held(log_ctx, 0, 1) or trend_held(log_ctx, -2, -1)

    def _borrow_trend(self, set_aside) -> None:
        """Carry, where the target's build gives no trend, the one its regime's sweeps on
        other builds show: their level is set aside (builds months apart differ by 30% and
        more), but how their ratio moves with the batch is the same engine, GPU, kernels and
        parallelism. Each (build, ISL, OSL) sweep at two or more concurrencies is one group;
        their slopes are pooled by least squares within groups (``pooled_trend``). Anchors
        that name no build are left out: one sweep of them could span builds."""
        named = {r.id: r for r in set_aside if r.provenance.build}
        theirs: list[AnchorPoint] = []
        self._read_points(named.values(), theirs)
        sweeps: dict[tuple, list[tuple[float, float]]] = {}
        for p in theirs:
            r = named[p.id]
            sweeps.setdefault((r.provenance.build, r.workload.isl, r.workload.osl), []).append(
                (math.log(p.batch), self._log_ratio(p, self.width)))
        slope, used = pooled_trend(list(sweeps.values()))
        if not used:
            return
        builds = sorted({key[0] for key, rows in sweeps.items()
                         if len({x for x, _ in rows}) > 1})
        self._prior_slope = slope
        self._prior_source = (f"the trend of {used} sweep(s) of this regime on other builds: "
                              + ", ".join(builds))

    def _restall(self) -> None:
        """Read the decode steps again with the stalls priced at the fitted prefill slope,
        and fit the prefill again on them, until the slope settles (STALL_PASSES at most):
        the first reading took the stalls out at the analytic prefill, which the replay
        does not run at, and the prefill fit reads the decode steps (its wait)."""
        for _ in range(STALL_PASSES):
            if abs(self.prefill_slope - self._stall_scale) <= STALL_SETTLED * self._stall_scale:
                return
            self._stall_scale = self.prefill_slope
            self.points = []
            for memo in (self._tables, self._rows, self._ratio_cache, self._context_slopes):
                memo.clear()
            self._collect(self._usable)
            self._fit_prefill(self._usable, fit_slope=self.result.prefill_calibrated)

    def _modelled_stall(self, record, tpot: float, batch: int) -> float:
        """Seconds per output token the other clients' prefills add to a TPOT, as the replay
        prices them, at most half the TPOT: each prompt that arrives during a request's
        decode adds its chunks to the decode steps of the anchor's ``batch``
        (``_prefill_beside_decodes``), at the prefill slope once it is fitted. None where
        ranks step together (their clients come in waves, prefilled between the decodes); a
        fixed-length loop on one instance still mixes its prompts' chunks into the decodes,
        so its stalls are taken out."""
        if self.group > 1 or record.regime.disaggregated:
            return 0.0   # (a disaggregated decode worker never prefills)
        oracle, key = self._anchor_oracle(record)
        w = record.workload
        memo = (key, int(w.isl), batch, w.isl + w.osl / 2.0)
        added = self._beside.get(memo)
        if added is None:
            added = self._beside[memo] = _prefill_beside_decodes(
                oracle, int(w.isl), batch, memo[3], self.width)
        stall = _arrivals_during_decode(record, tpot) * added * self._stall_scale \
            / (w.osl - 1)
        return min(stall, 0.5 * tpot)

    def _fit_prefill(self, usable, fit_slope: bool = True) -> None:
        """``TTFT = latency + sojourn(slope x prefill(isl)) + wait`` fitted to the
        lowest-concurrency anchor at each ISL (its TTFT is closest to a lone prefill).
        ``sojourn`` is the prompt's engine time plus its queueing behind the other clients'
        prompts (``closed_loop_sojourn``): at a few clients and long prompts that queueing is
        most of the TTFT, and read as engine time it would inflate the slope (a vLLM ISL grid
        at four clients fitted 6.4x the analytic prefill, and its replays saturated).
        ``fit_slope`` False (the store refused the probe's coverage of the target's ISL): the
        slope stays 1 and only the latency, the TTFT beyond that model, is read."""
        usable = [r for r in usable if r.ttft_s is not None and not r.little_mismatch()]
        best: dict[tuple, Any] = {}   # per model (a prior holds several) and ISL
        for record in usable:
            w = record.workload
            conc = w.concurrency if w.concurrency is not None else math.inf
            key = (w.isl, record.regime.model or "")
            old = best.get(key)
            if old is None or conc < (old.workload.concurrency or math.inf):
                best[key] = record
        rows = []   # TtftRow per ISL
        for _key, record in sorted(best.items()):
            row = self._ttft_row(record)
            if row.prefill > 0:
                rows.append(row)
        if not rows:
            return
        self.prefill_points = rows
        self.prefill_slope, self.frontend_latency_s = fit_ttft(rows, fit_slope)
        # The stalls are prefill time at the probe's ISL: a probe refused for the target's
        # ISL carries none of it into the engine (its TTFT beyond the analytic prefill stays
        # outside, in the latency), so the prefill is wholly the analytic model's.
        self._stall_points = self._prefill_stalls(usable) if fit_slope else []
        if self._stall_points:
            # the stall beyond the analytic prefill is engine time per prefill step: it leaves
            # the latency and enters every prefilling step
            read = float(np.median([max(0.0, stall - self.prefill_slope * prefill)
                                    for _, stall, prefill in self._stall_points]))
            # A request's first token comes out of its prefill step, so that step's engine
            # time cannot exceed the measured TTFT less the wait for the step in flight.
            ceiling = min(max(0.0, r.ttft - r.wait - self.prefill_slope * r.prefill)
                          for r in rows)
            self.prefill_step_overhead_s = min(read, ceiling)
            self.frontend_latency_s = latency_at(rows, self.prefill_slope,
                                                 self.prefill_step_overhead_s)
        # The latency by load: every closed-loop anchor's TTFT beyond the model, per concurrency.
        # A frontend serving more streams answers each later (tokenisation, detokenisation and
        # HTTP share a few host processes); the engine-side queueing the replay simulates is
        # taken out by the model's sojourn and wait.
        excess: dict[int, list[float]] = {}
        for record in usable:
            conc = record.workload.concurrency
            if conc is None or conc < 1 or self._memory_bound(record):
                continue
            row = self._ttft_row(record)
            excess.setdefault(int(conc), []).append(max(0.0, row.excess(
                self.prefill_slope, self.frontend_latency_s, self.prefill_step_overhead_s)))
        if excess:
            concs = sorted(excess)
            self._latency_table = (np.log(np.array(concs, dtype=np.float64)),
                                   np.array([float(np.mean(excess[c])) for c in concs]))

    def _prefill_stalls(self, usable) -> list[tuple[float, float, float]]:
        """(ISL, engine seconds per prefill step, analytic lone prefill) read from each anchor's
        decode stalls: mean TPOT counts the steps a prefill holds the decodes up, median ITL
        does not, so ``(TPOT - ITL) x (OSL - 1)`` is the stall over a request's decode, shared
        by the other clients' prompts that arrived meanwhile. Only anchors whose ITL is the
        step (not a coalesced stream, not a speculative chunk) and whose stall is at least
        STALL_MIN_SHARE of TPOT (below it the gap is the ITL distribution's own skew) count."""
        out = []
        for record in usable:
            m, w = record.measurements, record.workload
            _, basis = record.decode_step
            conc = int(w.concurrency or 0)
            tpot = m.tpot_s
            if (basis != "median_itl" or not tpot or not m.itl_median_s or conc < 2
                    or record.ttft_s is None or w.osl < 2 or record.regime.disaggregated):
                continue
            gap = tpot - m.itl_median_s
            if gap < STALL_MIN_SHARE * tpot:
                continue
            stall = gap * (w.osl - 1) / _arrivals_during_decode(record, tpot)
            out.append((float(w.isl), stall, self._lone_prefill(record)))
        return out

    def _running_cap(self, record, oracle: AnalyticOracle) -> int:
        """Requests the anchor's deployment ran at once per replica: its recorded limit, else
        the target engine's, over every attention-DP rank, and no more than its KV pool holds
        at their mean resident context (``ISL + OSL / 2``, Little's law on the pool: past it a
        closed loop queues for memory, as the replay does). Without the memory bound a sweep
        run to the pool's capacity read the queue as frontend latency and carried it to every
        other load (InferenceMAX B200 SGLang fp8 MTP 1k/8k c512: TTFT 199 s, 512 clients
        against about 400 requests' worth of pool), and labelled its step with a batch it
        never ran."""
        limit = record.regime.max_num_seqs or self.scenario.engine.max_num_seqs
        dp = oracle.scenario.parallel.dp_attention
        by_memory = self._held_by_memory(record)
        return max(1, min(int(limit), int(limit) if by_memory is None else by_memory)) * dp

    def _held_by_memory(self, record) -> int | None:
        """Requests one scheduler's KV pool holds at the anchor's mean resident context
        (``ISL + OSL / 2``); None where that context is empty."""
        w = record.workload
        return requests_held(self._pool_tokens(record), w.isl, w.osl)

    def _memory_bound(self, record) -> bool:
        """More clients than the anchor's KV pool holds at their mean resident context: its
        TTFT is mostly a queue for memory, whose length the engine's admission rule sets
        (SGLang reserves each running request's remaining output at ``new_token_ratio``),
        which the pool's Little's-law bound reads only roughly. Its residue is not time
        outside the engine, so it stays out of the latency by load (carried to another shape,
        B200 SGLang fp8 MTP 1k/8k c512's residue put 90 s on 1k/1k c512's 3 s TTFT)."""
        if record.regime.disaggregated or not record.workload.concurrency:
            return False
        oracle, _ = self._anchor_oracle(record)
        held = (self._held_by_memory(record) or 0) * oracle.scenario.parallel.dp_attention \
            * (record.regime.replicas or 1)
        return 0 < held < int(record.workload.concurrency)

    def _pool_tokens(self, record) -> int:
        """KV pool tokens of one scheduler of the anchor's deployment (each attention-DP rank
        has its own), remembered per regime: the memory model's, since a pool the target
        states (``engine.kv_pool_tokens``) is the target's, not the measured deployment's.
        A pool the anchors show (``kv_ceiling``) sizes the target's replay, not these
        readings: their steps, read from TPOT, carry the prefill stalls of the load they ran
        at, and read at the smaller pool's batch those stalls would be priced twice
        (docs/anchors.md, "The KV pool the anchors ran at")."""
        return self._model_pool(self._anchor_oracle(record)[1])

    def _model_pool(self, key: tuple) -> int:
        pool = self._pools.get(key)
        if pool is None:
            pool = self._pools[key] = model_memory_plan(self._oracles[key].scenario) \
                .kv_pool_tokens
        return pool

    def _ttft_row(self, record) -> TtftRow:
        """An anchor's TTFT with the parts the model explains: its analytic lone prefill, the
        wait behind the decode step in flight and for the scheduler's next read of new
        requests, the closed loop its prompts queue in, and the wait for a running slot when
        it had more clients than slots."""
        if record.regime.disaggregated:
            return self._disaggregated_ttft_row(record)
        oracle, _ = self._anchor_oracle(record)
        w = record.workload
        isl = int(w.isl)
        clients = max(1, int(w.concurrency or 1))
        others = clients - 1
        wave = self._waves(record) and others > 0
        wait = 0.0
        if wave:
            # the prompts come in a wave onto an idle group (``_wave_prefill``): their
            # queueing is in the wave's steps, and no step is in flight
            prefill = self._wave_prefill(record, clients)
        else:
            prefill = self._lone_prefill(record)
        if others and self.points and not wave:
            # the step in flight, as the replay prices it: the decoding others, shared over
            # the ranks where attention-DP ranks are simulated (a rank's, or its group's)
            batch = self._scheduled(others, oracle)
            step = self.decode_ratio(batch) * self._anchor_step(
                oracle, batch, isl + w.osl / 2.0, self.width)
            # half the step in flight, then (SGLang's receive interval) the whole steps left
            # to the scheduler's next read, (interval - 1) / 2 of them on average
            wait = 0.5 * step * (record.regime.scheduler_recv_interval or 1)
        tpot = record.measurements.tpot_s
        decode_s = max(0, w.osl - 1) * tpot if tpot else math.inf
        slots = self._running_cap(record, oracle) * (record.regime.replicas or 1)
        waited = slot_wait(decode_s, clients, slots) if math.isfinite(decode_s) else 0.0
        queued_behind = clients
        if wave:
            queued_behind = 1  # the wave's steps hold its queueing
        elif self.rank_level:
            # a prompt queues behind the prompts of its own rank only
            queued_behind = max(1, math.ceil(clients / oracle.scenario.parallel.dp_attention))
        return TtftRow(float(isl), float(record.ttft_s), prefill, wait + waited,
                       queued_behind, decode_s)

    def _disaggregated_ttft_row(self, record) -> TtftRow:
        """A disaggregated anchor's TTFT: its prompts queue at the prefill pool's workers
        (no decode step in flight there), the clients away decoding on the decode pool
        between prompts, and, where the anchor records the decode workers' running limit, a
        wait for a decode slot; the KV transfer stays in the latency the fit reads."""
        w, reg = record.workload, record.regime
        tpot = record.measurements.tpot_s
        decode_s = max(0, w.osl - 1) * tpot if tpot else math.inf
        clients = max(1, int(w.concurrency or 1))
        waited = 0.0
        if reg.max_num_seqs and reg.decode_workers and math.isfinite(decode_s):
            # the decode workers' recorded running limit (the decode pool's ranks, not the
            # prefill layout this oracle reads the anchor at), as a colocated anchor's
            waited = slot_wait(decode_s, clients,
                               reg.max_num_seqs * (reg.dp_attention or 1) * reg.decode_workers)
        return TtftRow(float(w.isl), float(record.ttft_s), self._lone_prefill(record),
                       waited, clients, decode_s, servers=reg.prefill_workers or 1)

    @property
    def frontend_modelled(self) -> bool:
        """Whether the anchors gave a frontend latency at all (else requests go straight in)."""
        return self._frontend_modelled

    def frontend_latency(self, in_flight: int) -> float:
        """Seconds a request spends outside the engine with ``in_flight`` requests (itself
        included) open: the anchors' latency interpolated in log concurrency; past the
        measured loads a power law in concurrency (``latency_at_load``); 0 when no anchor
        gave a TTFT.

        It is carried to a target ISL the probe does not cover: it is time per request, not
        per prompt token. A public DeepSeek-R1-0528 sweep on SGLang (16 x H100, one client)
        measured a TTFT of 180 ms at 128 tokens, 190-200 ms at 2k-4k and 264 ms at 8k: a
        fixed ~175 ms plus a prefill that grows as the analytic one does (docs/anchors.md)."""
        if not self._frontend_modelled:
            return 0.0
        n = max(1, int(in_flight))
        if self._frontend_from:
            return self._carried_latency(n)
        if self._latency_table is None:
            return self.frontend_latency_s
        value = self._latency_memo.get(n)
        if value is None:
            value = self._latency_memo[n] = latency_at_load(math.log(n), *self._latency_table)
        return value

    def _carried_latency(self, n: int) -> float:
        """A prior's time outside the engine at ``n`` requests open: the median of its
        regimes' own readings (each read at its lowest load) over the regimes whose lowest
        load is at most ``n`` (a reading at a heavier load holds that load's queueing; their
        load tables are not carried: past its loads a table's power law overshot, +2,700% at
        c64 held out by layout); 0 where none is."""
        value = self._latency_memo.get(n)
        if value is None:
            near = [r.oracle.frontend_latency_s for r in self._frontend_from
                    if r.batches[0] <= n]
            value = self._latency_memo[n] = float(np.median(near)) if near else 0.0
        return value

    # -- ratios ---------------------------------------------------------------------------
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
        if self.group == 1:
            return oracle.step(StepBatch(decode_context=np.full(batch, context),
                                         width=width)).seconds
        each, extra = divmod(batch, self.group)
        return oracle.step_group([
            StepBatch(decode_context=np.full(each + (i < extra), context), width=width)
            for i in range(self.group)]).seconds

    def decode_ratio(self, n: int, width: int | None = None,
                     context: float | None = None) -> float:
        """measured/analytic(anchor) for a target batch of ``n`` decoding sequences at mean
        resident ``context`` (None: the anchors' own context at that batch)."""
        width = self.width if width is None else width
        if not self.calibrated or n <= 0:
            return 1.0
        if self.prior is not None:
            return self.prior.ratio
        key = (n, width)
        r = self._ratio_cache.get(key)
        if r is None:
            r = ratio_at(math.log(n), *self._table(width), prior_slope=self._prior_slope,
                         one_sided=self._one_sided)
            self._ratio_cache[key] = r
        if context is None or context <= 0:
            return r
        slope = self._context_slope(width)
        rows = self._context_rows(width)
        if rows is not None:
            # some batch was measured at several contexts: each batch's ratio read at this
            # context (between its own contexts, interpolated), then across the batches
            logb, _ratios, log_ctx = self._table(width)
            lc = math.log(context)
            at = np.exp([_log_ratio_at_context(xs, ys, lc, slope) for xs, ys in rows])
            return ratio_at(math.log(n), logb, at, log_ctx, prior_slope=self._prior_slope,
                            one_sided=self._one_sided)
        if not slope:
            return r
        logb, _ratios, log_ctx = self._table(width)
        # the anchors' mean context at this batch, interpolated in log batch like the ratio
        own = float(np.interp(math.log(n), logb, log_ctx))
        return r * context_factor(slope, math.log(context) - own)

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
        decode ratio follows the context, else None: computed only then, as it is asked every
        step."""
        if self.prior is not None or not (self._context_slope(width)
                                          or self._context_rows(width) is not None):
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

    def prefill_ratio(self, batch: StepBatch) -> float:
        if not self._prefill_calibrated or not batch.prefill_tokens.size:
            return 1.0
        return self.prefill_slope

    # -- the interface --------------------------------------------------------------------
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
        # the ratio follows the context: each step's at its own, as the step-exact mode reads it
        return whole * np.array([
            self.decode_ratio(n, width, self._trend_context(width, *(c[k] for c in ranks)))
            for k in range(whole.size)])

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
        times *= np.array([self.decode_ratio(n, width, first + j * grow)
                           for j in range(steps)])
        return times

    # -- report ---------------------------------------------------------------------------
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


# Every shipped speculative (MTP) sweep's measured/analytic ratio grows with the batch, none
# of the others' does: log(ratio) over log(batch) is 0.12-0.41 across the nine MTP groups
# (pooled 0.20, median 0.23) against -0.1 to +0.1 without speculation. It is not the tokens
# per verify step falling with load (mean ITL over mean TPOT stays flat, 2.41 to 2.35 from c16
# to c64 on MI355X SGLang) but a verify step that grows faster than the analytic one, which is
# not modelled, so the pooled trend is carried where an MTP target's anchors give none
# (``ratio_at``), instead of holding the ratio flat (docs/anchors.md: leave-one-out TPOT p90
# 17.6% -> 13.1%).
SPEC_RATIO_BATCH_EXPONENT = 0.2

# A decode stall (mean TPOT over median ITL) below this share of TPOT is not read as prefill
# time: the ITL distribution's own skew puts the median that far below the mean.
STALL_MIN_SHARE = 0.05


# The decode ratio's context trend (``_context_slope``) is read only from a concurrency whose
# anchors span at least this factor in context, and carries the ratio at most
# CONTEXT_RATIO_LIMIT away from the anchors' own context's: a guard, not a fit.
CONTEXT_TREND_MIN_SPAN = 2.0
# Readings of the decode steps with their stalls priced at the fitted prefill slope
# (``_restall``): at most this many more, stopping once the slope moves by under
# STALL_SETTLED of itself.
STALL_PASSES = 3
STALL_SETTLED = 0.01
CONTEXT_RATIO_LIMIT = 2.0


_LOG_CONTEXT_LIMIT = math.log(CONTEXT_RATIO_LIMIT)


def _log_context_factor(slope: float, log_ctx_delta: float) -> float:
    """log ``context_factor``: scalar min/max, as it is read at every step of a macro-step."""
    return min(_LOG_CONTEXT_LIMIT, max(-_LOG_CONTEXT_LIMIT, slope * log_ctx_delta))


def context_factor(slope: float, log_ctx_delta: float) -> float:
    """The decode ratio's change ``log_ctx_delta`` away from the anchors' context."""
    return math.exp(_log_context_factor(slope, log_ctx_delta))


def _log_ratio_at_context(xs: list[float], ys: list[float], lc: float, slope: float) -> float:
    """One batch's log decode ratio at log context ``lc``: interpolated between the two of
    its measured contexts ``xs`` (log ratios ``ys``) around ``lc``; outside them, the nearest
    one's carried by the context slope (bounded, ``context_factor``)."""
    if len(xs) > 1 and xs[0] <= lc <= xs[-1]:
        k = min(bisect.bisect_right(xs, lc), len(xs) - 1)
        x0, x1 = xs[k - 1], xs[k]
        return ys[k - 1] + (ys[k] - ys[k - 1]) * (lc - x0) / (x1 - x0)
    end = 0 if lc < xs[0] else -1
    return ys[end] + _log_context_factor(slope, lc - xs[end])


def _decode_part(batch: StepBatch) -> StepBatch:
    """A mixed step's decodes alone: the part the decode ratio transports."""
    return StepBatch(decode_context=batch.decode_context, width=batch.width)


def _arrivals_during_decode(record, tpot: float) -> float:
    """Prompts the other clients of a closed-loop anchor send while one request decodes: each
    sends one per round of TTFT + decode, the decode being ``(OSL - 1) x tpot``."""
    w = record.workload
    life = (w.osl - 1) * tpot
    return (w.concurrency - 1) * life / (life + (record.ttft_s or 0.0))


def _prefill_beside_decodes(oracle: AnalyticOracle, isl: int, batch: int, context: float,
                            width: int) -> float:
    """What one prompt's chunks (the engine's chunked_prefill_size, each at the context
    already resident) add to the decode steps of ``batch`` sequences at ``context``, as
    analytic seconds: a mixed step's price less its decodes', the part the prefill ratio
    transports."""
    chunk = max(1, int(oracle.scenario.engine.chunked_prefill_size))
    ctx = np.full(batch, context)
    alone = oracle.step(StepBatch(decode_context=ctx, width=width)).seconds
    total, done = 0.0, 0
    while done < isl:
        c = min(chunk, isl - done)
        total += oracle.step(StepBatch(
            decode_context=ctx, width=width, prefill_tokens=np.array([float(c)]),
            prefill_resident=np.array([float(done)]),
            prefill_samples=1 if done + c >= isl else 0)).seconds - alone
        done += c
    return total


def _analytic_prefill_seconds(oracle: AnalyticOracle, isl: int) -> float:
    """One prompt alone, in the engine's prefill chunks, at the context already resident."""
    chunk = max(1, int(oracle.scenario.engine.chunked_prefill_size))
    total, done = 0.0, 0
    while done < isl:
        c = min(chunk, isl - done)
        last = done + c >= isl
        total += oracle.step(StepBatch(prefill_tokens=np.array([float(c)]),
                                       prefill_resident=np.array([float(done)]),
                                       prefill_samples=1 if last else 0)).seconds
        done += c
    return total


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
