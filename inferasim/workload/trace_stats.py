"""``inferasim trace stats``: what a trace holds -- requests, sessions, lengths, think time,
and the prefix reuse an infinite cache would see."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from inferasim.workload.lanes import TreeCorpus
from inferasim.workload.text_lines import open_text

PCTS = (10, 50, 90, 99)
FORMATS = ("agentx", "sessions", "mooncake", "bailian", "azure")


def _dist(values) -> dict[str, float]:
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if not v.size:
        return {"n": 0}
    out: dict[str, float] = {"n": int(v.size), "mean": float(v.mean())}
    for q, x in zip(PCTS, np.percentile(v, PCTS), strict=True):
        out[f"p{q}"] = float(x)
    return out


def ideal_prefix_reuse(corpus: TreeCorpus) -> tuple[int, int]:
    """(hit blocks, all blocks): per tree, the leading blocks of each request already seen
    earlier in the same tree -- the reuse of an infinite cache that each tree has to itself."""
    hit = total = 0
    for tree in range(corpus.n_trees):
        turns = corpus.tree_turns(tree)
        parts = [corpus.turn_keys(j) for j in turns]
        if not parts:
            continue
        allk = np.concatenate(parts)
        if not allk.size:
            continue
        _, inv = np.unique(allk, return_inverse=True)
        seen = np.zeros(int(inv.max()) + 1, dtype=bool)
        pos = 0
        for part in parts:
            idx = inv[pos:pos + part.size]
            pos += part.size
            if not idx.size:
                continue
            miss = np.flatnonzero(~seen[idx])
            hit += int(miss[0]) if miss.size else int(idx.size)
            total += int(idx.size)
            seen[idx] = True
    return hit, total


def corpus_stats(corpus: TreeCorpus) -> dict[str, Any]:
    first_of_stream = np.zeros(corpus.n_turns, dtype=bool)
    first_of_stream[corpus.stream_first] = True
    root_stream = np.zeros(corpus.n_streams, dtype=bool)
    root_stream[corpus.tree_stream] = True
    is_root = root_stream[corpus.turn_stream]
    later = ~first_of_stream
    hit, total = ideal_prefix_reuse(corpus)
    sub = ~root_stream
    span = []
    for tree in range(corpus.n_trees):
        t = corpus.t[corpus.tree_turns(tree)]
        t = t[np.isfinite(t)]
        if t.size:
            span.append(float(t.max() - t.min()))
    out = {
        "requests": corpus.n_turns,
        "sessions": corpus.n_trees,
        "root_requests": int(is_root.sum()),
        "subagent_requests": int((~is_root).sum()),
        "subagents": int(sub.sum()),
        "background_subagents": int((sub & (corpus.join < 0)).sum()),
        "block_tokens": sorted(set(corpus.tree_block.tolist())),
        "requests_per_session": _dist(corpus.tree_nturns),
        "input_tokens": _dist(corpus.prompt),
        "root_input_tokens": _dist(corpus.prompt[is_root]),
        "output_tokens": _dist(corpus.output),
        "think_s": _dist(corpus.think[later & is_root]),
        "gap_s": _dist(corpus.gap[later & is_root]),
        "subagent_think_s": _dist(corpus.think[later & ~is_root]),
        "session_span_s": _dist(span),
        "ideal_prefix_reuse": hit / total if total else 0.0,
        "blocks": int(total),
    }
    for key in ("orphans", "background", "dropped_overlong_trees"):
        if key in corpus.meta:
            out[f"loader_{key}"] = int(corpus.meta[key])
    return out


def stamped_stats(trace) -> dict[str, Any]:
    """A recorded trace's statistics (Mooncake, Bailian). Sessions are the trace's own where it
    names them, else its implicit follow-up chains (a request extending an earlier prefix);
    think time is the recorded delay of turns timed by one."""
    from inferasim.workload.stamped import ideal_hit_rate

    n = len(trace)
    root = np.arange(n)
    for i in range(n):  # a parent comes before its child in the trace's order
        if trace.parent[i] >= 0:
            root[i] = root[int(trace.parent[i])]
    per_session = np.bincount(root, minlength=n)
    stamps = trace.times_s[np.isfinite(trace.times_s)]
    gaps = np.diff(stamps) if stamps.size > 1 else np.empty(0)
    return {
        "requests": n,
        "sessions": int((trace.parent < 0).sum()),
        "block_tokens": [trace.block_tokens],
        "requests_per_session": _dist(per_session[per_session > 0]),
        "input_tokens": _dist(trace.input_tokens),
        "output_tokens": _dist(trace.output_tokens),
        "think_s": _dist(trace.delays_s),
        "interarrival_s": _dist(gaps),
        "span_s": float(trace.order_s[-1] - trace.order_s[0]) if n else 0.0,
        "ideal_prefix_reuse": float(ideal_hit_rate(trace)),
    }


#: What a trace file of any format is named (a folder's files offered in its place).
TRACE_SUFFIXES = (".jsonl.gz", ".json.gz", ".jsonl", ".csv", ".csv.gz")


def detect_format(path: Path) -> str:
    if path.is_dir():
        # a folder is an AgentX corpus (one trace a file); other formats are one file
        files = sorted(path.glob("*.json")) + sorted(path.glob("*.jsonl"))
        if not files:
            traces = sorted(p.name for p in path.iterdir() if p.is_file()
                            and p.name.endswith(TRACE_SUFFIXES))[:3]
            raise ValueError(f"a folder is read as an AgentX corpus of .json or .jsonl traces "
                             f"and {path} holds none" + (f"; give a trace file itself ("
                                                        f"{', '.join(traces)})" if traces else ""))
        try:
            first = detect_format(files[0])
        except ValueError:
            first = "agentx"  # the reader says what is wrong with it
        if first != "agentx":
            raise ValueError(f"a folder is read as an AgentX corpus, and {files[0].name} is a "
                             f"{first} trace: give the file itself")
        return "agentx"
    with open_text(path) as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("TIMESTAMP,"):
                return "azure"  # the CSV's header
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                if path.suffix == ".json":
                    break  # one JSON document over many lines: an AgentX trace
                raise ValueError(f"line {lineno}: not JSON ({exc.msg}), so its format cannot "
                                 "be told") from None
            if isinstance(rec, dict):
                if "chat_id" in rec:
                    return "bailian"
                if "turns" in rec:
                    return "sessions"
                if "requests" in rec:
                    return "agentx"
                if "input_length" in rec or "hash_ids" in rec:
                    return "mooncake"
            break
    if path.suffix == ".json":
        return "agentx"
    raise ValueError(f"cannot tell the format of {path}; pass --format")


def trace_stats(path: str | Path, fmt: str | None = None) -> dict[str, Any]:
    path = Path(path)
    fmt = fmt or detect_format(path)
    if fmt == "mooncake":
        from inferasim.workload.mooncake import load_mooncake

        stats = stamped_stats(load_mooncake(path))
    elif fmt == "bailian":
        from inferasim.workload.bailian import load_bailian

        stats = stamped_stats(load_bailian(path))
    elif fmt == "azure":
        from inferasim.workload.azure import load_azure

        stats = stamped_stats(load_azure(path))
    elif fmt == "agentx":
        from inferasim.workload.agentx import load_agentx

        stats = corpus_stats(load_agentx(path))
    elif fmt == "sessions":
        from inferasim.workload.sessions_format import load_sessions

        stats = corpus_stats(load_sessions(path))
    else:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return {"file": str(path), "format": fmt, **stats}


def format_stats(stats: dict[str, Any]) -> str:
    lines = [f"{stats['file']} ({stats['format']})"]
    scalar_rows = [("requests", "requests"), ("sessions", "sessions"),
                   ("root requests", "root_requests"), ("subagent requests", "subagent_requests"),
                   ("subagents", "subagents"), ("  of which background", "background_subagents"),
                   ("block tokens", "block_tokens"), ("blocks", "blocks")]
    for label, key in scalar_rows:
        if key in stats:
            lines.append(f"{label:<28}{stats[key]}")
    lines.append(f"{'ideal prefix reuse':<28}{stats['ideal_prefix_reuse']:.1%}")
    head = f"{'':<28}{'n':>8}{'mean':>11}" + "".join(f"{'p' + str(q):>11}" for q in PCTS)
    lines.append(head)
    dists = [("requests per session", "requests_per_session"), ("input tokens", "input_tokens"),
             ("root input tokens", "root_input_tokens"), ("output tokens", "output_tokens"),
             ("think time (s)", "think_s"), ("end-to-start gap (s)", "gap_s"),
             ("subagent think (s)", "subagent_think_s"), ("session span (s)", "session_span_s"),
             ("inter-arrival (s)", "interarrival_s")]
    for label, key in dists:
        d = stats.get(key)
        if not d or not d.get("n"):
            continue
        vals = "".join(f"{d['p' + str(q)]:>11.5g}" for q in PCTS)
        lines.append(f"{label:<28}{d['n']:>8}{d['mean']:>11.5g}{vals}")
    for key, value in stats.items():
        if key.startswith("loader_"):
            lines.append(f"{key.removeprefix('loader_').replace('_', ' '):<28}{value}")
    return "\n".join(lines)
