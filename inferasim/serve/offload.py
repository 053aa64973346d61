"""A KV tier below the GPU pool: host memory holding prefix blocks the GPU cache gave up or
never kept, as LMCache, SGLang's HiCache and vLLM's offloading connector run it.

The tier is a prefix cache of its own (a ``RadixCache`` over a pool of host tokens, LRU
among leaves), so a block is in at most one place in it and it never holds more than its
capacity. What is written and when, how a reload is overlapped, is the policy's
(``OffloadPolicy``, chosen by ``engine.kv_offload``; docs/engines.md, "KV offload"):

* ``lmcache`` (vLLM + LMCache): every prompt chunk the GPU computes is stored as it
  completes, in whole chunks of ``chunk_tokens`` (256); on admission the tier is looked up
  for the prompt beyond the GPU's hit and what it holds is loaded in the forward that
  prefills the request (the step waits for it).
* ``hicache`` (SGLang HiCache, write-through): what the GPU tree caches is written to host
  as it is inserted; a reload is overlapped layer by layer with the prefill step, so the
  step waits only for what the load takes beyond the step's own compute.
* ``vllm-native`` (vLLM's OffloadingConnector): blocks the GPU cache evicts are written
  back; a reload is asynchronous, the request waiting for it outside any step.

Behind the host tier an optional storage tier (local NVMe; ``engine.offload_storage_gib``)
holds what the host tier is written, as LMCache puts every chunk to all its backends and
HiCache backs host pages up to its storage backend. A prompt is served by the tiers in order
(GPU, then host, then storage, each continuing the prefix where the one above stopped), and
what storage serves is written back into host memory. How a storage read reaches the GPU is
the policy's: LMCache's blocking get runs before the forward (the step waits for the drive
and the host link); HiCache prefetches from storage while the request queues and, under its
default best-effort policy, keeps what arrived by the time the request is scheduled.
"""

from __future__ import annotations

import attrs
import numpy as np

from inferasim.serve.kv_pool import KVPool
from inferasim.serve.radix_cache import RadixCache

OFFLOADS = ("none", "lmcache", "hicache", "vllm-native")


@attrs.frozen
class OffloadPolicy:
    name: str
    writes: str            # "computed" (prompt chunks as they complete), "cached" (GPU tree
    #                        inserts), "evicted" (GPU evictions, write-back)
    reload: str            # "in-step" (the step waits), "overlapped" (layer by layer with
    #                        the step's compute), "async" (the request waits, not the step)
    chunk_tokens: int      # the tier's unit: only whole chunks are stored and matched
    # How a storage tier's hit reaches the host: "in-step" (a blocking read before the
    # forward, LMCache's StorageManager.get), "prefetch" (read while the request queues,
    # HiCache's best-effort prefetch), "" (the connector has no storage level)
    storage_reads: str = ""

    @classmethod
    def named(cls, name: str, chunk_tokens: int) -> OffloadPolicy:
        if name == "lmcache":
            return cls(name, "computed", "in-step", chunk_tokens, "in-step")
        if name == "hicache":
            return cls(name, "cached", "overlapped", chunk_tokens, "prefetch")
        if name == "vllm-native":
            return cls(name, "evicted", "async", chunk_tokens)
        raise ValueError(f"unknown kv_offload {name!r}; one of {OFFLOADS}")


@attrs.define(slots=True)
class TierStats:
    lookups: int = 0
    lookup_tokens: int = 0       # prompt tokens asked of the tier (beyond the tiers above)
    hit_tokens: int = 0          # of which it served (reloaded)
    written_tokens: int = 0
    bytes_to_host: float = 0.0   # written into the tier (for storage: onto the drive)
    bytes_to_gpu: float = 0.0    # read out of it (for storage: into host memory)


class KVTier:
    """One level below an engine instance's GPU pool (``name``: host memory, or storage
    behind it): ``capacity_tokens`` of KV, read over ``link_bytes_per_s`` per GPU (every GPU
    moves its own shard at once, so a token costs ``bytes_per_token`` per GPU over one GPU's
    link: the host link, or the drive a GPU reads from). ``below``: the storage tier behind
    a host tier, written through."""

    def __init__(self, policy: OffloadPolicy, capacity_tokens: int, block_tokens: int,
                 bytes_per_token: float, link_bytes_per_s: float, latency_s: float = 0.0,
                 name: str = "host"):
        self.name = name
        self.below: KVTier | None = None
        # when the link is free of the prefetches already begun (reads queue behind each
        # other: one drive per GPU)
        self.busy_until = 0.0
        self.policy = policy
        self.pool = KVPool(capacity_tokens)
        self.cache = RadixCache(self.pool, block_tokens, "leaf-lru")
        self.bt = block_tokens
        # blocks per tier chunk: whole chunks only (LMCache does not store a partial chunk)
        self.chunk_blocks = max(1, -(-policy.chunk_tokens // block_tokens))
        self.bytes_per_token = bytes_per_token
        self.link = link_bytes_per_s
        self.latency = latency_s
        self.stats = TierStats()

    def _whole_chunks(self, blocks: int) -> int:
        return blocks - blocks % self.chunk_blocks

    def write(self, keys: np.ndarray, now: float, through: bool = True) -> int:
        """Store the whole chunks of ``keys`` the tier does not hold yet, evicting its LRU
        leaves for them, and (``through``) the same in the tier below; returns the tokens this
        tier wrote (0 when even an empty tier is too small)."""
        if through and self.below is not None:
            self.below.write(keys, now)
        n = self._whole_chunks(len(keys))
        if n <= 0:
            return 0
        keys = keys[:n]
        cache = self.cache
        m = cache.match_prefix(keys, now)
        new = n - m.blocks
        if new <= 0:
            return 0
        tokens = new * self.bt
        cache.lock(m.node)  # the held prefix must survive the room made for its tail
        room = cache.make_room(tokens)
        cache.unlock(m.node, released=False)
        if not room:
            return 0
        self.pool.alloc_private(tokens)
        cache.insert(keys, now, cached_blocks=m.blocks)
        self.stats.written_tokens += tokens
        self.stats.bytes_to_host += tokens * self.bytes_per_token
        return tokens

    def peek(self, keys: np.ndarray, from_blocks: int, max_blocks: int) -> int:
        """``lookup`` without refreshing or counting (the admission gate asks first)."""
        held = self.cache.peek_prefix(keys, max_blocks)
        return max(0, self._whole_chunks(held) - from_blocks)

    def lookup(self, keys: np.ndarray, from_blocks: int, max_blocks: int, now: float) -> int:
        """Blocks of ``keys`` beyond the GPU's ``from_blocks`` the tier holds (whole chunks,
        at most ``max_blocks`` in all), refreshed as a hit. Counted in the tier's stats."""
        asked = max(0, max_blocks - from_blocks)
        self.stats.lookups += 1
        self.stats.lookup_tokens += asked * self.bt
        if asked <= 0:
            return 0
        held = self.cache.match_prefix(keys, now, max_blocks).blocks
        # the tier's hit starts at the GPU's: a chunk-aligned prefix of what it holds
        extra = max(0, self._whole_chunks(held) - from_blocks)
        return extra

    def reload_seconds(self, tokens: int) -> float:
        """Time to read ``tokens`` of KV over this tier's link (host to GPU; drive to host),
        every GPU moving its own shard."""
        if tokens <= 0:
            return 0.0
        return self.latency + tokens * self.bytes_per_token / self.link

    def prefetch(self, blocks: int, queued: float, now: float) -> tuple[int, float]:
        """A prefetch of ``blocks`` asked for when the request was queued at ``queued``, which
        starts once the link has finished the reads begun before it and stops at ``now`` (the
        request is scheduled): (the whole chunks that arrived, which HiCache's best-effort
        policy keeps and recomputes the rest of; when the link is free again)."""
        if blocks <= 0:
            return 0, self.busy_until
        start = max(queued, self.busy_until)
        end = min(now, start + self.reload_seconds(blocks * self.bt))
        moved = (end - start - self.latency) * self.link / self.bytes_per_token
        arrived = int(moved) // self.bt if moved > 0 else 0
        return self._whole_chunks(min(blocks, arrived)), max(end, self.busy_until)

    def count_reload(self, tokens: int) -> None:
        self.stats.hit_tokens += tokens
        self.stats.bytes_to_gpu += tokens * self.bytes_per_token

    def check(self) -> None:
        self.cache.check()
        assert self.pool.private == 0, f"a {self.name} write left tokens outside the tier's tree"
        if self.below is not None:
            self.below.check()
