"""YAML files with ``extends:`` / ``bases:`` inheritance, deep-merged, with the origin of every key kept.

Later files win; a mapping merges key by key, anything else is replaced whole. The origin
map (dotted key -> file that set it last) lets validation errors name the file a bad value
really came from, not just the leaf scenario.
"""

from __future__ import annotations

import copy
import functools
import re
from pathlib import Path
from typing import Any

import yaml

from inferasim.config.errors import ConfigError


class _DuplicateKey(yaml.constructor.ConstructorError):
    """A key given twice in one mapping: its message is worth more than the position alone."""


class _Loader(yaml.SafeLoader):
    """SafeLoader that also reads ``3.35e12`` as a number (YAML 1.1 wants ``3.35e+12``) and
    refuses a key given twice in one mapping (YAML keeps the last silently, so the first
    setting a user reads in the file would not be the one that runs)."""

    def construct_mapping(self, node, deep=False):
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, (str, int, float, bool)):
                continue  # a key that is not a scalar is left to the base loader
            line = key_node.start_mark.line + 1
            if key in seen:
                raise _DuplicateKey(None, None, f"key {key!r} given twice (lines "
                                    f"{seen[key]} and {line})", key_node.start_mark)
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
    |\.[0-9_]+(?:[eE][-+][0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""", re.X),
    list("-+0123456789."),
)


def parse_yaml(text: str):
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass

# What a parser's context means to someone writing the file: the construct left open.
_OPENED = {"while parsing a flow mapping": "the '{' opened",
           "while parsing a flow sequence": "the '[' opened",
           "while scanning a quoted scalar": "the quote opened",
           "while parsing a block mapping": "the mapping started",
           "while parsing a block collection": "the list started"}


def yaml_problem(exc: yaml.YAMLError) -> str:
    """What is wrong, in a line: the parser's problem, the construct it was inside and where
    that began (an unclosed bracket is found only where the parse fails, often far below)."""
    problem = getattr(exc, "problem", None) or "cannot be parsed"
    if "'\\t'" in problem:  # the scanner names the character it met
        return "a tab character; YAML indents with spaces only"
    context, mark = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    opened = _OPENED.get(context or "")
    if opened and mark is not None:
        hint = ""
        if "flow" in (context or "") or "quoted" in (context or ""):
            hint = "; is it closed?"
        return f"{problem} (inside {opened} at line {mark.line + 1}, column {mark.column + 1}{hint})"
    if problem == "mapping values are not allowed here":
        return ("a 'key: value' where a value was expected (a missing space after a colon, "
                "an indentation that does not match the lines above, or a value to quote)")
    return problem


INHERIT_KEYS = ("extends", "bases")

Origins = dict[str, str]


def read_yaml_mapping(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise ConfigError("file not found", file=str(path))
    if not path.is_file():
        raise ConfigError("expected a YAML file, found a directory", file=str(path))
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError("not a YAML file (not UTF-8 text)", file=str(path)) from None
    # A copy: callers take keys out of what they read (``extends``).
    return copy.deepcopy(_parsed_mapping(str(path), text))


@functools.lru_cache(maxsize=512)
def _parsed_mapping(path: str, text: str) -> dict[str, Any]:
    """The mapping a YAML file's ``text`` holds, memoised by its text (a search prices
    thousands of candidates, each resolving the same catalog entries; reading a file is
    cheap, parsing it is not). Errors are raised, never cached."""
    try:
        data = parse_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"not valid YAML{where}: {yaml_problem(exc)}", file=path) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"expected a mapping at the top level, found {type(data).__name__}", file=path
        )
    return data


def record_origins(data: Any, prefix: str, file: str, origins: Origins) -> None:
    if isinstance(data, dict):
        for key, value in data.items():
            dotted = f"{prefix}.{key}" if prefix else str(key)
            origins[dotted] = file
            record_origins(value, dotted, file, origins)


def deep_merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _parents(data: dict[str, Any], path: Path) -> list[Path]:
    found = [k for k in INHERIT_KEYS if k in data]
    if len(found) > 1:
        raise ConfigError("use either 'extends' or 'bases', not both", file=str(path), key=found[1])
    if not found:
        return []
    key = found[0]
    raw = data.pop(key)
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or not all(isinstance(p, str) for p in raw):
        raise ConfigError("expected a path or a list of paths", file=str(path), key=key)
    return [(path.parent / p).resolve() for p in raw]


def load_tree(path: Path, _stack: tuple[Path, ...] = ()) -> tuple[dict[str, Any], Origins]:
    """Load ``path`` with everything it extends; return the merged mapping and key origins."""
    path = Path(path).resolve()
    if path in _stack:
        chain = " -> ".join(p.name for p in (*_stack, path))
        raise ConfigError(f"cyclic extends: {chain}", file=str(_stack[-1]), key="extends")
    data = read_yaml_mapping(path)
    merged: dict[str, Any] = {}
    origins: Origins = {}
    for parent in _parents(data, path):
        if not parent.exists():
            raise ConfigError(f"extended file not found: {parent}", file=str(path), key="extends")
        pdata, porigins = load_tree(parent, (*_stack, path))
        merged = deep_merge(merged, pdata)
        origins.update(porigins)
    merged = deep_merge(merged, data)
    record_origins(data, "", str(path), origins)
    return merged, origins
