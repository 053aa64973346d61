"""A synthetic day of open-loop traffic for fleet-scale replays (docs/fleet.md): arrival
times shaped like the Azure LLM inference trace 2023, request contents (lengths, prefix
block ids) from the Mooncake conversation trace.

Each hour of the day draws its arrivals from the Azure hour's arrival offsets (code and
conversation merged, so its bursts and lulls): ``copies`` copies of that hour, each shifted
circularly by a random offset, of which exactly the hour's share of ``requests`` is kept
(uniformly). The requests are the Mooncake records in trace order, cycled; each pass over
the trace gets its own block-id namespace, so prefix reuse is the trace's own (within a
conversation, across its turns) and never crosses passes. Generated hour by hour: memory
holds one hour's arrival times, not the day's.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from inferasim.config.errors import ConfigError
from inferasim.workload.azure import read_azure
from inferasim.workload.mooncake import load_mooncake
from inferasim.workload.request import Arrival, RequestSpec

HOUR_S = 3600.0
DAY_S = 24 * HOUR_S
# Ids of one pass over the trace are offset by this much from the pass before.
PASS_NAMESPACE = 10**9


def azure_offsets(paths: list[Path]) -> np.ndarray:
    """Arrival offsets (s) within the hour of the Azure trace files, merged and sorted."""
    ns = np.sort(np.concatenate([read_azure(path)[0] for path in paths]))
    offsets = (ns - ns[0]) / 1e9
    return offsets[offsets < HOUR_S]


class DaySource:
    """``requests`` arrivals over ``hours`` hours (open loop), as the module describes."""

    open_loop = True

    def __init__(self, azure: list[Path], mooncake: Path, requests: int, seed: int = 0,
                 hours: int = 24):
        if requests < 1:
            raise ConfigError(f"expected at least one request, got {requests}", key="requests")
        if hours < 1:
            raise ConfigError(f"expected at least one hour, got {hours}", key="hours")
        self.offsets = azure_offsets(azure)
        self.trace = load_mooncake(mooncake, implicit_turns=False)
        self.block_tokens = self.trace.block_tokens
        self.requests = requests
        self.hours = hours
        self.duration_s = hours * HOUR_S
        self.seed = seed
        per_hour = -(-requests // hours)
        self.copies = max(1, -(-per_hour // self.offsets.size))

    def hour_times(self, hour: int, rng: np.random.Generator) -> np.ndarray:
        """The arrival times of ``hour``, sorted."""
        n = self.requests // self.hours + (1 if hour < self.requests % self.hours else 0)
        shifts = rng.uniform(0.0, HOUR_S, self.copies)
        pool = np.concatenate([(self.offsets + s) % HOUR_S for s in shifts])
        keep = rng.choice(pool.size, size=n, replace=False)
        return np.sort(pool[keep]) + hour * HOUR_S

    def _spec(self, i: int) -> RequestSpec:
        t = self.trace
        row, lap = i % len(t), i // len(t)
        out = int(t.output_tokens[row])
        keys = t.prompt_keys(row) + np.int64(lap * PASS_NAMESPACE)
        return RequestSpec(int(t.input_tokens[row]), out, keys, t.block_tokens, None, i, 0,
                           max_tokens=out)

    def arrivals(self) -> Iterator[Arrival]:
        rng = np.random.default_rng([self.seed, 24])
        i = 0
        for hour in range(self.hours):
            for at in self.hour_times(hour, rng).tolist():
                yield Arrival(at, self._spec(i))
                i += 1

    def next_session(self):
        raise TypeError("a synthetic day replays stamped arrivals, not client sessions")
