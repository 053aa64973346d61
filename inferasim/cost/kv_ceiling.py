"""The KV pool a measured server ran at, read from its closed-loop anchors (Little's law).

A closed loop of ``N`` clients without think time keeps, on average, ``N x (1 - TTFT / E2E)``
requests past their first token: those hold their whole context in the KV pool, the rest wait
for it or for their prefill. Times the mean resident context (``ISL + OSL / 2``) that is the
pool's mean occupancy. Where the most-occupied anchors of one deployment, at different prompt
lengths and loads, queue (their clients' contexts well beyond what runs) yet hold the same
occupancy, no anchor holds more, and that occupancy is well below what an engine prefilling a
full chunk every step would keep (it prefills ``chunk x (OSL - 1) / tokens per step`` prompt
tokens over one request's decode), the prompts waited for memory, not for the engine: the
occupancy is the pool the engine really had. docs/anchors.md ("The KV pool the anchors ran
at") gives the evidence (the GLM-5 ISL grid holds 205-217k tokens from 6k prompts at 48
clients to 16k at 64, where the memory model gives 320k) and how the reading behaves over the
shipped anchors when the thresholds below move: they are choices, not fits.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import attrs
import numpy as np

# An anchor queues for memory when its clients' contexts exceed what runs by this factor.
WAITING_MIN = 1.15
# The anchors at the ceiling: the queueing ones within this share of the highest occupancy.
# No anchor may hold more than this share above their median: a ceiling is a ceiling.
CEILING_SPREAD = 0.08
# The occupancy must be at most this share of what prefilling a full chunk every step keeps
# resident; near it the engine, not the pool, is the bottleneck.
ENGINE_BOUND_SHARE = 0.5
# The model's pool is kept where the ceiling is within this share of it.
MODEL_AGREES = 0.10
# Anchors at the ceiling the reading needs (and two concurrencies and two ISLs among them).
MIN_QUEUED = 3


@attrs.frozen
class Occupancy:
    """One anchor's mean KV occupancy by Little's law."""

    anchor: str
    isl: int
    osl: int
    clients: int
    resident: float   # a running request's mean context, ISL + OSL / 2
    running: float    # requests past their first token, on average
    schedulers: int = 1   # pools the clients spread over: replicas x attention-DP ranks

    @property
    def occupied(self) -> float:
        """Tokens resident in one scheduler's pool."""
        return self.running * self.resident / self.schedulers

    @property
    def offered(self) -> float:
        """Tokens one scheduler's pool would hold if every client ran."""
        return self.clients * self.resident / self.schedulers


@attrs.frozen
class KvCeiling:
    """The pool a deployment's anchors show, in tokens per scheduler: their mean occupancy
    plus half a mean prompt (the free gap a waiting prompt cannot use: it is admitted whole
    when its blocks fit)."""

    pool_tokens: int
    occupancy_tokens: float
    model_pool_tokens: int
    anchors: tuple[str, ...]


def occupancy(record) -> Occupancy | None:
    """The record's occupancy, or None where Little's law does not read it: open loops,
    agentic lanes (they think between turns), disaggregated pools (two pools), records whose
    throughput contradicts their latency, and records without TTFT and e2e latency."""
    w, m = record.workload, record.measurements
    if (w.concurrency is None or w.concurrency < 2 or w.request_rate is not None
            or w.decode_batch is not None or w.prefill_per_step is not None
            or w.dataset == "agentx" or record.regime.disaggregated
            or record.little_mismatch()):
        return None
    # means together where recorded, else medians together
    ttft, e2e = (m.ttft_mean_s, m.e2e_mean_s) if m.ttft_mean_s and m.e2e_mean_s \
        else (m.ttft_median_s, m.e2e_median_s)
    if not ttft or not e2e or ttft >= e2e:
        return None
    clients = int(w.concurrency)
    schedulers = (record.regime.replicas or 1) * (record.regime.dp_attention or 1)
    return Occupancy(record.id, int(w.isl), int(w.osl), clients, w.isl + w.osl / 2.0,
                     clients * (1.0 - ttft / e2e), schedulers)


def read_ceiling(records: Iterable, model_pool_tokens: int, chunk_tokens: int,
                 tokens_per_step: float) -> KvCeiling | None:
    """The pool ``records`` (one deployment, one build) ran at, or None where they do not show
    one below the memory model's ``model_pool_tokens`` (see the module's reading)."""
    occ = [o for o in map(occupancy, records) if o is not None]
    queued = [o for o in occ if o.offered >= WAITING_MIN * o.occupied
              and o.occupied <= ENGINE_BOUND_SHARE * chunk_tokens * (o.osl - 1)
              / max(1.0, tokens_per_step)]
    if not queued:
        return None
    # the top of the queueing anchors: below it, prompts also queue behind each other's
    # prefills at loads short of the ceiling
    top = max(o.occupied for o in queued)
    at_top = [o for o in queued if o.occupied >= (1.0 - CEILING_SPREAD) * top]
    if (len(at_top) < MIN_QUEUED or len({o.clients for o in at_top}) < 2
            or len({o.isl for o in at_top}) < 2):
        return None
    level = float(np.median([o.occupied for o in at_top]))
    if any(o.occupied > (1.0 + CEILING_SPREAD) * level for o in occ):
        return None   # an anchor held more: not a ceiling
    pool = level + 0.5 * float(np.median([o.isl for o in at_top]))
    if pool >= (1.0 - MODEL_AGREES) * model_pool_tokens:
        return None
    return KvCeiling(int(math.floor(pool)), level, int(model_pool_tokens),
                     tuple(sorted(o.anchor for o in at_top)))
