"""Pick the workload source a scenario names: closed-loop sessions or open-loop stamped arrivals."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import numpy as np

from inferasim.config.errors import ConfigError
from inferasim.config.scenario import MAX_ARRIVALS, Scenario
from inferasim.workload.random_lengths import BLOCK_TOKENS, RandomRequests, poisson_times
from inferasim.workload.request import Arrival, Session
from inferasim.workload.synthetic import SyntheticSessions

GENERATED_DURATION_S = 600.0


class WorkloadSource(Protocol):
    block_tokens: int
    open_loop: bool
    duration_s: float

    def next_session(self) -> Session: ...

    def arrivals(self) -> Iterator[Arrival]: ...


class SessionSource:
    """Closed loop: each client draws sessions from a generator."""

    open_loop = False

    def __init__(self, generator, block_tokens: int, duration_s: float):
        self.generator = generator
        self.block_tokens = block_tokens
        self.duration_s = duration_s

    def next_session(self) -> Session:
        return self.generator.next_session()

    def arrivals(self) -> Iterator[Arrival]:
        raise TypeError("a closed-loop source has no stamped arrivals")


class PoissonSource:
    """Open loop: generated requests at Poisson arrival times, through the warm-up and the
    measured window after it (the report's window starts at ``warmup_s``)."""

    open_loop = True

    def __init__(self, generator, rate: float, duration_s: float, rng: np.random.Generator,
                 block_tokens: int, warmup_s: float = 0.0):
        self.generator = generator
        self.rate = rate
        self.duration_s = duration_s
        self.warmup_s = warmup_s
        self.rng = rng
        self.block_tokens = block_tokens

    def next_session(self) -> Session:
        raise TypeError("an open-loop source has no sessions")

    def arrivals(self) -> Iterator[Arrival]:
        for t in poisson_times(self.rate, self.warmup_s + self.duration_s, self.rng):
            yield Arrival(float(t), self.generator.next_session().turns[0].request)


def workload_source(scenario: Scenario, rng: np.random.Generator) -> WorkloadSource:
    wl = scenario.workload
    fmt = wl.format
    duration = wl.duration_s
    if fmt in ("synthetic", "random"):
        duration = GENERATED_DURATION_S if duration is None else duration
        if fmt == "synthetic":
            gen = SyntheticSessions(wl.synthetic, scenario.model.max_context, rng)
            block = wl.synthetic.block_tokens
        else:
            gen = RandomRequests(wl.isl, wl.osl, wl.random_range_ratio, rng)
            block = BLOCK_TOKENS
        if wl.rate is not None:
            arrivals = wl.rate * (wl.warmup_s + duration)
            if arrivals > MAX_ARRIVALS:
                raise ConfigError(
                    f"{wl.rate:g} requests/s over {wl.warmup_s + duration:g} s (warm-up and "
                    f"duration) is {arrivals:.3g} arrivals; a replay draws at most "
                    f"{MAX_ARRIVALS:,}: lower workload.rate or workload.duration_s",
                    key="workload.rate", file=scenario.path)
            return PoissonSource(gen, wl.rate, duration, rng, block, wl.warmup_s)
        return SessionSource(gen, block, duration)
    if fmt == "mooncake":
        from inferasim.workload.mooncake import mooncake_source

        return mooncake_source(scenario, rng)
    if fmt == "bailian":
        from inferasim.workload.bailian import bailian_source

        return bailian_source(scenario, rng)
    if fmt == "azure":
        from inferasim.workload.azure import azure_source

        return azure_source(scenario, rng)
    if fmt in ("agentx", "sessions"):
        from inferasim.workload.agentx import agentx_source

        return agentx_source(scenario, rng)
    raise ConfigError(f"workload format {fmt!r} is not available yet", key="workload.format",
                      file=scenario.path)
