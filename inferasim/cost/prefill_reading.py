"""The prefill, TTFT and time outside the engine, a part of ``CalibratedOracle``
(``cost/calibrated.py``).

The lowest-concurrency anchor at each ISL (its TTFT is closest to a lone
prefill) is read as ``TTFT = latency + sojourn(slope x prefill(isl)) + wait``: ``prefill``
the analytic lone-prompt prefill in the engine's chunks, ``sojourn`` that engine time plus
the queueing behind the other clients' prompts in the closed loop (``closed_loop_sojourn``),
``wait`` half a calibrated decode step of the other clients (an arrival waits for the step
in flight). With three or more ISLs slope and latency are fitted (least squares, latency >=
0, slope within PREFILL_SLOPE_LIMITS); with fewer, the probe cannot tell a slower prefill
from a fixed latency: the slope is the one the store's other regimes identify (carried,
``cost/prefill_prior.py``), else 1, and the excess is latency. When the store refuses
the probe's coverage of the target's ISL the slope is likewise the carried one, else 1 (the
report says which) and the latency is still read: it is time per request.
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
"""

from __future__ import annotations

import math
from typing import Any

import attrs
import numpy as np

from inferasim.config.loader import rank_scenario
from inferasim.cost.oracle import AnalyticOracle, StepBatch
from inferasim.cost.prefill_prior import carried_slope, store_slopes
from inferasim.cost.ttft_model import (
    PREFILL_SLOPE_LIMITS,
    BatchedPrefill,
    TtftRow,
    fit_queue_slope,
    fit_ttft,
    identifies_slope,
    latency_at,
    latency_at_load,
    slot_wait,
)

# A decode stall (mean TPOT over median ITL) below this share of TPOT is not read as prefill
# time: the ITL distribution's own skew puts the median that far below the mean.
STALL_MIN_SHARE = 0.05

# Readings of the decode steps with their stalls priced at the fitted prefill slope
# (``_restall``): at most this many more, stopping once the slope moves by under
# STALL_SETTLED of itself.
STALL_PASSES = 3
STALL_SETTLED = 0.01

# The prompt a measured prefill kernel's share is read at where the workload names no ISL.
AGENTIC_PROBE_ISL = 32768

# _carry_slope not yet read (its answer may be None)
NOT_READ = object()


class PrefillReading:
    """The prefill, TTFT and time outside the engine (the module's docstring)."""

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
        self.identified_slope = "mixed steps"
        self._mixed_readings = readings

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
        if fit_slope and identifies_slope(rows):
            self.identified_slope = "prompt lengths"
            self.prefill_slope, self.frontend_latency_s = fit_ttft(rows, fit_slope)
        else:
            # one prompt length cannot split a slower prefill from time outside the engine:
            # the slope the store's other regimes identify, where there is one, else 1
            carried = self._carry_slope()
            self.carried_slope = carried
            slope = carried.slope if carried is not None else 1.0
            self.prefill_slope, self.frontend_latency_s = slope, latency_at(rows, slope)
            # The queues of prefill workers laid out as the target's read its rate, whatever
            # decode pool or worker counts they ran beside (held out by point, that read
            # better than the target's own pools alone: docs/anchors.md).
            queued = None
            if fit_slope and self.scenario.topology.kind == "disaggregated":
                own = self._anchor_key(self.scenario)
                queue = [r for r in usable if r.regime.disaggregated
                         and self._anchor_key(self._anchor_scenario(r)) == own]

                def fit():
                    return fit_queue_slope([self._ttft_row(r) for r in queue], slope)

                # a row is read at the anchor's layout with the target's engine, part and
                # model, none of which the load changes: read once per store and deployment,
                # not at every rung of a ladder or candidate of a search
                sc = self.scenario
                key = ("prefill queue", tuple(r.id for r in queue), slope, self.knobs,
                       sc.pool_role, sc.engine, sc.parallel, repr(sc.gpu), repr(sc.model))
                queued = fit() if self._store is None else self._store.memo(key, fit)
            if queued is not None:
                self.identified_slope = "prefill queue"
                self.prefill_slope = queued[0]
                self.frontend_latency_s = latency_at(rows, queued[0])
        # The stalls are prefill time at the probe's ISL: a probe refused for the target's
        # ISL carries none of it into the engine (its TTFT beyond the slope's prefill stays
        # outside, in the latency), so the prefill is the slope's alone.
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
        oracle, key = self._anchor_oracle(record)
        memo = (key, int(w.isl))
        server = self._batched_prefills.get(memo)
        if server is None:
            server = self._batched_prefills[memo] = batched_prefill(oracle, memo[1])
        return TtftRow(float(w.isl), float(record.ttft_s), self._lone_prefill(record),
                       waited, clients, decode_s, servers=reg.prefill_workers or 1,
                       batched=server)

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

    def _carry_slope(self):
        """The slope carried from the store's identifying regimes (``prefill_prior``), read
        once per oracle; None where carrying is off or no regime identifies one."""
        if not self.carry_prefill or self._store is None or self.result is None:
            return None
        if self._carried_memo is not NOT_READ:
            return self._carried_memo
        self._carried_memo = None
        if self._prefill_kernel_measured():
            self._notes.append(
                "no prefill slope carried: this part prices the target's sparse-selection "
                "prefill at its measured kernel's rate (sparse_prefill_cost_scale), which a "
                "slope read against other kernels would count twice")
            return None
        readings = store_slopes(self._store, self.knobs)
        self._carried_memo = carried_slope(readings, self.result.target, self._store.ids())
        return self._carried_memo

    def _prefill_kernel_measured(self) -> bool:
        """Whether the target's prefill at its ISL is priced by a kernel measured on its
        part: the catalog's sparse-selection shortfall moves it by more than 5% (GLM-5.1 on
        MI355X under SGLang: its AgentX ladder's input rate past the cliff within 9% at the
        analytic prefill, 36% slow with a slope carried; docs/anchors.md)."""
        gpu = self.scenario.gpu
        if gpu.sparse_prefill_cost_scale == 1.0:
            return False
        # a workload of sessions names no ISL: its prompts run to tens of thousands of tokens
        isl = int(self.result.target.isl or AGENTIC_PROBE_ISL)
        plain = attrs.evolve(self.scenario, gpu=attrs.evolve(gpu, sparse_prefill_cost_scale=1.0))
        measured = analytic_prefill_seconds(self.analytic, isl)
        return measured > 1.05 * analytic_prefill_seconds(self._analytic(plain), isl)

    def prefill_ratio(self, batch: StepBatch) -> float:
        if not self._prefill_calibrated or not batch.prefill_tokens.size:
            return 1.0
        return self.prefill_slope


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


def prefill_chunks(oracle, isl: float, chunk: int, resident: float = 0.0
                   ) -> list[tuple[float, float]]:
    """(tokens, seconds) of each step of one prompt of ``isl`` tokens alone, in chunks of
    ``chunk`` tokens, each at the context already resident (``resident`` cached ahead)."""
    out, done = [], 0.0
    while done < isl:
        c = min(chunk, isl - done)
        last = done + c >= isl
        out.append((c, oracle.step(StepBatch(prefill_tokens=np.array([float(c)]),
                                             prefill_resident=np.array([resident + done]),
                                             prefill_samples=1 if last else 0)).seconds))
        done += c
    return out


def analytic_prefill_seconds(oracle: AnalyticOracle, isl: int) -> float:
    """One prompt alone, in the engine's prefill chunks, at the context already resident."""
    chunk = max(1, int(oracle.scenario.engine.chunked_prefill_size))
    return sum(seconds for _, seconds in prefill_chunks(oracle, isl, chunk))


def batched_prefill(oracle, isl: int, resident: int = 0) -> BatchedPrefill:
    """A prefill worker's steps of one to ``most`` prompts of ``isl`` tokens: each
    attention-DP rank fills its token budget with whole prompts (one at least), so a step
    takes up to ``budget // isl`` prompts a rank. ``resident``: cached tokens ahead of each
    prompt, which its attention reads. ``oracle`` analytic (a reading's, its slope applied
    by the fit) or calibrated (a prediction's)."""
    budget = rank_scenario(oracle.scenario).engine.prompt_budget
    most = max(1, budget // max(1, isl)) * oracle.scenario.parallel.dp_attention
    sizes = sorted({1, most} | {2 ** i for i in range(1, most.bit_length()) if 2 ** i < most})
    seconds = tuple(oracle.step(StepBatch(prefill_tokens=np.full(m, float(isl)),
                                          prefill_resident=np.full(m, float(resident)),
                                          prefill_samples=m)).seconds for m in sizes)
    return BatchedPrefill(tuple(float(m) for m in sizes), seconds)
