"""The AgentX corpus (kv-cache-tester "weka" traces) as session trees, and the agentic source.

``workload.format: agentx``, ``workload.trace: PATH`` -- a ``.jsonl``/``.jsonl.gz`` file with
one trace JSON per line, a single trace ``.json``, or a folder of ``trace_*.json`` files.
The parsed form is cached under ``$XDG_CACHE_HOME/inferasim`` (default ``~/.cache/inferasim``)
keyed by the path, size and modification time of the input (one parse kept per input), so
the 31 MB corpus is parsed once (about 30 s) and then loads in well under a second.

How a trace becomes a tree (docs/agentic.md gives the evidence):

* The root stream is the trace's normal/streaming requests in file order.
* A subagent entry's ``t`` is its *completion* time: its start is ``t - duration_ms/1000``
  (which lands 0.1-1 s after the preceding parent request ends, and sibling fan-outs share
  it); its inner requests' ``t`` are relative to that start. An ``async_launched`` entry
  has no duration: its ``t`` is the launch time and it runs in the background.
* A subagent is spawned by the last parent request before it in file order (none: an
  orphan, dropped) and joined by the first parent request after it (none, or an async
  launch: background, not gating).
* Recorded end-to-start gap of a turn: its start minus the latest recorded end of what it
  waits for (previous turn of its stream, the subagents it joins; for a subagent's first
  turn, the parent request's end). ``think`` is the trace's own ``think_time``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from bisect import bisect_left
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from inferasim.config.errors import ConfigError
from inferasim.workload.lanes import CORPUS_VERSION, CorpusBuilder, LaneDriver, TreeCorpus
from inferasim.workload.text_lines import numbered_lines
from inferasim.workload.trace_path import resolve_trace_path

AGENTX_DEFAULT_DURATION_S = 1800.0
DEFAULT_BLOCK_SIZE = 64


# ---------------------------------------------------------------------------------------
# Cache
# ---------------------------------------------------------------------------------------
def cache_dir() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "inferasim"


def _trace_files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(path.glob("trace_*.json"))
        if not files:
            files = sorted(path.glob("*.json"))
        return files
    return [path]


def fingerprint(path: Path, kind: str) -> str:
    h = hashlib.sha1(f"{kind}|v{CORPUS_VERSION}".encode())
    for f in _trace_files(path):
        st = f.stat()
        h.update(f"|{f.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode())
    return h.hexdigest()[:20]


def _cache_stem(path: Path, kind: str) -> str:
    """The cached parses of ``path`` are named ``STEM-FINGERPRINT.npz``: the stem names the
    source (its resolved path), the fingerprint its current contents."""
    return f"{kind}-{hashlib.sha1(str(Path(path).resolve()).encode()).hexdigest()[:10]}"


def cached_corpus(path: Path, kind: str, parse) -> TreeCorpus:
    """Load the parsed corpus from the cache, or parse it and store it. Storing it removes
    the same source's earlier parses: a changed file would otherwise leave one stale copy
    (tens of MB) behind per change."""
    stem = _cache_stem(path, kind)
    target = cache_dir() / f"{stem}-{fingerprint(path, kind)}.npz"
    if target.exists():
        corpus = TreeCorpus.load(target)
        if corpus is not None:
            return corpus
    corpus = parse(path)
    try:
        corpus.save(target)
        for old in target.parent.glob(f"{stem}-*.npz"):
            if old != target and ".tmp" not in old.name:  # another process's write in flight
                old.unlink(missing_ok=True)
    except OSError:
        pass  # a read-only cache only costs the parse next time
    return corpus


# ---------------------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------------------
def iter_trace_dicts(path: Path) -> Iterator[tuple[str, object]]:
    """(where, decoded JSON) of each trace in a .jsonl(.gz) file, a .json file or a folder of
    them; ``where`` names the file (and line) for an error. A record that is not JSON, or a
    compressed file cut short or not compressed, is a ValueError saying where."""
    files = _trace_files(path) if path.is_dir() else [path]
    for f in files:
        if f.name.endswith((".jsonl", ".jsonl.gz")):
            for lineno, line in numbered_lines(f, "AgentX traces, one JSON object a line"):
                line = line.strip()
                if line:
                    yield f"{f}: line {lineno}", _decoded(line, f"{f}: line {lineno}")
        else:
            text = "".join(line for _, line in numbered_lines(f, "an AgentX trace (JSON)"))
            yield str(f), _decoded(text, str(f))


def _decoded(text: str, where: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{where}: not JSON ({exc})") from None


def _f(value, default: float = 0.0) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return default
    return out if math.isfinite(out) else default


def add_trace(b: CorpusBuilder, trace: dict, counts: dict[str, int]) -> bool:
    """Append one AgentX trace as a tree; False if it has no requests."""
    bs = int(trace.get("block_size") or DEFAULT_BLOCK_SIZE)
    reqs = trace.get("requests") or []
    normals = [(i, r) for i, r in enumerate(reqs) if r.get("type") != "subagent"]
    if not normals:
        counts["empty_traces"] += 1
        return False
    outer = [i for i, _ in normals]
    starts = [_f(r.get("t")) for _, r in normals]
    ends = [s + max(0.0, _f(r.get("api_time"))) for s, (_, r) in zip(starts, normals, strict=True)]

    # Subagents: spawn point, join point, recorded start and end.
    subs = []
    joined_end: dict[int, float] = {}
    for i, entry in enumerate(reqs):
        if entry.get("type") != "subagent":
            continue
        counts["subagents"] += 1
        pos = bisect_left(outer, i) - 1           # last parent request before the entry
        if pos < 0:
            counts["orphans"] += 1
            continue
        inner = [r for r in (entry.get("requests") or []) if r.get("type") != "subagent"]
        counts["nested_dropped"] += len(entry.get("requests") or []) - len(inner)
        if not inner:
            counts["empty_subagents"] += 1
            continue
        t = _f(entry.get("t"))
        dur = entry.get("duration_ms")
        gating = dur is not None and _f(dur, -1.0) >= 0 and entry.get("status") != "async_launched"
        start = t - _f(dur) / 1000.0 if gating else t
        rel = _f(inner[0].get("t")) + 1e-6 < start     # inner t relative to the start
        inner_t = [(_f(r.get("t")) + start if rel else _f(r.get("t"))) for r in inner]
        inner_end = max(s + max(0.0, _f(r.get("api_time"))) for s, r in zip(inner_t, inner,
                                                                             strict=True))
        end = t if gating else inner_end
        join = pos + 1 if gating and pos + 1 < len(normals) else -1
        if join < 0:
            counts["background"] += 1
        else:
            joined_end[join] = max(joined_end.get(join, -math.inf), end)
        subs.append((pos, join, start, inner, inner_t))

    b.begin_tree(str(trace.get("id", f"trace_{counts['traces']:04d}")), bs)
    b.begin_stream()
    first_turn = None
    for j, (_, r) in enumerate(normals):
        if j == 0:
            gap = 0.0
        else:
            gap = max(0.0, starts[j] - max(ends[j - 1], joined_end.get(j, -math.inf)))
        turn = b.add_turn(int(r.get("in") or 0), int(r.get("out") or 0),
                          np.asarray(r.get("hash_ids") or (), dtype=np.int64),
                          think=_f(r.get("think_time")), gap=gap, api=_f(r.get("api_time")),
                          t=starts[j])
        if first_turn is None:
            first_turn = turn
    for pos, join, _start, inner, inner_t in subs:
        b.begin_stream(parent=first_turn + pos, join=first_turn + join if join >= 0 else -1)
        prev_end = ends[pos]
        for r, s in zip(inner, inner_t, strict=True):
            b.add_turn(int(r.get("in") or 0), int(r.get("out") or 0),
                       np.asarray(r.get("hash_ids") or (), dtype=np.int64),
                       think=_f(r.get("think_time")), gap=max(0.0, s - prev_end),
                       api=_f(r.get("api_time")), t=s)
            prev_end = s + max(0.0, _f(r.get("api_time")))
    counts["traces"] += 1
    return True


def parse_agentx(path: Path, limit: int | None = None) -> TreeCorpus:
    b = CorpusBuilder()
    counts = {k: 0 for k in ("traces", "empty_traces", "subagents", "orphans", "background",
                             "nested_dropped", "empty_subagents")}
    for where, trace in iter_trace_dicts(path):
        try:
            if not isinstance(trace, dict) or not isinstance(trace.get("requests") or [], list):
                raise TypeError("expected an object whose 'requests' is a list")
            add_trace(b, trace, counts)
        except (TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"{where}: not an AgentX trace ({exc})") from None
        if limit is not None and counts["traces"] >= limit:
            break
    if not counts["traces"]:
        raise ValueError(f"no AgentX trace with requests in {path} (expected .json or .jsonl "
                         "files of objects with a 'requests' list)")
    corpus = b.build()
    corpus.meta = {k: float(v) for k, v in counts.items()}
    return corpus


def load_agentx(path: str | Path, *, use_cache: bool = True) -> TreeCorpus:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(path)
    if not use_cache:
        return parse_agentx(path)
    return cached_corpus(path, "agentx", parse_agentx)


# ---------------------------------------------------------------------------------------
# The workload source
# ---------------------------------------------------------------------------------------
def agentic_trace_path(scenario) -> Path:
    """The scenario's trace (``resolve_trace_path``), or for the ``sessions`` format without
    one, the bundled synthetic sessions."""
    wl = scenario.workload
    if wl.trace is None and wl.format == "sessions":
        from inferasim.config.catalog import REPO_ROOT

        return REPO_ROOT / "traces" / "agentic-small.jsonl"
    return resolve_trace_path(scenario)


def load_trees(scenario) -> TreeCorpus:
    wl = scenario.workload
    path = agentic_trace_path(scenario)
    try:
        if wl.format == "agentx":
            return load_agentx(path)
        from inferasim.workload.sessions_format import load_sessions

        return load_sessions(path)
    except (ValueError, KeyError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}", key="workload.trace",
                          file=scenario.path) from exc


def fit_context(corpus: TreeCorpus, max_context: int) -> TreeCorpus:
    """Drop the trees any request of which (prompt + output) exceeds the context window,
    as the harness's keep/drop filter does (a server would reject those requests)."""
    peak = corpus.peak_context()
    keep = np.nonzero(peak <= max_context)[0]
    if keep.size == corpus.n_trees:
        return corpus
    out = corpus.subset(keep)
    out.meta["dropped_overlong_trees"] = float(corpus.n_trees - keep.size)
    return out


def replayed_corpus(scenario, output_scale: float | None = None) -> TreeCorpus:
    """The scenario's session trees as its lanes replay them: their subagent streams
    stripped where ``workload.subagents`` is off, outputs scaled by ``output_scale``
    (default ``workload.output_scale``), then the trees that overflow the context window
    dropped."""
    scale = scenario.workload.output_scale if output_scale is None else output_scale
    corpus = load_trees(scenario)
    if not scenario.workload.subagents:
        corpus = corpus.without_subagents()
    return fit_context(corpus.with_output_scale(scale), scenario.model.max_context)


def agentx_source(scenario, rng: np.random.Generator) -> LaneDriver:
    """Lanes over the scenario's session trees (``agentx`` or ``sessions`` format)."""
    wl = scenario.workload
    corpus = replayed_corpus(scenario)
    if corpus.n_trees == 0:
        raise ConfigError(f"no session tree of {wl.trace} fits the model's context window "
                          f"({scenario.model.max_context} tokens)", key="workload.trace",
                          file=scenario.path)
    idle_cap = wl.idle_cap_s
    if wl.idle_cap_ms is not None:
        idle_cap = wl.idle_cap_ms / 1000.0
    if idle_cap is not None and idle_cap < 0:
        idle_cap = None
    duration = AGENTX_DEFAULT_DURATION_S if wl.duration_s is None else wl.duration_s
    try:
        return LaneDriver(corpus, concurrency=wl.concurrency, duration_s=duration, rng=rng,
                          sampler=wl.sampler, start_min_ratio=wl.start_min_ratio,
                          start_max_ratio=wl.start_max_ratio, timing=wl.timing,
                          idle_cap_s=idle_cap,
                          rate_scale=wl.rate_scale, max_requests=wl.max_requests,
                          live_responses=wl.live_responses)
    except ValueError as exc:
        raise ConfigError(str(exc), key="workload", file=scenario.path) from exc
