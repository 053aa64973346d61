"""Recorded request traces replayed at their stamps (Mooncake, Bailian): per row the prompt
and output lengths, the prompt's block keys and an arrival time, optionally chained into
sessions in which a turn waits for the one before it.

Replay modes:
- open loop: every row at its recorded time divided by ``rate_scale``;
- paced sessions: a turn is sent at its recorded time but never before the previous turn of
  its session has finished; a turn the trace times by ``delay`` instead is sent that long after
  the previous turn finished (AIPerf's multi-turn Mooncake rows). Every recorded time, stamps
  and delays alike, is divided by ``rate_scale``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import attrs
import numpy as np

from inferasim.config.errors import ConfigError, warn
from inferasim.workload.request import Arrival, RequestSpec
from inferasim.workload.text_lines import numbered_lines


def jsonl_records(path: Path, kind: str) -> Iterator[tuple[int, dict]]:
    """(line number, record) for each non-blank line of a JSONL trace (gzip or not)."""
    for lineno, line in numbered_lines(path, f"a {kind} JSONL trace"):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"line {lineno}: not JSON ({exc.msg}); expected one {kind} "
                              "record per line", file=str(path)) from None
        if not isinstance(row, dict):
            raise ConfigError(f"line {lineno}: expected a {kind} record (a JSON object)",
                              file=str(path))
        yield lineno, row


@attrs.frozen
class StampedTrace:
    times_s: np.ndarray        # recorded arrival, s from trace start; NaN: timed by its delay
    delays_s: np.ndarray       # wait after the previous turn finished; NaN: sent at its stamp
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    hash_ids: list[np.ndarray]  # all ids of each request (the last block may be partial)
    parent: np.ndarray         # index of the turn each one follows, or -1
    # Each row's stamp, or for a turn timed by its delay the previous turn's order time plus
    # the delay (its send time were every turn served at once): rows are kept in this order.
    order_s: np.ndarray
    block_tokens: int
    # The parents are the trace's own sessions (session_id, parent_chat_id), not inferred from
    # shared prefixes: such a trace is replayed as sessions.
    explicit_sessions: bool = False

    def __len__(self) -> int:
        return int(self.input_tokens.size)

    def prompt_keys(self, i: int) -> np.ndarray:
        """Keys of the full blocks only: a partial block is not cacheable."""
        return self.hash_ids[i][: int(self.input_tokens[i]) // self.block_tokens]

    @property
    def span_s(self) -> float:
        return float(self.order_s[-1]) if len(self) else 0.0


def _order_times(times: np.ndarray, delays: np.ndarray, parent: np.ndarray) -> np.ndarray:
    order = np.array(times, dtype=np.float64)
    for i in range(order.size):  # parents come first in a built trace
        if np.isnan(order[i]):
            p = int(parent[i])
            order[i] = (order[p] if p >= 0 else 0.0) + float(delays[i])
    return order


def build_trace(times: Sequence[float], delays: Sequence[float], inputs: Sequence[int],
                outputs: Sequence[int], ids: Sequence[np.ndarray], parent: Sequence[int],
                block_tokens: int, explicit_sessions: bool,
                source: str | None = None) -> StampedTrace:
    """Rows in file order, ``parent`` as file indices (a parent before its child) -> a trace
    in order-time order (ties in file order) with the parents renumbered. Outputs of 0 become
    1: every request returns its first token. Stamps out of file order are warned about
    (naming ``source``): they are replayed in time order, which may not be what was meant."""
    times_a = np.asarray(times, dtype=np.float64)
    _warn_unsorted(times_a, source)
    delays_a = np.asarray(delays, dtype=np.float64)
    parent_a = np.asarray(parent, dtype=np.int64)
    order_times = _order_times(times_a, delays_a, parent_a)
    order = np.argsort(order_times, kind="stable")
    new_index = np.empty_like(order)
    new_index[order] = np.arange(order.size)
    par = parent_a[order]
    par = np.where(par >= 0, new_index[np.maximum(par, 0)], -1)
    return StampedTrace(times_a[order], delays_a[order], np.asarray(inputs)[order],
                        np.maximum(np.asarray(outputs)[order], 1), [ids[i] for i in order],
                        par, order_times[order], block_tokens, explicit_sessions)


def _warn_unsorted(times: np.ndarray, source: str | None) -> None:
    stamped = np.flatnonzero(~np.isnan(times))  # rows timed by a delay carry no stamp
    stamps = times[stamped]
    back = np.flatnonzero(np.diff(stamps) < 0)
    if back.size:
        i, j = int(stamped[back[0]]), int(stamped[back[0] + 1])
        warn(f"timestamps are not sorted: record {j + 1} ({times[j]:g} s) comes after record "
             f"{i + 1} ({times[i]:g} s), {back.size} such step(s) back in all; replayed in "
             "timestamp order", file=source)


def ideal_hit_rate(trace: StampedTrace) -> float:
    """Token-weighted prefix reuse with an unbounded cache, from the hash ids alone.

    Counted as the engines count it: only full blocks are cached, and at least one prompt
    token is always computed (a fully cached prompt recomputes its last block)."""
    seen: set[tuple] = set()
    hit_tokens = 0
    bt = trace.block_tokens
    for i in range(len(trace)):
        keys = trace.prompt_keys(i)
        cap = (int(trace.input_tokens[i]) - 1) // bt
        prefix = tuple(keys.tolist())
        k = 0
        while k < min(len(prefix), cap) and prefix[: k + 1] in seen:
            k += 1
        hit_tokens += k * bt
        for j in range(1, len(prefix) + 1):
            seen.add(prefix[:j])
    return hit_tokens / float(trace.input_tokens.sum())


class StampedSource:
    def __init__(self, trace: StampedTrace, rate_scale: float, duration_s: float | None,
                 sessions: bool, warmup_s: float):
        self.trace = trace
        self.block_tokens = trace.block_tokens
        self.scale = rate_scale
        # The whole trace by default: the horizon sits just past the last arrival (turns timed
        # by a delay counted as if every turn before them were served at once).
        span = trace.span_s / rate_scale
        self.duration_s = (span + 1e-6 - warmup_s) if duration_s is None else duration_s
        self.warmup_s = warmup_s
        self.open_loop = not sessions
        self.driver = sessions

    def _spec(self, i: int) -> RequestSpec:
        t = self.trace
        out = int(t.output_tokens[i])
        # AIPerf's trace replay sends the recorded output length as max_tokens
        return RequestSpec(int(t.input_tokens[i]), out, t.prompt_keys(i), t.block_tokens, None,
                           i, 0, max_tokens=out)

    def sent(self) -> int:
        """The arrivals the replay sends: those before its horizon (warm-up and duration)."""
        horizon = (self.warmup_s + self.duration_s) * self.scale
        return int(np.count_nonzero(self.trace.order_s < horizon))

    def arrivals(self) -> Iterator[Arrival]:
        order = self.trace.order_s
        for i in range(len(self.trace)):
            yield Arrival(float(order[i]) / self.scale, self._spec(i))

    def next_session(self):
        raise TypeError("a recorded trace replays stamped arrivals, not client sessions")

    def drive(self, env, submit, log, horizon: float) -> None:
        """Paced sessions: each turn at its stamp but after the previous turn of its session has
        finished; a turn timed by its delay, that long after the previous one finished."""
        t = self.trace
        finished: dict[int, object] = {}   # row -> event fired when its request finishes
        delayed_children: dict[int, list[int]] = {}
        for i in range(len(t)):
            if np.isnan(t.times_s[i]) and t.parent[i] >= 0:
                delayed_children.setdefault(int(t.parent[i]), []).append(i)
        # only a turn another follows is waited on
        followed = set(int(p) for p in t.parent if p >= 0)

        def finished_event(i: int):
            if i not in finished:
                finished[i] = env.event()
            return finished[i]

        def send(i: int):
            if log.full:
                return
            req = log.new(self._spec(i))
            submit(req)
            if i not in followed:
                return
            yield req.done
            finished_event(i).succeed()
            for c in delayed_children.get(i, ()):
                at = env.now + float(t.delays_s[c]) / self.scale
                if at < horizon:
                    env.process(after_delay(c, at))

        def after_delay(i: int, at: float):
            if at > env.now:
                yield env.timeout(at - env.now)
            yield from send(i)

        def stamped(i: int):
            parent = int(t.parent[i])
            if parent >= 0:
                yield finished_event(parent)
            yield from send(i)

        def launcher():
            for i in range(len(t)):
                if np.isnan(t.times_s[i]):
                    continue  # sent by its parent's finish
                at = float(t.times_s[i]) / self.scale
                if at >= horizon:
                    return
                if at > env.now:
                    yield env.timeout(at - env.now)
                env.process(stamped(i))

        env.process(launcher())
