"""The step-cost oracle: seconds for one engine step from the work the batch asks of the model.

    oracle.step(batch) -> StepCost(seconds, breakdown)

The analytic model is a roofline per term (GEMM groups, lm_head, attention terms,
collectives) plus the fixed cost every step pays. It is the shape the anchor-calibrated
oracle transports measurements with; the calibration rescales it, never replaces it.
"""

from __future__ import annotations

import math

import attrs
import numpy as np

from inferasim.arch.attention import attention_for
from inferasim.arch.work import StepWork, step_work
from inferasim.config.knobs import Knobs
from inferasim.config.scenario import Scenario
from inferasim.arch.sparse_attention import decode_attention_cost
from inferasim.cost.attention_time import kind_attention_seconds

_EMPTY = np.zeros(0, dtype=np.float64)


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

    calibration = {"mode": "analytic", "anchors_used": [], "refused": [],
                   "note": "no anchors consulted: analytic roofline with the GPU base's efficiencies"}

    def __init__(self, scenario: Scenario, knobs: Knobs | None = None):
        self.scenario = scenario
        self.knobs = knobs or Knobs()
        self.gpu = scenario.gpu
        self.work: StepWork = step_work(scenario)
        self.attention = attention_for(scenario.model)
        self.kv_dtype = scenario.kv_dtype
        par = scenario.parallel
        self.attn_tp = par.attn_tp
        self.dp = par.dp_attention
        latent_replicated = (scenario.model.attention.kind.startswith("mla")
                             or scenario.model.attention.kind == "dsv4_compressed") \
            and not scenario.engine.mla_latent_sharded
        self.kv_divisor = 1.0 if latent_replicated else float(self.attn_tp)
        self.fixed_s = self.gpu.step_overhead_s + scenario.engine.step_overhead_s

    # -- pieces -------------------------------------------------------------------------
    def _gemm_seconds(self, tokens: float, samples: float) -> dict[str, float]:
        gpu, eff = self.gpu, self.gpu.efficiency
        out: dict[str, float] = {}
        if tokens <= 0:
            return out
        bw = gpu.hbm_bw * eff.memory
        for g in self.work.groups:
            weight_bytes = g.weight_bytes
            if g.experts:
                touched = 1.0 - (1.0 - g.experts_per_token / g.experts) ** tokens
                weight_bytes *= touched
            compute = g.flops_per_token * tokens / (gpu.peak_flops(g.dtype) * eff.gemm)
            out[g.name] = max(compute, weight_bytes / bw)
        if samples > 0:
            compute = self.work.lm_head_flops_per_sample * samples / (gpu.bf16_flops * eff.gemm)
            out["lm_head"] = max(compute, self.work.lm_head_bytes / bw)
        return out

    def _comm_seconds(self, tokens: float) -> float:
        w, gpu = self.work, self.gpu
        if tokens <= 0 or (w.allreduces_per_step == 0 and w.alltoall_bytes_per_token == 0):
            return 0.0
        bw = gpu.scaleup_bw_per_dir * gpu.efficiency.collective
        t = 0.0
        if w.allreduces_per_step:
            ring = 2.0 * (w.tp - 1) / w.tp * w.allreduce_bytes_per_token * tokens / bw
            t += w.allreduces_per_step * (ring + gpu.collective_latency_s * math.log2(w.tp))
        if w.alltoall_bytes_per_token:
            t += w.alltoall_bytes_per_token * tokens / bw + 2 * gpu.collective_latency_s
        return t

    def _decode_phase(self) -> str:
        return "dpa-decode" if self.dp > 1 else "decode"

    def _decode_attention(self, ctx: np.ndarray, width: int) -> dict[str, np.ndarray]:
        phase = self._decode_phase()
        dense = phase == "dpa-decode" and self.knobs.dpa_decode_dense
        cost = decode_attention_cost(self.attention, ctx, width, self.kv_dtype, dense=dense)
        secs = kind_attention_seconds(self.attention, cost, self.gpu, phase=phase,
                                      attn_tp=self.attn_tp, kv_bytes_divisor=self.kv_divisor,
                                      kv_dtype=self.kv_dtype)
        if self.dp > 1:
            # Each DP rank attends its own share of the instance's sequences in parallel.
            secs = {k: v / self.dp for k, v in secs.items()}
        return secs

    def _prefill_attention(self, chunk: np.ndarray, resident: np.ndarray) -> dict[str, np.ndarray]:
        cost = self.attention.prefill(chunk, resident, self.kv_dtype)
        secs = kind_attention_seconds(self.attention, cost, self.gpu, phase="prefill",
                                      attn_tp=self.attn_tp, kv_bytes_divisor=self.kv_divisor,
                                      kv_dtype=self.kv_dtype)
        if self.dp > 1:
            secs = {k: v / self.dp for k, v in secs.items()}
        return secs

    # -- the interface ------------------------------------------------------------------
    def step(self, batch: StepBatch) -> StepCost:
        tokens = float(batch.forward_tokens)
        samples = float(batch.prefill_samples + batch.n_decode * batch.width)
        breakdown = self._gemm_seconds(tokens, samples)
        if batch.prefill_tokens.size:
            for term, secs in self._prefill_attention(batch.prefill_tokens,
                                                      batch.prefill_resident).items():
                breakdown[f"attn_prefill_{term}"] = float(secs.sum())
        if batch.n_decode:
            for term, secs in self._decode_attention(batch.decode_context, batch.width).items():
                breakdown[f"attn_decode_{term}"] = float(secs.sum())
        breakdown["communication"] = self._comm_seconds(tokens)
        breakdown["overhead"] = self.fixed_s
        return StepCost(seconds=float(sum(breakdown.values())), breakdown=breakdown)

    def decode_steps(self, ctx0: np.ndarray, steps: int, advance: float, width: int) -> np.ndarray:
        """Seconds of ``steps`` consecutive decode steps of a steady batch.

        Sequence i is at context ``ctx0[i] + j * advance`` in step j; the batch does not change.
        One vectorised evaluation for all steps: this is what makes macro-steps cheap.
        """
        n = ctx0.size
        tokens = float(n * width)
        fixed = sum(self._gemm_seconds(tokens, tokens).values()) + self._comm_seconds(tokens) \
            + self.fixed_s
        ctx = ctx0[None, :].astype(np.float64) + advance * np.arange(steps, dtype=np.float64)[:, None]
        per_seq = sum(self._decode_attention(ctx.ravel(), width).values())
        attn = np.asarray(per_seq, dtype=np.float64).reshape(steps, n).sum(axis=1)
        return fixed + attn
