"""Helpers shared by the importers: reading files into ConfigErrors, numbers, hints."""

from __future__ import annotations

import csv
import difflib
import io
import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import pandas as pd

from inferasim.anchors import normalise as nz
from inferasim.anchors.record import AnchorRecord, Provenance, Regime
from inferasim.anchors.regime import settle
from inferasim.config.errors import ConfigError
from inferasim.config.paths import read_text
from inferasim.config.typed import out_of_bounds

_REGIME_FIELDS = {f.name: f for f in attrs.fields(Regime)}
_PROVENANCE_KEYS = ("image", "engine_version", "run_url", "url", "date", "tool")
HINT_KEYS = tuple(_REGIME_FIELDS) + _PROVENANCE_KEYS


def need_file(path: str | Path) -> Path:
    path = Path(path)
    if not path.exists():
        raise ConfigError("file not found", file=str(path))
    if not path.is_file():
        raise ConfigError("expected a file, found a directory", file=str(path))
    return path


def read_json(path: str | Path, expected: str = "a JSON file") -> Any:
    """The file's JSON; ``expected`` names the file the importer reads (the tool and the
    option that writes it), for the error a file of another kind raises."""
    path = need_file(path)
    text = read_text(path, expected)
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"not valid JSON ({exc}); expected {expected}{_looks_like(text)}",
                          file=str(path)) from None


def _looks_like(text: str) -> str:
    """What a file that is not JSON seems to be, from its first line: a hint at a mix-up."""
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    if not first:
        return "; the file is empty"
    if first.startswith("{") and len(text.splitlines()) > 1:
        return "; it looks like JSON lines (one object per line), as sglang-bench writes"
    if "," in first and not first.startswith(("{", "[")):
        shown = first if len(first) <= 60 else first[:57] + "..."
        return f"; it looks like CSV (first line: {shown!r})"
    return ""


def read_csv_whole(path: Path) -> pd.DataFrame:
    """A results CSV as a frame, every row whole: a row with fewer fields than the header
    (a file cut short mid-row) would otherwise import with its missing figures as NaN."""
    text = read_text(path, "a CSV file")
    rows = csv.reader(io.StringIO(text))
    header = next(rows, None)
    if not header:
        raise ConfigError("empty CSV file (no header row)", file=str(path))
    for row in rows:
        if row and len(row) != len(header):
            raise ConfigError(f"line {rows.line_num}: {len(row)} fields under a header of "
                              f"{len(header)} (is the file cut short?)", file=str(path))
    try:
        return pd.read_csv(io.StringIO(text))
    except (ValueError, pd.errors.ParserError) as exc:
        raise ConfigError(f"not a readable CSV ({exc})".splitlines()[0], file=str(path)) from None


def num(value: Any) -> float | None:
    """A finite float or None (NaN, empty, non-numeric -> None)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def integer(value: Any) -> int | None:
    out = num(value)
    return int(round(out)) if out is not None else None


def ms(value: Any) -> float | None:
    out = num(value)
    return out / 1000.0 if out is not None else None


def positive(value: float | None) -> float | None:
    return value if value is not None and value > 0 else None


def per_gpu(value: float | None, gpus: int | None) -> float | None:
    return value / gpus if value is not None and gpus else None


def iso_date(text: Any) -> str | None:
    """``20260213-141321`` / ``2026-07-09T10:23:29`` / ``2026-06-11`` -> ``2026-02-13``."""
    if text is None:
        return None
    s = str(text).strip()
    m = re.match(r"(\d{4})-?(\d{2})-?(\d{2})", s)
    return f"{m.group(1)}-{m.group(2)}-{m.group(3)}" if m else None


def truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    if value is None:
        return False
    if isinstance(value, float) and math.isnan(value):
        return False
    return bool(value)


def check_hints(hints: Mapping[str, Any] | None) -> dict[str, Any]:
    """Validate ``--meta KEY=VALUE`` hints: regime fields or provenance keys, typed."""
    out: dict[str, Any] = {}
    for key, value in (hints or {}).items():
        if key not in HINT_KEYS:
            near = difflib.get_close_matches(key, HINT_KEYS, n=1, cutoff=0.6)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise ConfigError(f"unknown key{hint}; known: {', '.join(HINT_KEYS)}",
                              key=f"--meta {key}")
        field = _REGIME_FIELDS.get(key)
        if field is not None and value is not None and field.type == "int | None":
            as_int = integer(value)
            if as_int is None or str(value).strip() not in (str(as_int), f"{as_int}.0"):
                raise ConfigError(f"expected an integer, got {value!r}", key=f"--meta {key}")
            value = as_int
        elif field is not None and value is not None and key == "acceptance":
            value = num(value)
        wrong = out_of_bounds(field, value) if field is not None else None
        if wrong:
            raise ConfigError(wrong, key=f"--meta {key}")
        _check_name(key, value)
        out[key] = value
    return out


def _check_name(key: str, value: Any) -> None:
    """A GPU part or engine a hint names must be one the normaliser knows: a typo would stamp
    anchors that match no target and are refused for every scenario."""
    if value is None:
        return
    if key == "gpu" and nz.normalise_gpu(str(value)) is None:
        known = sorted(nz.GPU_PARTS)
    elif key == "engine" and nz.normalise_engine(str(value)) not in set(nz.ENGINE_SPELLINGS.values()):
        known = sorted(set(nz.ENGINE_SPELLINGS.values()))
    else:
        return
    near = difflib.get_close_matches(str(value).lower(), known, n=1, cutoff=0.6)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    raise ConfigError(f"unknown {key} {value!r}{hint}; known: {', '.join(known)}",
                      key=f"--meta {key}")


def apply_hints(record: AnchorRecord, hints: Mapping[str, Any], *, file: str) -> AnchorRecord:
    """Fill unknown axes from the user's hints; a hint that contradicts what the file itself
    records is an error. Server args (a launch command) fill what is still unknown after."""
    if not hints:
        return settle(record)
    own = settle(attrs.evolve(record, server_args={}))
    hinted = settle(attrs.evolve(
        own,
        regime=Regime(**{k: v for k, v in hints.items() if k in _REGIME_FIELDS}),
        provenance=Provenance(source=own.provenance.source,
                              **{k: v for k, v in hints.items() if k in _PROVENANCE_KEYS})))
    reg_changes: dict[str, Any] = {}
    prov_changes: dict[str, Any] = {}
    for key in hints:
        if key in _REGIME_FIELDS:
            have, want = getattr(own.regime, key), getattr(hinted.regime, key)
            if want is None:
                continue
            if have is None:
                reg_changes[key] = want
            elif have != want:
                raise ConfigError(f"--meta {key}={hints[key]} contradicts the file, which "
                                  f"records {have}", file=file)
        else:
            have = getattr(own.provenance, key)
            if have is None:
                prov_changes[key] = hints[key]
            elif str(have) != str(hints[key]):
                raise ConfigError(f"--meta {key}={hints[key]} contradicts the file, which "
                                  f"records {have}", file=file)
    merged = attrs.evolve(own, regime=attrs.evolve(own.regime, **reg_changes),
                          provenance=attrs.evolve(own.provenance, **prov_changes),
                          server_args=record.server_args)
    return settle(merged)


def unique_ids(records: list[AnchorRecord]) -> list[AnchorRecord]:
    seen: dict[str, int] = {}
    out = []
    for record in records:
        n = seen.get(record.id, 0)
        seen[record.id] = n + 1
        out.append(record if n == 0 else attrs.evolve(record, id=f"{record.id}-{n + 1}"))
    return out


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")


def regime_from_model_id(model_id: str | None) -> dict[str, Any]:
    return {"model": nz.model_name(model_id), "weight_dtype": nz.weight_dtype_from_model_id(model_id)}
