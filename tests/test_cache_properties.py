"""Random request streams against the radix cache and its pool, checked after every step.

A stream interleaves request starts (match, pin, make room, allocate the uncached tail plus
some decode growth), finishes (insert, free the growth, unpin), aborts (unpin, free) and
eviction under memory pressure, on small random pools so that pressure is the common case.
Prompts come from a few families with shared heads and a few tails, so they share
prefixes and force splits.

Shrinking is off by default: a sixty-step stream shrinks for minutes, and the unshrunk
failing stream is printed anyway. Set HYPOTHESIS_SHRINK=1 to get the minimal one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from inferasim.serve.kv_pool import KVPool
from inferasim.serve.radix_cache import MatchResult, RadixCache

KINDS = ("start", "start", "start", "finish", "abort", "lookup", "evict")  # starts likelier


@dataclass(frozen=True)
class Step:
    """One event of a stream, drawn flat (a few integers) so that generating and shrinking
    stay cheap; ``kind`` decides which fields matter."""

    dt: float  # 0 makes ties in last access, which eviction order must tolerate
    kind: str
    family: int
    shared: int
    tail: int
    tail_len: int
    amount: int  # half blocks of decode growth, request pick, or blocks to evict
    leave_last: bool

    def prompt(self) -> np.ndarray:
        # Prompts of one family share up to 8 blocks, then branch into one of a few tails:
        # different shared lengths and tails end matches mid-edge, which forces splits.
        base = [100 * self.family + i for i in range(self.shared)]
        ends = [10_000 * self.family + 100 * self.tail + i for i in range(self.tail_len)]
        return np.array(base + ends, dtype=np.int64)


steps = st.builds(
    Step,
    st.sampled_from([0.0, 1.0, 1.0]),
    st.sampled_from(KINDS),
    st.integers(0, 2),
    st.integers(0, 8),
    st.integers(0, 2),
    st.integers(0, 4),
    st.integers(0, 12),
    st.booleans(),
)
streams = st.fixed_dictionaries(
    {
        "policy": st.sampled_from(["leaf-lru", "radix-leaf", "block-pool", "recency"]),
        "block_tokens": st.sampled_from([1, 4, 16]),
        "capacity_blocks": st.integers(2, 40),
        "steps": st.lists(steps, min_size=20, max_size=60),
    }
)


@dataclass
class Running:
    prompt: np.ndarray
    match: MatchResult
    private: int  # tokens this request holds outside the tree
    growth: int  # of which decode growth, not part of any full block


def cached_prefixes(cache: RadixCache) -> set[tuple[int, ...]]:
    """Every matchable key prefix, read off the tree independently of match_prefix."""
    found = set()
    for node in cache.iter_nodes():
        path = tuple(int(k) for k in cache.path_keys(node))
        start = len(path) - node.blocks
        found.update(path[:k] for k in range(start + 1, len(path) + 1))
    return found


def longest_cached(prefixes: set[tuple[int, ...]], prompt: np.ndarray) -> int:
    ids = tuple(int(k) for k in prompt)
    return max((k for k in range(len(ids) + 1) if k == 0 or ids[:k] in prefixes), default=0)


def evictable_leaves(cache: RadixCache):
    return [
        # the order the policy evicts leaves in: release order for a block pool, else recency
        (tuple(cache.path_keys(n)), cache.policy.priority(n)[0])
        for n in cache.iter_nodes()
        if n.lock_ref == 0 and not n.children
    ]


def reachable_tokens(cache: RadixCache) -> int:
    return sum(n.blocks for n in cache.iter_nodes()) * cache.block_tokens


class Stream:
    def __init__(self, policy: str, block_tokens: int, capacity_blocks: int):
        self.bt = block_tokens
        self.pool = KVPool(capacity_blocks * block_tokens)
        self.cache = RadixCache(self.pool, block_tokens, policy)
        self.running: list[Running] = []
        self.now = 0.0

    def apply(self, step: Step) -> None:
        if step.kind == "start":
            self.start(step.prompt(), step.amount % 5, step.leave_last)
        elif step.kind == "finish":
            self.finish(step.amount)
        elif step.kind == "abort":
            self.abort(step.amount)
        elif step.kind == "lookup":
            self.lookup(step.prompt())
        else:
            self.evict(max(0, step.amount * self.bt - step.tail_len))  # often not aligned

    def start(self, prompt: np.ndarray, half_blocks: int, leave_last: bool) -> None:
        cache, bt = self.cache, self.bt
        growth = half_blocks * bt // 2
        limit = max(0, len(prompt) - 1) if leave_last else None
        expect = longest_cached(cached_prefixes(cache), prompt[:limit])
        m = cache.match_prefix(prompt, self.now, max_blocks=limit)
        assert m.blocks == expect
        assert 0 <= m.tokens == m.blocks * bt <= len(prompt) * bt
        assert tuple(cache.path_keys(m.node)) == tuple(prompt[: m.blocks])
        cache.lock(m.node)
        need = (len(prompt) - m.blocks) * bt + growth
        if cache.make_room(need):
            assert self.pool.alloc_private(need)
            self.running.append(Running(prompt, m, need, growth))
        else:
            assert self.pool.free < need
            cache.unlock(m.node)

    def lookup(self, prompt: np.ndarray) -> None:
        """A match that pins nothing (a router probing): it still refreshes the path."""
        expect = longest_cached(cached_prefixes(self.cache), prompt)
        assert self.cache.match_prefix(prompt, self.now).blocks == expect

    def finish(self, pick: int) -> None:
        if not self.running:
            return
        req = self.running.pop(pick % len(self.running))
        r = self.cache.insert(req.prompt, self.now, cached_blocks=req.match.blocks)
        assert r.new_blocks + r.reused_blocks == len(req.prompt)
        assert r.reused_blocks >= req.match.blocks
        assert self.cache.peek_prefix(req.prompt) == len(req.prompt)
        self.pool.free_private(req.growth)
        self.cache.unlock(req.match.node)

    def abort(self, pick: int) -> None:
        if not self.running:
            return
        req = self.running.pop(pick % len(self.running))
        self.pool.free_private(req.private)
        self.cache.unlock(req.match.node)

    def evict(self, tokens: int) -> None:
        cache, pool = self.cache, self.pool
        evictable, tree, reachable = cache.evictable_tokens, pool.tree, reachable_tokens(cache)
        leaves = evictable_leaves(cache)
        freed = cache.evict(tokens)
        assert freed % self.bt == 0
        if evictable >= tokens and cache.policy.whole_leaf:
            # whole leaves: at least what was asked, and the last leaf taken was needed
            assert freed >= tokens
        elif evictable >= tokens:
            assert tokens <= freed < tokens + self.bt  # whole blocks, nothing beyond
        else:
            assert freed == evictable
        assert pool.tree == tree - freed
        for req in self.running:  # pinned prefixes are untouched
            assert cache.peek_prefix(req.prompt[: req.match.blocks]) == req.match.blocks
        if cache.policy.evicts_tail:
            # only unpinned leaves went: what left memory is exactly what left the tree
            assert reachable_tokens(cache) == reachable - freed
            lost = [t for keys, t in leaves if cache.peek_prefix(np.array(keys)) < len(keys)]
            kept = [t for keys, t in leaves if cache.peek_prefix(np.array(keys)) == len(keys)]
            if lost and kept:
                assert max(lost) <= min(kept), "a more recent leaf went before an older one"

    def check(self) -> None:
        self.pool.check()
        self.cache.check()
        assert self.pool.used <= self.pool.capacity
        assert self.pool.private == sum(r.private for r in self.running)
        if self.cache.policy.evicts_tail:
            assert self.cache.orphan_tokens == 0


SHRINK = (Phase.shrink,) if os.environ.get("HYPOTHESIS_SHRINK") else ()
PHASES = (Phase.explicit, Phase.reuse, Phase.generate, *SHRINK)


@settings(max_examples=200, deadline=None, phases=PHASES)
@given(streams)
def test_random_streams_keep_every_invariant(spec):
    stream = Stream(spec["policy"], spec["block_tokens"], spec["capacity_blocks"])
    for step in spec["steps"]:
        stream.now += step.dt
        stream.apply(step)
        stream.check()
    while stream.running:  # drain: every request gives back what it took
        stream.finish(0)
    stream.check()
    assert stream.pool.private == 0
    assert stream.cache.protected_tokens == 0
    stream.cache.evict(stream.pool.capacity)
    assert stream.pool.free == stream.pool.capacity and stream.pool.tree == 0
    stream.cache.check()
