"""A speculative scenario's acceptance where it states none: read from the anchors that
measured it, nearest first, else a published figure (docs/anchors.md, "Acceptance where a
scenario states none").

How many drafts a verify step keeps is the draft model's agreement with the target on the
text being generated: a property of the model, its weights and the method, not of the part
it runs on. So the chain crosses part and engine before it crosses the model:

1. the scenario's own ``speculative.acceptance``;
2. anchors of the same model, method, weights, engine and part ("regime");
3. anchors of the same model and method on any part or engine ("model and method");
4. anchors of the method on any model ("method");
5. the method's published figure for its first draft (``PUBLISHED_FIRST_DRAFT``).

An anchor's acceptance is what its verify steps emitted (its client's accept length, or its
stream where one chunk carries one step: ``AnchorRecord.accept_length``), carried from the
anchor's output length to the target's (``carry_tokens_per_step``), read per draft position at
its own draft depth and carried to the target's depth at that rate. A level's figure is the
median over its anchors.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from inferasim.anchors import normalise as nz
from inferasim.anchors.record import DEFAULT_DRAFT_TOKENS
from inferasim.config.errors import ConfigError
from inferasim.config.scenario import acceptance_for_tokens

#: The first draft's acceptance where no anchor measures the method. MTP: DeepSeek-V3's
#: technical report (arXiv 2412.19437, section 5.4.3) measures 85-90% for the second token of
#: its one MTP module; the lower end is taken. Only that position is published, so only it is
#: credited: a verify step emits 1 + 0.85 tokens at any depth, read per position at the
#: target's depth. (Crediting every deeper draft at 0.85 priced DeepSeek-R1's MTP rows,
#: held out by model, at 3.2 tokens a step where their streams read 1.8-2.5, and their TPOT
#: 40% fast; docs/anchors.md, "Acceptance where a scenario states none".)
PUBLISHED_FIRST_DRAFT = {"mtp": 0.85}

LEVELS = ("scenario", "regime", "model and method", "method", "published")

#: How the tokens a verify step emits grow with the output length on a random-prompt
#: benchmark: ``tokens(L2) = tokens(L1) x (L2 / L1) ** k``. Fitted to one data set, the
#: InferenceMAX history (``benchmarks_history_flat.csv``): on each speculative family with 1k/1k
#: and 1k/8k rows of the same run date and clients, the 1k/8k TPOT over the 1k/1k one, divided
#: by the same ratio of its plain-decoding sibling (0.98-1.03: the context barely moves a
#: step), is 0.72-0.88 over nine colocated families, median 0.83 (SGLang, TensorRT-LLM and
#: ATOM on B200, H200 and MI355X alike): a step emits 1.2x the tokens over an 8x longer
#: output, k = ln(1.2) / ln(8). Leaving any one family out moves the median within
#: 0.82-0.84. Generated text on random prompts turns repetitive as it goes, which the draft
#: predicts; whether real text does is not measured here, so the carry applies to random
#: prompts only (docs/anchors.md, "Acceptance grows with the output length").
OUTPUT_LENGTH_EXPONENT = 0.088


def carry_tokens_per_step(tokens: float, from_osl: float | None, to_osl: float | None,
                          width: int) -> float:
    """``tokens`` a verify step emitted over outputs of ``from_osl``, carried to outputs of
    ``to_osl`` (``OUTPUT_LENGTH_EXPONENT``), within 1 and the verify ``width``; unchanged where
    either length is unknown."""
    if not from_osl or not to_osl or from_osl == to_osl:
        return tokens
    carried = tokens * (float(to_osl) / float(from_osl)) ** OUTPUT_LENGTH_EXPONENT
    return min(max(carried, 1.0), float(width))


def target_osl(scenario) -> int | None:
    """The output length a scenario's acceptance is carried to: its random prompts' OSL;
    None for a trace, synthetic sessions or agentic lanes (their text is not random)."""
    wl = scenario.workload
    return int(wl.osl) if wl.format == "random" and wl.osl else None


@attrs.frozen
class AcceptanceReading:
    """Which level of the chain gave a scenario its acceptance, and from what."""

    level: str
    acceptance: float          # per draft position
    tokens_per_step: float     # what a verify step emits at the target's draft depth
    anchors: int = 0           # the anchors the level read
    regimes: tuple[str, ...] = ()

    def note(self) -> str:
        where = {"scenario": "the scenario's",
                 "published": "published (no anchor measures the method)"}.get(
            self.level, f"{self.level}: median of {self.anchors} anchor(s)' verify steps "
                        f"({', '.join(self.regimes[:3])}{', ...' if len(self.regimes) > 3 else ''})")
        return (f"speculative acceptance {self.acceptance:.3f} a draft "
                f"({self.tokens_per_step:.2f} tokens a verify step): {where}")

    def to_dict(self) -> dict[str, Any]:
        return {"level": self.level, "acceptance": round(self.acceptance, 4),
                "tokens_per_step": round(self.tokens_per_step, 4), "anchors": self.anchors,
                "regimes": list(self.regimes)}


def per_position(tokens_per_step: float, draft_tokens: int) -> float:
    """The per-position acceptance at which ``draft_tokens`` drafts emit ``tokens_per_step``
    a verify step."""
    return float(acceptance_for_tokens(float(tokens_per_step), int(draft_tokens)))


def _measured(records, spec_method: str) -> list:
    return [r for r in records if r.regime.spec_method == spec_method
            and r.accept_length is not None]


def _level_records(level: str, measured: list, scenario) -> list:
    model = nz.model_name(scenario.model.name)
    if level == "method":
        return measured
    same_model = [r for r in measured if r.regime.model == model]
    if level == "model and method":
        return same_model
    engine = nz.orchestrated_engine(scenario.engine.name, scenario.topology.orchestrator)
    gpu = nz.normalise_gpu(scenario.gpu.name)
    return [r for r in same_model if r.regime.engine == engine and r.regime.gpu == gpu
            and r.regime.weight_dtype is not None
            and nz.weight_dtypes_match(r.regime.weight_dtype, scenario.weight_dtype)]


def read_acceptance(scenario, records) -> AcceptanceReading | None:
    """The chain's answer for ``scenario`` from ``records`` (anchor records; may be empty);
    None for a scenario that does not speculate. Raises ConfigError where nothing in the
    chain measures or publishes the method's acceptance."""
    spec = scenario.speculative
    if spec.method == "none":
        return None
    osl = target_osl(scenario)
    if spec.acceptance is not None:  # the scenario's, or resolved already
        if spec.acceptance_osl and osl and spec.acceptance_osl != osl:
            tokens = carry_tokens_per_step(spec.tokens_per_step, spec.acceptance_osl, osl,
                                           spec.verify_width)
            return AcceptanceReading("scenario", per_position(tokens, spec.draft_tokens),
                                     tokens)
        return spec._reading or AcceptanceReading("scenario", spec.acceptance,
                                                   spec.tokens_per_step)
    measured = _measured(records, nz.spec_method(spec.method))
    for level in LEVELS[1:-1]:
        found = _level_records(level, measured, scenario)
        if not found:
            continue
        rates = []
        for r in found:
            depth = r.regime.draft_tokens or DEFAULT_DRAFT_TOKENS
            tokens = carry_tokens_per_step(r.accept_length, r.workload.osl, osl, depth + 1)
            rates.append(per_position(tokens, depth))
        rate = float(np.median(rates))
        regimes = sorted({f"{r.regime.model} {r.regime.engine} {r.regime.gpu}" for r in found})
        return AcceptanceReading(level, rate, attrs.evolve(spec, acceptance=rate).tokens_per_step,
                                 len(found), tuple(regimes))
    if spec.method in PUBLISHED_FIRST_DRAFT:
        tokens = 1.0 + PUBLISHED_FIRST_DRAFT[spec.method]
        return AcceptanceReading("published", per_position(tokens, spec.draft_tokens), tokens)
    raise ConfigError(
        f"no anchor measures {spec.method}'s acceptance and none is published here: set the "
        "tokens it accepts per draft position (0-1)",
        file=scenario.origin_of("speculative.method"), key="speculative.acceptance")


def with_acceptance(scenario, records) -> tuple[Any, AcceptanceReading | None]:
    """``scenario`` with its acceptance resolved (``read_acceptance``), and the reading."""
    reading = read_acceptance(scenario, records)
    spec = scenario.speculative
    if reading is None or (spec.acceptance is not None and reading.acceptance == spec.acceptance):
        return scenario, reading
    spec = attrs.evolve(spec, acceptance=round(reading.acceptance, 6), reading=reading,
                        acceptance_osl=target_osl(scenario) or spec.acceptance_osl)
    return attrs.evolve(scenario, speculative=spec), reading


def resolved_with_reading(scenario, store=None) -> tuple[Any, AcceptanceReading | None]:
    """``with_acceptance`` against ``store``, by default the anchors the scenario names
    (``loading.scenario_store``)."""
    if scenario.speculative.method == "none":
        return scenario, None
    if store is None and scenario.speculative.acceptance is None:
        from inferasim.anchors.loading import scenario_store

        store = scenario_store(scenario)
    return with_acceptance(scenario, store if store is not None else ())


def resolved(scenario, store=None):
    """``scenario`` with its acceptance resolved (``resolved_with_reading``)."""
    return resolved_with_reading(scenario, store)[0]
