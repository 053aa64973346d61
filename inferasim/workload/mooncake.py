"""Mooncake FAST'25 traces (``workload.format: mooncake``): JSONL of timestamp (ms), input and
output lengths and ``hash_ids`` — one id per 512-token block, a shared leading run of ids
being a reusable prefix.

Replay modes:
- open loop (default): every request at its recorded timestamp divided by ``rate_scale``;
- ``mooncake_sessions: true``: the implicit follow-up turns (a request extending an earlier
  request's full-block prefix of at least two blocks) become sessions; a turn is sent at its
  recorded time but never before the previous turn of its session has finished.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import attrs
import numpy as np

from inferasim.config.errors import ConfigError
from inferasim.config.scenario import Scenario
from inferasim.workload.request import Arrival, RequestSpec
from inferasim.workload.trace_path import resolve_trace_path

MOONCAKE_BLOCK_TOKENS = 512
MIN_FOLLOWUP_BLOCKS = 2


@attrs.frozen
class MooncakeTrace:
    times_s: np.ndarray        # arrival, seconds from trace start
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    hash_ids: list[np.ndarray]  # all ids of each request (the last block may be partial)
    parent: np.ndarray         # index of the request each one extends, or -1

    def __len__(self) -> int:
        return int(self.times_s.size)

    def prompt_keys(self, i: int) -> np.ndarray:
        """Keys of the full blocks only: a partial block is not cacheable."""
        return self.hash_ids[i][: int(self.input_tokens[i]) // MOONCAKE_BLOCK_TOKENS]


def load_mooncake(path: Path) -> MooncakeTrace:
    times, ins, outs, ids = [], [], [], []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                stamp = float(row["timestamp"]) / 1000.0
                prompt, output = int(row["input_length"]), int(row["output_length"])
                keys = np.asarray(row["hash_ids"], dtype=np.int64).reshape(-1)
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise ConfigError(f"line {lineno}: not a Mooncake record ({exc}); expected "
                                  "timestamp, input_length, output_length, hash_ids",
                                  file=str(path)) from None
            if not math.isfinite(stamp) or prompt < 1 or output < 0:
                raise ConfigError(f"line {lineno}: expected a finite timestamp, input_length "
                                  f">= 1 and output_length >= 0, got {stamp * 1000:g}, "
                                  f"{prompt}, {output}", file=str(path))
            times.append(stamp)
            ins.append(prompt)
            outs.append(output)
            ids.append(keys)
    if not times:
        raise ConfigError("no requests in trace", file=str(path))
    order = np.argsort(np.asarray(times), kind="stable")
    times_a = np.asarray(times)[order]
    ins_a, outs_a = np.asarray(ins)[order], np.asarray(outs)[order]
    ids = [ids[i] for i in order]
    return MooncakeTrace(times_a, ins_a, np.maximum(outs_a, 1), ids, _parents(ids, ins_a))


def _parents(ids: list[np.ndarray], inputs: np.ndarray) -> np.ndarray:
    """For each request, the latest earlier request whose full-block prefix it extends."""
    owner: dict[tuple, int] = {}
    parent = np.full(len(ids), -1, dtype=np.int64)
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


def ideal_hit_rate(trace: MooncakeTrace) -> float:
    """Token-weighted prefix reuse with an unbounded cache, from the hash ids alone.

    Counted as the engines count it: only full blocks are cached, and at least one prompt
    token is always computed (a fully cached prompt recomputes its last block)."""
    seen: set[tuple] = set()
    hit_tokens = 0
    for i in range(len(trace)):
        keys = trace.prompt_keys(i)
        cap = (int(trace.input_tokens[i]) - 1) // MOONCAKE_BLOCK_TOKENS
        prefix = tuple(keys.tolist())
        k = 0
        while k < min(len(prefix), cap) and prefix[: k + 1] in seen:
            k += 1
        hit_tokens += k * MOONCAKE_BLOCK_TOKENS
        for j in range(1, len(prefix) + 1):
            seen.add(prefix[:j])
    return hit_tokens / float(trace.input_tokens.sum())


class MooncakeSource:
    block_tokens = MOONCAKE_BLOCK_TOKENS

    def __init__(self, trace: MooncakeTrace, rate_scale: float, duration_s: float | None,
                 sessions: bool, warmup_s: float):
        self.trace = trace
        self.scale = rate_scale
        span = float(trace.times_s[-1]) / rate_scale
        # The whole trace by default: the horizon sits just past the last arrival.
        self.duration_s = (span + 1e-6 - warmup_s) if duration_s is None else duration_s
        self.open_loop = not sessions
        self.driver = sessions

    def _spec(self, i: int) -> RequestSpec:
        t = self.trace
        return RequestSpec(int(t.input_tokens[i]), int(t.output_tokens[i]), t.prompt_keys(i),
                           MOONCAKE_BLOCK_TOKENS, None, i, 0)

    def arrivals(self) -> Iterator[Arrival]:
        for i in range(len(self.trace)):
            yield Arrival(float(self.trace.times_s[i]) / self.scale, self._spec(i))

    def next_session(self):
        raise TypeError("Mooncake replays stamped arrivals, not client sessions")

    def drive(self, env, submit, log, horizon: float) -> None:
        """Paced sessions: each request at its stamp, but after its parent turn has finished."""
        done_events: dict[int, object] = {}

        def one(i: int):
            at = float(self.trace.times_s[i]) / self.scale
            if at > env.now:
                yield env.timeout(at - env.now)
            parent = int(self.trace.parent[i])
            if parent >= 0 and parent in done_events:
                yield done_events[parent]
            req = log.new(self._spec(i))
            done_events[i] = req.done
            submit(req)

        def launcher():
            for i in range(len(self.trace)):
                at = float(self.trace.times_s[i]) / self.scale
                if at >= horizon:
                    return
                if at > env.now:
                    yield env.timeout(at - env.now)
                env.process(one(i))

        env.process(launcher())


def mooncake_source(scenario: Scenario, rng: np.random.Generator) -> MooncakeSource:
    wl = scenario.workload
    if wl.rate_scale <= 0:
        raise ConfigError("expected a positive number", file=scenario.path, key="workload.rate_scale")
    trace = load_mooncake(resolve_trace_path(wl.trace, scenario.path, fmt="mooncake"))
    return MooncakeSource(trace, wl.rate_scale, wl.duration_s, wl.mooncake_sessions, wl.warmup_s)
