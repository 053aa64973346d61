"""inferasim's own agentic session format (``workload.format: sessions``): JSONL, one session
tree per line. docs/agentic.md is the reference; in short::

    {"session": "s-0001", "block_tokens": 64, "prefixes": {"root": 16960, "sub": 8384},
     "turns": [
       {"in": 24500, "out": 180, "prefix": "root"},
       {"in": 26100, "out": 240, "think": 9.0, "gap": 8.6},
       {"id": "a1", "stream": "agent-1", "parent": 1, "in": 11700, "out": 205,
        "prefix": "sub", "gap": 0.7},
       {"stream": "agent-1", "in": 13500, "out": 219, "think": 4.0},
       {"in": 31000, "out": 300, "think": 40.0, "gap": 12.0, "joins": ["agent-1"]}]}

Turns belong to streams (``stream``, default ``main``, the root conversation) and run in file
order within their stream. A non-main stream starts when its ``parent`` turn (an id of an
earlier turn; default ids are positions) completes -- without one it is an orphan and is
dropped. A turn with ``joins`` waits until those streams have drained; a stream nobody joins
runs in the background. Prompt blocks come from ``hash_ids`` (explicit ids), ``hash_ranges``
(runs ``[first, count]``) or, when neither is given, token counts: the turn keeps ``keep``
tokens of its stream's previous prompt (default: all of it when the prompt grew, none when it
shrank -- a compaction) and the rest are new blocks; a stream's first turn may open with a
named ``prefix`` shared by every stream that names it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from inferasim.workload.lanes import CorpusBuilder, TreeCorpus
from inferasim.workload.text_lines import numbered_lines

MAIN = "main"
DEFAULT_BLOCK_TOKENS = 64
# Explicit ids live in [0, 2**31); ids made up from token counts in [2**31, 2**32).
GENERATED_BASE = 1 << 31


class SessionFormatError(ValueError):
    def __init__(self, where: str, message: str):
        super().__init__(f"{where}: {message}")


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    for n, line in numbered_lines(path, "a sessions JSONL trace"):
        line = line.strip()
        if line and not line.startswith("#"):
            yield n, line


def _num(turn: dict, key: str, where: str, default=None, *, integer: bool = False):
    value = turn.get(key, default)
    if value is None:
        if default is None:
            raise SessionFormatError(where, f"missing {key!r}")
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SessionFormatError(where, f"{key!r} must be a number, got {value!r}")
    if value < 0:
        raise SessionFormatError(where, f"{key!r} must not be negative, got {value!r}")
    return int(value) if integer else float(value)


class _KeyMaker:
    """Block ids of one session for turns given as token counts."""

    def __init__(self, bt: int, prefixes: dict[str, int]):
        self.bt = bt
        self.next = GENERATED_BASE
        self.prefixes = {name: self.fresh(int(tokens) // bt) for name, tokens in prefixes.items()}

    def fresh(self, n: int) -> np.ndarray:
        out = np.arange(self.next, self.next + n, dtype=np.int64)
        self.next += n
        if self.next >= 1 << 32:
            raise ValueError("session too large for its block-id space")
        return out


def _explicit_keys(turn: dict, where: str) -> np.ndarray | None:
    if "hash_ids" in turn:
        keys = np.asarray(turn["hash_ids"], dtype=np.int64)
    elif "hash_ranges" in turn:
        runs = turn["hash_ranges"]
        try:
            keys = np.concatenate([np.arange(int(a), int(a) + int(n), dtype=np.int64)
                                   for a, n in runs]) if runs else np.empty(0, np.int64)
        except (TypeError, ValueError) as exc:
            raise SessionFormatError(where, "hash_ranges must be a list of [first, count]") \
                from exc
    else:
        return None
    if keys.size and (keys.min() < 0 or keys.max() >= GENERATED_BASE):
        raise SessionFormatError(where, "hash ids must lie in [0, 2**31)")
    return keys


def add_session(b: CorpusBuilder, session: dict, where: str, counts: dict[str, int]) -> bool:
    """Append one session (a parsed JSON line) as a tree; False if it has no main turns."""
    if not isinstance(session, dict) or not isinstance(session.get("turns"), list):
        raise SessionFormatError(where, "a session is an object with a 'turns' list")
    bt = _num(session, "block_tokens", where, DEFAULT_BLOCK_TOKENS, integer=True)
    if bt <= 0:
        raise SessionFormatError(where, "block_tokens must be positive")
    prefixes = session.get("prefixes") or {}
    if not isinstance(prefixes, dict):
        raise SessionFormatError(where, "prefixes must map names to token counts")
    keymaker = _KeyMaker(bt, prefixes)

    # Pass 1: ids, streams in order of appearance, parents and joins.
    turns = session["turns"]
    ids: dict[str, int] = {}
    stream_of: list[str] = []
    order: list[str] = []
    members: dict[str, list[int]] = {}
    parent_of: dict[str, int] = {}
    for pos, turn in enumerate(turns):
        tw = f"{where}: turn {pos}"
        if not isinstance(turn, dict):
            raise SessionFormatError(tw, "a turn is an object")
        tid = str(turn.get("id", pos))
        if tid in ids:
            raise SessionFormatError(tw, f"duplicate turn id {tid!r}")
        ids[tid] = pos
        stream = str(turn.get("stream", MAIN))
        stream_of.append(stream)
        if stream not in members:
            members[stream] = []
            order.append(stream)
            if "parent" in turn and stream != MAIN:
                ref = str(turn["parent"])
                if ref not in ids:
                    raise SessionFormatError(tw, f"parent {ref!r} is not an earlier turn")
                parent_of[stream] = ids[ref]
        elif "parent" in turn:
            raise SessionFormatError(tw, "only a stream's first turn names its parent")
        members[stream].append(pos)
    if MAIN not in members:
        counts["empty_sessions"] += 1
        return False
    # Orphans (no parent), and streams whose parent is itself dropped, are left out.
    live = [MAIN]
    for stream in order:
        if stream == MAIN:
            continue
        parent = parent_of.get(stream)
        if parent is None or stream_of[parent] not in live:
            counts["orphans"] += 1
            continue
        live.append(stream)
    joined_by: dict[str, int] = {}
    for pos, turn in enumerate(turns):
        if stream_of[pos] not in live:
            continue
        for name in turn.get("joins") or ():
            name = str(name)
            tw = f"{where}: turn {pos}"
            if name not in members:
                raise SessionFormatError(tw, f"joins unknown stream {name!r}")
            if name not in live:
                continue  # an orphan: nothing to wait for
            if name == stream_of[pos] or name == MAIN:
                raise SessionFormatError(tw, f"a turn cannot join {name!r}")
            if parent_of[name] >= pos:
                raise SessionFormatError(tw, f"joins {name!r} before it is spawned")
            if name in joined_by:
                raise SessionFormatError(tw, f"stream {name!r} is joined twice")
            joined_by[name] = pos

    # Pass 2: streams in order, turns in file order within each.
    b.begin_tree(str(session.get("session", where)), bt)
    global_of: dict[int, int] = {}
    pending_joins: list[tuple[int, int]] = []   # (stream index, joining file position)
    for stream in live:
        parent = -1 if stream == MAIN else global_of[parent_of[stream]]
        s_idx = b.begin_stream(parent=parent)
        if stream in joined_by:
            pending_joins.append((s_idx, joined_by[stream]))
        prev_keys: np.ndarray | None = None
        prev_in = 0
        for pos in members[stream]:
            turn = turns[pos]
            tw = f"{where}: turn {pos}"
            prompt = _num(turn, "in", tw, integer=True)
            output = _num(turn, "out", tw, integer=True)
            think = _num(turn, "think", tw, 0.0)
            gap = _num(turn, "gap", tw, think)
            api = _num(turn, "api", tw, math.nan) if turn.get("api") is not None else math.nan
            t = _num(turn, "t", tw, math.nan) if turn.get("t") is not None else math.nan
            n_blocks = prompt // bt
            keys = _explicit_keys(turn, tw)
            if keys is None:
                if prev_keys is None:
                    name = turn.get("prefix")
                    if name is not None and str(name) not in keymaker.prefixes:
                        raise SessionFormatError(tw, f"unknown prefix {name!r}")
                    head = keymaker.prefixes[str(name)] if name is not None else prev_keys
                    head = head[:n_blocks] if head is not None else np.empty(0, np.int64)
                else:
                    keep = turn.get("keep")
                    keep = (prev_in if prompt >= prev_in else 0) if keep is None \
                        else _num(turn, "keep", tw, integer=True)
                    head = prev_keys[:min(keep // bt, n_blocks, prev_keys.size)]
                keys = np.concatenate((head, keymaker.fresh(n_blocks - head.size)))
            elif keys.size > n_blocks:
                raise SessionFormatError(tw, f"{keys.size} hash ids for {prompt} tokens "
                                             f"(at most {n_blocks} full blocks of {bt})")
            global_of[pos] = b.add_turn(prompt, output, keys, think=think, gap=gap, api=api, t=t)
            prev_keys, prev_in = keys, prompt
    for s_idx, pos in pending_joins:
        b.set_join(s_idx, global_of[pos])
    counts["sessions"] += 1
    return True


def parse_sessions(path: Path) -> TreeCorpus:
    b = CorpusBuilder()
    counts = {"sessions": 0, "empty_sessions": 0, "orphans": 0}
    for n, line in _lines(path):
        where = f"{path.name}:{n}"
        try:
            session = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SessionFormatError(where, f"not JSON ({exc.msg})") from exc
        add_session(b, session, where, counts)
    corpus = b.build()
    corpus.meta = {k: float(v) for k, v in counts.items()}
    if corpus.n_trees == 0:
        raise SessionFormatError(str(path), "no sessions")
    return corpus


def load_sessions(path: str | Path) -> TreeCorpus:
    """Small files are parsed directly; large ones go through the parsed-corpus cache."""
    path = Path(path)
    if path.stat().st_size < 8 << 20:
        return parse_sessions(path)
    from inferasim.workload.agentx import cached_corpus

    return cached_corpus(path, "sessions", parse_sessions)


def write_sessions(path: str | Path, sessions: list[dict]) -> None:
    """One compact JSON object per line, written whole or not at all."""
    from inferasim.report.atomic import write_text_atomic

    write_text_atomic(path, "".join(json.dumps(session, separators=(",", ":")) + "\n"
                                    for session in sessions))
