"""A radix prefix cache over key blocks, sharing one :class:`KVPool` with the running requests.

The unit of the tree is a *key block*: ``block_tokens`` tokens named by one int64 key (a
hash id). A prompt is a numpy int64 array of keys, one per full block. The tree is
compressed: each node's edge is an array of several keys, children are found by their
first key, and an edge is matched with one vectorised comparison -- prompts run to
thousands of blocks and every turn of a session extends the last, so a per-block Python
loop on the match path would dominate a replay.

Request life cycle as the engine drives it (SGLang's ``RadixCache``)::

    m = cache.match_prefix(keys, now)                # longest cached prefix, refreshed
    cache.lock(m.node)                               # pin it while the request runs
    cache.make_room(need) and pool.alloc_private(need)   # uncached tail + decode growth
    ...                                              # prefill / decode
    r = cache.insert(keys, now, cached_blocks=m.blocks)  # computed blocks become cached
    pool.free_private(leftover)                      # partial last block, and so on
    cache.unlock(m.node)                             # (or lock r.node to keep going)

Locks are counts on every node from the locked node to the root, so inserting while a
matched prefix is locked just works: a split hands the head the same count, and a new node
hung below a locked one starts unlocked (evictable) until someone locks it.

Eviction policies, chosen by name:

* ``leaf-lru``: least recently used among unpinned leaves. Only the tail blocks needed are
  taken from the chosen leaf (trimmed in place: its head stays cached). When a parent
  becomes an unpinned leaf it joins the candidates, so eviction cascades up.
* ``radix-leaf`` (SGLang's): the same order, each chosen leaf freed whole.
* ``block-pool`` (vLLM's and ATOM's free-block queue): unpinned leaves in the order their
  last holder freed them, tail blocks first; a lookup that is not admitted refreshes nothing.
* ``recency``: least recently used among *all* unpinned nodes, ties broken toward the root,
  as a block LRU that frees a request's blocks front-first would. It exists to show the
  cyclic-sweep pathology. Evicting an inner node (or the head blocks of one) makes its
  whole subtree unreachable for matching, yet those orphaned nodes still hold memory until
  each is evicted in its own turn of the LRU order.

Both keep candidates in a heap with lazy deletion: every change of a node's priority or
eligibility bumps its ``stamp`` and pushes a fresh entry; stale entries are skipped on pop,
so lock, unlock and access stay O(path).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType

import attrs
import numpy as np

from inferasim.serve.kv_pool import KVPool

_EMPTY_KEYS = np.empty(0, dtype=np.int64)


class RadixNode:
    """One edge of the tree: ``keys`` is the run of key blocks from the parent to here."""

    __slots__ = (
        "keys",
        "blocks",
        "first_key",
        "parent",
        "children",
        "lock_ref",
        "last_access",
        "depth",
        "uid",
        "stamp",
        "held",
        "orphan",
        "shape",
        "released",
    )

    def __init__(self, keys: np.ndarray, parent: RadixNode | None, uid: int, now: float):
        self.parent = parent
        self.children: dict[int, RadixNode] = {}
        self.lock_ref = 0
        self.last_access = now
        # Blocks between the root and this edge's first block; the recency tie-break.
        self.depth = 0 if parent is None else parent.depth + parent.blocks
        self.uid = uid
        self.stamp = 0  # bumped on every heap push; older heap entries are stale
        self.held = True  # False once its memory went back to the pool
        self.orphan = False  # held, but cut off from the root (recency only)
        # Bumped whenever the edge's keys change or the node leaves the tree (peek witnesses).
        self.shape = -1
        # When its last holder let it go, as a sequence number (block-pool order)
        self.released = 0
        self.reshape(keys)

    def reshape(self, keys: np.ndarray) -> None:
        """Set the edge's keys; its length and first key are kept beside them because every
        walk, lock and eviction reads them (an attribute read, not a call)."""
        self.keys = keys
        self.blocks = len(keys)
        self.first_key = int(keys[0]) if len(keys) else -1
        self.shape += 1

    def __repr__(self) -> str:
        return (
            f"RadixNode(uid={self.uid}, depth={self.depth}, blocks={self.blocks}, "
            f"lock_ref={self.lock_ref}, last_access={self.last_access})"
        )


@dataclass(frozen=True, slots=True)
class MatchResult:
    node: RadixNode  # ends exactly at the matched boundary (the root if nothing matched)
    blocks: int
    tokens: int


@dataclass(frozen=True, slots=True)
class InsertResult:
    node: RadixNode  # ends exactly at the last inserted block
    new_blocks: int  # moved from the caller's private tokens into the tree
    reused_blocks: int  # already in the tree: the length of the prefix the walk found


@attrs.define(slots=True)
class CacheStats:
    lookups: int = 0
    lookup_blocks: int = 0
    hit_blocks: int = 0
    inserted_blocks: int = 0  # new to the tree
    reused_blocks: int = 0  # found in the tree by insert
    duplicate_blocks: int = 0  # computed privately although cached: freed by insert
    evictions: int = 0  # blocks
    evicted_nodes: int = 0
    orphaned_blocks: int = 0  # made unreachable while still held (recency only)


class LeafLRU:
    """LRU among unpinned leaves; take only the tail blocks needed."""

    name = "leaf-lru"
    evicts_tail = True
    whole_leaf = False

    @staticmethod
    def eligible(node: RadixNode) -> bool:
        return node.lock_ref == 0 and not node.children

    @staticmethod
    def priority(node: RadixNode) -> tuple:
        return (node.last_access, node.uid)


class RadixLeaf(LeafLRU):
    """SGLang's RadixCache: LRU (last access) among unpinned leaves, each freed whole, a
    parent joining the candidates once childless (engines.md 4.2, ``evict``)."""

    name = "radix-leaf"
    whole_leaf = True


class BlockPool(LeafLRU):
    """vLLM's (and ATOM's) free-block queue: a block goes to the queue's end when its last
    holder frees it, a request's blocks tail first, and allocation takes from the front; a
    hit takes a block out of the queue. So the order is release order, not access order (a
    lookup that is not admitted does not refresh anything), and a chain's tail goes before
    its prefix, which makes the candidates unpinned leaves (engines.md 4.1, 4.3)."""

    name = "block-pool"

    @staticmethod
    def priority(node: RadixNode) -> tuple:
        return (node.released, node.uid)


class RecencyLRU:
    """LRU among all unpinned nodes, nearest the root first on ties; takes head blocks first."""

    name = "recency"
    evicts_tail = False
    whole_leaf = False

    @staticmethod
    def eligible(node: RadixNode) -> bool:
        return node.lock_ref == 0

    @staticmethod
    def priority(node: RadixNode) -> tuple:
        return (node.last_access, node.depth, node.uid)


EVICTION_POLICIES: Mapping[str, type[LeafLRU] | type[RecencyLRU]] = MappingProxyType(
    {p.name: p for p in (LeafLRU, RadixLeaf, BlockPool, RecencyLRU)}
)


def _common_blocks(edge: np.ndarray, keys: np.ndarray) -> int:
    """Length of the common prefix of two key arrays whose first keys agree (the child was
    found by its first key), in one vectorised comparison."""
    n = min(len(edge), len(keys))
    if n == 1:
        return 1  # most edges hold one block once turns have split them: no array work
    differs = edge[:n] != keys[:n]
    first = int(differs.argmax()) if n else 0
    return first if n and differs[first] else n


class RadixCache:
    def __init__(self, pool: KVPool, block_tokens: int, policy: str = "leaf-lru"):
        if block_tokens <= 0:
            raise ValueError(f"block_tokens must be > 0, got {block_tokens}")
        if policy not in EVICTION_POLICIES:
            raise ValueError(
                f"unknown eviction policy {policy!r}; one of {sorted(EVICTION_POLICIES)}"
            )
        self.pool = pool
        self.block_tokens = int(block_tokens)
        self.policy = EVICTION_POLICIES[policy]()
        self.stats = CacheStats()
        self._next_uid = 1
        self.root = RadixNode(_EMPTY_KEYS, None, 0, float("-inf"))
        self._nodes: set[RadixNode] = set()  # every node holding memory, orphans included
        self._heap: list[tuple] = []
        self._evictable = 0
        self._protected = 0
        self._orphan_tokens = 0
        self._releases = 0  # the block-pool order's clock
        # Called with the keys from the root through blocks about to be evicted (a host tier
        # that writes back what the GPU cache gives up); None = nobody listens.
        self.on_evict = None
        # A fleet index's view of this cache (``prefix_index.CacheListener``): told of the
        # blocks (by depth and key) as they become reachable and as they stop being so.
        self.listener = None

    # ---- sizes -------------------------------------------------------------------------

    @property
    def evictable_tokens(self) -> int:
        return self._evictable

    @property
    def protected_tokens(self) -> int:
        return self._protected

    @property
    def cached_tokens(self) -> int:
        return self._evictable + self._protected

    @property
    def orphan_tokens(self) -> int:
        """Held but unreachable (recency only): memory that can never be a hit again."""
        return self._orphan_tokens

    @property
    def node_count(self) -> int:
        return len(self._nodes)

    # ---- lookups -----------------------------------------------------------------------

    def match_prefix(
        self, keys: np.ndarray, now: float, max_blocks: int | None = None
    ) -> MatchResult:
        """Longest cached prefix of ``keys`` (at most ``max_blocks``), refreshed to ``now``.

        The node the match ends in is split at the boundary, so the result's node covers
        exactly the matched blocks and locking it pins nothing beyond them."""
        keys = _as_keys(keys)
        if max_blocks is not None:
            keys = keys[: max(0, max_blocks)]
        node, blocks = self._walk(keys, now)
        self.stats.lookups += 1
        self.stats.lookup_blocks += len(keys)
        self.stats.hit_blocks += blocks
        return MatchResult(node, blocks, blocks * self.block_tokens)

    def peek_prefix(self, keys: np.ndarray, max_blocks: int | None = None) -> int:
        """Matched blocks, without splitting, refreshing or counting: for admission order."""
        return self._peek(keys, max_blocks, None)

    def peek_witnessed(self, keys: np.ndarray,
                       max_blocks: int | None = None) -> tuple[int, tuple]:
        """``peek_prefix`` and a witness of what the answer depends on: each child lookup
        the walk made and the shape of the edge it found. While ``unchanged(witness)`` the
        answer stands -- prefix-first order asks it of every waiting request at every
        admission, and the tree changes somewhere at almost every step, but rarely on a
        given request's path."""
        seen: list = []
        return self._peek(keys, max_blocks, seen), tuple(seen)

    def _peek(self, keys: np.ndarray, max_blocks: int | None, seen: list | None) -> int:
        keys = _as_keys(keys)
        if max_blocks is not None:
            keys = keys[: max(0, max_blocks)]
        node, pos = self.root, 0
        while pos < len(keys):
            key = int(keys[pos])
            child = node.children.get(key)
            if seen is not None:
                seen.append((node, key, child, 0 if child is None else child.shape))
            if child is None:
                break
            matched = _common_blocks(child.keys, keys[pos:])
            pos += matched
            if matched < child.blocks:
                break
            node = child
        return pos

    @staticmethod
    def unchanged(witness: tuple) -> bool:
        for node, key, child, shape in witness:
            if node.children.get(key) is not child or (child is not None
                                                        and child.shape != shape):
                return False
        return True

    def insert(self, keys: np.ndarray, now: float, cached_blocks: int = 0) -> InsertResult:
        """Cache the blocks a request computed.

        The caller holds ``cached_blocks`` leading blocks from the tree (its locked match;
        0 means it computed every block privately) and the rest as private tokens. Blocks
        new to the tree move private -> tree; blocks the walk finds already cached beyond
        ``cached_blocks`` were computed twice, and their private copy goes back to the pool.
        The path is refreshed to ``now``."""
        keys = _as_keys(keys)
        n = len(keys)
        if not 0 <= cached_blocks <= n:
            raise ValueError(f"cached_blocks={cached_blocks} outside 0..{n}")
        bt = self.block_tokens
        if (n - cached_blocks) * bt > self.pool.private:
            raise ValueError(
                f"insert of {n - cached_blocks} private blocks but the pool holds only "
                f"{self.pool.private} private tokens"
            )
        node, reused = self._walk(keys, now)
        if reused < cached_blocks:
            # Only possible if the caller let its matched prefix go unpinned and evicted.
            raise ValueError(f"caller claims {cached_blocks} cached blocks, tree has {reused}")
        new_blocks = n - reused
        if new_blocks:
            node = self._new_child(node, keys[reused:].copy(), now)
            self.pool.private_to_tree(new_blocks * bt)
            if self.listener is not None:
                self.listener.added(node.depth, node.keys)
        duplicates = reused - cached_blocks
        self.pool.free_private(duplicates * bt)
        self.stats.inserted_blocks += new_blocks
        self.stats.reused_blocks += reused
        self.stats.duplicate_blocks += duplicates
        return InsertResult(node, new_blocks, reused)

    # ---- pins --------------------------------------------------------------------------

    def lock(self, node: RadixNode) -> None:
        self._require_reachable(node)
        bt = self.block_tokens
        while node is not self.root:
            if node.lock_ref == 0:
                tokens = node.blocks * bt
                self._evictable -= tokens
                self._protected += tokens
            node.lock_ref += 1
            node = node.parent

    def unlock(self, node: RadixNode, released: bool = True) -> None:
        """Drop one pin along the path. ``released``: its holder frees the blocks, which puts
        them at the end of a block pool's order, deepest first; False when a lookup only
        pinned them for an admission that did not happen (nothing was taken or freed)."""
        self._require_reachable(node)
        bt = self.block_tokens
        while node is not self.root:
            if node.lock_ref <= 0:
                raise ValueError(f"unlock of an unlocked node {node}")
            node.lock_ref -= 1
            if node.lock_ref == 0:
                tokens = node.blocks * bt
                self._protected -= tokens
                self._evictable += tokens
                if released:
                    self._releases += 1
                    node.released = self._releases
                self._offer(node)
            node = node.parent

    # ---- eviction ----------------------------------------------------------------------

    def evict(self, tokens: int) -> int:
        """Free at least ``tokens`` (rounded up to whole blocks) if that much is evictable;
        returns the tokens freed."""
        need = -(-max(0, tokens) // self.block_tokens)
        freed = 0
        while freed < need:
            node = self._top_candidate()
            if node is None:
                break
            take = node.blocks if self.policy.whole_leaf else min(node.blocks, need - freed)
            if self.on_evict is not None:
                self.on_evict(self.path_keys(node))
            if take < node.blocks and self.policy.evicts_tail:
                self._trim_leaf(node, take)  # still the top candidate, its entry still valid
                freed += take
                continue
            heapq.heappop(self._heap)  # the entry ``_top_candidate`` found
            if take < node.blocks:
                # a head-first policy gives up the head blocks (tail-first trims, above)
                node = self._split(node, take)
            freed += node.blocks
            self._release(node)
        return freed * self.block_tokens

    def _trim_leaf(self, node: RadixNode, take: int) -> None:
        """Free the last ``take`` blocks of an unpinned leaf in place: the head stays cached
        under the same node, which keeps its place among the candidates (eviction of the
        rest of this leaf's tail comes next, as LRU over its blocks would have it). Its
        priority (recency, uid) does not change, so its heap entry stays as it is."""
        tokens = take * self.block_tokens
        keep = node.blocks - take
        if self.listener is not None:
            self.listener.removed(node.depth + keep, node.keys[keep:])
        node.reshape(node.keys[:keep])
        self._evictable -= tokens
        self.pool.tree_to_free(tokens)
        self.stats.evictions += take

    def make_room(self, tokens: int) -> bool:
        """Evict until the pool has ``tokens`` free. When even evicting everything unpinned
        would not do, nothing is evicted and False is returned: dropping reuse that cannot
        buy the admission would be pure loss."""
        short = tokens - self.pool.free
        if short <= 0:
            return True
        if short > self._evictable:
            return False
        self.evict(short)
        return self.pool.free >= tokens

    # ---- inspection (tests, reports) ---------------------------------------------------

    def iter_nodes(self) -> Iterator[RadixNode]:
        """Reachable nodes, parents before children (the root excluded)."""
        stack = list(self.root.children.values())
        while stack:
            node = stack.pop()
            yield node
            stack.extend(node.children.values())

    def path_keys(self, node: RadixNode) -> np.ndarray:
        parts = []
        while node is not None and node is not self.root:
            parts.append(node.keys)
            node = node.parent
        return np.concatenate(parts[::-1]) if parts else _EMPTY_KEYS

    def check(self) -> None:
        """Walk the whole tree and the heap; raises AssertionError on a broken invariant."""
        self.pool.check()
        bt = self.block_tokens
        reachable: set[RadixNode] = set()
        stack = [self.root]
        while stack:
            node = stack.pop()
            child_locks = 0
            for first, child in node.children.items():
                assert child.held and not child.orphan, f"dead child {child}"
                assert child.parent is node, f"broken parent link {child}"
                assert child.blocks > 0 and child.first_key == first, f"bad edge key {child}"
                assert child.depth == node.depth + node.blocks, f"bad depth {child}"
                child_locks += child.lock_ref
                reachable.add(child)
                stack.append(child)
            if node is not self.root:
                assert node.lock_ref >= child_locks, f"lock_ref below its children's {node}"
        orphans = self._nodes - reachable
        assert reachable <= self._nodes, "reachable node not registered"
        for node in orphans:
            assert node.held and node.orphan and node.lock_ref == 0, f"bad orphan {node}"
        assert not (orphans and self.policy.evicts_tail), "leaf-lru must never orphan"
        evictable = sum(n.blocks for n in self._nodes if n.lock_ref == 0) * bt
        protected = sum(n.blocks for n in self._nodes if n.lock_ref > 0) * bt
        assert evictable == self._evictable, f"evictable {self._evictable} != {evictable}"
        assert protected == self._protected, f"protected {self._protected} != {protected}"
        assert evictable + protected == self.pool.tree, "tree tokens != pool.tree"
        assert sum(n.blocks for n in orphans) * bt == self._orphan_tokens, "orphan tokens"
        live = {(node.uid, stamp, prio) for prio, stamp, node in self._heap if node.held}
        for node in self._nodes:
            if self.policy.eligible(node):
                entry = (node.uid, node.stamp, self.policy.priority(node))
                assert entry in live, f"eligible node without a current heap entry {node}"

    # ---- internals ---------------------------------------------------------------------

    def _walk(self, keys: np.ndarray, now: float) -> tuple[RadixNode, int]:
        """Follow ``keys`` from the root, splitting where the match ends mid-edge and
        refreshing every node on the path."""
        node, pos = self.root, 0
        while pos < len(keys):
            child = node.children.get(int(keys[pos]))
            if child is None:
                break
            matched = _common_blocks(child.keys, keys[pos:])
            partial = matched < child.blocks
            if partial:
                child = self._split(child, matched)
            node = child
            pos += matched
            self._touch(node, now)
            if partial:
                break
        return node, pos

    def _split(self, node: RadixNode, at: int) -> RadixNode:
        """Cut ``node``'s edge after ``at`` blocks; return the new head. The original object
        stays the tail, so anyone holding it (a lock, a match) still ends at the same place."""
        head = RadixNode(node.keys[:at], node.parent, self._take_uid(), node.last_access)
        head.lock_ref = node.lock_ref  # every lock through the tail passes the head
        head.released = node.released
        head.orphan = node.orphan
        if node.parent is not None:
            node.parent.children[head.first_key] = head
        head.children[int(node.keys[at])] = node
        node.reshape(node.keys[at:])
        node.parent = head
        node.depth += at
        self._nodes.add(head)
        self._offer(node)  # its depth changed, which is part of the recency priority
        self._offer(head)
        return head

    def _new_child(self, parent: RadixNode, keys: np.ndarray, now: float) -> RadixNode:
        node = RadixNode(keys, parent, self._take_uid(), now)
        self._releases += 1
        node.released = self._releases
        parent.children[node.first_key] = node
        self._nodes.add(node)
        self._evictable += node.blocks * self.block_tokens
        self._offer(node)
        return node

    def _release(self, node: RadixNode) -> None:
        """Give an unpinned node's memory back to the pool and drop it from the tree."""
        tokens = node.blocks * self.block_tokens
        parent = node.parent
        node.shape += 1
        if self.listener is not None and not node.orphan:
            self.listener.removed(node.depth, node.keys)
        if parent is not None:
            del parent.children[node.first_key]
        for child in node.children.values():
            child.parent = None
            self._orphan_subtree(child)
        node.children = {}
        node.parent = None
        node.held = False
        self._nodes.discard(node)
        self._evictable -= tokens
        if node.orphan:
            self._orphan_tokens -= tokens
        self.pool.tree_to_free(tokens)
        self.stats.evictions += node.blocks
        self.stats.evicted_nodes += 1
        if parent is not None and parent is not self.root and not parent.orphan:
            self._offer(parent)  # under leaf-lru it may just have become a leaf

    def _orphan_subtree(self, top: RadixNode) -> None:
        stack = [top]
        while stack:
            node = stack.pop()
            if node.orphan:
                continue
            node.orphan = True
            if self.listener is not None:
                self.listener.removed(node.depth, node.keys)  # unreachable: no match
            self._orphan_tokens += node.blocks * self.block_tokens
            self.stats.orphaned_blocks += node.blocks
            stack.extend(node.children.values())

    def _touch(self, node: RadixNode, now: float) -> None:
        node.last_access = now
        self._offer(node)

    def _offer(self, node: RadixNode) -> None:
        """Invalidate the node's heap entries and push a fresh one if it is a candidate."""
        node.stamp += 1
        if not self.policy.eligible(node):
            return
        heapq.heappush(self._heap, (self.policy.priority(node), node.stamp, node))
        if len(self._heap) > 2 * len(self._nodes) + 64:
            self._compact_heap()

    def _compact_heap(self) -> None:
        self._heap = [
            (self.policy.priority(node), node.stamp, node)
            for node in self._nodes
            if self.policy.eligible(node)
        ]
        heapq.heapify(self._heap)

    def _top_candidate(self) -> RadixNode | None:
        """The next node to evict, its entry left at the top of the heap (the stale entries
        above it are dropped)."""
        heap = self._heap
        eligible = self.policy.eligible
        while heap:
            _, stamp, node = heap[0]
            if node.held and stamp == node.stamp and eligible(node):
                return node
            heapq.heappop(heap)
        return None

    def _require_reachable(self, node: RadixNode) -> None:
        if node is not self.root and (not node.held or node.orphan):
            raise ValueError(f"node is no longer in the tree: {node}")

    def _take_uid(self) -> int:
        uid = self._next_uid
        self._next_uid += 1
        return uid


_INT64 = np.dtype(np.int64)


def _as_keys(keys: np.ndarray) -> np.ndarray:
    # Every workload hands over 1-D int64 key arrays: taken as they are, without the two
    # numpy calls (a few per admission) the conversion costs
    if type(keys) is np.ndarray and keys.dtype is _INT64 and keys.ndim == 1:
        return keys
    return np.asarray(keys, dtype=np.int64).reshape(-1)
