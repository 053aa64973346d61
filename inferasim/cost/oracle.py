"""The step-cost oracle: seconds for one engine step from the work the batch asks of the model.

    oracle.step(batch) -> StepCost(seconds, breakdown)

The analytic model is a roofline per term (GEMM groups, lm_head, attention terms,
collectives) plus the fixed cost every step pays. It is the shape the anchor-calibrated
oracle transports measurements with; the calibration rescales it, never replaces it.
"""

from __future__ import annotations

import attrs
import numpy as np

from inferasim.arch.attention import GqaAttention, MlaAttention, attention_for
from inferasim.arch.interconnect import allreduce_seconds, alltoall_seconds, check_scaleout
from inferasim.arch.params import param_counts
from inferasim.arch.sparse_attention import decode_attention_cost
from inferasim.arch.work import StepWork, step_work
from inferasim.config.knobs import Knobs
from inferasim.config.scenario import Scenario
from inferasim.cost.attention_time import AttentionPricer, kind_attention_pricer

_EMPTY = np.zeros(0, dtype=np.float64)

#: A GEMM of M rows runs its compute side as if it had M + GEMM_RAMP_ROWS: the tiles' fill
#: and the last partial wave cost the same whatever M, so the roofline's knee is soft and a
#: GEMM of a few hundred rows runs well below the part's attained rate. Fitted (least squares
#: on the log, with the catalog's H100 efficiencies and a fixed 6 us a kernel) to Vidur's
#: H100 BF16 operator timings of six dense models (``../shared/data/vidur-profiling``,
#: 21,924 GEMMs of 1-4,096 rows); held out by model, every model's own fit is 128 rows and
#: the median absolute log error 0.082-0.088 against 0.083-0.100 for the hard roofline, whose
#: bias at 129-1,024 rows (+15% to +22%) this removes. ``inferasim validate kernels``
#: reproduces it; docs/attention.md, "The GEMM's knee". The catalog's Hopper parts carry it
#: (``GpuSpec.gemm_ramp_rows``); no other part's GEMMs were measured.
GEMM_RAMP_ROWS = 128.0


def tile_ramp(rows: float, ramp_rows: float = GEMM_RAMP_ROWS) -> float:
    """The compute side's stretch for a GEMM of ``rows`` rows."""
    return 1.0 + ramp_rows / max(rows, 1.0)


def gemm_roofline(gpu, flops: float, weight_bytes: float, rows: float, dtype: str) -> float:
    """Seconds of one GEMM (or a group of them) on ``gpu``: its compute at the part's attained
    rate, stretched by the part's tile ramp at ``rows``, or its weight read, whichever is
    longer."""
    eff = gpu.efficiency
    compute = flops / (gpu.peak_flops(dtype) * eff.gemm) * tile_ramp(rows, gpu.gemm_ramp_rows)
    return max(compute, weight_bytes / (gpu.hbm_bw * eff.memory))


@attrs.frozen
class StepBatch:
    """One engine step, array-shaped: prefill chunks and decode sequences."""

    prefill_tokens: np.ndarray = _EMPTY     # tokens computed per prefill chunk
    prefill_resident: np.ndarray = _EMPTY   # context already resident for each chunk
    prefill_samples: int = 0                # chunks that finish their prompt (emit a token)
    decode_context: np.ndarray = _EMPTY     # resident context per decode sequence
    width: int = 1                          # tokens each decode sequence verifies (1 + drafts)

    @property
    def n_decode(self) -> int:
        return int(self.decode_context.size)

    @property
    def forward_tokens(self) -> int:
        return int(self.prefill_tokens.sum()) + self.n_decode * self.width


@attrs.frozen
class StepCost:
    seconds: float
    breakdown: dict[str, float]


class AnalyticOracle:
    """Roofline step time from the model's work on one GPU of the instance."""

    @property
    def calibration(self) -> dict:
        """What priced the steps (a fresh dict: a class-level one would be shared state)."""
        return {"mode": "analytic", "anchors_used": [], "refused": [],
                "note": "no anchors consulted: analytic roofline with the GPU base's efficiencies"}

    def __init__(self, scenario: Scenario, knobs: Knobs | None = None, *,
                 rank_level: bool = False):
        """``rank_level``: batches are one attention-DP rank's own (the ranks are simulated
        apart); otherwise one scheduler stands for all ranks and attention is shared out."""
        self.scenario = scenario
        self.knobs = knobs or Knobs()
        self.gpu = scenario.gpu
        self.work: StepWork = step_work(scenario)
        # a group past the part's scale-up domain needs its NIC figure: fail here, not mid-replay
        check_scaleout(self.gpu, scenario, self.work.tp if self.work.allreduces_per_step else 1,
                       self.work.ep)
        self.attention = attention_for(scenario.model)
        self.kv_dtype = scenario.kv_dtype
        par = scenario.parallel
        self.attn_tp = par.attn_tp
        self.dp = par.dp_attention
        self.dp_split = 1 if rank_level else par.dp_attention
        latent_replicated = (scenario.model.attention.kind.startswith("mla")
                             or scenario.model.attention.kind == "dsv4_compressed") \
            and not scenario.engine.mla_latent_sharded
        self.kv_divisor = 1.0 if latent_replicated else float(self.attn_tp)
        self.fixed_s = (self.gpu.step_overhead_s + scenario.engine.step_overhead_s
                        + self.gpu.layer_latency_s * scenario.model.num_layers)
        self._gemm_memo: dict[tuple[float, float], dict[str, float]] = {}
        self._steady_parts: dict[tuple[int, int], tuple[float, float]] = {}
        self._ramp_array = np.zeros(0)
        # Dense attention without windows is linear in its work (see _linear_coefficients);
        # a hybrid's linear-attention layers cost a constant per sequence, which is not.
        self._linear = type(self.attention) in (GqaAttention, MlaAttention) \
            and scenario.model.attention.sliding_layers == 0 \
            and scenario.model.attention.linear is None
        self._coefficients: dict[tuple[str, int], dict[str, float]] = {}
        self._pricers: dict[str, AttentionPricer] = {}
        self._coefficient_sums: dict[tuple[str, int], float] = {}
        # (tokens, samples) -> GEMM + collective seconds of a step: what its context does not
        # change, remembered for step_seconds
        self._context_free: dict[tuple[float, float], float] = {}
        spec = scenario.speculative
        self.draft_tokens = spec.draft_tokens if spec.method != "none" else 0
        counts = param_counts(scenario.model)
        # The draft runs once per draft token: the MTP module, or (EAGLE3, DSpark) a
        # one-layer draft head of about the same size.
        self.draft_params = (counts.mtp or counts.attention // max(scenario.model.num_layers, 1)
                             + 3 * scenario.model.hidden_size ** 2) / par.tp
        self.draft_dtype = "fp8" if scenario.weight_dtype != "bf16" else "bf16"

    # -- pieces -------------------------------------------------------------------------
    def _gemm_seconds(self, tokens: float, samples: float, own: float) -> dict[str, float]:
        """``own``: the tokens of the busiest attention-DP rank (each GPU projects its own
        rank's attention); all of them without attention DP."""
        # Batch shapes repeat (a decode batch of n runs many steps): remember them.
        key = (tokens, samples, own)
        hit = self._gemm_memo.get(key)
        if hit is None:
            if len(self._gemm_memo) > 4096:
                self._gemm_memo.clear()
            hit = self._gemm_memo[key] = self._gemm_seconds_uncached(tokens, samples, own)
        return dict(hit)

    def _gemm_seconds_uncached(self, tokens: float, samples: float,
                               own: float) -> dict[str, float]:
        gpu = self.gpu
        out: dict[str, float] = {}
        if tokens <= 0:
            return out
        for g in self.work.groups:
            weight_bytes = g.weight_bytes
            done = own if g.name == "gemm_attention" else tokens
            rows = done
            if g.experts:
                touched = 1.0 - (1.0 - g.experts_per_token / g.experts) ** tokens
                weight_bytes *= touched
                # each touched expert multiplies its own share of the routed tokens
                rows = done * g.experts_per_token / (g.experts * max(touched, 1e-12))
            out[g.name] = gemm_roofline(gpu, g.flops_per_token * done, weight_bytes, rows,
                                        g.dtype)
        if samples > 0:
            out["lm_head"] = gemm_roofline(gpu, self.work.lm_head_flops_per_sample * samples,
                                           self.work.lm_head_bytes, samples, "bf16")
        return out

    def _comm_seconds(self, tokens: float, own: float | None = None) -> float:
        """TP all-reduces and the EP all-to-all, each priced by the domains its group spans
        (on the scale-up links inside one, the cross-domain share on the NICs past it).
        ``own``: the busiest attention-DP rank's tokens (all of them without attention DP):
        each GPU dispatches, and reduces its attention output for, its own rank's."""
        w, gpu = self.work, self.gpu
        if tokens <= 0 or (w.allreduces_per_step == 0 and w.alltoall_bytes_per_token == 0
                           and w.attn_allreduces_per_step == 0):
            return 0.0
        own = tokens if own is None else own
        t = 0.0
        if w.allreduces_per_step:
            t += w.allreduces_per_step * allreduce_seconds(gpu, w.allreduce_bytes_per_token,
                                                           tokens, w.tp)
        if w.attn_allreduces_per_step:
            t += w.attn_allreduces_per_step * allreduce_seconds(
                gpu, w.allreduce_bytes_per_token, own, w.attn_tp)
        if w.alltoall_bytes_per_token:
            t += alltoall_seconds(gpu, w.alltoall_bytes_per_token, own, w.ep,
                                  w.alltoalls_per_step)
        return t

    def _draft_seconds(self, n_decode: int) -> float:
        if not self.draft_tokens or n_decode == 0:
            return 0.0
        gpu = self.gpu
        gemm = gemm_roofline(gpu, 2.0 * self.draft_params * n_decode,
                             self.draft_params * (1.0 if self.draft_dtype == "fp8" else 2.0),
                             n_decode, self.draft_dtype)
        # Each draft pass is one layer's kernels plus a little host work.
        return self.draft_tokens * (gemm + gpu.step_overhead_s * 0.1 + gpu.layer_latency_s)

    def _decode_phase(self) -> str:
        return "dpa-decode" if self.dp > 1 else "decode"

    def _decode_attention(self, ctx: np.ndarray, width: int) -> dict[str, np.ndarray]:
        if self._linear:
            coef = self._linear_coefficients(("decode", width))
            return {term: c * ctx for term, c in coef.items()}
        return self._decode_attention_full(ctx, width)

    def _prefill_attention(self, chunk: np.ndarray, resident: np.ndarray) -> dict[str, np.ndarray]:
        if self._linear:
            pairs = chunk * resident + chunk * (chunk + 1) / 2
            return {term: c * pairs for term, c in self._linear_coefficients(("prefill", 0)).items()}
        return self._prefill_attention_full(chunk, resident)

    def _linear_coefficients(self, key: tuple[str, int]) -> dict[str, float]:
        """Seconds per unit of work for attention that is linear in it: dense attention with
        no window prices decode per token of context and prefill per causal query-key pair,
        so one evaluation at a unit of work prices every batch (the hot path of a replay)."""
        coef = self._coefficients.get(key)
        if coef is None:
            one = np.ones(1)
            if key[0] == "decode":
                secs = self._decode_attention_full(one, key[1])
            else:  # a 1-token chunk over nothing resident: exactly one query-key pair
                secs = self._prefill_attention_full(one, np.zeros(1))
            coef = self._coefficients[key] = {t: float(v[0]) for t, v in secs.items()}
        return coef

    def _pricer(self, phase: str) -> AttentionPricer:
        """The phase's attention rates, worked out once per oracle."""
        pricer = self._pricers.get(phase)
        if pricer is None:
            pricer = self._pricers[phase] = kind_attention_pricer(
                self.attention, self.gpu, phase=phase, attn_tp=self.attn_tp,
                kv_bytes_divisor=self.kv_divisor, kv_dtype=self.kv_dtype)
        return pricer

    def _decode_attention_full(self, ctx: np.ndarray, width: int) -> dict[str, np.ndarray]:
        phase = self._decode_phase()
        dense = phase == "dpa-decode" and self.knobs.dpa_decode_dense
        scale = self.scenario.engine.dpa_decode_attention_scale if phase == "dpa-decode" else None
        cost = decode_attention_cost(self.attention, ctx, width, self.kv_dtype, dense=dense,
                                     scale=scale)
        secs = self._pricer(phase).seconds(cost)
        if self.dp_split > 1:
            # Each DP rank attends its own share of the instance's sequences in parallel.
            secs = {k: v / self.dp_split for k, v in secs.items()}
        return secs

    def _prefill_attention_full(self, chunk: np.ndarray,
                                resident: np.ndarray) -> dict[str, np.ndarray]:
        cost = self.attention.prefill(chunk, resident, self.kv_dtype)
        secs = self._pricer("prefill").seconds(cost)
        if self.dp_split > 1:
            secs = {k: v / self.dp_split for k, v in secs.items()}
        return secs

    # -- the interface ------------------------------------------------------------------
    def step(self, batch: StepBatch) -> StepCost:
        tokens = float(batch.forward_tokens)
        samples = float(batch.prefill_samples + batch.n_decode * batch.width)
        own = tokens / self.dp_split   # one scheduler for the ranks: an even share each
        breakdown = self._gemm_seconds(tokens, samples, own)
        breakdown.update(self._attention_seconds(batch))
        breakdown["communication"] = self._comm_seconds(tokens, own)
        if self.draft_tokens and batch.n_decode:
            breakdown["draft"] = self._draft_seconds(batch.n_decode)
        breakdown["overhead"] = self.fixed_s
        return StepCost(seconds=float(sum(breakdown.values())), breakdown=breakdown)

    def step_seconds(self, batch: StepBatch) -> float:
        """``step(batch).seconds`` without building the breakdown: the engine's per-step
        price. Linear attention sums its coefficients before scaling the batch's work, so it
        may differ from ``step`` in the last bits; the engine prices with this in both step
        modes."""
        if not self._linear:
            return self.step(batch).seconds
        n_decode = batch.decode_context.size
        tokens, samples, prefill, decode = self._linear_parts(batch)
        seconds = self._context_free_seconds(tokens, samples, tokens / self.dp_split)
        seconds += prefill
        seconds += decode
        seconds += self.fixed_s
        if self.draft_tokens and n_decode:
            seconds += self._draft_seconds(n_decode)
        return seconds

    def _linear_parts(self, batch: StepBatch) -> tuple[float, float, float, float]:
        """(tokens, samples, prefill attention seconds, decode attention seconds) of a step
        whose attention is linear in its work, in Python floats: a step holds a few prefill
        chunks, and Python floats beat numpy's per-call overhead there."""
        chunks = batch.prefill_tokens.tolist()
        n_decode = batch.decode_context.size
        width = batch.width
        prefill = decode = 0.0
        if chunks:
            pairs = sum(c * r + c * (c + 1) / 2
                        for c, r in zip(chunks, batch.prefill_resident.tolist(), strict=True))
            prefill = self._coefficient_sum(("prefill", 0)) * pairs
        if n_decode:
            decode = self._coefficient_sum(("decode", width)) \
                * float(np.add.reduce(batch.decode_context))  # .sum() without its wrapper
        return (float(int(sum(chunks)) + n_decode * width),
                float(batch.prefill_samples + n_decode * width), prefill, decode)

    def _context_free_seconds(self, tokens: float, samples: float, own: float) -> float:
        """GEMM and collective seconds of a step of ``tokens`` (``samples`` sampled), ``own``
        of them its busiest attention-DP rank's: what its context does not change,
        remembered per shape."""
        key = (tokens, samples, own)
        seconds = self._context_free.get(key)
        if seconds is None:
            if len(self._context_free) > 4096:
                self._context_free.clear()
            seconds = self._context_free[key] = \
                sum(self._gemm_seconds(tokens, samples, own).values()) \
                + self._comm_seconds(tokens, own)
        return seconds

    def _coefficient_sum(self, key: tuple[str, int]) -> float:
        total = self._coefficient_sums.get(key)
        if total is None:
            total = self._coefficient_sums[key] = sum(self._linear_coefficients(key).values())
        return total

    def step_group(self, batches: list[StepBatch]) -> StepCost:
        """Attention-DP ranks stepping together: the dense and MoE layers run over the
        combined tokens of all ranks, each rank attends its own sequences in parallel (the
        slowest sets the pace), and the step ends for all at once."""
        tokens = float(sum(b.forward_tokens for b in batches))
        samples = float(sum(b.prefill_samples + b.n_decode * b.width for b in batches))
        own = float(max((b.forward_tokens for b in batches), default=0))
        breakdown = self._gemm_seconds(tokens, samples, own)
        attn = [self._attention_seconds(b) for b in batches]
        slowest = max(range(len(batches)), key=lambda i: sum(attn[i].values())) if attn else 0
        for term, secs in (attn[slowest].items() if attn else ()):
            breakdown[term] = secs
        breakdown["communication"] = self._comm_seconds(tokens, own)
        n_decode = max((b.n_decode for b in batches), default=0)
        if self.draft_tokens and n_decode:
            breakdown["draft"] = self._draft_seconds(n_decode)
        breakdown["overhead"] = self.fixed_s
        return StepCost(seconds=float(sum(breakdown.values())), breakdown=breakdown)

    def step_group_seconds(self, batches: list[StepBatch]) -> float:
        """``step_group(batches).seconds`` without the breakdown: a lockstep group's price
        per step, in both step modes (as ``step_seconds`` is one engine's)."""
        if not self._linear:
            return self._evaluated_group_seconds(batches)
        tokens = samples = slowest = own = 0.0
        n_decode = 0
        for b in batches:
            rank_tokens, rank_samples, prefill, decode = self._linear_parts(b)
            tokens += rank_tokens
            samples += rank_samples
            own = max(own, rank_tokens)
            slowest = max(slowest, prefill + decode)  # each rank attends its own sequences
            n_decode = max(n_decode, b.decode_context.size)
        return self._group_seconds(tokens, samples, slowest, n_decode, own)

    def _evaluated_group_seconds(self, batches: list[StepBatch]) -> float:
        """``step_group(batches).seconds`` for attention not linear in its work: every rank's
        sequences (and prompt chunks) in one evaluation, each rank's share summed apart
        (a sequence's attention is its own), rather than one evaluation per rank."""
        widths = {b.width for b in batches if b.n_decode}
        if len(widths) > 1:
            return self.step_group(batches).seconds
        tokens = float(sum(b.forward_tokens for b in batches))
        samples = float(sum(b.prefill_samples + b.n_decode * b.width for b in batches))
        own = float(max((b.forward_tokens for b in batches), default=0))
        n_decode = max((b.n_decode for b in batches), default=0)
        attention = np.zeros(len(batches))
        decoding = [i for i, b in enumerate(batches) if b.n_decode]
        if decoding:
            ctx = np.concatenate([batches[i].decode_context for i in decoding])
            per_seq = sum(self._decode_attention(ctx, widths.pop()).values())
            starts = np.cumsum([0] + [batches[i].n_decode for i in decoding[:-1]])
            attention[decoding] += np.add.reduceat(per_seq, starts)
        prefilling = [i for i, b in enumerate(batches) if b.prefill_tokens.size]
        if prefilling:
            chunks = np.concatenate([batches[i].prefill_tokens for i in prefilling])
            resident = np.concatenate([batches[i].prefill_resident for i in prefilling])
            per_chunk = sum(self._prefill_attention(chunks, resident).values())
            starts = np.cumsum([0] + [batches[i].prefill_tokens.size for i in prefilling[:-1]])
            attention[prefilling] += np.add.reduceat(per_chunk, starts)
        slowest = float(attention.max()) if attention.size else 0.0
        return self._group_seconds(tokens, samples, slowest, n_decode, own)

    def group_decode_steps(self, contexts: list[np.ndarray | None], width: int) -> np.ndarray:
        """``step_group_seconds`` of consecutive decode-only group steps, one per row of the
        busy ranks' context matrices (``None``: an idle rank), each equal to the single
        step's price (linear attention: the same operations per step; otherwise each rank's
        matrix evaluated at once, equal to the last bits)."""
        steps = next(c.shape[0] for c in contexts if c is not None)
        tokens = samples = 0.0
        n_decode = 0
        slowest = np.zeros(steps)
        coef = self._coefficient_sum(("decode", width)) if self._linear else 0.0
        for c in contexts:
            nd = 0 if c is None else c.shape[1]
            tokens += nd * width
            samples += nd * width
            if not nd:
                continue
            if self._linear:
                attn = coef * c.sum(axis=1)
            else:
                # every sequence's attention is its own (elementwise in its context), so a
                # rank's whole run of steps is one evaluation over its context matrix
                per_seq = sum(self._decode_attention(c.ravel(), width).values())
                attn = np.asarray(per_seq, dtype=np.float64).reshape(c.shape).sum(axis=1)
            slowest = np.maximum(slowest, attn)
            n_decode = max(n_decode, nd)
        return self._group_seconds(tokens, samples, slowest, n_decode, float(n_decode * width))

    def _group_seconds(self, tokens: float, samples: float, slowest, n_decode: int,
                       own: float):
        """A group step's seconds from its combined ``tokens`` (``samples`` sampled), ``own``
        of them its busiest rank's, its slowest rank's attention (one figure, or one per step)
        and its largest decode batch: one sum for the single group step and the run of them."""
        seconds = self._context_free_seconds(tokens, samples, own) + slowest + self.fixed_s
        if self.draft_tokens and n_decode:
            seconds += self._draft_seconds(n_decode)
        return seconds

    def _attention_seconds(self, batch: StepBatch) -> dict[str, float]:
        out: dict[str, float] = {}
        if batch.prefill_tokens.size:
            for term, secs in self._prefill_attention(batch.prefill_tokens,
                                                      batch.prefill_resident).items():
                out[f"attn_prefill_{term}"] = float(secs.sum())
        if batch.n_decode:
            for term, secs in self._decode_attention(batch.decode_context, batch.width).items():
                out[f"attn_decode_{term}"] = float(secs.sum())
        return out

    def decode_steps(self, ctx0: np.ndarray, steps: int, advance: float | np.ndarray,
                     width: int) -> np.ndarray:
        """Seconds of ``steps`` consecutive decode steps of a steady batch.

        Sequence i is at context ``ctx0[i] + j * advance`` in step j (``advance`` one figure,
        or one per sequence); the batch does not change. One vectorised evaluation for all
        steps: this is what makes macro-steps cheap.
        """
        n = ctx0.size
        # A batch of n runs macro-step after macro-step: its context-free part is remembered.
        key = (n, width)
        parts = self._steady_parts.get(key)
        if parts is None:
            tokens = float(n * width)
            fixed = self._context_free_seconds(tokens, tokens, tokens / self.dp_split) \
                + self._draft_seconds(n) \
                + self.fixed_s
            coef = self._coefficient_sum(("decode", width)) if self._linear else 0.0
            parts = self._steady_parts[key] = (fixed, coef)
        fixed, coef = parts
        if self._linear:
            # Linear in context: step j costs the coefficients times the batch's total
            # context, sum(ctx0) + j * n * advance -- O(steps), whatever the batch size.
            grow = float(np.add.reduce(advance)) if isinstance(advance, np.ndarray) \
                else n * advance
            # fixed + coef * (sum(ctx0) + grow * j), in place: one array, not four
            times = grow * self._ramp(steps)
            times += float(np.add.reduce(ctx0))
            times *= coef
            times += fixed
            return times
        ctx = ctx0[None, :].astype(np.float64) + self._ramp(steps)[:, None] * advance
        per_seq = sum(self._decode_attention(ctx.ravel(), width).values())
        attn = np.asarray(per_seq, dtype=np.float64).reshape(steps, n).sum(axis=1)
        return fixed + attn

    def _ramp(self, steps: int) -> np.ndarray:
        """0, 1, ..., steps - 1 as floats (read only: a view of one array kept per oracle)."""
        if steps > self._ramp_array.size:
            self._ramp_array = np.arange(max(steps, 2 * self._ramp_array.size),
                                         dtype=np.float64)
            self._ramp_array.setflags(write=False)
        return self._ramp_array[:steps]
