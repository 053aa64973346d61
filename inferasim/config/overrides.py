"""``--set dotted.key=value`` overrides, typed by YAML's scalar rules (8 -> int, 0.5 -> float, true -> bool)."""

from __future__ import annotations

from typing import Any

import yaml

from inferasim.config.errors import ConfigError, warn
from inferasim.config.yaml_tree import Origins, parse_yaml

OVERRIDE_ORIGIN = "--set"


def parse_override(text: str) -> tuple[str, Any]:
    if "=" not in text:
        raise ConfigError(f"expected KEY=VALUE, got {text!r}", file=OVERRIDE_ORIGIN)
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ConfigError(f"expected a dotted key such as workload.concurrency, got {key!r}",
                          file=OVERRIDE_ORIGIN)
    if key.rsplit(".", 1)[-1] == "version":
        return key, raw.strip()  # a release as typed: 0.20 is not the number 0.2
    try:
        value = parse_yaml(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key, value


def apply_overrides(data: dict[str, Any], origins: Origins, overrides: list[str]) -> None:
    """Apply overrides in place, recording their origin as ``--set``; a later one wins."""
    for text in overrides:
        key, value = parse_override(text)
        node = data
        parts = key.split(".")
        for i, part in enumerate(parts[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            elif not isinstance(child, dict):
                prefix = ".".join(parts[: i + 1])
                raise ConfigError(f"cannot set a key below {prefix!r}, which is a value",
                                  file=OVERRIDE_ORIGIN, key=key)
            node = child
        node[parts[-1]] = value
        origins[key] = OVERRIDE_ORIGIN


def warn_repeated(overrides: list[str]) -> None:
    """A key the user's ``--set`` gives twice with different values: the last is kept, as
    for a shell variable, but the first may be the one the user reads. (Overrides a command
    composes on top, such as a sweep's grid values, are not checked: they are meant to win.)"""
    given: dict[str, Any] = {}
    for text in overrides:
        key, value = parse_override(text)
        if key in given and given[key] != value:
            warn(f"given twice ({given[key]!r}, then {value!r}); the last is used",
                 file=OVERRIDE_ORIGIN, key=key)
        given[key] = value
