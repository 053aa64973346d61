"""Build one replay (workload, engine instance, oracle) on one SimPy clock and run it to the drain."""

from __future__ import annotations

import attrs
import numpy as np
import simpy

from inferasim.arch.memory import MemoryPlan, memory_plan
from inferasim.config.knobs import Knobs
from inferasim.config.scenario import Scenario
from inferasim.cost.oracle import AnalyticOracle
from inferasim.serve.clients import RequestLog, closed_loop_client, open_loop_arrivals
from inferasim.serve.engine import EngineInstance
from inferasim.serve.kv_manager import KVManager
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


def _rng(seed: int, name: str) -> np.random.Generator:
    """One random stream per subsystem, so adding draws in one leaves the others alone."""
    return np.random.default_rng([seed, sum(name.encode())])


def simulate(scenario: Scenario, knobs: Knobs | None = None, oracle=None,
             source: WorkloadSource | None = None) -> SimResult:
    knobs = knobs or Knobs()
    wl = scenario.workload
    env = simpy.Environment()
    plan = memory_plan(scenario)
    source = source or workload_source(scenario, _rng(wl.seed, "workload"))
    oracle = oracle or AnalyticOracle(scenario, knobs)
    eng_spec = scenario.engine
    kv = KVManager(plan.kv_pool_tokens, eng_spec.page_size, source.block_tokens,
                   eng_spec.eviction_policy, eng_spec.prefix_caching)
    engine = EngineInstance(env, scenario, oracle, kv)
    log = RequestLog(env)
    window_start = wl.warmup_s
    horizon = window_start + source.duration_s
    if getattr(source, "driver", False):
        # Sources with their own client logic (agentic lanes, paced sessions) start it here.
        source.drive(env, engine.submit, log, horizon)
    elif source.open_loop:
        env.process(open_loop_arrivals(env, source.arrivals(), engine.submit, log, horizon))
    else:
        for _ in range(wl.concurrency):
            env.process(closed_loop_client(env, source.next_session, engine.submit, log, horizon))
    env.run()
    return SimResult(scenario=scenario, memory=plan, requests=log.requests, engines=[engine],
                     window_start_s=window_start, horizon_s=horizon, end_s=env.now,
                     calibration=dict(oracle.calibration), knobs=knobs)
