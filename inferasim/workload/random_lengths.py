"""Fixed-length random prompts (``workload.format: random``), as benchmark clients send them.

Every prompt is distinct (no reusable prefix), ISL/OSL fixed, which is how InferenceMAX
and ``vllm bench serve --dataset-name random`` drive a server.
"""

from __future__ import annotations

import numpy as np

from inferasim.workload.keys import unique_keys
from inferasim.workload.request import RequestSpec, Session, Turn

BLOCK_TOKENS = 16


class RandomRequests:
    """``range_ratio`` < 1 draws each length uniformly from [ratio x L, L], as the benchmark
    clients' ``--random-range-ratio`` does (InferenceMAX runs 0.8): with fixed lengths every
    client of a closed loop would finish in lockstep and prefill in bursts."""

    def __init__(self, isl: int, osl: int, range_ratio: float = 1.0,
                 rng: np.random.Generator | None = None):
        self.isl, self.osl = isl, osl
        self.ratio = range_ratio
        self.rng = rng or np.random.default_rng(0)
        self._next = 0

    def _length(self, full: int) -> int:
        if self.ratio >= 1.0:
            return full
        return int(self.rng.integers(max(1, int(full * self.ratio)), full + 1))

    def next_request(self) -> RequestSpec:
        rid = self._next
        self._next += 1
        isl, osl = self._length(self.isl), self._length(self.osl)
        keys = unique_keys(rid, isl // BLOCK_TOKENS)
        # vllm bench serve's random dataset sends max_tokens = osl with --ignore-eos
        return RequestSpec(isl, osl, keys, BLOCK_TOKENS, None, rid, 0, max_tokens=osl)

    def next_session(self) -> Session:
        req = self.next_request()
        return Session(req.session, (Turn(0.0, req),))


def poisson_times(rate: float, horizon_s: float, rng: np.random.Generator) -> np.ndarray:
    n = max(16, int(rate * horizon_s * 1.5) + 16)
    times = np.cumsum(rng.exponential(1.0 / rate, size=n))
    while times[-1] < horizon_s:
        times = np.concatenate((times, times[-1] + np.cumsum(rng.exponential(1.0 / rate, size=n))))
    return times[times < horizon_s]
