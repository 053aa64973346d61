"""The TTFT model the calibrated oracle fits to its anchors: a prompt's first token is the time
outside the engine (the frontend latency) plus its engine time (``slope x`` the analytic
prefill, plus any fixed engine cost per prefilling step) plus its queueing behind the other
clients' prompts in a closed loop, plus the wait for the step in flight
(``inferasim.cost.calibrated`` explains the reading; docs/anchors.md the evidence)."""

from __future__ import annotations

import math

import attrs
import numpy as np

# The fitted prefill slope (measured over analytic engine time) is kept within these bounds: a
# fit outside them says more about the probe's noise than about the prefill.
PREFILL_SLOPE_LIMITS = (0.25, 8.0)


def held_at_bound(value: float, limits: tuple[float, float]) -> bool:
    """A fitted factor within 1% of a bound of ``limits``: the fit stopped there, so it is no
    reading of what it fits (the prefill slope; a prior's split, ``prior.fit_split``)."""
    lo, hi = limits
    return not lo * 1.01 < value < hi / 1.01


@attrs.frozen
class BatchedPrefill:
    """A prefill server that takes every waiting prompt, up to ``most`` of them, into one step
    (a disaggregated prefill worker: its ranks' token budgets over the prompt length): the
    analytic seconds of a step of ``m`` prompts, at the sizes ``m`` it was priced at."""

    sizes: tuple[float, ...]     # 1 .. most, ascending
    seconds: tuple[float, ...]

    @property
    def most(self) -> float:
        return self.sizes[-1]

    def step(self, m: np.ndarray, slope: float = 1.0, overhead: float = 0.0) -> np.ndarray:
        return slope * np.interp(m, self.sizes, self.seconds) + overhead

    def capacity(self, servers: int = 1, slope: float = 1.0, overhead: float = 0.0) -> float:
        """Prompts a second that ``servers`` of it serve with every step full."""
        return servers * self.most / float(self.step(np.array(self.most), slope, overhead))


#: Throughputs the batched station's closed loop is solved over (``batched_sojourn``).
_THROUGHPUT_GRID = 256
#: Fixed-point passes for a step's batch at a given arrival rate.
_BATCH_PASSES = 24


def batched_sojourn(server: BatchedPrefill, clients: int, away: float, servers: int = 1,
                    slope: float = 1.0, overhead: float = 0.0) -> float:
    """A prompt's time at a pool of ``servers`` batching prefill servers (``BatchedPrefill``)
    that ``clients`` closed-loop clients visit between ``away`` seconds elsewhere, each
    server's response ``R`` at its share of the rate as ``_batched_response`` gives it.
    The loop's throughput ``X`` solves ``X (away + R(X)) = clients``;
    past the pool's capacity, ``servers x most / T(most)``, the prompts queue and ``R`` is
    what the population leaves: ``clients / X - away``. Where batches are of one prompt
    this is close to ``closed_loop_sojourn``'s, with no queueing below saturation."""
    lone = float(server.step(np.array(1.0), slope, overhead))
    if clients <= 1 or not math.isfinite(away):
        return lone
    capacity = server.capacity(servers, slope, overhead)
    # at most the clients with none of them away; at least the unloaded loop's
    top = min(capacity, clients / max(away + lone, 1e-12))
    xs = np.geomspace(top * 1e-4, top, _THROUGHPUT_GRID)
    resp = _batched_response(server, xs / servers, slope, overhead)
    gap = xs * (away + resp) - clients   # rises with x
    i = int(np.searchsorted(gap, 0.0))
    if i >= xs.size:   # the pool is saturated: the population sets the queue
        return max(float(resp[-1]), clients / capacity - away)
    if i == 0:
        return float(resp[0])
    f = gap[i - 1] / (gap[i - 1] - gap[i])
    return float(resp[i - 1] + f * (resp[i] - resp[i - 1]))


def _batched_response(server: BatchedPrefill, lam: np.ndarray, slope: float,
                      overhead: float) -> np.ndarray:
    """A prompt's time at one batching server (``batched_sojourn``) at arrival rates ``lam``:
    a step gathers what arrived during the one before, ``m = lam T(m)`` prompts within
    [1, most]; a prompt waits for half the step in flight, times the share of time the
    server is busy, then its own step."""
    m = np.ones_like(lam)
    for _ in range(_BATCH_PASSES):
        m = np.clip(lam * server.step(m, slope, overhead), 1.0, server.most)
    t = server.step(m, slope, overhead)
    busy = np.minimum(1.0, lam * t / m)
    return t * (1.0 + 0.5 * busy)


def batched_response(server: BatchedPrefill, rate: float, servers: int = 1,
                     slope: float = 1.0, overhead: float = 0.0) -> float:
    """A prompt's time at ``servers`` batching prefill servers offered ``rate`` prompts a
    second in all (an open arrival stream); infinite at or past their capacity."""
    if rate >= server.capacity(servers, slope, overhead):
        return math.inf
    return float(_batched_response(server, np.array([rate / servers]), slope, overhead)[0])


@attrs.frozen
class TtftRow:
    """One anchor's TTFT as the prefill fit reads it."""

    isl: float
    ttft: float
    prefill: float      # analytic lone prefill, in the engine's chunks
    wait: float         # the step in flight, the receive interval's read, a running slot
    clients: int        # closed-loop concurrency
    decode_s: float     # a request's decode phase: (OSL - 1) x measured TPOT (inf: unknown)
    servers: int = 1    # engines prefilling side by side (a disaggregated prefill pool's)
    batched: BatchedPrefill | None = None   # its servers batch the waiting prompts

    def sojourn(self, slope: float, latency: float, overhead: float = 0.0) -> float:
        if self.batched is not None:
            return batched_sojourn(self.batched, self.clients, latency + self.decode_s,
                                   self.servers, slope, overhead)
        return closed_loop_sojourn(slope * self.prefill + overhead, self.clients,
                                   latency + self.decode_s, self.servers)

    def queue(self, slope: float, latency: float, overhead: float = 0.0) -> float:
        return self.sojourn(slope, latency, overhead) - slope * self.prefill - overhead

    def excess(self, slope: float, latency: float, overhead: float = 0.0) -> float:
        """The TTFT the model does not explain: time outside the engine."""
        return self.ttft - self.wait - self.sojourn(slope, latency, overhead)


def requests_held(pool_tokens: float, isl: float, osl: float) -> int | None:
    """Closed-loop requests of ``isl``/``osl`` a KV pool holds at once, by Little's law at
    their mean resident context ``isl + osl / 2``; None where that context is empty."""
    resident = isl + osl / 2.0
    return int(pool_tokens // resident) if resident > 0 else None


def slot_wait(decode_s: float, clients: float, slots: float) -> float:
    """A first token's wait for a running slot when ``clients`` closed-loop clients share
    ``slots``: every slot turns over once a decode, so each client's round takes
    clients / slots decodes and the rest of it is the wait, (clients / slots - 1) decodes."""
    return decode_s * max(0.0, clients / slots - 1.0) if slots > 0 else 0.0


def closed_loop_sojourn(service: float, clients: int, away: float, servers: int = 1) -> float:
    """A prompt's time from reaching the engine to its first token when ``clients`` closed-loop
    clients each spend ``away`` seconds elsewhere (decoding, the frontend) between prompts and
    ``service`` seconds of engine prefill, served one prompt at a time: mean value analysis
    of that two-station closed network (exact for exponential service, a little high for
    fixed). The population bounds the queue, which an open-queue formula would not.
    ``servers`` side by side (a disaggregated prefill pool): a prompt waits only for the
    queue beyond the other servers, served ``servers`` at a time (the usual multi-server
    approximation of the mean value analysis; one server is the exact form above)."""
    if clients <= 1 or service <= 0 or not math.isfinite(away):
        return service
    queue = 0.0
    sojourn = service
    idle = servers - 1
    for n in range(1, clients + 1):
        sojourn = service * (1.0 + max(0.0, queue - idle) / servers)
        queue = n * sojourn / (sojourn + away)
    return sojourn


# Log-spaced slopes the fit scans before refining the best one (golden section).
_SLOPE_GRID = 64
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


#: Prompt lengths (one TTFT row each) a fit needs to split a slower prefill from a fixed
#: latency.
MIN_PROMPT_LENGTHS = 3


def identifies_slope(rows: list[TtftRow]) -> bool:
    """Whether the rows can split a slower prefill from a fixed latency: MIN_PROMPT_LENGTHS
    prompt lengths or more whose analytic prefills differ."""
    return len(rows) >= MIN_PROMPT_LENGTHS \
        and max(r.prefill for r in rows) > min(r.prefill for r in rows)


def fit_ttft(rows: list[TtftRow], fit_slope: bool = True) -> tuple[float, float]:
    """(slope, latency) minimising the squared misfit of ``TTFT - wait = latency +
    sojourn(slope x prefill)`` over the rows (latency >= 0, slope within
    PREFILL_SLOPE_LIMITS); below three ISLs, or without ``fit_slope``, the slope is 1 (one
    point cannot split the two)."""
    if not fit_slope or not identifies_slope(rows):
        return 1.0, latency_at(rows, 1.0)

    def misfit(log_slope: float) -> float:
        slope = math.exp(log_slope)
        latency = latency_at(rows, slope)
        return sum((r.excess(slope, latency) - latency) ** 2 for r in rows)

    slope = _best_slope(misfit, _SLOPE_GRID, 40)
    return slope, latency_at(rows, slope)


def _best_slope(misfit, points: int, passes: int) -> float:
    """The slope within PREFILL_SLOPE_LIMITS minimising ``misfit(log slope)``: the best of
    ``points`` log-spaced ones, refined by ``passes`` of golden section within its
    neighbours."""
    lo, hi = PREFILL_SLOPE_LIMITS
    grid = np.linspace(math.log(lo), math.log(hi), points)
    costs = [misfit(float(x)) for x in grid]
    i = int(np.argmin(costs))
    a, b = float(grid[max(0, i - 1)]), float(grid[min(len(grid) - 1, i + 1)])
    for _ in range(passes):
        c, d = b - _GOLDEN * (b - a), a + _GOLDEN * (b - a)
        if misfit(c) <= misfit(d):
            b = d
        else:
            a = c
    return math.exp((a + b) / 2.0)


#: TTFT beyond the model, at the prior slope, that no frontend adds: a row with more was
#: queueing for the prefill (the InferenceMAX frontends' own latency reads 0.1-0.5 s,
#: docs/anchors.md). Such a row's throughput is the pool's, and it fixes the prefill's rate.
QUEUE_MIN_EXCESS_S = 1.0
_QUEUE_GRID = 32


def fit_queue_slope(rows: list[TtftRow], prior: float) -> tuple[float, float] | None:
    """(slope, latency) read from a batching prefill pool's queue, or None where no row
    queued. One prompt length cannot split a slower prefill from time outside the engine
    at low load, but a saturated pool's TTFT is its clients over its throughput, less their
    time away: where rows exceed the model at ``prior`` by QUEUE_MIN_EXCESS_S or more, the
    slope is the one whose queue explains them (least squares of the log TTFT ratio), the
    latency the other rows' (none: 0)."""
    rows = [r for r in rows if r.batched is not None and r.clients > 1]
    if not rows:
        return None
    calm = [r for r in rows if r.excess(prior, 0.0) < QUEUE_MIN_EXCESS_S]
    queued = [r for r in rows if r not in calm]
    if not queued:
        return None

    def misfit(log_slope: float) -> float:
        slope = math.exp(log_slope)
        latency = latency_at(calm, slope) if calm else 0.0
        return sum(math.log(max(1e-9, r.wait + latency + r.sojourn(slope, latency))
                            / max(1e-9, r.ttft)) ** 2 for r in queued)

    slope = _best_slope(misfit, _QUEUE_GRID, 24)
    if held_at_bound(slope, PREFILL_SLOPE_LIMITS):
        return None
    return slope, latency_at(calm, slope) if calm else 0.0


def latency_at(rows: list[TtftRow], slope: float, overhead: float = 0.0) -> float:
    """The latency that best fits the rows at ``slope`` (>= 0). It also lengthens each
    client's time away, so it is found by a few fixed-point passes."""
    latency = 0.0
    for _ in range(4):
        latency = max(0.0, float(np.mean([r.excess(slope, latency, overhead) for r in rows])))
    return latency


# Past the measured loads the frontend latency follows latency ~ concurrency^k: k is the end
# segment's own exponent (clipped to 0..LATENCY_EXPONENT_MAX) or, with one measured load,
# LATENCY_LOAD_EXPONENT, the median log-log slope of the shipped InferenceMAX groups' latency
# tables (26 groups, 0.04-0.54 but for one broken row; docs/anchors.md). With SGLang's receive
# wait taken out of the B200 rows that median is 0.13; 0.17 is kept, as 0.13 predicted the
# leave-one-out TTFT worse (p90 28.9% against 23.3%). Held flat, one anchor at c512 (3 s of
# TTFT) put 3 s on every request of a c4 replay.
LATENCY_LOAD_EXPONENT = 0.17
LATENCY_EXPONENT_MAX = 0.5


def latency_at_load(x: float, logc: np.ndarray, lat: np.ndarray) -> float:
    """The frontend latency at log concurrency ``x``: interpolated inside the measured loads,
    a power law past them (see LATENCY_LOAD_EXPONENT)."""
    if logc.size > 1 and logc[0] <= x <= logc[-1]:
        return float(np.interp(x, logc, lat))
    i, j = (0, 1) if x < logc[0] else (-2, -1)
    end = lat[i] if x < logc[0] else lat[j]
    exponent = LATENCY_LOAD_EXPONENT
    if logc.size > 1:
        exponent = 0.0
        if lat[i] > 0 and lat[j] > 0:
            exponent = math.log(lat[j] / lat[i]) / (logc[j] - logc[i])
        exponent = min(max(exponent, 0.0), LATENCY_EXPONENT_MAX)
    return float(end * math.exp(exponent * (x - (logc[i] if x < logc[0] else logc[j]))))
