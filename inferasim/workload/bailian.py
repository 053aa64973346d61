"""Alibaba Bailian traces (``workload.format: bailian``, qwen-bailian-usagetraces-anon, as
AIPerf's ``bailian_trace`` reads them): JSONL rows of ``chat_id``, ``parent_chat_id`` (-1 for
the first turn), ``timestamp`` (seconds), ``input_length``, ``output_length``, ``turn``,
``type`` and ``hash_ids`` — one id per 16-token block, each row's ids covering its whole
context (a follow-up repeats its conversation's ids, so it shares that prefix).

Rows linked through ``parent_chat_id`` are one conversation and replay as a session: each turn
at its recorded time (divided by ``rate_scale``), never before the turn it follows has
finished. A parent the file does not hold (a cut trace) leaves its child a first turn.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from inferasim.config.errors import ConfigError
from inferasim.config.scenario import Scenario
from inferasim.workload.stamped import StampedSource, StampedTrace, build_trace, jsonl_records
from inferasim.workload.trace_path import resolve_trace_path

BAILIAN_BLOCK_TOKENS = 16


def load_bailian(path: Path) -> StampedTrace:
    times, ins, outs, ids, chats, parents = [], [], [], [], [], []
    for lineno, row in jsonl_records(path, "Bailian"):
        try:
            chat = int(row["chat_id"])
            parent = int(row.get("parent_chat_id", -1))
            stamp = float(row["timestamp"])
            prompt, output = int(row["input_length"]), int(row["output_length"])
            keys = np.asarray(row.get("hash_ids") or [], dtype=np.int64).reshape(-1)
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"line {lineno}: not a Bailian record ({exc}); expected "
                              "chat_id, parent_chat_id, timestamp (s), input_length, "
                              "output_length, hash_ids", file=str(path)) from None
        if not math.isfinite(stamp) or stamp < 0 or prompt < 1 or output < 0:
            raise ConfigError(f"line {lineno}: expected a finite timestamp >= 0, "
                              f"input_length >= 1 and output_length >= 0, got {stamp:g}, "
                              f"{prompt}, {output}", file=str(path))
        times.append(stamp)
        ins.append(prompt)
        outs.append(output)
        ids.append(keys)
        chats.append(chat)
        parents.append(parent)
    if not ins:
        raise ConfigError("no requests in trace", file=str(path))
    row_of: dict[int, int] = {}
    for i, chat in enumerate(chats):
        if chat in row_of:
            raise ConfigError(f"record {i + 1}: chat_id {chat} appears twice (first in record "
                              f"{row_of[chat] + 1}); expected one row per chat_id",
                              file=str(path))
        row_of[chat] = i
    parent = [row_of.get(p, -1) if p >= 0 else -1 for p in parents]
    _check_acyclic(parent, chats, path)
    delays = [math.nan] * len(ins)
    return build_trace(times, delays, ins, outs, ids, parent, BAILIAN_BLOCK_TOKENS, True,
                       source=str(path))


def _check_acyclic(parent: list[int], chats: list[int], path: Path) -> None:
    state = [0] * len(parent)  # 0 unseen, 1 on the walk, 2 done
    for start in range(len(parent)):
        walk, i = [], start
        while i >= 0 and state[i] == 0:
            state[i] = 1
            walk.append(i)
            i = parent[i]
        if i >= 0 and state[i] == 1:
            raise ConfigError(f"chat_id {chats[i]}: its parent_chat_id chain loops back to it",
                              file=str(path))
        for j in walk:
            state[j] = 2


def bailian_source(scenario: Scenario, rng: np.random.Generator) -> StampedSource:
    wl = scenario.workload
    trace = load_bailian(resolve_trace_path(scenario))
    return StampedSource(trace, wl.rate_scale, wl.duration_s, True, wl.warmup_s)
