"""Closed-form steady-state projection of a scenario, priced by the same step-cost oracle.

No event is simulated. The workload is reduced to its moments (drawn from the scenario's own
generator); the engine to three step prices from the oracle (a decode step at a batch, a
prefill chunk's marginal cost, a mixed step's length); the closed loop of clients to
Little's law. docs/sweeps.md gives the formulas; the symbols below follow it.

    B      time-average number of sequences decoding
    t(B)   seconds of one decode step at batch B and the mean decode context
    D(B)   decode seconds per request     = (O - 1) / a * t(B_seen) / (1 - X * Delta)
    X(B)   requests/s the engine serves   = B / (D0 + B * Delta)      (Little on decode)
    S(B)   prefill seconds of one request = its chunks, each a step with the batch in it
    Wq(B)  prefill queueing (M/D/1)       = rho_p * S / (2 (1 - rho_p)) + U * t / 2
    N      clients                        = X * (Z + Wq + S + D)      (Little on the loop)

Closed loop: the B that makes the right-hand side equal N (bisection; it rises with B).
If even the largest admissible batch leaves clients over, the engine is saturated: X is the
batch-limited rate and the excess waits in the admission queue (TTFT by Little's law).
Open loop (``workload.rate``): the B at which X(B) equals the offered rate.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np

from inferasim.config.errors import ConfigError
from inferasim.config.knobs import Knobs
from inferasim.config.loader import rank_scenario
from inferasim.config.scenario import Scenario

SAMPLE_REQUESTS = 2000
# A recorded trace is read whole, up to this many arrivals from its start: its first
# SAMPLE_REQUESTS are no sample of it (the Mooncake hour's first 2,000 arrive at 2.99/s
# with 13.7k-token prompts and 29% prefix reuse, the hour at 3.40/s, 12.0k and 37%).
RECORDED_REQUESTS = 100_000
# Agentic lanes sampled for the moments: ~4k requests of the AgentX corpus in 3.8 s and
# 1.1 GB; all 1,024 lanes of a search's top rung took 81 s and 10.9 GB (67k requests).
LANE_SAMPLE = 64
PREFILL_REPRESENTATIVES = 32
RETENTION_PASSES = 8
# The window over which an open loop's burstiness is read (_dispersion).
ARRIVAL_WINDOW_S = 10.0
# Passes of the disaggregated pools' joint solution (project_disaggregated).
DISAGG_PASSES = 6


@attrs.frozen
class WorkloadMoments:
    """What the projection needs to know about the workload, from a sample of its requests."""

    requests: int
    prompt_mean: float            # P, tokens
    output_mean: float            # O, tokens
    think_mean_s: float           # Z, seconds of think time before a request (0 for open loop)
    hit_shared: float             # prompt fraction cacheable from other sessions (system prompts)
    hit_private: float            # prompt fraction cacheable from the same session's history
    decode_context: float         # output-weighted mean context while decoding, E[O(P+O/2)]/E[O]
    idle_context: float           # tokens a client's session holds while it thinks
    rate: float | None            # open loop: requests/s offered
    prompts: np.ndarray           # per sampled request: prompt tokens
    shared_tokens: np.ndarray     # per sampled request: cached tokens from other sessions
    private_tokens: np.ndarray    # per sampled request: cached tokens from its own session
    # The same two for a cache that is never sent the outputs: a disaggregated prefill
    # pool's (the decode pool generates them; serve/topology.py sends it none).
    prompt_shared_tokens: np.ndarray
    prompt_private_tokens: np.ndarray
    thinks: np.ndarray            # per sampled request: its client's think time before it
    # An open loop's reuse in time: per cached block of the unbounded cache, its request and
    # how long before that request's arrival the block was last touched (cumulative maximum
    # along the request's matched run, so the blocks under any age are a leading run), for a
    # cache that is sent the outputs and (``_prompts``) one that is not. None: closed loop.
    reuse: ReuseAges | None = None
    reuse_prompts: ReuseAges | None = None
    # An open loop's arrival variability (1 for Poisson; None for a closed loop): the
    # counts' index of dispersion over ARRIVAL_WINDOW_S, the squared coefficient of
    # variation a renewal process of the same burstiness would have.
    arrival_scv: float | None = None
    # The mean prompt + max_tokens over the requests, where every client sends max_tokens;
    # None where they send none (an engine then deduces it from its longest request).
    sent_sequence: float | None = None
    # Per sampled request: what its session held in the cache while its client was away (the
    # previous turn's prompt and output; 0 for a session's first request). None: open loop.
    histories: np.ndarray | None = None
    # The same for a cache that is sent the prompts only (a disaggregated prefill pool's):
    # the previous turn's prompt.
    prompt_histories: np.ndarray | None = None
    # What the sampled sessions' last turns leave that no turn returns to: their prompts and
    # outputs, and their prompts alone (tokens, over the sample).
    dead_tokens: float = 0.0
    dead_prompt_tokens: float = 0.0

    @property
    def hit_ideal(self) -> float:
        return self.hit_shared + self.hit_private


@attrs.frozen
class ReuseAges:
    """Flattened per cached block: its request, its tokens, its age (s), whether another
    session first sent it (``shared``)."""

    owner: np.ndarray
    tokens: np.ndarray
    age: np.ndarray
    shared: np.ndarray
    requests: int

    def cached_within(self, horizon: float, affinity: float = 1.0) -> np.ndarray:
        """Per request, the cached tokens an LRU cache whose blocks live ``horizon`` seconds
        since their last touch still holds (Che's characteristic time): the leading blocks
        touched more recently than that, its own session's only with the router's
        ``affinity``."""
        keep = self.age < horizon
        weight = self.tokens * np.where(self.shared, 1.0, affinity)
        return np.bincount(self.owner[keep], weights=weight[keep], minlength=self.requests)


def _dispersion(times: np.ndarray) -> float:
    """The arrival counts' index of dispersion (variance over mean) in windows of
    ARRIVAL_WINDOW_S: 1 for a Poisson stream, above it for a bursty trace."""
    if times.size < 2:
        return 1.0
    counts = np.bincount(((times - times.min()) // ARRIVAL_WINDOW_S).astype(np.int64))
    return float(max(counts.var() / counts.mean(), 1e-3)) if counts.mean() > 0 else 1.0


def _reuse_ages(specs: list, times: np.ndarray, shared: np.ndarray, private: np.ndarray,
                outputs: bool = True) -> ReuseAges:
    """Each request's cached blocks (``_cached_blocks``' leading run, ``shared`` and
    ``private`` tokens of it) with the time since a request last touched them, its prompt at
    its arrival and (``outputs``) its finished output then too."""
    last: dict[int, float] = {}
    owner, tokens, age, from_other = [], [], [], []
    for r, spec in enumerate(specs):
        t = float(times[r])
        bt = spec.block_tokens
        head = int(shared[r]) // bt
        run = head + int(private[r]) // bt
        if run:
            ages = np.maximum.accumulate(
                [t - last.get(int(k), t) for k in spec.keys[:run]])
            owner.append(np.full(run, r))
            tokens.append(np.full(run, float(bt)))
            age.append(ages)
            from_other.append(np.arange(run) < head)
        for k in spec.keys:
            last[int(k)] = t
        if outputs and spec.finish_keys is not None:
            for k in spec.finish_keys:
                last[int(k)] = t
    if not owner:
        empty = np.zeros(0)
        return ReuseAges(empty.astype(np.int64), empty, empty, empty.astype(bool), len(specs))
    return ReuseAges(np.concatenate(owner), np.concatenate(tokens), np.concatenate(age),
                     np.concatenate(from_other), len(specs))


def _cached_blocks(specs: list, outputs: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Per request, the leading prompt blocks an unbounded cache holds when it arrives, split
    into (blocks first sent by another session, blocks first sent by its own session).
    ``outputs=False``: a cache that is sent the prompts only.

    Vectorised: every block id gets the position of its first appearance (request r's prompt
    at 2r, its finished output at 2r + 1); a block is cached for request r if it appeared
    before 2r. Matching stops at the first miss and leaves at least one token to compute.
    """
    parts, tags = [], []
    for r, spec in enumerate(specs):
        keys = np.asarray(spec.keys, dtype=np.int64)
        parts.append(keys)
        tags.append(np.full(keys.size, 2 * r, dtype=np.int64))
        if outputs and spec.finish_keys is not None:
            fin = np.asarray(spec.finish_keys, dtype=np.int64)
            parts.append(fin)
            tags.append(np.full(fin.size, 2 * r + 1, dtype=np.int64))
    shared = np.zeros(len(specs))
    private = np.zeros(len(specs))
    if not parts:
        return shared, private
    all_keys = np.concatenate(parts)
    all_tags = np.concatenate(tags)
    _, inverse = np.unique(all_keys, return_inverse=True)
    first = np.full(inverse.max() + 1, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, inverse, all_tags)
    sessions = np.array([spec.session for spec in specs], dtype=np.int64)
    offset = 0
    for r, spec in enumerate(specs):
        n = len(spec.keys)
        limit = min(n, max(0, (spec.prompt_tokens - 1) // spec.block_tokens))
        seen = first[inverse[offset:offset + limit]]
        offset += n + (len(spec.finish_keys) if outputs and spec.finish_keys is not None
                       else 0)
        misses = np.flatnonzero(seen >= 2 * r)
        run = int(misses[0]) if misses.size else limit
        if run == 0:
            continue
        own = sessions[seen[:run] // 2] == spec.session
        owned = np.flatnonzero(own)
        head = int(owned[0]) if owned.size else run
        shared[r] = head * spec.block_tokens
        private[r] = (run - head) * spec.block_tokens
    return shared, private


def closed_loop_horizon(ages: np.ndarray, held: np.ndarray, rate: float, room: float,
                        dead: float = 0.0) -> float:
    """Che's characteristic time of an LRU cache of ``room`` tokens under a closed loop's
    returns: a session's history (``held[r]`` tokens for sampled request r) waits in the
    cache from its last touch until the request returns ``ages[r]`` seconds later, and is
    found if it is younger than T, where what the cache holds fills the room: the histories
    waiting, returns at ``rate`` a second each holding ``held[r]`` for min(age, T), and the
    histories no request returns to (a session's last turn), ``dead`` tokens over the
    sample's requests, each held for T. Infinite where nothing is dead and every history
    whole fits (none waits longer than its age)."""
    n = ages.size
    if n == 0 or rate <= 0:
        return math.inf
    if not dead and rate * float(np.sum(held * ages)) / n <= room:
        return math.inf
    if room <= 0:
        return 0.0
    # occupancy(T) x n / rate = (held x age over ages < T) + T x (held over ages >= T + dead):
    # piecewise linear and increasing in T; find where it reaches the room
    order = np.argsort(ages, kind="stable")
    a, h = ages[order], held[order]
    below = np.concatenate(([0.0], np.cumsum(h * a)))
    above = np.concatenate((np.cumsum(h[::-1])[::-1], [0.0])) + dead
    target = room * n / rate
    i = int(np.searchsorted(below[:-1] + a * above[:-1], target, side="right"))
    if i >= n and not dead:
        return math.inf
    return float((target - below[i]) / above[i]) if above[i] > 0 else float(a[i])


def workload_moments(scenario: Scenario, sample: int = SAMPLE_REQUESTS) -> WorkloadMoments:
    """Draw ``sample`` requests from the scenario's workload generator and reduce them.

    Cached tokens are those of an unbounded prefix cache (every block ever sent or finished
    stays), matched the way the engine does (whole blocks, at least one token computed).
    """
    from inferasim.workload.sources import workload_source

    wl = scenario.workload
    rng = np.random.default_rng([wl.seed, sum(b"projection")])
    source = workload_source(scenario, rng)
    specs: list[tuple[float, Any]] = []     # (think_s, RequestSpec)
    arrivals: list[float] = []
    rate = None
    if source.open_loop:
        recorded = getattr(source, "sent", None)
        if recorded is not None:  # every arrival the replay sends, up to RECORDED_REQUESTS
            sample = max(1, min(recorded(), RECORDED_REQUESTS))
        last = 0.0
        for arrival in source.arrivals():
            specs.append((0.0, arrival.request))
            arrivals.append(arrival.time_s)
            last = arrival.time_s
            if len(specs) >= sample:
                break
        if wl.rate is not None:
            rate = wl.rate
        elif recorded is not None:  # the trace's own rate over the replay's horizon
            rate = recorded() / (source.warmup_s + source.duration_s)
        else:
            rate = len(specs) / max(last, 1e-9)
    elif getattr(source, "driver", False):
        # lanes: every request their trees would send in the duration, each tree instance a
        # session whose turns follow one another (LaneDriver.lane_sessions); the moments
        # are per request, so LANE_SAMPLE lanes stand for more
        for session in source.lane_sessions(LANE_SAMPLE):
            specs.extend((turn.think_s, turn.request) for turn in session.turns)
    else:
        while len(specs) < sample:
            session = source.next_session()
            specs.extend((turn.think_s, turn.request) for turn in session.turns)
        specs = specs[:sample]
    requests = [spec for _, spec in specs]
    sh_a, pr_a = _cached_blocks(requests)
    sh_p, pr_p = _cached_blocks(requests, outputs=False)
    prompts = [spec.prompt_tokens for spec in requests]
    outputs = [spec.output_tokens for spec in requests]
    thinks = [think for think, _ in specs]
    # What a thinking client's session holds: its previous turn's prompt and output.
    last_context: dict[int, int] = {}
    last_prompt: dict[int, int] = {}
    histories = np.zeros(len(specs))
    prompt_histories = np.zeros(len(specs))
    for r, (_, spec) in enumerate(specs):
        held = last_context.get(spec.session)
        if held is not None:
            histories[r] = held
            prompt_histories[r] = last_prompt[spec.session]
        last_context[spec.session] = spec.prompt_tokens + spec.output_tokens
        last_prompt[spec.session] = spec.prompt_tokens
    closed = not arrivals
    idle = (histories > 0) & (np.asarray(thinks) > 0)   # a returning session that thought
    p = np.asarray(prompts, dtype=np.float64)
    o = np.asarray(outputs, dtype=np.float64)
    times = np.asarray(arrivals, dtype=np.float64) if arrivals else None
    scv = None
    if times is not None:
        scv = 1.0 if wl.rate is not None else _dispersion(times)
    return WorkloadMoments(
        requests=len(specs), prompt_mean=float(p.mean()), output_mean=float(o.mean()),
        think_mean_s=float(np.mean(thinks)),
        hit_shared=float(sh_a.sum() / p.sum()), hit_private=float(pr_a.sum() / p.sum()),
        decode_context=float((o * (p + o / 2)).sum() / o.sum()),
        idle_context=float(histories[idle].mean()) if idle.any() else 0.0, rate=rate,
        prompts=p, shared_tokens=sh_a, private_tokens=pr_a,
        prompt_shared_tokens=sh_p, prompt_private_tokens=pr_p,
        thinks=np.asarray(thinks, dtype=np.float64),
        arrival_scv=scv,
        reuse=_reuse_ages(requests, times, sh_a, pr_a) if times is not None else None,
        reuse_prompts=_reuse_ages(requests, times, sh_p, pr_p, outputs=False)
        if times is not None else None,
        sent_sequence=float(np.mean([r.prompt_tokens + r.max_tokens for r in requests]))
        if all(r.max_tokens is not None for r in requests) else None,
        histories=histories if closed else None,
        prompt_histories=prompt_histories if closed else None,
        dead_tokens=float(sum(last_context.values())) if closed else 0.0,
        dead_prompt_tokens=float(sum(last_prompt.values())) if closed else 0.0)


@attrs.frozen
class _HostTier:
    """A scheduler's host KV tier as the replay attaches it (``attach_host_tier``)."""

    tokens: int
    reload_s_per_token: float   # a GPU's shard of a token over its host link
    reload: str                 # how the engine waits for a reload (OffloadPolicy.reload)
    writes: str                 # what it is written (OffloadPolicy.writes)

    @classmethod
    def of(cls, scenario: Scenario, plan) -> _HostTier | None:
        """None without ``engine.kv_offload``. A storage tier behind it is not in the
        closed form."""
        eng, gpu = scenario.engine, scenario.gpu
        if eng.kv_offload == "none" or gpu.host_link_bw_per_dir <= 0:
            return None
        from inferasim.serve.offload import OffloadPolicy
        from inferasim.serve.topology import host_tier_tokens

        policy = OffloadPolicy.named(eng.kv_offload, eng.offload_chunk_tokens)
        return cls(host_tier_tokens(scenario, plan),
                   plan.kv_bytes_per_token / gpu.host_link_bw_per_dir, policy.reload,
                   policy.writes)

    def kept(self, ages: np.ndarray, held: np.ndarray, dead: float, rate: float,
             gpu_horizon: float, running: float) -> np.ndarray:
        """Per request (bool): whether the tier serves the history the GPU pool lost. A
        tier written as prompts are computed or cached (LMCache, HiCache) holds a copy of
        everything, the running requests' contexts (``running`` tokens) included, so every
        history competes for it; one written with the GPU pool's evictions (vLLM's
        connector) holds a history only from its eviction on, ``gpu_horizon`` after its
        last touch."""
        lost = ages >= gpu_horizon
        if not lost.any():
            return lost
        if self.writes == "evicted":
            since = np.maximum(ages - gpu_horizon, 0.0)
            return lost & (since < closed_loop_horizon(since, held, rate, self.tokens, dead))
        room = max(0.0, self.tokens - running)
        return lost & (ages < closed_loop_horizon(ages, held, rate, room, dead))


def _representatives(prompts: np.ndarray, cached: np.ndarray) -> list[tuple[float, float]]:
    """Representative requests, (uncached tail, cached) each: quantiles of the uncached
    tail, equal weights."""
    tails = np.maximum(prompts - cached, 1.0)
    order = np.argsort(tails, kind="stable")
    groups = np.array_split(order, min(PREFILL_REPRESENTATIVES, order.size))
    return [(float(tails[g].mean()), float(cached[g].mean())) for g in groups if g.size]


class _Prices:
    """Step prices from the oracle, cached by integer batch and interpolated between."""

    def __init__(self, scenario: Scenario, oracle, moments: WorkloadMoments,
                 cached: np.ndarray, width: int, group: int = 1,
                 reload: tuple[float, str] = (0.0, "")):
        eng = scenario.engine
        # a host tier's reload, seconds a mean request, and how the engine waits for it
        # (OffloadPolicy.reload: "in-step", "overlapped", "async")
        self.reload_s, self.reload_mode = reload
        self.oracle = oracle
        # Ranks stepping together: every step is the group's, its other ranks decoding.
        self.group = group
        self.width = width
        self.ctx = moments.decode_context
        self.mixed = eng.scheduler == "unified"
        self.batched_tokens = eng.max_num_batched_tokens
        self.chunk_size = eng.chunked_prefill_size
        self.reps = _representatives(moments.prompts, cached)  # per request, its cached tokens
        self._decode: dict[int, tuple[float, float]] = {}
        self._prefill: dict[int, tuple[float, float, float, float, float]] = {}

    def _interp(self, fn: Callable[[int], Any], b: float):
        lo = max(0, int(math.floor(b)))
        frac = b - lo
        a = np.asarray(fn(lo), dtype=np.float64)
        if frac <= 0:
            return a
        return a + frac * (np.asarray(fn(lo + 1), dtype=np.float64) - a)

    def _decode_cost(self, n: int) -> tuple[float, float]:
        """A decode step of ``n`` sequences and the attention in it (``_cost``)."""
        if n not in self._decode:
            from inferasim.cost.oracle import StepBatch

            batch = StepBatch(decode_context=np.full(n, self.ctx), width=self.width)
            self._decode[n] = self._cost(batch, n)
        return self._decode[n]

    def _decode_at(self, n: int) -> float:
        return self._decode_cost(n)[0]

    def _cost(self, batch, n: int) -> tuple[float, float]:
        """One scheduler's step ``batch`` and the attention in it; in a lockstep group, the
        group step with the other ranks each decoding ``n`` sequences (its attention is
        the slowest rank's)."""
        if self.group == 1:
            cost = self.oracle.step(batch)
        else:
            from inferasim.cost.oracle import StepBatch

            others = StepBatch(decode_context=np.full(n, self.ctx), width=self.width)
            cost = self.oracle.step_group([batch] + [others] * (self.group - 1))
        attn = sum(v for k, v in cost.breakdown.items() if k.startswith("attn_"))
        return cost.seconds, attn

    def decode_step(self, b: float) -> float:
        """Seconds of a decode step with ``b`` sequences (b may be fractional)."""
        return float(self._interp(self._decode_at, b))

    def _prefill_at(self, n: int) -> tuple[float, float, float, float, float]:
        """A mean request's prefill with ``n`` sequences decoding, as four figures (and, for
        a lockstep group, how much of the first is the prefilling rank's attention):

        the engine seconds it adds (beside the decode batch, or all of it when prefill steps
        exclude decode); its span (the sum of the steps it is in); and the first and second
        moments of its service on the prefill lane (each step's time in proportion to the
        share of the step's token budget it uses), for the queueing formula.
        """
        if n in self._prefill:
            return self._prefill[n]
        from inferasim.cost.oracle import StepBatch

        decode = np.full(n, self.ctx) if self.mixed else np.zeros(0)
        # What the engine would have spent anyway: its decode step (mixed), or in a lockstep
        # group the group's decode step (the other ranks decode through the prefill).
        anyway = (self.mixed or self.group > 1) and n
        base, base_attn = self._decode_cost(n) if anyway else (0.0, 0.0)
        budget = max(1, self.batched_tokens - n * self.width) if self.mixed else self.chunk_size
        added = span = service_sum = service_sq = attn_added = 0.0
        for tail, cached in self.reps:
            done = service = 0.0
            while done < tail:
                chunk = min(budget, tail - done)
                last = done + chunk >= tail
                step, attn = self._cost(StepBatch(
                    prefill_tokens=np.array([chunk]), prefill_resident=np.array([cached + done]),
                    prefill_samples=int(last), decode_context=decode, width=self.width), n)
                added += step - base
                attn_added += attn - base_attn
                span += step
                service += step * chunk / budget
                done += chunk
            if self.reload_s > 0:
                # LMCache loads before the forward (the step waits); HiCache overlaps the
                # load with the step's layers (what exceeds the compute); vLLM's connector
                # loads while the request waits, holding no step
                wait = (self.reload_s if self.reload_mode == "in-step"
                        else max(0.0, self.reload_s - service)
                        if self.reload_mode == "overlapped" else 0.0)
                added += wait
                service += wait
                span += self.reload_s if self.reload_mode == "async" else wait
            service_sum += service
            service_sq += service * service
        k = len(self.reps)
        self._prefill[n] = (added / k, span / k, service_sum / k, service_sq / k,
                            attn_added / k)
        return self._prefill[n]

    def prefill(self, b: float) -> tuple[float, ...]:
        """``_prefill_at``'s figures at a fractional batch."""
        return tuple(float(v) for v in self._interp(self._prefill_at, b))


class _DecodeOnlyPrices(_Prices):
    """A disaggregated decode instance's prices: its requests arrive prefilled, so a
    request adds no prefill step to its batch (the KV it receives is in the pool)."""

    def prefill(self, b: float) -> tuple[float, ...]:
        return (0.0, 0.0, 0.0, 0.0, 0.0)


@attrs.frozen
class _State:
    b: float
    x: float
    tpot: float
    decode_s: float
    prefill_s: float
    wait_s: float
    prefill_share: float
    lane: float

    @property
    def feasible(self) -> bool:
        return self.lane < 1.0 and self.prefill_share < 1.0 and math.isfinite(self.x)


def _state(b: float, n_clients: float | None, m: WorkloadMoments, prices: _Prices,
           advance: float) -> _State:
    """Everything at decode batch ``b``: the rate, TPOT, prefill span and queueing."""
    # What a request sees of the others: the arrival theorem (closed loop) or PASTA (open).
    others = b * (n_clients - 1) / n_clients if n_clients else b
    t_seen = prices.decode_step(1.0 + others)
    added, span, service, service_sq, attn_added = prices.prefill(others)
    d0 = (m.output_mean - 1.0) / advance * t_seen
    g = prices.group
    if g == 1 or b <= 0 or added <= 0:
        x = b / (d0 + b * added) if b > 0 else 0.0
        share = x * added
    else:
        # In a lockstep group every rank's prefills hold this rank's steps too. Their GEMM
        # and MoE time adds up over the ranks (g x Delta_rest); their attention runs on each
        # prefilling rank at once, so a step waits on it unless no rank prefills:
        # 1 - (1 - x Delta_attn)^g of the time. Little on the decode phase then reads
        # b (1 - share(x)) = x d0, whose one root in x is found by bisection.
        rest = max(0.0, added - attn_added)
        attn = added - rest

        def group_share(v: float) -> float:
            return min(1.0, g * v * rest + 1.0 - (1.0 - min(1.0, v * attn)) ** g)

        x = _bisect(lambda v: v * d0 >= b * (1.0 - group_share(v)), 0.0,
                    b / d0 if d0 > 0 else 1.0 / added)
        share = group_share(x)
    tpot = t_seen / advance / max(1.0 - share, 1e-12)
    decode_s = (m.output_mean - 1.0) * tpot
    # The prefill lane (M/G/1, Pollaczek-Khinchine): utilisation from the mean service,
    # the wait from its second moment, so a heavy tail of long prompts queues the rest.
    lane = x * service
    busy = min(1.0, b + x * span)
    wait = busy * prices.decode_step(max(b, 1.0)) / 2.0
    queue = x * service_sq / (2.0 * (1.0 - lane)) if lane < 1.0 else math.inf
    if m.arrival_scv is not None and service > 0 and math.isfinite(queue):
        # G/G/1 (Kingman, Marchal): P-K's wait scaled by (ca2 + cs2) / (1 + cs2), the
        # arrivals' variability in place of Poisson's
        cs2 = max(service_sq / (service * service) - 1.0, 0.0)
        queue *= (m.arrival_scv + cs2) / (1.0 + cs2)
    wait = wait + queue
    return _State(b, x, tpot, decode_s, span, wait, share, lane)


def _bisect(fn: Callable[[float], bool], lo: float, hi: float, iters: int = 60) -> float:
    """The smallest b in [lo, hi] with fn(b) true (fn monotone false -> true)."""
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        if fn(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _batch_cap(scenario: Scenario, pool_tokens: int, m: WorkloadMoments,
               window: int = 0) -> float:
    """Sequences the engine runs at once: its limit, or what the pool holds at the mean
    decode context plus the bounded windows each running sequence keeps. Under TensorRT-LLM's
    GUARANTEED_NO_EVICT a running sequence holds its whole prompt and max_tokens from its
    admission, as the replay's admission reserves them (``EngineCore.admission_reserve``):
    the clients' own, else what the engine deduces from its longest request."""
    seqs = scenario.engine.max_num_seqs
    held = m.decode_context
    if scenario.engine.capacity_policy == "guaranteed-no-evict":
        longest = min(scenario.context_limit, pool_tokens)
        whole = longest if m.sent_sequence is None else min(m.sent_sequence, longest)
        held = max(held, whole)
    return float(max(1.0, min(seqs, pool_tokens / max(held + window, 1.0))))


def _solve(load: float, m: WorkloadMoments, prices: _Prices, cap: float,
           advance: float, outside: float = 0.0) -> tuple[_State, float, str | None]:
    """One instance at ``load`` (clients, or requests/s when the workload is open loop):
    (state, TTFT, what saturates: None, "batch", "prefill" or "overloaded"). ``outside``:
    seconds a request spends after it is sent and before the engine has it (the frontend;
    a disaggregated decode pool's prefill pool), in its TTFT and in the closed loop's round."""
    if m.rate is None:
        n = float(load)
        away = m.think_mean_s + outside

        def clients(b: float) -> tuple[_State, float]:
            st = _state(b, n, m, prices, advance)
            if not st.feasible:
                return st, math.inf
            return st, st.x * (away + st.wait_s + st.prefill_s + st.decode_s)

        hi = min(cap, n)
        st, held = clients(hi)
        limit = "batch"
        if held >= n:
            b = _bisect(lambda v: clients(v)[1] >= n, 0.0, hi)
            st, held = clients(b)
            if math.isfinite(held):
                return st, outside + st.wait_s + st.prefill_s, None
            st, _ = clients(b * (1.0 - 1e-6))
            limit = "prefill"
        # Saturated: the clients the engine cannot hold wait for admission (Little's law).
        ttft = n / st.x - m.think_mean_s - st.decode_s if st.x > 0 else math.inf
        return st, max(ttft, outside + st.wait_s + st.prefill_s), limit
    lam = float(load)

    def enough(b: float) -> bool:
        st = _state(b, None, m, prices, advance)
        return not st.feasible or st.x >= lam

    b = _bisect(enough, 0.0, cap)
    st = _state(b, None, m, prices, advance)
    if st.feasible and st.x >= lam * (1.0 - 1e-6):
        return st, outside + st.wait_s + st.prefill_s, None
    if not st.feasible:
        st = _state(b * (1.0 - 1e-6), None, m, prices, advance)
    return st, math.inf, "overloaded"


def _engines(scenario: Scenario) -> tuple[int, float]:
    """How many schedulers share the load (instances x attention-DP ranks, each simulated
    apart), and the chance a session's next turn reaches the one holding its history."""
    topo = getattr(scenario, "topology", None)
    dp = scenario.parallel.dp_attention
    instances, router, rank_router = 1, "prefix-affinity", "prefix-affinity"
    if topo is not None:
        if topo.kind != "colocated":
            raise ConfigError("the projection models colocated instances only; replay a "
                              f"{topo.kind} topology with 'inferasim run'", file=scenario.path,
                              key="topology.kind")
        instances, router, rank_router = int(topo.instances), topo.router, scenario.rank_router
    affinity = 1.0
    if instances > 1 and router != "prefix-affinity":
        affinity /= instances
    if dp > 1 and rank_router != "prefix-affinity":
        affinity /= dp
    return instances * dp, affinity


def _oracle(scenario: Scenario, knobs: Knobs, oracles: dict | None = None):
    """The oracle a replay of the scenario uses (``oracle_for``): anchor-calibrated where the
    anchors apply; under attention-DP one rank's own batches, read against the group step
    when the ranks step together, as the replay builds it."""
    return shared_oracle(scenario, knobs, oracles, rank_level=scenario.parallel.dp_attention > 1)


# Oracles ``shared_oracle`` keeps (each holds its memos of step prices): a search enumerates a
# deployment's rungs together, so a few deployments' pools cover every reuse.
SHARED_ORACLES = 16


def shared_oracle(scenario: Scenario, knobs: Knobs, oracles: dict | None, *,
                  rank_level: bool = False):
    """``oracle_for``, remembered in ``oracles`` (when given) for every scenario that differs
    from this one only in its number of clients: an oracle reads the deployment, its anchors
    and the workload's lengths, never the load (a search projects each deployment at every
    rung of its ladder; tests/test_projection_disagg.py holds the projections equal)."""
    from inferasim.cost.calibrated import oracle_for

    if oracles is None:
        return oracle_for(scenario, knobs, rank_level=rank_level)
    # (the description says the load in words)
    unloaded = attrs.evolve(scenario, description="",
                            workload=attrs.evolve(scenario.workload, concurrency=None))
    key = (repr(unloaded), repr(knobs), rank_level)
    oracle = oracles.get(key)
    if oracle is None:
        if len(oracles) >= SHARED_ORACLES:
            oracles.pop(next(iter(oracles)))   # the oldest: a search projects by deployment
        oracle = oracles[key] = oracle_for(scenario, knobs, rank_level=rank_level)
    return oracle


def _frontend(oracle):
    """The oracle's frontend latency (seconds at a number of open requests), where its
    calibration models one; else None."""
    return oracle.frontend_latency if getattr(oracle, "frontend_modelled", False) else None


def _open_requests(m: WorkloadMoments, clients: float, x: float, ttft: float,
                   decode_s: float) -> float:
    """Requests sent and not finished over the deployment, as the frontend counts them: the
    clients not thinking (closed loop), else the arrivals of one request's life (Little)."""
    if m.rate is None:
        return max(1.0, clients - x * m.think_mean_s)
    return max(1.0, x * (ttft + decode_s))


def project(scenario: Scenario, knobs: Knobs | None = None, oracle=None,
            moments: WorkloadMoments | None = None, *, prices_class: type = _Prices,
            frontend=None, beyond: float = 0.0, oracles: dict | None = None) -> dict[str, Any]:
    """The steady-state projection: the same keys as a replay summary where they mean the same.

    A request reaches the engine after the time outside it the replay charges
    (``frontend``, seconds at a number of open requests: by default the oracle's frontend
    latency, as ``serve/simulation.py`` applies it) plus ``beyond`` (a disaggregated decode
    pool's prefill pool and transfer). ``oracles``: a memo shared between projections
    (``shared_oracle``)."""
    from inferasim.anchors.acceptance import resolved
    from inferasim.arch.memory import memory_plan
    from inferasim.cost.calibrated import with_measured_pool

    knobs = knobs or Knobs()
    scenario = resolved(scenario)   # a speculative scenario's acceptance, as the replay's
    engines, affinity = _engines(scenario)
    oracle = oracle or _oracle(scenario, knobs, oracles)
    # the pool the deployment's anchors ran at, as the replay sizes it (kv_ceiling)
    scenario = with_measured_pool(scenario, oracle)
    m = moments or workload_moments(scenario)
    # The routers spread the load evenly over identical schedulers; each is solved alone.
    load = (m.rate if m.rate is not None else scenario.workload.concurrency) / engines
    plan = memory_plan(scenario)
    pool, window = plan.kv_pool_tokens, plan.kv_window_pool_tokens
    gpus = scenario.gpus_per_instance * engines / scenario.parallel.dp_attention
    width = scenario.speculative.verify_width
    advance = scenario.speculative.tokens_per_step
    if pool < m.decode_context + window:
        # most requests could never be admitted: no steady state to solve for (the replay
        # refuses them and says so)
        raise ConfigError(f"the KV pool holds {pool:,d} tokens, less than the mean request's "
                          f"{m.decode_context + window:,.0f}", key="parallel.tp")
    cap = _batch_cap(scenario, pool, m, window)
    # --workload-resident-tokens gives the length-biased resident mean measured on the real
    # trace, so that a sampling error in the session model is not read as an admission one.
    idle_context = scenario.workload.resident_tokens or m.idle_context
    idle_scale = idle_context / m.idle_context if m.idle_context > 0 else 1.0
    retention = affinity
    horizon = math.inf  # the cache's characteristic time (Che), s
    tier = _HostTier.of(scenario, plan)
    host = np.zeros_like(m.prompts)     # per request: tokens reloaded from the host tier
    cached = (m.reuse.cached_within(horizon, affinity) if m.reuse is not None
              else m.shared_tokens + retention * m.private_tokens)
    dp = scenario.parallel.dp_attention
    group = knobs.lockstep_group(dp) if dp > 1 else 1
    per_rank = rank_scenario(scenario)  # the chunk and reserve each rank's scheduler runs
    if frontend is None:
        frontend = _frontend(oracle)
    clients = scenario.workload.concurrency
    latency = frontend(clients if m.rate is None else 1) if frontend is not None else 0.0
    for _ in range(RETENTION_PASSES):
        reload = (float(host.mean()) * tier.reload_s_per_token, tier.reload) if tier \
            else (0.0, "")
        prices = prices_class(per_rank, oracle, m, cached, width, group, reload)
        st, ttft, saturated = _solve(load, m, prices, cap, advance, latency + beyond)
        room = max(0.0, pool - st.b * (m.decode_context + window))
        if m.reuse is not None:
            # An open loop's blocks stay while less than the room's worth of new blocks has
            # been written after their last touch: each request's prompt tail and output.
            # A request holds its blocks until it finishes, so they age from its end: the
            # horizon is counted from an arrival, the request's time in the engine later.
            written = st.x * (m.prompt_mean - float(cached.mean()) + m.output_mean)
            held = (ttft if math.isfinite(ttft) else 0.0) + st.decode_s
            horizon = room / written + held if written > 0 else math.inf
            new_cached = m.reuse.cached_within(horizon, affinity)
            new = float(new_cached.sum() / max(m.hit_ideal * m.prompts.sum(), 1e-9))
        else:
            # A session's history waits in the cache, evictable, from its previous turn's end
            # to its next admission; LRU keeps it only if that wait is shorter than Che's
            # characteristic time of the room beside the running batch (closed_loop_horizon).
            unlocked = max(0.0, ttft - st.prefill_s) if math.isfinite(ttft) else 0.0
            ages = m.thinks + unlocked
            horizon = closed_loop_horizon(ages, m.histories * idle_scale, st.x, room,
                                          m.dead_tokens * idle_scale)
            kept = (ages < horizon).astype(np.float64)
            if tier is not None:
                served = tier.kept(ages, m.histories * idle_scale, m.dead_tokens * idle_scale,
                                   st.x, horizon, st.b * m.decode_context)
                host = affinity * served * m.private_tokens
            new_cached = m.shared_tokens + affinity * kept * m.private_tokens + host
            own = float(m.private_tokens.sum())
            # the share of the sessions' own prefixes kept (all of none where they have none)
            new = affinity * (float((kept * m.private_tokens).sum()) / own if own > 0 else 1.0)
        # the frontend's latency at the requests this state keeps open
        moved = latency
        if frontend is not None:
            moved = frontend(_open_requests(m, clients, st.x * engines, ttft, st.decode_s))
        settled = abs(new - retention) < 1e-3 and abs(moved - latency) <= 1e-3 * max(latency, 1e-3)
        retention, latency, cached = new, moved, new_cached
        if settled:
            break
    host_hit = float(host.sum() / m.prompts.sum())
    hit = float(cached.sum() / m.prompts.sum()) - host_hit   # the GPU pool's, as its counter
    x = st.x * engines
    out_tok = x * m.output_mean
    in_tok = x * m.prompt_mean
    return {
        "request_rate": x,
        "output_tok_s": out_tok,
        "input_tok_s": in_tok,
        "total_tok_s": out_tok + in_tok,
        "output_tok_s_per_gpu": out_tok / gpus,
        "total_tok_s_per_gpu": (out_tok + in_tok) / gpus,
        "ttft_mean_s": ttft,
        "itl_mean_ms": st.tpot * 1e3,
        "tpot_mean_ms": st.tpot * 1e3,
        "e2e_mean_s": ttft + st.decode_s,
        "interactivity_tok_s": 1.0 / st.tpot if st.tpot > 0 else math.nan,
        "prefix_hit_rate": hit,
        "host_hit_rate": host_hit,
        "decode_batch": st.b,
        "decode_step_ms": prices.decode_step(max(st.b, 1.0)) * 1e3,
        "prefill_span_s": st.prefill_s,
        "prefill_wait_s": st.wait_s,
        "frontend_s": latency,
        "prefill_share": st.prefill_share,
        "cache_retention": retention,
        "cache_horizon_s": horizon,
        "saturated": saturated,
        "batch_cap": cap,
        "schedulers": engines,
        "lockstep_group": group,
        "session_affinity": affinity,
        "oracle": dict(getattr(oracle, "calibration", {}) or {}).get("mode", "analytic"),
        "workload": {"requests_sampled": m.requests, "prompt_mean": m.prompt_mean,
                     "output_mean": m.output_mean, "think_mean_s": m.think_mean_s,
                     "hit_ideal": m.hit_ideal, "hit_shared": m.hit_shared,
                     "decode_context": m.decode_context, "idle_context": idle_context,
                     "rate": m.rate, "arrival_scv": m.arrival_scv,
                     "concurrency": None if m.rate else scenario.workload.concurrency},
    }


def project_disaggregated(scenario: Scenario, knobs: Knobs | None = None,
                          moments: WorkloadMoments | None = None, *,
                          oracles: dict | None = None) -> dict[str, Any]:
    """xPyD in closed form. The decode pool is solved as colocated instances whose requests
    arrive prefilled (``_DecodeOnlyPrices``) after the frontend, the prefill pool and the KV
    transfer. The prefill pool is its workers batching the waiting prompts, each worker's
    ranks filling their token budgets with prompts of the mean uncached tail: the station the
    calibration reads the anchors' TTFTs with (``ttft_model.batched_sojourn``; an open stream
    ``batched_response``). Each pool is priced by the oracle its replay builds, from its own
    scenario, and the frontend is the prefill pool's oracle's, as the replay's. The two pools
    are solved together: each one's time is the other's clients' time away. ``oracles``: as
    ``project``'s."""
    from inferasim.arch.interconnect import kv_link_plan
    from inferasim.arch.memory import memory_plan
    from inferasim.config.loader import resolved_pools
    from inferasim.cost.prefill_reading import batched_prefill
    from inferasim.cost.ttft_model import batched_response, batched_sojourn
    from inferasim.serve.topology import full_kv_bytes_per_token

    knobs = knobs or Knobs()
    topo = scenario.topology
    if topo.kind != "disaggregated":
        raise ValueError("project_disaggregated takes a disaggregated scenario")
    m = moments or workload_moments(scenario)
    prefill, decode = resolved_pools(scenario)
    pre_oracle = shared_oracle(prefill, knobs, oracles)
    dec_oracle = _oracle(decode, knobs, oracles)
    frontend = _frontend(pre_oracle)
    colocated = decode.evolve(topology=attrs.evolve(topo, kind="colocated",
                                                     instances=topo.decode.instances))
    link = kv_link_plan(scenario)  # the link the replay builds (serve/topology.py)
    transfer = (link.latency_s + m.prompt_mean * full_kv_bytes_per_token(scenario)
                / link.bytes_per_s)
    workers = topo.prefill.instances
    pool = memory_plan(prefill).kv_pool_tokens * workers
    servers: dict[int, Any] = {}
    spreads: dict[int, float] = {}
    affinity = _prefill_affinity(scenario, prefill)
    sojourn, horizon, gap, last_tail = 0.0, math.inf, 0.0, 0
    for _ in range(DISAGG_PASSES):
        cached = _prefill_pool_cached(m, affinity, horizon, gap)
        hit = float(cached.sum() / m.prompts.sum())
        tail = max(1, round(m.prompt_mean * (1.0 - hit)))
        server = servers.get(tail)
        if server is None:
            # each prompt's attention reads the prefix its pool held; the mean prompt's
            # steps are scaled to the mean of the workload's (a long prompt's chunks cost
            # more a token), read again only when the tail moves by 2% or more
            resident = round(m.prompt_mean) - tail
            bucket = round(math.log(tail) / math.log(1.02))
            if bucket not in spreads:
                spreads[bucket] = _prefill_spread(pre_oracle, m.prompts, cached, tail, resident)
            server = batched_prefill(pre_oracle, tail, resident)
            server = servers[tail] = attrs.evolve(
                server, seconds=tuple(spreads[bucket] * t for t in server.seconds))
        out = project(colocated, knobs, oracle=dec_oracle, moments=m,
                      prices_class=_DecodeOnlyPrices, frontend=frontend,
                      beyond=sojourn + transfer)
        x = float(out["request_rate"])
        decode_s = float(out["e2e_mean_s"]) - float(out["ttft_mean_s"])
        if m.rate is None:
            # a client is away from the prefill pool for everything else in its round
            away = float(out["e2e_mean_s"]) - sojourn + m.think_mean_s
            moved = batched_sojourn(server, scenario.workload.concurrency, away, workers)
        else:
            moved = batched_response(server, x, workers)
        gap = float(out["e2e_mean_s"]) - sojourn + (moved if math.isfinite(moved) else 0.0)
        if m.prompt_histories is not None:
            # a closed loop's sessions each hold their last prompt until they return
            horizon = closed_loop_horizon(m.thinks + gap, m.prompt_histories, x, pool,
                                          m.dead_prompt_tokens)
        else:
            # LRU keeps what was written in the last pool / (uncached tokens a second) s
            horizon = pool / max(x * tail, 1e-9)
        settled = tail == last_tail and (
            not math.isfinite(moved) or abs(moved - sojourn) <= 1e-3 * max(sojourn, 1e-3))
        sojourn, last_tail = moved, tail
        if settled:
            break
    capacity = server.capacity(workers)
    saturated = out["saturated"]
    ttft = float(out["ttft_mean_s"])
    if not math.isfinite(sojourn):   # an open stream past the prefill pool's capacity
        x, saturated, ttft = capacity * (1.0 - 1e-6), "prefill", math.inf
    elif x >= capacity * (1.0 - 1e-3):
        saturated = "prefill"
    span = float(server.step(np.array(1.0)))
    gpus = scenario.total_gpus
    out_tok, in_tok = x * m.output_mean, x * m.prompt_mean
    out.update({
        "request_rate": x, "output_tok_s": out_tok, "input_tok_s": in_tok,
        "total_tok_s": out_tok + in_tok, "output_tok_s_per_gpu": out_tok / gpus,
        "total_tok_s_per_gpu": (out_tok + in_tok) / gpus, "ttft_mean_s": ttft,
        "e2e_mean_s": ttft + decode_s, "saturated": saturated,
        "prefill_span_s": span, "prefill_wait_s": max(0.0, sojourn - span),
        "kv_transfer_s": transfer, "prefill_capacity_rps": capacity,
        "prefix_hit_rate": hit, "prefill_cache_horizon_s": horizon,
        "host_hit_rate": None,   # a disaggregated pool's host tier is not in the closed form
        # the share of the sessions' own prefixes the prefill pool's cache still holds
        "cache_retention": float((cached - m.prompt_shared_tokens).sum()
                                 / max(m.prompt_private_tokens.sum(), 1.0)),
    })
    return out


def _prefill_affinity(scenario: Scenario, prefill: Scenario) -> float:
    """The chance a session's next turn reaches the prefill worker (and rank) holding its
    last prompt: ``_engines``' affinity for the pool's router."""
    topo = scenario.topology
    return _engines(prefill.evolve(topology=attrs.evolve(
        topo, kind="colocated", instances=topo.prefill.instances, router=topo.router_policy)))[1]


def _prefill_pool_cached(m: WorkloadMoments, affinity: float, horizon: float, gap: float
                         ) -> np.ndarray:
    """Per sampled request, the cached tokens a disaggregated prefill pool serves it. Its
    cache is sent the prompts and never the outputs. Under LRU a block stays while it is
    younger than the cache's characteristic time ``horizon`` (Che's; for a closed loop
    ``closed_loop_horizon`` over the sessions' last prompts), so a session's last prompt is
    found if its next turn comes back within the horizon: ``gap`` (the rest of its round outside
    the pool's cache: transfer, decode, the next prompt's wait) plus its think time; a turn
    finds its prompt only with the router's ``affinity``. An open loop's blocks are kept by
    their ages since their last touch (``ReuseAges.cached_within``)."""
    if m.reuse_prompts is not None:
        return m.reuse_prompts.cached_within(horizon, affinity)
    kept = np.full(m.prompts.size, affinity)
    if m.rate is None:
        kept = kept * (m.thinks + gap < horizon)
    return m.prompt_shared_tokens + kept * m.prompt_private_tokens


def _prefill_spread(oracle, prompts: np.ndarray, cached: np.ndarray, tail: int,
                    resident: int) -> float:
    """The mean prompt's prefill seconds over the prompt of mean length's: a prompt alone,
    in chunks of its rank's budget, at the representatives ``_Prices`` takes. Above 1 where
    long prompts cost more a token (attention).

    Attention-DP ranks step together, each on its own budget of tokens, so a step lasts as
    long as its slowest rank's: a busy rank's step is priced as a full budget at one
    chunk's price a token (a chunk drawn in proportion to its tokens: short prompts share
    a step), and the mean such step becomes the mean of the largest of ``dp`` of them."""
    from inferasim.cost.prefill_reading import prefill_chunks

    budget = rank_scenario(oracle.scenario).engine.prompt_budget
    dp = oracle.scenario.parallel.dp_attention
    steps = [prefill_chunks(oracle, t, budget, c) for t, c in _representatives(prompts, cached)]
    mean = float(np.mean([sum(s for _, s in c) for c in steps]))
    spread = mean / sum(s for _, s in prefill_chunks(oracle, tail, budget, resident))
    if dp > 1:
        tokens, seconds = np.array([tc for c in steps for tc in c]).T
        full = seconds * budget / tokens           # a rank's full step at this chunk's price
        by = np.argsort(full)
        full, weight = full[by], tokens[by] / tokens.sum()
        below = np.cumsum(weight)
        largest = float(np.sum(full * (below ** dp - np.maximum(below - weight, 0.0) ** dp)))
        spread *= largest / float(np.sum(full * weight))
    return spread


# Metrics the projection and a replay both report, scored projection against replay.
SCORED = ("output_tok_s", "output_tok_s_per_gpu", "input_tok_s", "total_tok_s", "ttft_mean_s",
          "itl_mean_ms", "tpot_mean_ms", "e2e_mean_s", "interactivity_tok_s", "prefix_hit_rate",
          "host_hit_rate")


def score(projection: dict[str, Any], replay: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    for key in SCORED:
        p, r = projection.get(key), replay.get(key)
        if p is None or r is None:
            continue
        diff = float(p) - float(r)
        pct = diff / abs(r) * 100.0 if r and math.isfinite(r) and math.isfinite(diff) else None
        out[key] = {"projection": float(p), "replay": float(r), "diff": diff, "pct": pct}
    return out
