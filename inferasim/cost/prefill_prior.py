"""The prefill slope carried to a regime whose own anchors cannot identify it.

A regime measured at one prompt length (every InferenceMAX regime: ISL 1024) cannot tell a
prefill slower than the analytic one from a fixed time outside the engine; read as the
latter (slope 1), a projection to long prompts prices their prefill at the analytic rate.
Held out on the vLLM H200 grids, 8k prompts projected from 1k ones so read +56% throughput,
-26% TPOT and -30% TTFT (docs/anchors.md, "The prefill slope carried").

Every regime in the store that does identify a slope (a TTFT fit over three prompt lengths
or more, or the mixed steps of an agentic ladder; none held at a bound) is a reading of how
far real engines prefill from the analytic model. The slope carried is the median of the
readings, from the nearest level that holds two or more: the same part and engine, the same
engine, then every reading. The target's own regime never gives it one (it would have identified
its own), and a reading counts only where its regime's anchors are in the store the target
is calibrated from, so a hold-out that removes them removes it.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from inferasim.anchors.deployment import scenario_from_regime
from inferasim.anchors.regime import compare, regime_key
from inferasim.config.errors import ConfigError
from inferasim.cost.ttft_model import MIN_PROMPT_LENGTHS, PREFILL_SLOPE_LIMITS, held_at_bound

#: Levels of the carry, nearest first. A level serves with at least MIN_LEVEL_READINGS
#: readings: one regime's slope is that regime's (the vLLM H200 grids identify 0.73 on GLM-5
#: and 2.49 on MiniMax-M2.5), and a median of one is no pooling.
LEVELS = ("the same part and engine", "the same engine", "every engine")
MIN_LEVEL_READINGS = 2


@attrs.frozen
class SlopeReading:
    """One regime's own prefill slope, as the carry pools it."""

    label: str
    model: str
    engine: str
    gpu: str
    slope: float
    how: str                      # "prompt lengths" or "mixed steps"
    anchor_ids: frozenset = attrs.field(eq=False, repr=False)
    regime: Any = attrs.field(eq=False, repr=False)   # one of its anchors' Regime


@attrs.frozen
class CarriedSlope:
    slope: float
    level: str
    readings: tuple[SlopeReading, ...]

    def note(self) -> str:
        names = ", ".join(f"{r.label} x{r.slope:.2f}" for r in self.readings)
        return (f"prefill slope x{self.slope:.3g} the analytic, carried from the regimes of "
                f"{self.level} "
                f"(the median of {len(self.readings)} regime(s) that identify one: {names}); "
                "this regime's anchors measure too few prompt lengths to identify its own")

    def to_dict(self) -> dict[str, Any]:
        return {"slope": round(self.slope, 4), "level": self.level,
                "regimes": {r.label: round(r.slope, 4) for r in self.readings}}


def _regime_label(record) -> str:
    reg = record.regime
    return (f"{reg.model} {reg.engine} {reg.gpu} {reg.weight_dtype or '?'} "
            f"tp{reg.tp} ep{reg.ep} dpa{reg.dp_attention}")


def _identifying_groups(records) -> list[list]:
    """The store's colocated regimes (any build) whose anchors could identify a slope."""
    groups: dict[tuple, list] = {}
    for record in records:
        reg = record.regime
        if reg.disaggregated or reg.model is None or reg.gpu is None:
            continue
        groups.setdefault(regime_key(record)[:-1], []).append(record)
    out = []
    for group in groups.values():
        closed = {int(r.workload.isl) for r in group
                  if r.ttft_s is not None and r.workload.concurrency
                  and r.workload.prefill_per_step is None}
        mixed = any(r.workload.prefill_per_step is not None for r in group)
        if len(closed) >= MIN_PROMPT_LENGTHS or mixed:
            out.append(group)
    return out


def read_slopes(store, knobs) -> tuple[SlopeReading, ...]:
    """Each identifying regime of ``store`` calibrated on its own deployment (its regime's
    scenario at its longest prompt, so that its probe covers the target), not carrying a
    slope itself, and the slope it identifies."""
    from inferasim.anchors.store import AnchorStore
    from inferasim.cost.calibrated import CalibratedOracle

    out = []
    for group in _identifying_groups(store):
        longest = max(group, key=lambda r: r.workload.isl)
        try:
            base = scenario_from_regime(longest)
        except ConfigError:
            continue   # a deployment inferasim cannot build: it reads nothing
        w = longest.workload
        workload = attrs.evolve(base.workload, isl=int(w.isl), osl=int(w.osl),
                                concurrency=int(w.concurrency or 1))
        scenario = attrs.evolve(base, workload=workload)
        try:
            oracle = CalibratedOracle(scenario, AnchorStore(group), knobs, carry_prefill=False)
        except (ConfigError, ValueError):
            continue
        how = oracle.identified_slope
        if how is None or held_at_bound(oracle.prefill_slope, PREFILL_SLOPE_LIMITS):
            continue   # not identified, or a fit the TTFT model did not describe
        reg = longest.regime
        out.append(SlopeReading(_regime_label(longest), reg.model, reg.engine or "?",
                                reg.gpu, float(oracle.prefill_slope), how,
                                frozenset(r.id for r in group), reg))
    return tuple(out)


def store_slopes(store, knobs) -> tuple[SlopeReading, ...]:
    """The readings of ``store``, read once per store (and the stores sharing its memo)."""
    return store.memo("prefill_slopes", lambda: read_slopes(store, knobs))


def carried_slope(readings, target, store_ids) -> CarriedSlope | None:
    """The slope carried to ``target`` (a ``Target``): the median of the readings of the
    nearest LEVELS that holds MIN_LEVEL_READINGS (the last level: any), never the target's own
    regime's, and only readings whose anchors are all in ``store_ids``."""
    usable = []
    for r in readings:
        if not r.anchor_ids <= store_ids:
            continue
        diffs, _ = compare(r.regime, target)
        if not [d for d in diffs if d.axis != "build"]:
            continue   # its own regime
        usable.append(r)
    levels = (
        [r for r in usable if r.gpu == target.gpu and r.engine == target.engine],
        [r for r in usable if r.engine == target.engine],
        usable,
    )
    for level, found in zip(LEVELS, levels, strict=True):
        if len(found) >= MIN_LEVEL_READINGS or (found and level == LEVELS[-1]):
            slope = float(np.median([r.slope for r in found]))
            return CarriedSlope(slope, level, tuple(found))
    return None
