"""Latency targets a search must meet, and the objectives it ranks by.

An SLA bound names a replay summary key. The closed-form projection reports means only, so
stage one reads each bound against the projection's mean of the same quantity
(``PROJECTED``): a percentile is at least its mean for these latencies, so a mean already past
a bound by more than the margin is a miss the replay would only make worse.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import attrs

from inferasim.config.errors import ConfigError
from inferasim.search.replay import FAILED

# key -> (summary key, "max" for an upper bound or "min" for a lower one, projection key)
SLA_KEYS = {
    "ttft_p90_s": ("ttft_p90_s", "max", "ttft_mean_s"),
    "ttft_p50_s": ("ttft_p50_s", "max", "ttft_mean_s"),
    "tpot_p90_ms": ("tpot_p90_ms", "max", "tpot_mean_ms"),
    "e2e_p90_s": ("e2e_p90_s", "max", "e2e_mean_s"),
    "interactivity_tok_s": ("interactivity_tok_s", "min", "interactivity_tok_s"),
}
# objective -> (record key, +1 to maximise or -1 to minimise)
OBJECTIVES = {
    "throughput_per_gpu": ("total_tok_s_per_gpu", +1),
    "cost_per_mtok": ("cost_per_mtok_usd", -1),
    "energy_per_token": ("joules_per_token", -1),
}


@attrs.frozen
class Sla:
    bounds: tuple[tuple[str, float], ...] = ()

    @classmethod
    def parse(cls, items: tuple[str, ...] | list[str]) -> Sla:
        """``("ttft_p90_s=2", "tpot_p90_ms=40,interactivity_tok_s=20")`` -> an Sla."""
        bounds: dict[str, float] = {}
        for item in items:
            for part in (p.strip() for p in item.split(",")):
                if not part:
                    continue
                key, sep, raw = part.partition("=")
                key = key.strip()
                if not sep or key not in SLA_KEYS:
                    raise ConfigError(f"expected KEY=VALUE with KEY one of {', '.join(SLA_KEYS)}, "
                                      f"got {part!r}", key="--sla")
                try:
                    value = float(raw)
                except ValueError:
                    raise ConfigError(f"expected a number, got {raw!r}", key=f"--sla {key}") from None
                if not math.isfinite(value) or value <= 0:
                    raise ConfigError(f"expected a positive number, got {raw!r}", key=f"--sla {key}")
                if key in bounds:
                    raise ConfigError("given twice", key=f"--sla {key}")
                bounds[key] = value
        return cls(tuple(bounds.items()))

    def describe(self) -> str:
        if not self.bounds:
            return "none"
        return ", ".join(f"{k} {'<=' if SLA_KEYS[k][1] == 'max' else '>='} {v:g}"
                         for k, v in self.bounds)

    def slack(self, record: Mapping[str, float], *, projected: bool = False) -> float:
        """The worst bound's ratio of room: above 1 meets every bound with that factor to
        spare, below 1 misses one by that factor; infinite when no bound binds (none given,
        or every figure at zero), so stage one's best candidate can be one of those. A
        missing or NaN figure is a miss."""
        worst = math.inf
        for key, bound in self.bounds:
            summary_key, sense, proj_key = SLA_KEYS[key]
            value = record.get(proj_key if projected else summary_key)
            value = math.nan if value is None else float(value)
            if math.isnan(value):
                return 0.0  # not measured (no request finished): a miss
            if value <= 0:
                room = math.inf if sense == "max" else 0.0
            else:
                room = bound / value if sense == "max" else value / bound
            worst = min(worst, room)
        return worst

    def met(self, record: Mapping[str, float]) -> bool:
        """A replay that served nothing (``replay.FAILED``), or refused part of its workload
        (``requests_failed``: a deployment that turns requests away serves a lighter load
        than it was given), meets no SLA, not even none."""
        return FAILED not in record and not record.get("requests_failed") \
            and self.slack(record) >= 1.0


def objective_of(name: str) -> tuple[str, int]:
    if name not in OBJECTIVES:
        raise ConfigError(f"expected one of {', '.join(OBJECTIVES)}, got {name!r}",
                          key="--objective")
    return OBJECTIVES[name]
