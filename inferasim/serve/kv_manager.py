"""The engine's view of KV memory: one pool shared by the prefix cache and the running requests.

A request holds its matched prefix through a lock on the cache (counted once however many
requests share it) and its own uncached tail and decode growth as private tokens, rounded
up to whole pages. Admission needs room for the uncached tail only, never the whole context
(plus, for a model with bounded windows, the windows every running request holds).
"""

from __future__ import annotations

import numpy as np

from inferasim.serve.engine_policy import PrefixCounter
from inferasim.serve.kv_pool import KVPool
from inferasim.serve.live import LiveRequest
from inferasim.serve.radix_cache import RadixCache
from inferasim.workload.keys import own_block_keys


class KVManager:
    def __init__(self, capacity_tokens: int, page_size: int, block_tokens: int,
                 eviction_policy: str, prefix_caching: bool, window_tokens: int = 0,
                 counter: PrefixCounter | None = None):
        """``window_tokens``: what every admitted request holds besides its context, for the
        layers that keep a bounded window (sliding-window or compressed layers' raw window),
        in tokens of this pool (``arch.memory.window_pool_tokens``): one allocation with the rest."""
        self.pool = KVPool(capacity_tokens)
        self.cache = RadixCache(self.pool, block_tokens, eviction_policy)
        self.page = page_size
        self.bt = block_tokens
        self.prefix_caching = prefix_caching
        self.window = window_tokens
        self.counter = counter if counter is not None else PrefixCounter()
        self.held = 0  # finished requests whose KV stays pinned for a transfer (holds_kv)
        self.tier = None  # a host KV tier behind the pool (serve/offload.KVTier), if any
        # A preallocation first matches this cache (a vLLM decode instance counts its own
        # hits before it pulls the rest: get_num_new_matched_tokens, engines.md 6)
        self.prealloc_matches = False

    def refusal(self, tokens: int, pool: str = "pool", holders: int = 0) -> str:
        """Why a request of ``tokens`` context cannot be admitted into this pool with nothing
        running. Either it is longer than the pool, or ``holders`` requests waiting behind it
        hold their preallocated pages (a disaggregated decode instance's transferred
        prompts), which only running them would free: a head-of-line stall, where the
        engine's arrival-order queue would wait for ever (vLLM's FCFS scheduler stops at a
        head it cannot allocate)."""
        windows = f" (+{self.window} for its bounded windows)" if self.window else ""
        if tokens + self.window <= self.pool.capacity and holders:
            return (f"stalled at the head of the queue: needs {tokens} tokens of KV{windows}, "
                    f"{self.available} of the {pool}'s {self.pool.capacity} free or evictable, "
                    f"{self.pool.private} held by {holders} waiting request(s)' preallocated "
                    "pages that only running them would free (refused here; an arrival-order "
                    "queue would wait for ever)")
        return f"needs {tokens} tokens of KV{windows}; the {pool} holds {self.pool.capacity}"

    def pages(self, tokens: float) -> int:
        """Tokens rounded up to whole pages."""
        n = int(-(-tokens // 1))
        return -(-n // self.page) * self.page

    def _matchable_blocks(self, req: LiveRequest) -> int:
        # At least one token is always computed, so a fully cached prompt recomputes its last block.
        return min(len(req.match_keys), (req.target - 1) // self.bt)

    def matchable_keys(self, req: LiveRequest):
        """The keys a peek of ``req`` matches (a fleet index hashes the same ones)."""
        return req.match_keys[:max(0, self._matchable_blocks(req))]

    def peek_once(self, req: LiveRequest) -> int:
        """``peek`` without its memo, for a router asking every instance once per request:
        a memo per request would be replaced at each instance and never hit."""
        if not self.prefix_caching:
            return 0
        return self.cache.peek_prefix(req.match_keys, self._matchable_blocks(req))

    def peek(self, req: LiveRequest) -> int:
        """Cached prefix blocks, without side effects (for prefix-first admission order).

        Remembered per request while the tree nodes the match walked keep their shape:
        prefix-first ordering asks this of every waiting request at every admission."""
        if not self.prefix_caching:
            return 0
        memo = req.peek_version  # a request waits at one instance: one cache per memo
        if not memo or memo[0] != req.target or not self.cache.unchanged(memo[1]):
            req.peek_blocks, witness = self.cache.peek_witnessed(
                req.match_keys, self._matchable_blocks(req))
            req.peek_version = (req.target, witness)
        return req.peek_blocks

    @property
    def available(self) -> int:
        """Tokens an admission may use: free plus what eviction could free."""
        return self.pool.free + self.cache.evictable_tokens

    def preallocate(self, req: LiveRequest, keep_free: float, now: float = 0.0) -> bool:
        """Allocate the whole prompt's pages ahead of its KV (a disaggregated decode instance's
        preallocation) when ``keep_free`` tokens stay available beside them; with
        ``prealloc_matches``, the prefix cached here at ``now`` is locked
        (``req.tree_tokens``) and only the uncached tail allocated."""
        node, hit = self.cache.root, 0
        if self.prealloc_matches and self.prefix_caching:
            match = self.cache.match_prefix(req.match_keys, now, self._matchable_blocks(req))
            node, hit = match.node, match.tokens
        self.cache.lock(node)
        pages = self.pages(req.spec.prompt_tokens - hit)
        held = pages + self.window
        if held + keep_free > self.available or not self.cache.make_room(held):
            self.cache.unlock(node, released=False)
            return False
        self.pool.alloc_private(held)
        req.private, req.node, req.tree_tokens, req.computed = pages, node, hit, 0
        req.window = self.window
        req.preallocated = True
        return True

    def try_admit(self, req: LiveRequest, now: float, reserve: float = 0.0,
                  reserved_by_others: float = 0.0, first_chunk: int | None = None,
                  gate_whole: bool = True) -> bool:
        """Lock the cached prefix and allocate the uncached tail; False leaves no trace but
        the refreshed access time of the matched path (as a real match would).

        ``first_chunk``: allocate only the pages of the first ``first_chunk`` uncached tokens
        (an engine that allocates per step, vLLM); the rest grows as chunks are scheduled.
        The room asked for is then the whole tail (``gate_whole``) or that chunk."""
        if req.preallocated and req.private:
            req.computed = req.target  # the transferred KV lands in the preallocated pages
            if req.cached_first < 0:
                req.cached_first = 0
            return True
        if self.prefix_caching:
            match = self.cache.match_prefix(req.match_keys, now, self._matchable_blocks(req))
            node, hit = match.node, match.tokens
        else:
            node, hit = self.cache.root, 0
        self.cache.lock(node)
        tail = self.pages(req.target - hit)
        tier = self.tier
        # prompt blocks the host tier holds beyond the GPU's hit, and the storage tier beyond
        # the host's: loaded, not computed
        host = stored = 0
        drive_free = 0.0
        if tier is not None and not req.prefilled:
            host, stored, drive_free = self._tier_blocks(req, hit // self.bt, now)
        loaded = (host + stored) * self.bt
        if first_chunk is not None and not req.prefilled:
            first = self.pages(min(req.target - hit, loaded + first_chunk))
            gate = (tail if gate_whole else first) + self.window
            tail = first
        else:
            gate = tail + self.window
        held = tail + self.window
        if gate + reserve > self.available - reserved_by_others or not self.cache.make_room(held):
            # nothing was taken: the matched path is not freed anew (a block pool keeps its
            # place in the queue)
            self.cache.unlock(node, released=False)
            if self.counter.per_lookup:
                self._count(req, hit)
            return False
        self._count(req, hit)
        self.pool.alloc_private(held)
        req.private, req.node, req.tree_tokens, req.computed = tail, node, hit, hit
        req.window = self.window
        if tier is not None and not req.prefilled:
            self._load_from_tiers(req, hit // self.bt, host, stored, drive_free, now)
        if req.prefilled:
            req.computed = req.target  # the transferred KV lands in the allocated pages
        if req.cached_first < 0:
            req.cached_first = min(hit, req.spec.prompt_tokens)
        return True

    def _tier_blocks(self, req: LiveRequest, gpu_blocks: int,
                     now: float) -> tuple[int, int, float]:
        """(host, storage) blocks the tiers would serve beyond the GPU's ``gpu_blocks``, each
        continuing the prefix where the one above stopped, and when the drive is free after
        this request's read; a storage read prefetched while the request queues counts only
        what has arrived by ``now``."""
        tier, most = self.tier, self._matchable_blocks(req)
        host = tier.peek(req.match_keys, gpu_blocks, most)
        below = tier.below
        if below is None:
            return host, 0, 0.0
        stored = below.peek(req.match_keys, gpu_blocks + host, most)
        if tier.policy.storage_reads == "prefetch":
            stored, free = below.prefetch(stored, req.arrival, now)
            return host, stored, free
        return host, stored, below.busy_until

    def _load_from_tiers(self, req: LiveRequest, gpu_blocks: int, host: int, stored: int,
                         drive_free: float, now: float) -> None:
        """Admission takes what the tiers serve: each tier's hit refreshed and counted, what
        storage served written back into host memory, the tokens loaded rather than computed
        and what the first prefill step still waits for."""
        tier, most = self.tier, self._matchable_blocks(req)
        tier.lookup(req.match_keys, gpu_blocks, most, now)
        if host:
            tier.count_reload(host * self.bt)
        if tier.below is not None:
            tier.below.lookup(req.match_keys, gpu_blocks + host, most, now)
            tier.below.busy_until = drive_free
        if stored:
            end = gpu_blocks + host + stored
            tier.below.count_reload(stored * self.bt)
            tier.write(req.match_keys[:end], now, through=False)
        loaded = (host + stored) * self.bt
        if loaded:
            req.computed = req.tree_tokens + loaded
            req.reload_tokens += host * self.bt
            req.storage_tokens += stored * self.bt
            req.reload_pending = loaded
            req.storage_pending = stored * self.bt

    def _count(self, req: LiveRequest, hit: int) -> None:
        """Add one lookup to the engine's prefix-cache counter (vLLM: the request's tokens so
        far, and the block-aligned hit); never a preempted request's re-admission (vLLM keeps
        those in separate preempted_* counters, out of the hit rate: PR #45202, vllm issue
        #25780) nor a disaggregated decode side's landing of its KV."""
        if req.prefilled or req.preemptions:
            return
        req.lookup_tokens += req.target
        req.lookup_hit_tokens += hit

    def grow(self, req: LiveRequest, context_tokens: float) -> bool:
        """Make the request's private pages cover ``context_tokens``; False if the pool cannot."""
        delta = self.pages(context_tokens - req.tree_tokens) - req.private
        if delta <= 0:
            return True
        if not self.take(delta):
            return False
        req.private += delta
        return True

    def page_deltas(self, context: np.ndarray, tree: np.ndarray, private: np.ndarray) -> np.ndarray:
        """Tokens of new pages each request needs to hold ``context`` (vectorised ``grow``)."""
        pages = np.ceil(np.ceil(context - tree) / self.page) * self.page
        return np.maximum(0.0, pages - private)

    def take(self, tokens: int) -> bool:
        """Allocate ``tokens`` of private pages at once, evicting as needed; the caller shares
        them out. Equal to growing each request in turn: eviction frees the same LRU blocks."""
        if tokens <= 0:
            return True
        if not self.cache.make_room(tokens):
            return False
        self.pool.alloc_private(tokens)
        return True

    def _cache_blocks(self, req: LiveRequest, keys, now: float) -> None:
        cached = req.tree_tokens // self.bt
        if len(keys) <= cached:
            return
        result = self.cache.insert(keys, now, cached_blocks=cached)
        self._offload(keys, now, "cached")  # HiCache writes through what the tree caches
        req.private -= (len(keys) - cached) * self.bt
        self.cache.lock(result.node)
        self.cache.unlock(req.node)
        req.node = result.node
        req.tree_tokens = len(keys) * self.bt

    def _offload(self, keys, now: float, writes: str) -> None:
        """Write ``keys`` to the host tier when its policy writes on this event."""
        if self.tier is not None and self.tier.policy.writes == writes:
            self.tier.write(keys, now)

    def chunk_done(self, req: LiveRequest, computed: float, now: float) -> None:
        """The full blocks of the first ``computed`` tokens of an unfinished prompt become
        cached (still pinned while the request runs): vLLM registers blocks as they fill,
        SGLang inserts each chunk, so a request admitted meanwhile hits them. Idempotent."""
        if req.on_chunk is not None:
            req.on_chunk(computed, now)
        done = self.chunk_keys(req, computed)
        if self.prefix_caching:
            self._cache_blocks(req, done, now)
        self._offload(done, now, "computed")  # LMCache stores each chunk as it is computed

    def chunk_keys(self, req: LiveRequest, computed: float):
        """The full blocks of the first ``computed`` tokens of ``req``'s prompt."""
        keys = req.match_keys
        return keys[:min(len(keys), int(computed) // self.bt)]

    def prompt_done(self, req: LiveRequest, now: float) -> None:
        """The prompt's full blocks become cached (still pinned while the request runs)."""
        if self.prefix_caching:
            self._cache_blocks(req, req.spec.keys, now)
        self._offload(req.spec.keys, now, "computed")

    def finish(self, req: LiveRequest, now: float) -> None:
        """Cache prompt + output blocks the next turn can reuse, unpin, free the rest; a
        request that ``holds_kv`` keeps everything pinned until ``release_held``."""
        if self.prefix_caching and req.spec.finish_keys is not None:
            self._cache_blocks(req, req.spec.finish_keys, now)
        if req.holds_kv:
            # a prefill instance's finished request whose KV is still being read: neither
            # evictable nor free until the transfer ends (engines.md 6)
            req.kv_held = True
            self.held += 1
            return
        self.release(req)

    def release_held(self, req: LiveRequest) -> None:
        """The transfer of a held request's KV ended: its cached blocks become evictable,
        the rest free, as its finish would have left them."""
        if req.kv_held:
            req.kv_held = False
            self.held -= 1
            self.release(req)

    def keep_computed(self, req: LiveRequest, tokens: float, now: float) -> None:
        """Cache the full blocks of the first ``tokens`` tokens the request has computed
        before it is preempted, and remember their keys for its re-admission (vLLM caches
        blocks as they fill, prompt and decode alike, so a recomputed request hits them).
        Its output blocks take the keys the next turn extends (``finish_keys``), else keys
        of its own."""
        if not self.prefix_caching:
            return
        blocks = int(tokens) // self.bt
        base = req.spec.keys if req.spec.finish_keys is None else req.spec.finish_keys
        keys = base[:blocks]
        if blocks > len(base):
            keys = np.concatenate((base, own_block_keys(req.rid, len(base), blocks - len(base))))
        self._cache_blocks(req, keys, now)
        req.resume_keys = keys

    def release(self, req: LiveRequest) -> None:
        """Drop everything the request holds (finish or preemption); cached blocks stay cached."""
        if req.node is not None:
            self.cache.unlock(req.node)
        self.pool.free_private(req.private + req.window)
        req.private, req.window, req.node, req.tree_tokens = 0, 0, None, 0
