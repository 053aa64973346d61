"""A router's indexes over its engine instances: least-loaded and prefix-affinity decisions
without reading every instance (docs/fleet.md). Each decision picks what the policy's scan
(``router.SCANS``) would.

Prefix affinity takes the least-loaded instance among those the prefix index says hold the
deepest prefix, then verifies it: the index's depth is an upper bound (an instance
mid-macro-step has not applied its growth evictions yet; a hash may collide), so the
candidate is caught up and peeked as the scan peeks every instance. Where it falls short the
search goes on (best first over the bounds) until no unverified bound can beat the best.
A run of prompt chunks in flight counts its chunks as held from its start (the bound stays a
bound: a read mid-run caches the chunks done by then, one node per chunk as the step-exact
mode does, so reading or not leaves the tree alike). Instances whose catch-up writes
evictions to a host tier stamped with the read's time tell the router while such a run is in
flight, and are caught up at every decision, as the scan does.
"""

from __future__ import annotations

from collections.abc import Sequence

from inferasim.serve.live import LiveRequest
from inferasim.serve.load_index import LoadIndex
from inferasim.serve.prefix_index import PrefixIndex, indexed_names


def _load_score(target) -> int:
    return target.load_score


def _request_count(target) -> int:
    return target.request_count


class FleetRouting:
    def __init__(self, targets: Sequence, policy: str):
        self.targets = targets
        self.load = LoadIndex(targets, _request_count if policy == "least-requests"
                              else _load_score)
        self.prefix: PrefixIndex | None = None
        self.eager: set[int] = set()
        self.verified = 0   # candidates peeked
        self.decisions = 0
        kv = targets[0].kv
        if policy == "prefix-affinity" and kv.prefix_caching:
            self.prefix = PrefixIndex()
            for i, t in enumerate(targets):
                if t.kv.cache.node_count:
                    raise ValueError("a fleet index attaches to empty caches")
                t.kv.cache.listener = self.prefix.listener(i)
        self._pick_prefix = policy == "prefix-affinity"
        for i, t in enumerate(targets):
            t.watch(self, i)

    @staticmethod
    def supports(targets: Sequence) -> bool:
        """Engine instances of one pool (the same block size and caching)."""
        if not all(hasattr(t, "watch") for t in targets):
            return False
        first = targets[0].kv
        return all(t.kv.bt == first.bt and t.kv.prefix_caching == first.prefix_caching
                   for t in targets)

    # -- what the instances report (their load: by marking ``load.stale``) --------------
    def hold(self, position: int, keys) -> list[int] | None:
        """Count ``keys`` as held by instance ``position`` until ``release``: blocks a run in
        flight caches as its steps end (a read mid-run caches those done by then)."""
        if self.prefix is None or not len(keys):
            return None
        names = indexed_names(0, keys)
        self.prefix.add(1 << position, names)
        return names

    def release(self, position: int, held: list[int] | None) -> None:
        if held is not None:
            self.prefix.remove(1 << position, held)

    def set_eager(self, position: int, on: bool) -> None:
        if on:
            self.eager.add(position)
        else:
            self.eager.discard(position)

    # -- decisions ---------------------------------------------------------------------
    def pick(self, targets: Sequence, req: LiveRequest) -> int:
        self.decisions += 1
        if not self._pick_prefix:
            return self.load.least()
        if self.eager:
            for position in sorted(self.eager):
                targets[position].catch_up()
        if self.prefix is None:
            return self.load.least()  # no instance caches: every peek is 0
        keys = targets[0].kv.matchable_keys(req)
        levels = self.prefix.levels(keys) if len(keys) else []
        return self._best(targets, req, levels)

    def _best(self, targets: Sequence, req: LiveRequest,
              levels: list[tuple[int, int]]) -> int:
        """The lowest (-cached blocks, load, position), best first over the index's bounds:
        an instance in level j's mask and not in level j + 1's matches at most level j's
        bound; one in no level, nothing."""
        scores = self.load.scores
        done = 0
        best: tuple[int, int, int] | None = None
        j = len(levels)
        while True:
            while j and not levels[j - 1][1] & ~done:
                j -= 1
            bound, subset = levels[j - 1] if j else (0, self.load.all)
            subset &= ~done
            if not subset:
                break
            c = self.load.least(subset)
            lower = (-bound, scores[c], c)
            if best is not None and best < lower:
                break
            if bound:
                self.verified += 1
                blocks = targets[c].peek(req)
            else:
                blocks = 0
            key = (-blocks, scores[c], c)
            if best is None or key < best:
                best = key
            if blocks == bound:
                break  # its key is its bound, below every other bound
            done |= 1 << c
        return best[2]
