"""Agentic session trees and the lane driver that replays them the way the harness does.

Data layout (:class:`TreeCorpus`): every loader (``agentx``, ``sessions``) produces the same
flat numpy arrays, so a corpus of 49 k requests and 94 M block ids fits in tens of MB and
caches as one ``.npz``:

* **keys** are stored as *segments*. Within one stream (the root conversation or one
  subagent) a request almost always extends the previous one block for block, so a stream
  is cut into segments: a request whose keys extend the segment's keys so far appends only
  its new tail; a request whose keys are a prefix of the segment reuses it; anything else
  (a compaction, a rewritten context) opens a new segment. A request's keys are
  ``keys[seg_start[seg] : seg_start[seg] + nkeys]`` -- 8.3 M stored ids for the AgentX
  corpus's 94 M. Keys are *local* ids (``0 <= id < 2**32``), namespaced per tree instance
  at replay time.
* **turns** (one row per request): tree, stream, prompt/output tokens, recorded think time,
  recorded end-to-start gap, recorded server time, recorded start, segment, key count.
* **streams**: tree, first turn, turn count, the turn that spawns it (``parent``; -1 for a
  tree's root stream) and the turn that joins it (``join``; -1 = background).
* **trees**: first stream / first turn and counts, block size, id.

Lanes (:class:`LaneDriver`): ``workload.concurrency`` lanes, each holding one tree until
the whole tree (root and every subagent, background ones included) has drained, then
drawing the next from the sampler. Rules (docs/agentic.md):

* a turn waits for the previous turn of its stream and for every stream it joins, then its
  delay (recorded end-to-start gap, or recorded think time), then -- if its prompt extends
  a request of the lane that is still pending -- for that request;
* a stream starts when its parent turn completes (after its own first gap);
* the lane's idle guard: while nothing of the lane is in flight, a timer is pulled forward
  to at most ``idle_cap`` from the moment the lane went idle;
* a lane's first tree starts at a random point of its root stream, the turn before it sent
  as warm-up; recycled lanes start at turn 0; every tree instance gets its own key namespace;
* nothing is issued at or after the horizon; what is in flight drains.
"""

from __future__ import annotations

import heapq
import math
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import numpy as np
import simpy

from inferasim.workload.keys import session_base
from inferasim.workload.request import Arrival, RequestSpec, Session, Turn

CORPUS_VERSION = 1
LOCAL_KEY_LIMIT = 1 << 32

SAMPLERS = ("sequential", "shuffle", "random")
TIMINGS = ("end-to-start", "think-time")


# ---------------------------------------------------------------------------------------
# The corpus
# ---------------------------------------------------------------------------------------
class TreeCorpus:
    """Session trees in flat numpy arrays (see the module docstring)."""

    TURN_FIELDS = ("turn_tree", "turn_stream", "prompt", "output", "think", "gap", "api",
                   "t", "seg", "nkeys")
    STREAM_FIELDS = ("stream_tree", "stream_first", "stream_n", "parent", "join")
    TREE_FIELDS = ("tree_stream", "tree_nstreams", "tree_turn", "tree_nturns", "tree_block")

    def __init__(self, arrays: dict[str, np.ndarray], ids: list[str], meta: dict | None = None):
        for name in (*self.TURN_FIELDS, *self.STREAM_FIELDS, *self.TREE_FIELDS, "keys",
                     "seg_start"):
            setattr(self, name, arrays[name])
        self.ids = list(ids)
        self.meta = dict(meta or {})

    # -- sizes ------------------------------------------------------------------------
    @property
    def n_trees(self) -> int:
        return int(self.tree_stream.size)

    @property
    def n_turns(self) -> int:
        return int(self.prompt.size)

    @property
    def n_streams(self) -> int:
        return int(self.stream_tree.size)

    def arrays(self) -> dict[str, np.ndarray]:
        names = (*self.TURN_FIELDS, *self.STREAM_FIELDS, *self.TREE_FIELDS, "keys", "seg_start")
        return {name: getattr(self, name) for name in names}

    # -- keys -------------------------------------------------------------------------
    def turn_keys(self, turn: int) -> np.ndarray:
        """The local key ids of one request (a view into the segment store)."""
        start = int(self.seg_start[self.seg[turn]])
        return self.keys[start:start + int(self.nkeys[turn])]

    def tree_turns(self, tree: int) -> range:
        first = int(self.tree_turn[tree])
        return range(first, first + int(self.tree_nturns[tree]))

    def tree_streams(self, tree: int) -> range:
        first = int(self.tree_stream[tree])
        return range(first, first + int(self.tree_nstreams[tree]))

    def peak_context(self) -> np.ndarray:
        """Per tree: the largest prompt + output of any of its requests."""
        peak = self.prompt + self.output
        out = np.zeros(self.n_trees, dtype=np.int64)
        np.maximum.at(out, self.turn_tree, peak)
        return out

    def output_per_prompt_token(self) -> float:
        """Output tokens over prompt tokens, summed over every request of the corpus."""
        prompt = int(self.prompt.sum())
        return float(self.output.sum()) / prompt if prompt else 0.0

    def with_output_scale(self, scale: float) -> TreeCorpus:
        """The same trees with every output length times ``scale`` (rounded, at least one
        token); prompts, keys and timings are shared, not copied."""
        if scale == 1.0:
            return self
        arrays = self.arrays()
        arrays["output"] = np.maximum(1, np.rint(self.output * scale)).astype(self.output.dtype)
        return TreeCorpus(arrays, self.ids, self.meta)

    # -- persistence ------------------------------------------------------------------
    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        # a temporary name of its own: sweep workers parsing the same corpus at once each
        # write theirs, and the last rename wins with a whole file
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".npz", dir=path.parent)
        tmp = Path(name)
        try:
            with os.fdopen(fd, "wb") as fh:
                np.savez(fh, ids=np.array(self.ids, dtype=str),
                         version=np.array([CORPUS_VERSION]),
                         meta_keys=np.array(list(self.meta), dtype=str),
                         meta_values=np.array([float(v) for v in self.meta.values()]),
                         **self.arrays())
            tmp.replace(path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise

    @classmethod
    def load(cls, path: Path) -> TreeCorpus | None:
        try:
            with np.load(path, allow_pickle=False) as data:
                if int(data["version"][0]) != CORPUS_VERSION:
                    return None
                arrays = {k: data[k] for k in data.files}
        except (OSError, KeyError, ValueError):
            return None
        meta = dict(zip(arrays["meta_keys"].tolist(), arrays["meta_values"].tolist(),
                        strict=True))
        return cls(arrays, arrays["ids"].tolist(), meta)

    # -- selection --------------------------------------------------------------------
    def without_subagents(self) -> TreeCorpus:
        """Each tree's root stream alone, as the no-subagents corpora were published (every
        subagent entry stripped, the parent's requests kept as recorded). A turn that
        joined subagents waited for them; without them its end-to-start gap is the time
        from its own previous turn's end (``t`` + ``api``) to its start. The turns are
        selected in place: the key store is shared, not copied."""
        n = self.n_trees
        if self.n_streams == n:
            return self
        roots = self.tree_stream.astype(np.int64)
        keep = np.isin(self.turn_stream, roots)      # a tree's root stream comes first
        counts = self.stream_n[roots].astype(np.int64)
        firsts = np.concatenate(([0], np.cumsum(counts)[:-1]))
        arrays = self.arrays()
        for name in self.TURN_FIELDS:
            arrays[name] = arrays[name][keep]
        arrays["turn_stream"] = arrays["turn_tree"].copy()   # stream i is tree i's root
        t, api, gap = arrays["t"], arrays["api"], arrays["gap"].copy()
        ends = t + np.maximum(api, 0.0)
        later = np.ones(t.size, dtype=bool)
        later[firsts] = False                        # a tree's first turn keeps its gap
        prev_end = np.concatenate(([np.nan], ends[:-1]))
        redo = later & np.isfinite(t) & np.isfinite(prev_end)
        gap[redo] = np.maximum(0.0, t[redo] - prev_end[redo])
        arrays["gap"] = gap
        arrays.update(
            stream_tree=np.arange(n, dtype=self.stream_tree.dtype),
            stream_first=firsts.astype(self.stream_first.dtype),
            stream_n=counts.astype(self.stream_n.dtype),
            parent=np.full(n, -1, dtype=self.parent.dtype),
            join=np.full(n, -1, dtype=self.join.dtype),
            tree_stream=np.arange(n, dtype=self.tree_stream.dtype),
            tree_nstreams=np.ones(n, dtype=self.tree_nstreams.dtype),
            tree_turn=firsts.astype(self.tree_turn.dtype),
            tree_nturns=counts.astype(self.tree_nturns.dtype))
        return TreeCorpus(arrays, self.ids, {**self.meta, "subagents_stripped":
                                             float(self.n_streams - n)})

    def subset(self, trees: np.ndarray) -> TreeCorpus:
        """A corpus of the given trees (in that order), keys re-packed."""
        b = CorpusBuilder()
        for tree in np.asarray(trees, dtype=np.int64):
            b.copy_tree(self, int(tree))
        out = b.build()
        out.meta = dict(self.meta)
        return out


class CorpusBuilder:
    """Accumulates trees stream by stream, cutting each stream's keys into segments."""

    def __init__(self) -> None:
        self.cols: dict[str, list] = {name: [] for name in
                                      (*TreeCorpus.TURN_FIELDS, *TreeCorpus.STREAM_FIELDS,
                                       *TreeCorpus.TREE_FIELDS)}
        self.key_chunks: list[np.ndarray] = []
        self.n_keys = 0
        self.seg_start: list[int] = []
        self.ids: list[str] = []
        self._seg = -1
        self._seg_keys: np.ndarray | None = None
        self._tree = -1
        self._stream = -1

    # -- trees and streams ------------------------------------------------------------
    def begin_tree(self, tree_id: str, block_tokens: int) -> int:
        c = self.cols
        self._tree = len(self.ids)
        self.ids.append(str(tree_id))
        c["tree_stream"].append(len(c["stream_tree"]))
        c["tree_nstreams"].append(0)
        c["tree_turn"].append(len(c["prompt"]))
        c["tree_nturns"].append(0)
        c["tree_block"].append(int(block_tokens))
        return self._tree

    def begin_stream(self, parent: int = -1, join: int = -1) -> int:
        """Open a stream of the current tree; ``parent``/``join`` are global turn indices."""
        c = self.cols
        self._stream = len(c["stream_tree"])
        c["stream_tree"].append(self._tree)
        c["stream_first"].append(len(c["prompt"]))
        c["stream_n"].append(0)
        c["parent"].append(int(parent))
        c["join"].append(int(join))
        c["tree_nstreams"][self._tree] += 1
        self._seg_keys = None
        return self._stream

    def set_join(self, stream: int, turn: int) -> None:
        self.cols["join"][stream] = int(turn)

    def add_turn(self, prompt: int, output: int, keys: np.ndarray, *, think: float = 0.0,
                 gap: float = 0.0, api: float = math.nan, t: float = math.nan) -> int:
        c = self.cols
        turn = len(c["prompt"])
        keys = np.asarray(keys, dtype=np.int64)
        seg, nkeys = self._place_keys(keys)
        c["turn_tree"].append(self._tree)
        c["turn_stream"].append(self._stream)
        c["prompt"].append(int(prompt))
        c["output"].append(int(output))
        c["think"].append(float(think))
        c["gap"].append(float(gap))
        c["api"].append(float(api))
        c["t"].append(float(t))
        c["seg"].append(seg)
        c["nkeys"].append(nkeys)
        c["stream_n"][self._stream] += 1
        c["tree_nturns"][self._tree] += 1
        return turn

    def _place_keys(self, keys: np.ndarray) -> tuple[int, int]:
        n = int(keys.size)
        if n and (int(keys.min()) < 0 or int(keys.max()) >= LOCAL_KEY_LIMIT):
            raise ValueError(f"block ids must lie in [0, 2**32): got {int(keys.min())}.."
                             f"{int(keys.max())}")
        cur = self._seg_keys
        if cur is not None:
            m = int(cur.size)
            if n >= m and np.array_equal(keys[:m], cur):
                if n > m:
                    tail = keys[m:]
                    self.key_chunks.append(tail)
                    self.n_keys += tail.size
                    self._seg_keys = keys
                return self._seg, n
            if n < m and np.array_equal(cur[:n], keys):
                return self._seg, n
        self._seg = len(self.seg_start)
        self.seg_start.append(self.n_keys)
        self.key_chunks.append(keys)
        self.n_keys += n
        self._seg_keys = keys
        return self._seg, n

    def copy_tree(self, corpus: TreeCorpus, tree: int) -> None:
        self.begin_tree(corpus.ids[tree], int(corpus.tree_block[tree]))
        t0 = int(corpus.tree_turn[tree])
        new_t0 = len(self.cols["prompt"])
        for s in corpus.tree_streams(tree):
            parent = int(corpus.parent[s])
            join = int(corpus.join[s])
            self.begin_stream(parent - t0 + new_t0 if parent >= 0 else -1,
                              join - t0 + new_t0 if join >= 0 else -1)
            first = int(corpus.stream_first[s])
            for j in range(first, first + int(corpus.stream_n[s])):
                self.add_turn(int(corpus.prompt[j]), int(corpus.output[j]), corpus.turn_keys(j),
                              think=float(corpus.think[j]), gap=float(corpus.gap[j]),
                              api=float(corpus.api[j]), t=float(corpus.t[j]))

    def build(self) -> TreeCorpus:
        c = self.cols
        ints32 = {"turn_tree", "turn_stream", "seg", "nkeys", "stream_tree", "stream_n",
                  "tree_nstreams", "tree_nturns", "tree_block"}
        floats = {"think", "gap", "api", "t"}
        arrays: dict[str, np.ndarray] = {}
        for name, values in c.items():
            dtype = np.float64 if name in floats else (np.int32 if name in ints32 else np.int64)
            arrays[name] = np.asarray(values, dtype=dtype)
        keys = np.concatenate(self.key_chunks) if self.key_chunks else np.empty(0, np.int64)
        # Local ids fit 32 bits; stored unsigned to halve the corpus.
        arrays["keys"] = keys.astype(np.uint32)
        arrays["seg_start"] = np.asarray(self.seg_start + [self.n_keys], dtype=np.int64)
        return TreeCorpus(arrays, self.ids)


# ---------------------------------------------------------------------------------------
# Samplers
# ---------------------------------------------------------------------------------------
class TreeSampler:
    """Which tree a lane replays next: ``sequential`` (file order, cycling), ``shuffle``
    (a seeded permutation, reshuffled each pass) or ``random`` (uniform with replacement)."""

    def __init__(self, n: int, kind: str, rng: np.random.Generator):
        if n <= 0:
            raise ValueError("no session trees to sample from")
        if kind not in SAMPLERS:
            raise ValueError(f"unknown sampler {kind!r}; choose one of {', '.join(SAMPLERS)}")
        self.n, self.kind, self.rng = n, kind, rng
        self._order = np.arange(n)
        self._pos = n if kind == "shuffle" else 0

    def next(self) -> int:
        if self.kind == "random":
            return int(self.rng.integers(self.n))
        if self._pos >= self.n:
            self._pos = 0
            if self.kind == "shuffle":
                self._order = self.rng.permutation(self.n)
        idx = int(self._order[self._pos])
        self._pos += 1
        return idx


# ---------------------------------------------------------------------------------------
# One tree instance: its requests, namespaced
# ---------------------------------------------------------------------------------------
class TreeInstance:
    """A tree ready to replay: request specs with keys in the instance's own namespace."""

    def __init__(self, corpus: TreeCorpus, tree: int, instance: int, start_turn: int = 0,
                 warmup: bool = False, live_responses: bool = False):
        self.corpus, self.tree, self.instance = corpus, tree, instance
        c = corpus
        self.bt = int(c.tree_block[tree])
        self.t0 = int(c.tree_turn[tree])
        self.s0 = int(c.tree_stream[tree])
        self.n_turns = int(c.tree_nturns[tree])
        self.n_streams = int(c.tree_nstreams[tree])
        base = session_base(instance)
        turns = range(self.t0, self.t0 + self.n_turns)
        seg_arrays: dict[int, np.ndarray] = {}
        self.specs: list[RequestSpec] = []
        for j in turns:
            seg = int(c.seg[j])
            arr = seg_arrays.get(seg)
            if arr is None:
                lo, hi = int(c.seg_start[seg]), int(c.seg_start[seg + 1])
                arr = c.keys[lo:hi].astype(np.int64) + base
                seg_arrays[seg] = arr
            keys = arr[:int(c.nkeys[j])]
            out = max(1, int(c.output[j]))
            # the harness sends max_tokens = the recorded output (agentx.md)
            self.specs.append(RequestSpec(int(c.prompt[j]), out, keys, self.bt, None,
                                          instance, j - self.t0, max_tokens=out))
        if live_responses:
            self._reuse_responses()
        # Local (tree-relative) structure.
        self.stream_first = (c.stream_first[self.s0:self.s0 + self.n_streams] - self.t0).tolist()
        self.stream_n = c.stream_n[self.s0:self.s0 + self.n_streams].tolist()
        par = c.parent[self.s0:self.s0 + self.n_streams]
        self.parent = np.where(par >= 0, par - self.t0, -1).tolist()
        self.children: dict[int, list[int]] = {}
        self.joins: dict[int, list[int]] = {}
        for s in range(1, self.n_streams):
            if self.parent[s] >= 0:
                self.children.setdefault(self.parent[s], []).append(s)
            join = int(c.join[self.s0 + s])
            if join >= 0:
                self.joins.setdefault(join - self.t0, []).append(s)
        self.start_turn = start_turn  # index into the root stream (turn 0 of the tree)
        # The start turn is the cache warm-up sent before the measured phase (the turn before
        # t*); the replay proper resumes at the turn after it.
        self.warmup = warmup

    def _reuse_responses(self) -> None:
        """The client sends the server's own response back in the next turn of the stream
        (AIPerf's live-assistant mode): each request's ``finish_keys`` are the next turn's
        leading keys over its prompt and output tokens, where the next prompt extends this
        one; a stream's last turn reuses nothing."""
        stream = self.corpus.turn_stream[self.t0:self.t0 + self.n_turns]
        for i in range(self.n_turns - 1):
            if stream[i + 1] != stream[i]:
                continue
            spec, following = self.specs[i], self.specs[i + 1].keys
            n = len(spec.keys)
            if len(following) <= n or not np.array_equal(following[:n], spec.keys):
                continue
            blocks = min(len(following), (spec.prompt_tokens + spec.output_tokens) // self.bt)
            self.specs[i] = attrs.evolve(spec, finish_keys=following[:blocks])

    def dropped_streams(self) -> set[int]:
        """Streams that never run because their parent turn lies before the start turn (or is
        the warm-up turn: what it spawned is history too)."""
        dropped: set[int] = set()
        last_history = self.start_turn if self.warmup else self.start_turn - 1
        for s in range(1, self.n_streams):
            p = self.parent[s]
            owner = self._stream_of(p)
            if (owner == 0 and p <= last_history) or owner in dropped:
                dropped.add(s)
        return dropped

    def _stream_of(self, turn: int) -> int:
        for s in range(self.n_streams):
            if self.stream_first[s] <= turn < self.stream_first[s] + self.stream_n[s]:
                return s
        return -1


def warmup_turn_at(corpus: TreeCorpus, tree: int, ratio: float) -> int:
    """The root-stream turn sent as cache warm-up for start point ``ratio`` of the tree's
    span, or -1 when the replay starts at turn 0 with none.

    t* = t_first + ratio x (t_last - t_first) over the root stream's recorded starts (turn
    index when starts are not recorded); the first root turn at or after t* is where the
    replay resumes, and the turn before it is sent first, as warm-up.
    """
    s0 = int(corpus.tree_stream[tree])
    first, n = int(corpus.stream_first[s0]), int(corpus.stream_n[s0])
    if n <= 1:
        return -1
    t = corpus.t[first:first + n]
    if not np.all(np.isfinite(t)):
        t = np.arange(n, dtype=np.float64)
    target = t[0] + ratio * (t[-1] - t[0])
    resume = int(np.searchsorted(t, target, side="left"))
    return min(n - 1, resume - 1)


def start_turn_at(corpus: TreeCorpus, tree: int, ratio: float) -> int:
    """The root-stream turn a lane's replay of the tree begins with (its warm-up turn, or 0)."""
    return max(0, warmup_turn_at(corpus, tree, ratio))


# ---------------------------------------------------------------------------------------
# The lane driver
# ---------------------------------------------------------------------------------------
class _Lane:
    """A lane's bookkeeping: requests in flight (for the idle guard and the extension hold).

    The lane is *busy* while a request of it is in flight or a stream it spawned has not yet
    sent its first request (a spawn is a request about to be issued)."""

    def __init__(self, env: simpy.Environment, index: int):
        self.env = env
        self.index = index
        self.pending: list = []
        self.spawning = 0
        self._idle: simpy.Event | None = None

    @property
    def busy(self) -> bool:
        return bool(self.pending) or self.spawning > 0

    def track(self, req) -> None:
        self.pending.append(req)
        req.done.callbacks.append(lambda _ev, r=req: self._finished(r))

    def _finished(self, req) -> None:
        self.pending.remove(req)
        self._check_idle()

    def spawned(self, delta: int) -> None:
        self.spawning += delta
        self._check_idle()

    def _check_idle(self) -> None:
        if not self.busy and self._idle is not None:
            idle, self._idle = self._idle, None
            idle.succeed()

    def idle_event(self) -> simpy.Event:
        if self._idle is None:
            self._idle = self.env.event()
        return self._idle

    def blocker(self, keys: np.ndarray):
        """A pending request of this lane whose prompt ``keys`` extends, or None."""
        n_new = keys.size
        for req in self.pending:
            k = req.spec.keys
            n = k.size
            if 0 < n <= n_new and k[n - 1] == keys[n - 1] and k[0] == keys[0] \
                    and np.array_equal(k, keys[:n]):
                return req
        return None


class _TreeRun:
    """One tree instance being replayed in a lane."""

    def __init__(self, driver: LaneDriver, lane: _Lane, inst: TreeInstance):
        self.driver, self.lane, self.inst = driver, lane, inst
        env = driver.env
        self.env = env
        self.done = env.event()
        self.stream_done = [env.event() for _ in range(inst.n_streams)]
        self.active = 0
        for s in inst.dropped_streams():
            self.stream_done[s].succeed()
        self.start_stream(0, inst.start_turn)

    def start_stream(self, s: int, first: int = 0) -> None:
        self.active += 1
        if s != 0:
            self.lane.spawned(+1)
        self.env.process(self._stream(s, first))

    def _stream_finished(self, s: int) -> None:
        if not self.stream_done[s].triggered:
            self.stream_done[s].succeed()
        self.active -= 1
        if self.active == 0 and not self.done.triggered:
            self.done.succeed()

    def _stream(self, s: int, first: int):
        d, inst, env, lane = self.driver, self.inst, self.env, self.lane
        start = inst.stream_first[s]
        spawning = s != 0
        warmup = s == 0 and inst.warmup
        for j in range(start + first, start + inst.stream_n[s]):
            if env.now >= d.horizon or d.exhausted:
                break
            joined = [self.stream_done[x] for x in inst.joins.get(j, ())
                      if not self.stream_done[x].triggered]
            if joined:
                yield env.all_of(joined)
            # The lane's very first request (root start, or the warm-up turn) goes at once, and
            # so does the turn after a warm-up, when the measured phase opens.
            resumes = warmup and j == start + first + 1
            delay = 0.0 if (s == 0 and j == start + first) or resumes \
                else d.delay(inst.corpus, inst.t0 + j)
            if delay > 0:
                yield from d.wait(lane, delay)
            spec = inst.specs[j]
            while (blocker := lane.blocker(spec.keys)) is not None:
                yield blocker.done
            if env.now >= d.horizon or d.exhausted:
                break
            req = d.log.new(spec)
            lane.track(req)
            if spawning:
                spawning = False
                lane.spawned(-1)
            d.submit(req)
            d.sent += 1
            if warmup and j == start + first:
                yield from d.warm_up(req)
                continue  # what the warm-up turn spawned is history (dropped_streams)
            yield req.done
            for child in inst.children.get(j, ()):
                if env.now < d.horizon:
                    self.start_stream(child)
        if spawning:
            lane.spawned(-1)
        self._stream_finished(s)


class LaneDriver:
    """A workload source that drives its own lanes (``simulate`` calls :meth:`drive`)."""

    driver = True
    open_loop = False

    def __init__(self, corpus: TreeCorpus, *, concurrency: int, duration_s: float,
                 rng: np.random.Generator, sampler: str = "sequential",
                 start_min_ratio: float = 0.0, start_max_ratio: float = 0.0,
                 timing: str = "end-to-start", idle_cap_s: float | None = 10.0,
                 rate_scale: float = 1.0, max_requests: int | None = None,
                 live_responses: bool = False):
        if corpus.n_trees == 0:
            raise ValueError("the workload has no session trees")
        if timing not in TIMINGS:
            raise ValueError(f"unknown timing {timing!r}; choose one of {', '.join(TIMINGS)}")
        if not 0.0 <= start_min_ratio <= start_max_ratio <= 1.0:
            raise ValueError("start ratios must satisfy 0 <= start_min_ratio <= "
                             "start_max_ratio <= 1")
        self.corpus = corpus
        blocks = set(corpus.tree_block.tolist())
        if len(blocks) != 1:
            raise ValueError(f"trees with different block sizes in one workload: {sorted(blocks)}")
        self.block_tokens = blocks.pop()
        self.concurrency = concurrency
        self.duration_s = duration_s
        self.rng = rng
        self.sampler = TreeSampler(corpus.n_trees, sampler, rng)
        self.start_min_ratio, self.start_max_ratio = start_min_ratio, start_max_ratio
        self._delays = corpus.gap if timing == "end-to-start" else corpus.think
        self.idle_cap = idle_cap_s
        self.rate_scale = rate_scale
        self.max_requests = max_requests
        self.live_responses = live_responses
        self.instances = 0
        self.sent = 0
        self.trees_started: list[tuple[int, int, int, int]] = []  # (lane, tree, instance, start)
        # (window start, horizon) once the measured phase has opened (see ``drive``)
        self.measured_window: tuple[float, float] | None = None

    # -- the WorkloadSource protocol ---------------------------------------------------
    def next_session(self) -> Session:
        raise TypeError("a lane-driven source has no closed-loop sessions; call drive()")

    def arrivals(self) -> Iterator[Arrival]:
        raise TypeError("a lane-driven source has no stamped arrivals; call drive()")

    @property
    def exhausted(self) -> bool:
        return self.max_requests is not None and self.sent >= self.max_requests

    def lane_sessions(self, lanes: int | None = None) -> list[Session]:
        """The lanes' requests as closed-loop sessions, for a closed form that cannot run the
        lanes (``sweep.projection``): one session per tree instance, in the order the lanes
        would take their trees (each lane's first from a drawn start point, its warm-up turn
        included; then whichever lane's recorded time is least takes the sampler's next).
        A stream's turns follow the turn that spawns it (they run beside their parent's
        later turns in the replay); each turn's delay is the lane's wait before it (the
        recorded gap or think time, at most the idle cap). A lane takes trees until its
        recorded time, delays and server times, covers the duration. ``lanes``: how many of
        the lanes (default all). Uses this source's own sampler and generator: a source
        built for its lanes should not also drive."""
        cap = self.idle_cap
        sessions: list[Session] = []
        n = self.concurrency if lanes is None else min(lanes, self.concurrency)
        heap = [(0.0, i) for i in range(n)]
        first = [True] * n
        while heap:
            clock, lane = heapq.heappop(heap)
            tree = self.sampler.next()
            warm = -1
            if first[lane] and self.start_max_ratio > 0:
                ratio = float(self.rng.uniform(self.start_min_ratio, self.start_max_ratio))
                warm = warmup_turn_at(self.corpus, tree, ratio)
            first[lane] = False
            inst = TreeInstance(self.corpus, tree, self.instances, max(0, warm),
                                warmup=warm >= 0, live_responses=self.live_responses)
            self.instances += 1
            turns: list[Turn] = []
            dropped = inst.dropped_streams()
            start = clock
            # the root stream from its start turn, each spawned stream after its parent turn
            pending = [(0, inst.start_turn)]
            while pending and clock < self.duration_s:
                s, k = pending.pop()
                j = inst.stream_first[s] + k
                if k + 1 < inst.stream_n[s]:
                    pending.append((s, k + 1))
                pending.extend((c, 0) for c in reversed(inst.children.get(j, ()))
                               if c not in dropped)
                delay = 0.0 if not turns else self.delay(self.corpus, inst.t0 + j)
                if cap is not None:
                    delay = min(delay, cap)
                api = float(self.corpus.api[inst.t0 + j])
                clock += delay + (api if math.isfinite(api) and api > 0 else 0.0)
                turns.append(Turn(delay, inst.specs[j]))
            if clock <= start:  # a tree without recorded time cannot fill the duration
                clock = self.duration_s
            if turns:
                sessions.append(Session(inst.instance, tuple(turns)))
            if clock < self.duration_s:
                heapq.heappush(heap, (clock, lane))
        return sessions

    def delay(self, corpus: TreeCorpus, turn: int) -> float:
        value = float(self._delays[turn])
        if not math.isfinite(value) or value <= 0:
            return 0.0
        return value / self.rate_scale

    def drive(self, env: simpy.Environment, submit: Callable, log, horizon: float) -> None:
        """Start the lanes. A lane whose first tree starts part-way sends the turn before t*
        at once as cache warm-up, and, as AIPerf runs warm-up as a phase of its own, the
        measured phase opens when every lane's warm-up has finished: each lane resumes at
        t* then, and the window (``warmup_s`` after the opening) and the horizon move with
        it (``measured_window``). Without warm-up turns the phase opens at once."""
        self.env, self.submit, self.log, self.horizon = env, submit, log, horizon
        self.measured = env.event()
        self._warming = 0
        self._warmed = env.event()
        for i in range(self.concurrency):
            env.process(self._lane(_Lane(env, i)))
        # Created after the lanes: it runs once each has sent its warm-up (at time 0).
        env.process(self._open_measured_phase(horizon - self.duration_s))

    def _open_measured_phase(self, offset: float):
        # After every process started at time 0 has run (a lane's first stream sends its
        # warm-up from its own process): a zero timeout comes after their initialisation.
        yield self.env.timeout(0)
        if self._warming:
            yield self._warmed
        start = self.env.now + offset
        self.horizon = start + self.duration_s
        self.measured_window = (start, self.horizon)
        self.measured.succeed()

    def warm_up(self, req):
        """Wait out a warm-up request, then for the measured phase to open."""
        self._warming += 1
        yield req.done
        self._warming -= 1
        if not self._warming and not self._warmed.triggered:
            self._warmed.succeed()
        yield self.measured

    # -- timers ----------------------------------------------------------------------------
    def wait(self, lane: _Lane, delay: float):
        """Wait ``delay`` s; while nothing of the lane is in flight, at most ``idle_cap``."""
        env, cap = self.env, self.idle_cap
        deadline = env.now + delay
        while True:
            idle = not lane.busy
            if cap is not None and idle:
                deadline = min(deadline, env.now + cap)
            deadline = min(deadline, self.horizon)
            remaining = deadline - env.now
            if remaining <= 0:
                return
            if cap is None or idle:
                yield env.timeout(remaining)
                return
            yield env.timeout(remaining) | lane.idle_event()
            if env.now >= deadline:
                return

    # -- lanes --------------------------------------------------------------------------
    def _lane(self, lane: _Lane):
        env = self.env
        first = True
        while env.now < self.horizon and not self.exhausted:
            tree = self.sampler.next()
            warm = -1
            if first and self.start_max_ratio > 0:
                ratio = float(self.rng.uniform(self.start_min_ratio, self.start_max_ratio))
                warm = warmup_turn_at(self.corpus, tree, ratio)
            if warm < 0 and not self.measured.triggered:
                yield self.measured  # no warm-up of its own: it starts with the phase
            start = max(0, warm)
            inst = TreeInstance(self.corpus, tree, self.instances, start, warmup=warm >= 0,
                                live_responses=self.live_responses)
            self.trees_started.append((lane.index, tree, self.instances, start))
            self.instances += 1
            run = _TreeRun(self, lane, inst)
            yield run.done
            first = False
