import time

import numpy as np
import pytest

from inferasim.serve.kv_pool import KVPool
from inferasim.serve.radix_cache import RadixCache

BT = 16  # block_tokens


def keys(*ids):
    return np.array(ids, dtype=np.int64)


def make(capacity_blocks=100, policy="leaf-lru"):
    pool = KVPool(capacity_blocks * BT)
    return pool, RadixCache(pool, BT, policy)


def serve(cache, prompt, now):
    """One request the way the engine runs it: match, pin, compute the rest, cache it."""
    m = cache.match_prefix(prompt, now)
    cache.lock(m.node)
    need = (len(prompt) - m.blocks) * BT
    assert cache.make_room(need)
    assert cache.pool.alloc_private(need)
    r = cache.insert(prompt, now, cached_blocks=m.blocks)
    cache.unlock(m.node)
    cache.check()
    return m, r


def fill(cache, prompt, now):
    """Insert a prompt the caller computed wholly in private."""
    assert cache.pool.alloc_private(len(prompt) * BT)
    return cache.insert(prompt, now)


# ---- insert / match / split ----------------------------------------------------------------


def test_empty_cache_matches_nothing():
    _, cache = make()
    m = cache.match_prefix(keys(1, 2, 3), now=0.0)
    assert (m.node, m.blocks, m.tokens) == (cache.root, 0, 0)
    cache.check()


def test_insert_then_match_the_whole_prompt():
    pool, cache = make()
    r = fill(cache, keys(1, 2, 3, 4), 1.0)
    assert (r.new_blocks, r.reused_blocks) == (4, 0)
    assert (pool.tree, pool.private, pool.free) == (4 * BT, 0, 96 * BT)
    m = cache.match_prefix(keys(1, 2, 3, 4, 5, 6), 2.0)
    assert (m.blocks, m.tokens) == (4, 4 * BT)
    assert m.node is r.node
    cache.check()


def test_match_splits_the_node_at_the_boundary():
    _, cache = make()
    fill(cache, keys(1, 2, 3, 4, 5), 1.0)
    m = cache.match_prefix(keys(1, 2, 9), 2.0)
    assert m.blocks == 2
    assert list(cache.path_keys(m.node)) == [1, 2]
    assert cache.node_count == 2
    assert m.node.last_access == 2.0
    (tail,) = m.node.children.values()
    assert list(tail.keys) == [3, 4, 5] and tail.last_access == 1.0
    cache.check()


def test_match_respects_max_blocks():
    _, cache = make()
    fill(cache, keys(1, 2, 3, 4), 1.0)
    m = cache.match_prefix(keys(1, 2, 3, 4), 2.0, max_blocks=3)
    assert m.blocks == 3 and list(cache.path_keys(m.node)) == [1, 2, 3]
    assert cache.match_prefix(keys(1, 2), 3.0, max_blocks=0).blocks == 0
    cache.check()


def test_insert_reports_the_reuse_its_split_found():
    pool, cache = make()
    fill(cache, keys(1, 2, 3), 1.0)
    r = fill(cache, keys(1, 2, 7, 8), 2.0)
    assert (r.new_blocks, r.reused_blocks) == (2, 2)
    # the two duplicate blocks went back to the pool, the two new ones into the tree
    assert (pool.tree, pool.private) == (5 * BT, 0)
    assert cache.stats.duplicate_blocks == 2
    assert cache.peek_prefix(keys(1, 2, 3)) == 3
    assert cache.peek_prefix(keys(1, 2, 7, 8)) == 4
    cache.check()


def test_insert_of_a_cached_prefix_adds_nothing():
    pool, cache = make()
    fill(cache, keys(1, 2, 3, 4), 1.0)
    r = fill(cache, keys(1, 2), 2.0)
    assert (r.new_blocks, r.reused_blocks) == (0, 2)
    assert list(cache.path_keys(r.node)) == [1, 2]
    assert (pool.tree, pool.private) == (4 * BT, 0)
    cache.check()


def test_insert_with_cached_blocks_frees_only_true_duplicates():
    pool, cache = make()
    fill(cache, keys(1, 2), 1.0)
    m, r = serve(cache, keys(1, 2, 3, 4), 2.0)
    assert m.blocks == 2 and (r.new_blocks, r.reused_blocks) == (2, 2)
    assert cache.stats.duplicate_blocks == 0
    assert (pool.tree, pool.private) == (4 * BT, 0)


def test_insert_refuses_more_private_blocks_than_the_pool_holds():
    _, cache = make()
    with pytest.raises(ValueError):
        cache.insert(keys(1, 2), 1.0)
    cache.check()


def test_peek_does_not_split_refresh_or_count():
    _, cache = make()
    fill(cache, keys(1, 2, 3), 1.0)
    assert cache.peek_prefix(keys(1, 2, 9)) == 2
    assert cache.node_count == 1 and cache.stats.lookups == 0
    assert next(cache.iter_nodes()).last_access == 1.0


# ---- locks -----------------------------------------------------------------------------------


def test_lock_moves_the_path_between_evictable_and_protected():
    _, cache = make()
    fill(cache, keys(1, 2, 3, 4), 1.0)
    m = cache.match_prefix(keys(1, 2), 2.0)
    cache.lock(m.node)
    assert (cache.protected_tokens, cache.evictable_tokens) == (2 * BT, 2 * BT)
    cache.lock(m.node)  # a second sharer
    cache.unlock(m.node)
    assert cache.protected_tokens == 2 * BT
    cache.unlock(m.node)
    assert (cache.protected_tokens, cache.evictable_tokens) == (0, 4 * BT)
    with pytest.raises(ValueError):
        cache.unlock(m.node)
    cache.check()


def test_lock_protects_from_eviction():
    pool, cache = make()
    fill(cache, keys(1, 2, 3), 1.0)
    fill(cache, keys(5, 6), 2.0)
    m = cache.match_prefix(keys(1, 2, 3), 3.0)
    cache.lock(m.node)
    freed = cache.evict(100 * BT)
    assert freed == 2 * BT
    assert cache.peek_prefix(keys(1, 2, 3)) == 3
    assert cache.peek_prefix(keys(5, 6)) == 0
    cache.unlock(m.node)
    assert cache.evict(100 * BT) == 3 * BT
    assert pool.tree == 0 and pool.free == pool.capacity
    cache.check()


def test_insert_below_a_locked_prefix_just_works():
    # Locks are counts on the path: the split hands the head the count, a new node below
    # a locked one starts evictable, and moving the lock to the longer node is lock+unlock.
    _, cache = make()
    fill(cache, keys(1, 2, 3, 4), 1.0)
    m = cache.match_prefix(keys(1, 2, 3, 4), 2.0)
    cache.lock(m.node)
    r = fill(cache, keys(1, 2, 8, 9), 3.0)  # splits the locked node
    assert r.reused_blocks == 2 and r.node.lock_ref == 0
    assert cache.protected_tokens == 4 * BT and cache.evictable_tokens == 2 * BT
    cache.check()
    r2 = fill(cache, keys(1, 2, 3, 4, 5), 4.0)
    cache.lock(r2.node)
    cache.unlock(m.node)
    assert cache.protected_tokens == 5 * BT
    assert cache.evict(100 * BT) == 2 * BT  # only the unpinned branch 8, 9
    cache.check()


# ---- eviction --------------------------------------------------------------------------------


def test_leaf_lru_evicts_the_least_recent_leaf_first():
    _, cache = make()
    fill(cache, keys(1, 1), 1.0)
    fill(cache, keys(2, 2), 2.0)
    fill(cache, keys(3, 3), 3.0)
    cache.match_prefix(keys(1, 1), 4.0)  # refresh: now 2 is the oldest
    assert cache.evict(2 * BT) == 2 * BT
    assert cache.peek_prefix(keys(2, 2)) == 0
    assert cache.peek_prefix(keys(1, 1)) == 2 and cache.peek_prefix(keys(3, 3)) == 2
    assert cache.evict(1) == BT
    assert cache.peek_prefix(keys(3, 3)) == 1  # oldest remaining leaf, tail block first
    cache.check()


def test_leaf_lru_takes_only_the_tail_blocks_needed():
    _, cache = make()
    fill(cache, keys(1, 2, 3, 4, 5, 6), 1.0)
    assert cache.evict(2 * BT - 5) == 2 * BT
    assert cache.peek_prefix(keys(1, 2, 3, 4, 5, 6)) == 4
    assert cache.stats.evictions == 2
    cache.check()


def test_eviction_cascades_to_the_parent_once_it_is_an_unlocked_leaf():
    _, cache = make()
    fill(cache, keys(1, 2), 1.0)
    fill(cache, keys(1, 2, 3, 4), 2.0)
    fill(cache, keys(9), 3.0)
    # leaves: [3, 4] at 2.0 and [9] at 3.0; [1, 2] is inner and was last touched at 2.0
    assert cache.evict(3 * BT) == 3 * BT
    assert cache.peek_prefix(keys(1, 2, 3, 4)) == 1  # 3, 4 went, then the parent's tail
    assert cache.peek_prefix(keys(9)) == 1  # the newer leaf survives its older parent chain
    cache.check()


def test_parent_stays_while_it_still_has_a_child():
    _, cache = make()
    fill(cache, keys(1, 2, 3), 1.0)
    fill(cache, keys(1, 2, 4), 2.0)
    assert cache.evict(2 * BT) == 2 * BT
    # leaf 3 (oldest) then leaf 4; the shared [1, 2] had a child until the end
    assert cache.peek_prefix(keys(1, 2, 3)) == 2 and cache.peek_prefix(keys(1, 2, 4)) == 2
    cache.check()


def test_make_room_evicts_only_what_is_needed_and_refuses_the_impossible():
    pool, cache = make(capacity_blocks=10)
    fill(cache, keys(1, 2, 3, 4, 5, 6), 1.0)
    assert pool.alloc_private(2 * BT)
    assert cache.make_room(2 * BT)  # already free
    assert cache.stats.evictions == 0
    assert cache.make_room(4 * BT)
    assert pool.free == 4 * BT and cache.stats.evictions == 2
    m = cache.match_prefix(keys(1, 2, 3, 4), 2.0)
    cache.lock(m.node)
    assert not cache.make_room(7 * BT)  # would need pinned blocks
    assert cache.stats.evictions == 2  # nothing dropped in vain
    cache.check()


def test_recency_evicts_the_root_side_first_and_orphans_the_rest():
    pool, cache = make(policy="recency")
    fill(cache, keys(1, 2, 3, 4), 1.0)
    fill(cache, keys(1, 2, 3, 4, 5, 6), 1.0)
    fill(cache, keys(7, 8), 2.0)
    assert cache.evict(1) == BT
    # head block 1 went: the whole chain is unreachable but still holds memory
    assert cache.peek_prefix(keys(1, 2, 3, 4, 5, 6)) == 0
    assert cache.orphan_tokens == 5 * BT
    assert pool.tree == 7 * BT
    assert cache.stats.orphaned_blocks == 5
    cache.check()
    assert cache.evict(5 * BT) == 5 * BT  # the orphans go in their own turn
    assert cache.orphan_tokens == 0 and cache.peek_prefix(keys(7, 8)) == 2
    cache.check()


def test_leaf_lru_never_orphans():
    _, cache = make()
    fill(cache, keys(1, 2, 3, 4), 1.0)
    fill(cache, keys(1, 2, 3, 4, 5, 6), 1.0)
    assert cache.evict(1) == BT
    assert cache.peek_prefix(keys(1, 2, 3, 4, 5, 6)) == 5
    assert cache.orphan_tokens == 0 and cache.stats.orphaned_blocks == 0
    cache.check()


def test_unknown_policy_is_rejected():
    with pytest.raises(ValueError, match="leaf-lru"):
        RadixCache(KVPool(10), 16, policy="lfu")


# ---- scale -----------------------------------------------------------------------------------


def test_long_growing_sessions_stay_fast():
    # Each turn extends the last by 40 blocks, to ~8000 blocks per session.
    pool = KVPool(40 * 8_000 * BT)
    cache = RadixCache(pool, BT)
    rng = np.random.default_rng(0)
    sessions = [rng.integers(0, 2**62, size=8_000) for _ in range(4)]
    start = time.perf_counter()
    now = 0.0
    for turn in range(1, 200):
        for s in sessions:
            now += 1.0
            m = cache.match_prefix(s[: 40 * turn], now)
            assert m.blocks == 40 * (turn - 1)
            cache.lock(m.node)
            need = (40 * turn - m.blocks) * BT
            assert cache.make_room(need) and pool.alloc_private(need)
            cache.insert(s[: 40 * turn], now, cached_blocks=m.blocks)
            cache.unlock(m.node)
    assert time.perf_counter() - start < 5.0
    cache.check()


# ---- the cyclic sweep ------------------------------------------------------------------------


def cyclic_sweep_hit_tokens(policy, sessions=8, prefix_blocks=32, tail_blocks=64, rounds=6):
    """Sessions share a long prefix, each with its own tail, visited round-robin with a
    cache a little smaller than the working set. Returns hit tokens after the first round."""
    working_set = prefix_blocks + sessions * tail_blocks
    pool = KVPool((working_set - tail_blocks // 3) * BT)
    cache = RadixCache(pool, BT, policy)
    prefix = np.arange(prefix_blocks, dtype=np.int64)
    prompts = [
        np.concatenate([prefix, 1_000_000 * (s + 1) + np.arange(tail_blocks, dtype=np.int64)])
        for s in range(sessions)
    ]
    hits, now = 0, 0.0
    for visit in range(rounds * sessions):
        now += 1.0
        m, _ = serve(cache, prompts[visit % sessions], now)
        if visit >= sessions:
            hits += m.tokens
    return hits


def test_cyclic_sweep_leaf_lru_keeps_reuse_recency_loses():
    leaf = cyclic_sweep_hit_tokens("leaf-lru")
    recency = cyclic_sweep_hit_tokens("recency")
    visits = 5 * 8
    # recency drops each tail from the front just before its reuse: only the prefix hits
    assert recency == visits * 32 * BT
    # leaf-lru gives up only the tail ends it needs: prefix plus most of each tail hit
    assert leaf >= 1.5 * recency
    assert leaf == visits * (32 + 64 - 21) * BT
