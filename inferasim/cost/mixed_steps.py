"""Steps that carry prompt tokens beside their decodes, read apart: how much of an agentic
rung's mean ITL is its decodes and how much its uncached prompt tokens.

An agentic rung's step (``Workload.prefill_per_step``) holds both. Below a KV cliff it holds,
on average, a few dozen tokens of uncached tail on a prompt of ~80k (in fact one chunk of a
few thousand tokens every hundred-odd steps); past the cliff, thousands of recomputed prompt
tokens. Read apart, rung by rung, the saturated rungs' decodes were priced at the decode
ratio extrapolated past the batches the rungs below measured (2.2 at 24 decoding on MiniMax
FP8 TP2, 2.8 at 14 on MXFP4 TP1), and each one's prefill slope was what that left: 1.56 on
one ladder, 0.88 on the other, 1.8x apart on one part and engine.

``fit_shares`` prices every step of a regime at two unknown factors, one on its analytic
decodes and one on its analytic prompt tokens, by least squares over the relative errors.
On the two MiniMax ladders the factors come out alike (decodes 1.48 and 1.53, prompt tokens
1.42 and 1.55: docs/anchors.md, "The tails in the decode steps").
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import numpy as np

from inferasim.cost.oracle import StepBatch
from inferasim.cost.ttft_model import PREFILL_SLOPE_LIMITS


@attrs.frozen
class StepParts:
    """One mixed-step anchor against its own analytic step."""

    id: str
    measured_s: float     # the anchor's step (mean ITL)
    decodes_s: float      # its decodes alone, analytic
    prompt_s: float       # what its prompt tokens add, analytic
    batch: int = 1        # the decodes it held, at least one

    @property
    def prompt_led(self) -> bool:
        """Most of the step is prompt tokens (a saturated rung past a KV cliff)."""
        return self.prompt_s >= self.decodes_s


def step_parts(record, oracle, width: int = 1) -> StepParts:
    """``record``'s step split by ``oracle`` (the analytic oracle of its own deployment): its
    decodes at the batch that decoded at once and the mean context, and its uncached prompt
    tokens as the engine computes them: a request's uncached rest in chunks of at most the
    engine's chunk, on top of the cached share of its prompt, in that share of the steps
    which averages the record's tokens per step. Not the average tokens in every step: a
    few dozen tokens beside four decodes would touch half a MoE's experts where the real
    tail, one chunk in one step, touches them once."""
    w = record.workload
    batch = max(1, int(round(w.decode_batch or w.concurrency or 1)))
    ctx = np.full(batch, w.isl + w.osl / 2.0)
    cached = w.prefix_hit_rate or 0.0
    uncached = max(1.0, w.isl * (1.0 - cached))
    chunk = min(uncached, float(max(1, oracle.scenario.engine.chunked_prefill_size)))
    resident = w.isl * cached + (uncached - chunk) / 2.0
    decodes = oracle.step(StepBatch(decode_context=ctx, width=width)).seconds
    whole = oracle.step(StepBatch(decode_context=ctx, width=width,
                                  prefill_tokens=np.array([chunk]),
                                  prefill_resident=np.array([resident]))).seconds
    share = float(w.prefill_per_step) / chunk
    return StepParts(record.id, float(record.decode_step_s), decodes,
                     share * (whole - decodes), batch)


@attrs.frozen
class ShareFit:
    """The two factors: measured step ~ decode_ratio x decodes + prompt_slope x prompt."""

    decode_ratio: float
    prompt_slope: float
    steps: int


def fit_shares(parts: Sequence[StepParts]) -> ShareFit | None:
    """Both factors by least squares over the steps' relative errors, or None where the
    steps cannot tell them apart: no step led by its prompt tokens, or none by its decodes,
    or a factor that comes out non-positive or its slope outside PREFILL_SLOPE_LIMITS."""
    usable = [p for p in parts if p.measured_s > 0 and p.prompt_s > 0 and p.decodes_s > 0]
    if not any(p.prompt_led for p in usable) or all(p.prompt_led for p in usable):
        return None
    a = np.array([[p.decodes_s / p.measured_s, p.prompt_s / p.measured_s] for p in usable])
    (ratio, slope), *_ = np.linalg.lstsq(a, np.ones(len(usable)), rcond=None)
    lo, hi = PREFILL_SLOPE_LIMITS
    if ratio <= 0 or not lo <= slope <= hi:
        return None
    return ShareFit(float(ratio), float(slope), len(usable))
