"""Reading the anchors in their own regimes, a part of ``CalibratedOracle``
(``cost/calibrated.py``): each anchor's deployment as a scenario and its analytic oracle
(its layout, KV dtype, and for a prior its own model and part), the requests it ran at once
(its running limit and its KV pool), its decode step as an ``AnchorPoint`` at its batch and
context, the trend borrowed from the regime's other builds, the mixed agentic steps split
into decodes and prompt tokens, and a prior pooled from other regimes (``cost/prior.py``)."""

from __future__ import annotations

import math

import attrs
import numpy as np

from inferasim.anchors.acceptance import carry_tokens_per_step
from inferasim.arch.memory import model_memory_plan
from inferasim.config.errors import ConfigError
from inferasim.config.loader import catalog_gpu, catalog_model, rank_scenario
from inferasim.config.scenario import Scenario, SpeculativeSpec
from inferasim.cost.mixed_steps import fit_shares, step_parts
from inferasim.cost.oracle import AnalyticOracle, StepBatch
from inferasim.cost.prefill_reading import analytic_prefill_seconds
from inferasim.cost.prior import PooledPrior, reading
from inferasim.cost.ratio_table import pooled_trend, trend_held
from inferasim.cost.ttft_model import requests_held


@attrs.frozen
class AnchorPoint:
    """One anchor as the oracle uses it: its steady decode batch and its measured step."""

    id: str
    batch: int              # sequences per engine instance (per rank, or per lockstep group)
    context: float          # mean resident context, isl + osl / 2
    measured_s: float       # seconds of one (verify) step
    regime_key: tuple


class AnchorReading:
    """The anchors read in their own regimes (the module's docstring)."""

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
            sub = type(self)(self._anchor_scenario(group[0]), self._store, self.knobs,
                             anchors=own, rank_level=self.rank_level)
            label = (f"{group[0].regime.model} {key[-1]} {key[7]} tp{key[0]} ep{key[1]} "
                     f"dpa{key[2]} kv {key[4]}")
            read = reading(label, group[0], sub)
            if read is not None:
                readings.append(read)
                if read.slope_pinned:
                    self._notes.append(
                        f"prior regime {label}: its prefill fit stopped at its bound "
                        f"(x{sub.prefill_slope:.2f} the analytic); it gives the prior no "
                        "prefill slope")
        if other_kind:
            kinds = ("dense", "mixture-of-experts") if moe else ("mixture-of-experts", "dense")
            self._notes.append(
                f"prior regimes of {', '.join(sorted(other_kind))} are left out: a {kinds[1]} "
                f"model's prior is no {kinds[0]} model's (none held out supports it)")
        if not readings:
            self._notes.append("no regime of the prior calibrates a decode step")
            return None
        return PooledPrior(self.result.prior_level, self._same_ranks(readings))

    def _same_ranks(self, readings: list) -> list:
        """The readings whose ranks stand as the target's do (attention-DP ranks apart, or
        one rank), where the pool holds any and also holds the other kind: an attention-DP
        step runs 1.4-4x its analytic price on the measured deployments where the others
        run 0.9-1.3x (docs/anchors.md, "Attention-DP regimes read apart"), so a median over
        both carries neither."""
        apart = self.scenario.parallel.dp_attention > 1
        same = [r for r in readings if r.ranks_apart == apart]
        if not same or len(same) == len(readings):
            return readings
        left = sorted({r.label for r in readings if r.ranks_apart != apart})
        self._notes.append(
            f"prior: {len(same)} regime(s) {'with' if apart else 'without'} attention-DP "
            f"ranks, as the target; {len(left)} of the other kind left out "
            f"({'; '.join(left[:3])}{'; ...' if len(left) > 3 else ''})")
        return same

    def _analytic(self, scenario: Scenario) -> AnalyticOracle:
        if self.rank_level:
            return AnalyticOracle(scenario, self.knobs, rank_level=True)
        return AnalyticOracle(scenario, self.knobs)

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
        # the anchor's EPLB slots are not recorded: the target's, where it runs expert parallel
        parallel = par.relaid(tp=tp or par.tp, ep=ep or par.ep,
                              dp_attention=dpa or par.dp_attention, dcp=reg.dcp or par.dcp)
        engine = attrs.evolve(sc.engine, kv_dtype=reg.kv_dtype or sc.kv_dtype)
        model, gpu, spec = sc.model, sc.gpu, sc.speculative
        if self.result.prior_level is not None:
            if reg.spec_method == "none" and spec.method != "none":
                spec = SpeculativeSpec()    # a plain regime's step is read plain
            dtype = reg.weight_dtype if reg.weight_dtype not in (None, "fp4") else None
            model = self._models.get((reg.model, dtype))
            if model is None:  # read from the catalog once per model and dtype
                model = self._models[(reg.model, dtype)] = catalog_model(reg.model, dtype)
            if reg.gpu is not None and reg.gpu != gpu.name:
                # a prior from another part of the ISA reads its step against its own part
                gpu = self._parts.get(reg.gpu)
                if gpu is None:
                    gpu = self._parts[reg.gpu] = catalog_gpu(reg.gpu)
        return attrs.evolve(sc, model=model, gpu=gpu, parallel=parallel, engine=engine,
                            speculative=spec)

    @staticmethod
    def _anchor_key(sc: Scenario) -> tuple:
        return (sc.parallel.tp, sc.parallel.ep, sc.parallel.dp_attention, sc.parallel.dcp,
                sc.kv_dtype, sc.model.name, sc.model.weight_dtype, sc.gpu.name,
                sc.speculative.method)

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
            seconds = self._lone_prefills[memo] = analytic_prefill_seconds(oracle, memo[1])
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
        budget = rank_scenario(oracle.scenario).engine.prompt_budget
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
            if reg.spec_method not in (None, "none") or (spec_target and reg.spec_method is None):
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
