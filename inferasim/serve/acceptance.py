"""Tokens per verify step, request by request.

Under speculative decoding requests accept differently (what they generate decides how often
the draft is right): the measured rows show it as a spread of TPOT between requests
(coefficient of variation 0.07-0.21 on the InferenceMAX MTP rows at 1k/1k, against 0.01-0.08
without speculation). Requests that accept alike and start together finish together; spread,
they finish apart, as the slots of a real server turn over. The model gives a request one rate
for its whole decode. The rows' spread shrinks over longer outputs (0.04-0.05 at 1k/8k), so a
real rate wanders, and the figure a scenario gives is the spread at its own output length.
"""

from __future__ import annotations

from statistics import NormalDist

_MASK = (1 << 64) - 1
_UNIT = NormalDist()


def _unit_interval(seed: int, rid: int) -> float:
    """A uniform draw in (0, 1) fixed by ``seed`` and ``rid`` (SplitMix64 of the pair): the same
    request draws the same in both step modes, whatever order requests reach the engine in."""
    x = (seed * 0x9E3779B97F4A7C15 + rid + 1) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    x ^= x >> 31
    return (x + 0.5) / 2.0**64


class RequestAdvance:
    """A request's tokens per verify step, drawn through its seconds per token: ``1 / a =
    (1 + cv x z) / mean``, z standard normal, so ``mean`` is the harmonic mean over requests
    and ``cv`` the spread of their TPOT. The harmonic mean is what a stream shows (mean ITL
    over mean TPOT) and what sets a closed loop's throughput (a slow request holds its slot
    longer), so spreading the requests keeps both. Within 1 (no draft accepted) and the
    verify width (every draft accepted)."""

    def __init__(self, mean: float, cv: float, width: int, seed: int):
        self.mean, self.cv, self.width, self.seed = mean, cv, float(width), seed

    def __call__(self, rid: int) -> float:
        z = _UNIT.inv_cdf(_unit_interval(self.seed, rid))
        per_token = (1.0 + self.cv * z) / self.mean
        return min(max(1.0 / max(per_token, 1e-9), 1.0), self.width)
