"""Mooncake FAST'25 traces (``workload.format: mooncake``): JSONL of timestamp (ms), input and
output lengths and ``hash_ids`` — one id per 512-token block, a shared leading run of ids
being a reusable prefix. AIPerf's extensions of the format are read too: ``session_id`` chains
rows into multi-turn sessions (file order), a later turn may be timed by ``delay`` (ms after
the previous turn finished) instead of a timestamp, and rows without ``hash_ids`` share no
prefix.

Replay modes (``inferasim.workload.stamped``):
- open loop (default): every request at its recorded timestamp divided by ``rate_scale``;
- sessions: a trace with ``session_id`` is replayed as its sessions; with
  ``mooncake_sessions: true`` a trace without them replays its implicit follow-up turns (a
  request extending an earlier request's full-block prefix of at least two blocks) as
  sessions. A turn is sent at its recorded time but never before the previous turn of its
  session has finished.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from inferasim.config.errors import ConfigError
from inferasim.config.scenario import Scenario
from inferasim.workload.stamped import StampedSource, StampedTrace, build_trace, jsonl_records
from inferasim.workload.trace_path import resolve_trace_path

MOONCAKE_BLOCK_TOKENS = 512
MIN_FOLLOWUP_BLOCKS = 2
# Keys of rows without hash_ids: negative, so they meet no recorded id and no other row.
_UNKEYED_STRIDE = 1 << 32


def _number(row: dict, key: str, lineno: int, path: Path) -> float | None:
    value = row.get(key)
    if value is None:
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise ConfigError(f"line {lineno}: {key} must be a finite number >= 0, got "
                          f"{row.get(key)!r}", file=str(path))
    return value


def _whole(row: dict, key: str) -> int:
    """A token count: a whole number (100.5 or true is not one; int() would take either)."""
    value = row[key]
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"{key} must be a whole number, got {value!r}")
    number = float(value)
    if not number.is_integer():
        raise ValueError(f"{key} must be a whole number, got {value!r}")
    return int(number)


def load_mooncake(path: Path, implicit_turns: bool = True) -> StampedTrace:
    """The trace in stamp order. ``implicit_turns``: without sessions of its own, link each
    request to the earlier one it extends (a replay as sessions, the trace statistics); an
    open-loop replay reads no links, and finding them costs as much as parsing the file."""
    times, delays, ins, outs, ids, sessions = [], [], [], [], [], []
    for lineno, row in jsonl_records(path, "Mooncake"):
        try:
            prompt, output = _whole(row, "input_length"), _whole(row, "output_length")
            if "hash_ids" in row and row["hash_ids"] is not None:
                keys = np.asarray(row["hash_ids"], dtype=np.int64).reshape(-1)
            else:
                n = -(-prompt // MOONCAKE_BLOCK_TOKENS)
                keys = -(len(ins) + 1) * _UNKEYED_STRIDE - np.arange(n, dtype=np.int64)
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"line {lineno}: not a Mooncake record ({exc}); expected "
                              "timestamp (or delay), input_length, output_length and "
                              "optionally hash_ids, session_id", file=str(path)) from None
        stamp = _number(row, "timestamp", lineno, path)
        delay = _number(row, "delay", lineno, path)
        session = row.get("session_id")
        if prompt < 1 or output < 0:
            raise ConfigError(f"line {lineno}: expected input_length >= 1 and "
                              f"output_length >= 0, got {prompt}, {output}", file=str(path))
        if stamp is not None and delay is not None:
            raise ConfigError(f"line {lineno}: timestamp and delay cannot both be set",
                              file=str(path))
        if stamp is None and (delay is None or session is None):
            raise ConfigError(f"line {lineno}: expected a timestamp (ms); only a later turn "
                              "of a session (session_id) may give a delay instead",
                              file=str(path))
        times.append(math.nan if stamp is None else stamp / 1000.0)
        delays.append(math.nan if delay is None else delay / 1000.0)
        ins.append(prompt)
        outs.append(output)
        ids.append(keys)
        sessions.append(None if session is None else str(session))
    if not ins:
        raise ConfigError("no requests in trace", file=str(path))
    explicit = any(s is not None for s in sessions)
    if explicit:
        parent = _session_parents(sessions, times, path)
    elif not implicit_turns:
        parent = [-1] * len(ins)
    else:
        # implicit turns follow the earlier request they extend: read in stamp order
        order = np.argsort(np.asarray(times), kind="stable")
        by_time = _parents([ids[i] for i in order], np.asarray(ins)[order])
        parent = [-1] * len(ins)
        for k, p in enumerate(by_time):
            parent[int(order[k])] = int(order[p]) if p >= 0 else -1
    return build_trace(times, delays, ins, outs, ids, parent, MOONCAKE_BLOCK_TOKENS, explicit,
                       source=str(path))


def _session_parents(sessions: list[str | None], times: list[float], path: Path) -> list[int]:
    """Each row's previous row of its session (file order), -1 for a first turn; a row
    without a session is one of its own."""
    last: dict[str, int] = {}
    parent = []
    for i, s in enumerate(sessions):
        p = last.get(s, -1) if s is not None else -1
        if p < 0 and math.isnan(times[i]):
            raise ConfigError(f"record {i + 1}: the first turn of session {s!r} gives a delay "
                              "but no timestamp; expected a timestamp (ms)", file=str(path))
        parent.append(p)
        if s is not None:
            last[s] = i
    return parent


def _parents(ids: list[np.ndarray], inputs: np.ndarray) -> list[int]:
    """For each request (in stamp order), the latest earlier request whose full-block prefix
    it extends: the implicit follow-up turns of a trace without sessions."""
    owner: dict[tuple, int] = {}
    parent = [-1] * len(ids)
    for i, h in enumerate(ids):
        full = int(inputs[i]) // MOONCAKE_BLOCK_TOKENS
        # The longest earlier full prefix (>= 2 blocks) this request starts with.
        key_all = tuple(h.tolist())
        for k in range(len(key_all), MIN_FOLLOWUP_BLOCKS - 1, -1):
            j = owner.get(key_all[:k])
            if j is not None:
                parent[i] = j
                break
        if full >= MIN_FOLLOWUP_BLOCKS:
            owner[key_all[:full]] = i
    return parent


def mooncake_source(scenario: Scenario, rng: np.random.Generator) -> StampedSource:
    wl = scenario.workload
    if wl.rate_scale <= 0:
        raise ConfigError("expected a positive number", file=scenario.path, key="workload.rate_scale")
    trace = load_mooncake(resolve_trace_path(scenario),
                          implicit_turns=wl.mooncake_sessions)
    sessions = wl.mooncake_sessions or trace.explicit_sessions
    return StampedSource(trace, wl.rate_scale, wl.duration_s, sessions, wl.warmup_s)
