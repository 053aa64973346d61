"""Build one replay (workload, serving topology, oracles) on one SimPy clock and run it to the drain."""

from __future__ import annotations

import contextlib
import gc

import attrs
import numpy as np
import simpy

from inferasim.anchors.acceptance import resolved
from inferasim.arch.memory import MemoryPlan, memory_plan
from inferasim.config.errors import ConfigError
from inferasim.config.knobs import Knobs
from inferasim.config.scenario import Scenario
from inferasim.cost.calibrated import oracle_for, with_measured_pool
from inferasim.serve.clients import RequestLog, closed_loop_client, open_loop_arrivals
from inferasim.serve.topology import build_topology
from inferasim.workload.sources import WorkloadSource, workload_source


@attrs.frozen
class SimResult:
    scenario: Scenario
    memory: MemoryPlan
    requests: list
    engines: list
    window_start_s: float
    horizon_s: float
    end_s: float
    calibration: dict
    knobs: Knobs
    kv_pool_tokens: int = 0
    prefill_kv_pool_tokens: int | None = None  # a disaggregated deployment's prefill pool
    # where the rows went when they were streamed (``requests`` is then empty)
    rows: object = None


def _rng(seed: int, name: str) -> np.random.Generator:
    """One random stream per subsystem, so adding draws in one leaves the others alone."""
    return np.random.default_rng([seed, sum(name.encode())])


def _behind_frontend(env: simpy.Environment, submit, oracle):
    """``submit`` reached after the oracle's frontend latency for the requests then open: the
    anchors' time outside the engine steps (tokenisation, HTTP, the server's input pipeline),
    which each request's TTFT and end-to-end latency carry and the engine's batches do not."""
    latency_of = getattr(oracle, "frontend_latency", None)
    if latency_of is None or not getattr(oracle, "frontend_modelled", True):
        return submit
    open_requests = 0

    def closed(_event) -> None:
        nonlocal open_requests
        open_requests -= 1

    def delayed(req) -> None:
        nonlocal open_requests
        open_requests += 1
        req.done.callbacks.append(closed)
        latency = latency_of(open_requests)
        if latency <= 0.0:
            submit(req)
        else:
            env.timeout(latency).callbacks.append(lambda _event: submit(req))

    return delayed


#: Refusals in a row, with no request served in between, after which the replay stops: every
#: request the workload sends is one the deployment cannot serve, and a closed loop would
#: resend them without the clock moving.
REFUSAL_STREAK_LIMIT = 1000


def _refusal_guard(submit):
    """``submit`` that stops the replay with a ConfigError once REFUSAL_STREAK_LIMIT requests
    in a row are refused (too long for the model's context or the KV pool)."""
    streak = 0

    def settled(req) -> None:
        nonlocal streak
        if not req.failed:
            streak = 0
            return
        streak += 1
        if streak >= REFUSAL_STREAK_LIMIT:
            raise ConfigError(
                f"the deployment refused {streak} requests in a row and served none between "
                f"them (the last: {req.failed}); shorten the requests, or give the deployment "
                "more KV memory (parallel.tp, a larger GPU)", key="workload")

    def guarded(req) -> None:
        req.done.callbacks.append(lambda _event: settled(req))
        submit(req)

    return guarded


# Young-generation size during a replay. The replay keeps every request's record, so the live
# heap grows with the trace, and at CPython's default (700) the full collections that rescan
# it grew faster than the trace: 0.41-0.44 s of the four-hour Mooncake replay's 16.5 s
# against 0.08 s of one hour's 4 s. At 50,000 the replay collects a few times (cyclic garbage
# is still collected, in bigger batches): 0.04 s for the hour, 0.18 s for four. A fleet's
# young collections cost more each (its young objects are scattered over a larger heap):
# fleet-x16 spent 1.17 s in 26 of them at 50,000 and 0.57 s in 9 at 200,000. A finished
# request is freed by its reference count, so what waits longer for a collection is only
# cyclic garbage, at most this many objects.
REPLAY_GC_YOUNG = 200_000
# The older generations' thresholds (CPython's default 10 and 10). A fleet's live heap is its
# instances' radix trees and queues, every one of them rescanned by each older collection:
# at 16 routed instances (fleet-x16) 50 and 100 took the replay from 55.5-57.9 s to
# 52.7-52.9 s (two runs each, one machine), and the whole replay, its set-up included,
# runs under them.
REPLAY_GC_OLDER = (50, 100)


@contextlib.contextmanager
def _fewer_collections():
    """Raise the collector's thresholds for the replay, and put them back after."""
    old = gc.get_threshold()
    gc.set_threshold(max(old[0], REPLAY_GC_YOUNG), *(max(o, n) for o, n in
                                                    zip(old[1:], REPLAY_GC_OLDER, strict=True)))
    try:
        yield
    finally:
        gc.set_threshold(*old)


def _run(env: simpy.Environment, horizon: float, on_clock) -> None:
    """``env.run()``, calling ``on_clock(now, horizon)`` between batches of events (the
    CLI's progress bar). Stepping by hand is what ``run`` does inside, so the replay is the
    same event for event."""
    if on_clock is None:
        env.run()
        return
    try:
        while True:
            for _ in range(CLOCK_EVERY_EVENTS):
                env.step()
            on_clock(env.now, horizon)
    except simpy.core.EmptySchedule:
        on_clock(env.now, horizon)


#: Events between two ``on_clock`` calls: a few hundred calls a second at most.
CLOCK_EVERY_EVENTS = 4096


def simulate(scenario: Scenario, knobs: Knobs | None = None, oracle=None,
             source: WorkloadSource | None = None, store=None, on_clock=None,
             rows=None) -> SimResult:
    """Replay ``scenario``. Steps are priced by ``oracle`` when given (every engine shares
    it), else by an oracle per engine role calibrated from ``store`` (default: the anchors
    the scenario names), at rank level where attention-DP ranks are simulated apart.
    ``on_clock(now_s, horizon_s)``, when given, is called as the simulated clock advances.
    ``rows`` (``report.row_stream.RowStream``): stream each request's row to disk as the
    replay goes instead of keeping every request in ``SimResult.requests``."""
    with _fewer_collections():  # the set-up (trace, instances) too
        return _simulate(scenario, knobs, oracle, source, store, on_clock, rows)


def _simulate(scenario: Scenario, knobs: Knobs | None, oracle, source: WorkloadSource | None,
              store, on_clock, rows) -> SimResult:
    knobs = knobs or Knobs()
    # the engines and the oracles read one acceptance (anchors/acceptance.py)
    scenario = resolved(scenario, store)
    wl = scenario.workload
    env = simpy.Environment()
    source = source or workload_source(scenario, _rng(wl.seed, "workload"))
    oracles: list = []
    # One oracle per pool (its scenario), not per instance: an oracle is a pure function of
    # its scenario (its memos included), and a fleet of 64 instances calibrating 64 copies
    # paid the calibration 64 times and kept 64 sets of memos cold in the cache.
    made_for: dict[tuple[int, bool], tuple[Scenario, object]] = {}

    def make_oracle(sc: Scenario, rank_level: bool):
        if oracle is not None:
            made = oracle
        elif (key := (id(sc), rank_level)) in made_for:
            made = made_for[key][1]
        else:
            # Attention-DP ranks simulated apart are priced at their own batches.
            made = oracle_for(sc, knobs, store, rank_level=rank_level)
            made_for[key] = (sc, made)  # the scenario held, so its id stays its own
        oracles.append(made)
        return made

    if oracle is None and scenario.topology.kind == "colocated" \
            and scenario.engine.kv_pool_tokens is None:
        # the pool the deployment's anchors ran at, where they show one smaller than the
        # memory model's (kv_ceiling): the oracle calibrates first, then sizes the pool
        rank_level = scenario.parallel.dp_attention > 1
        made = oracle_for(scenario, knobs, store, rank_level=rank_level)
        scenario = with_measured_pool(scenario, made)
        made_for[(id(scenario), rank_level)] = (scenario, made)
    topology = build_topology(env, scenario, knobs, source.block_tokens, make_oracle)
    log = RequestLog(env, wl.max_requests, rows)
    if rows is not None:
        rows.start(scenario.speculative.tokens_per_step, scenario.engine.stream_interval,
                   topology.engines)
    window_start = wl.warmup_s
    horizon = window_start + source.duration_s
    submit = _refusal_guard(_behind_frontend(env, topology.submit,
                                             oracles[0] if oracles else None))
    if getattr(source, "driver", False):
        # Sources with their own client logic (agentic lanes, paced sessions) start it here.
        source.drive(env, submit, log, horizon)
    elif source.open_loop:
        env.process(open_loop_arrivals(env, source.arrivals(), submit, log, horizon))
    else:
        for _ in range(wl.concurrency):
            env.process(closed_loop_client(env, source.next_session, submit, log, horizon))
    _run(env, horizon, on_clock)
    if rows is not None:
        rows.close()
    # A source with a warm-up phase of its own (agentic lanes) opens its window when it ends.
    window_start, horizon = getattr(source, "measured_window", None) or (window_start, horizon)
    calibration = dict(oracles[0].calibration)
    if scenario.topology.kind == "disaggregated" and oracles[-1] is not oracles[0]:
        # the pools run their own layouts, so their oracles calibrate apart: the report's
        # top level is the prefill pool's (the first instance), the decode pool's beside it
        calibration["decode_pool"] = dict(oracles[-1].calibration)
    return SimResult(scenario=scenario, memory=memory_plan(scenario), requests=log.requests,
                     engines=topology.engines, window_start_s=window_start, horizon_s=horizon,
                     end_s=env.now, calibration=calibration, knobs=knobs,
                     kv_pool_tokens=topology.kv_pool_tokens,
                     prefill_kv_pool_tokens=topology.prefill_kv_pool_tokens, rows=rows)
