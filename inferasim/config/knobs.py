"""Every ``INFERASIM_*`` environment knob, declared once with its meaning.

Code reads knobs only through ``Knobs.from_env`` so that a run's knob settings are one value
that can be recorded beside its results and varied by ``inferasim ablate``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import attrs

from inferasim.config.errors import ConfigError, warn


@attrs.frozen
class KnobDecl:
    name: str
    kind: type
    default: object
    meaning: str
    minimum: int = 1  # integer knobs


KNOBS: tuple[KnobDecl, ...] = (
    KnobDecl("INFERASIM_DPA_DECODE_DENSE", bool, False,
             "Price attention-DP decode attention dense over the whole context, ignoring "
             "selection and compression (the ablation of behaviour.md section 3)."),
    KnobDecl("INFERASIM_DES_LOCKSTEP", int, 0,
             "Attention-DP ranks stepping together, in groups of N: each step is priced at "
             "the group's combined batch and ends for all of them at once (SGLang and vLLM "
             "DP ranks sync at every MoE layer; an idle rank runs a dummy batch). 0, the "
             "default: every rank of an instance, as the engines run; 1: independent ranks.",
             minimum=0),
)

_BY_NAME = {k.name: k for k in KNOBS}
PREFIX = "INFERASIM_"


def _suggestion(name: str, cutoff: float = 0.6) -> str:
    import difflib

    near = difflib.get_close_matches(name.strip(), list(_BY_NAME), n=1, cutoff=cutoff)
    return f" (did you mean {near[0]!r}?)" if near else ""


def _parse(decl: KnobDecl, raw: str, origin: str):
    text = raw.strip()
    if decl.kind is bool:
        if text.lower() in ("1", "true", "yes", "on"):
            return True
        if text.lower() in ("0", "false", "no", "off", ""):
            return False
        raise ConfigError(f"expected 0 or 1, got {raw!r}", file=origin, key=decl.name)
    if decl.kind is int:
        try:
            value = int(text)
        except ValueError:
            raise ConfigError(f"expected an integer, got {raw!r}", file=origin,
                              key=decl.name) from None
        if value < decl.minimum:
            raise ConfigError(f"expected an integer of at least {decl.minimum}, got {raw!r}",
                              file=origin, key=decl.name)
        return value
    raise TypeError(decl.kind)


@attrs.frozen
class Knobs:
    dpa_decode_dense: bool = False
    des_lockstep: int = 0

    def lockstep_group(self, dp: int) -> int:
        """Ranks per lockstep group of an instance of ``dp`` attention-DP ranks (0: all).

        An instance without attention DP is one rank whatever the knob says: a prior prices
        such neighbours of an attention-DP target with the target's knobs."""
        if dp <= 1:
            return 1
        return self.des_lockstep or dp

    def check(self, scenario) -> None:
        """The knobs apply to ``scenario`` (a sweep checks every rung before any replay)."""
        dp = scenario.parallel.dp_attention
        if dp > 1 and dp % self.lockstep_group(dp):
            raise ConfigError(f"INFERASIM_DES_LOCKSTEP={self.lockstep_group(dp)} must divide "
                              f"the attention-DP size {dp}", key="parallel.dp_attention",
                              file=scenario.path)

    @classmethod
    def from_mapping(cls, env: Mapping[str, str], origin: str = "environment") -> Knobs:
        """The knobs ``env`` sets; an ``INFERASIM_*`` name that is no knob is warned about
        (a misspelled knob would otherwise change nothing without a word)."""
        for name in sorted(env):
            if name.startswith(PREFIX) and name not in _BY_NAME:
                warn(f"not an inferasim knob, ignored{_suggestion(name, 0.75)}; run 'inferasim "
                     "knobs' to list them", file=origin, key=name)
        values = {}
        for decl in KNOBS:
            if decl.name in env:
                field = decl.name.removeprefix("INFERASIM_").lower()
                values[field] = _parse(decl, env[decl.name], origin)
        return cls(**values)

    @classmethod
    def from_env(cls) -> Knobs:
        return cls.from_mapping(os.environ)

    def with_setting(self, text: str, origin: str = "--knob") -> Knobs:
        """Apply ``NAME=VALUE``; an unknown name is an error."""
        name, _, raw = text.partition("=")
        decl = _BY_NAME.get(name.strip())
        if decl is None:
            raise ConfigError(f"unknown knob{_suggestion(name)}; run 'inferasim knobs' to "
                              "list them",
                              file=origin, key=name)
        field = decl.name.removeprefix("INFERASIM_").lower()
        return attrs.evolve(self, **{field: _parse(decl, raw, origin)})
