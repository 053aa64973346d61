"""Build frozen attrs specs from plain mappings, with one clear error per mistake.

Every field's type comes from its annotation: int, float, str, bool, ``X | None``,
``list[X]``, ``dict[str, X]`` and nested attrs classes. A field may declare allowed values
with ``metadata={"choices": (...)}``. Unknown keys get a "did you mean" from the field names.
"""

from __future__ import annotations

import difflib
import functools
import math
import types
import typing
from typing import Any

import attrs

from inferasim.config.errors import ConfigError
from inferasim.config.yaml_tree import Origins

_TYPE_WORDS = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}


def choices(*values: str) -> dict[str, tuple[str, ...]]:
    return {"choices": values}


def at_least(bound: float) -> dict[str, float]:
    """A numeric field's smallest allowed value."""
    return {"min": bound}


def above(bound: float) -> dict[str, float]:
    """A numeric field that must exceed ``bound``."""
    return {"above": bound}


def between(low: float, high: float) -> dict[str, float]:
    """A numeric field within [low, high]."""
    return {"min": low, "max": high}


class _Ctx:
    def __init__(self, origins: Origins, default_file: str):
        self.origins = origins
        self.default_file = default_file

    def file_for(self, key: str) -> str:
        probe = key
        while probe:
            if probe in self.origins:
                return self.origins[probe]
            probe = probe.rpartition(".")[0]
        return self.default_file

    def fail(self, key: str, message: str) -> ConfigError:
        return ConfigError(message, file=self.file_for(key), key=key)


def _describe(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if tp in _TYPE_WORDS:
        return _TYPE_WORDS[tp]
    if origin in (list, tuple):
        (inner, *_) = typing.get_args(tp) or (Any,)
        return f"a list of {_describe(inner).removeprefix('a ').removeprefix('an ')}s"
    if origin is dict:
        return "a mapping"
    if attrs.has(tp):
        return "a mapping"
    return str(tp)


def _convert(tp: Any, value: Any, key: str, ctx: _Ctx) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        real = [a for a in args if a is not type(None)]
        errors = []
        for arg in real:
            try:
                return _convert(arg, value, key, ctx)
            except ConfigError as exc:
                errors.append(exc)
        raise errors[0]
    if tp is Any:
        return value
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise ctx.fail(key, f"expected true or false, got {value!r}")
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ctx.fail(key, f"expected an integer, got {value!r}")
        if isinstance(value, float) and not value.is_integer():
            raise ctx.fail(key, f"expected an integer, got {value!r}")
        return int(value)
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ctx.fail(key, f"expected a number, got {value!r}")
        if not math.isfinite(value):
            # NaN passes every bound check (each comparison is false) and infinity breaks
            # the arithmetic downstream: neither is a setting or a measurement
            raise ctx.fail(key, f"expected a finite number, got {value!r}")
        return float(value)
    if tp is str:
        if isinstance(value, float) and key.rsplit(".", 1)[-1] == "version":
            # YAML read an unquoted 0.20 as the number 0.2: its last zero is gone
            raise ctx.fail(key, f"expected a version string, got the number {value!r} (YAML "
                                "reads an unquoted 0.20 as 0.2): quote it, e.g. \"0.20\"")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        if not isinstance(value, str):
            raise ctx.fail(key, f"expected a string, got {value!r}")
        return value
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ctx.fail(key, f"expected {_describe(tp)}, got {value!r}")
        (inner, *_) = typing.get_args(tp) or (Any,)
        return tuple(_convert(inner, v, f"{key}[{i}]", ctx) for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            raise ctx.fail(key, f"expected a mapping, got {value!r}")
        _, inner = typing.get_args(tp) or (str, Any)
        return {str(k): _convert(inner, v, f"{key}.{k}", ctx) for k, v in value.items()}
    if attrs.has(tp):
        if not isinstance(value, dict):
            raise ctx.fail(key, f"expected a mapping, got {value!r}")
        return _build(tp, value, key, ctx)
    raise TypeError(f"unsupported field type {tp!r} at {key}")


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    """A spec class's resolved annotations: resolving them is the costly part of a build (an
    anchor store builds hundreds of records), and a class's never change."""
    return typing.get_type_hints(cls)


def _build(cls: type, data: dict[str, Any], prefix: str, ctx: _Ctx) -> Any:
    hints = _hints(cls)
    fields = {f.name: f for f in attrs.fields(cls)}
    for key in data:
        if key not in fields:
            dotted = f"{prefix}.{key}" if prefix else str(key)
            near = difflib.get_close_matches(str(key), list(fields), n=1, cutoff=0.6)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            known = ", ".join(sorted(n for n in fields if not n.startswith("_")))
            raise ctx.fail(dotted, f"unknown key{hint}; known keys here: {known}")
    kwargs = {}
    for name, field in fields.items():
        dotted = f"{prefix}.{name}" if prefix else name
        if name not in data:
            if field.default is attrs.NOTHING:
                raise ctx.fail(dotted, f"missing required key ({_describe(hints[name])})")
            continue
        value = _convert(hints[name], data[name], dotted, ctx)
        allowed = field.metadata.get("choices")
        items = value if isinstance(value, tuple) else (value,)  # a list's choices bound each
        for item in items if allowed else ():
            if item is not None and item not in allowed:
                near = difflib.get_close_matches(str(item), allowed, n=1, cutoff=0.5)
                hint = f" (did you mean {near[0]!r}?)" if near else ""
                raise ctx.fail(dotted,
                               f"expected one of {', '.join(allowed)}; got {item!r}{hint}")
        wrong = out_of_bounds(field, value)
        if wrong:
            raise ctx.fail(dotted, wrong)
        kwargs[name] = value
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as exc:
        raise ctx.fail(prefix or cls.__name__, str(exc)) from None


def out_of_bounds(field: attrs.Attribute, value: Any) -> str | None:
    """What is wrong with a numeric ``value`` against ``field``'s bounds (``at_least``,
    ``above``, ``between``), or None."""
    if value is None:
        return None
    low, over = field.metadata.get("min"), field.metadata.get("above")
    high = field.metadata.get("max")
    if low is not None and value < low:
        return f"expected a value of at least {_bound(low)}, got {value!r}"
    if over is not None and value <= over:
        return f"expected a value above {_bound(over)}, got {value!r}"
    if high is not None and value > high:
        return f"expected a value of at most {_bound(high)}, got {value!r}"
    return None


def _bound(value: float) -> str:
    """A bound as a user types it: a whole number in full (16777216, not 1.67772e+07)."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def build_spec(cls: type, data: dict[str, Any], *, prefix: str = "", origins: Origins | None = None,
               default_file: str = "<scenario>") -> Any:
    """Build ``cls`` from ``data``; errors name the file each key came from."""
    return _build(cls, data, prefix, _Ctx(origins or {}, default_file))


def spec_to_dict(spec: Any) -> Any:
    """The inverse, for writing a resolved scenario: tuples become lists."""
    if attrs.has(type(spec)):
        return {f.name: spec_to_dict(getattr(spec, f.name)) for f in attrs.fields(type(spec))
                if not f.name.startswith("_")}
    if isinstance(spec, (list, tuple)):
        return [spec_to_dict(v) for v in spec]
    if isinstance(spec, dict):
        return {k: spec_to_dict(v) for k, v in spec.items()}
    return spec
