"""Which instances of a fleet cache which prompt prefixes: one index for the router, fed by
every instance's radix cache, so a decision reads a few of the prompt's blocks instead of
every instance's tree (docs/fleet.md).

Only the blocks at depths 1, 2, 4, 8, ... are indexed, each named by (its depth, its key):
a function of the prefix, so an instance holding a prefix of ``t`` blocks holds every
indexed name up to depth ``t``. Per name the index keeps a bitmask of the instances that
hold it. The deepest indexed depth ``p`` an instance holds (with every shallower one) bounds
its match from above by the next indexed depth less one: two prefixes may share a name (the
same key at the same depth), and an instance mid-macro-step has not yet applied the growth
evictions the step-exact mode would have. The router verifies its candidates
(fleet_routing.py).
"""

from __future__ import annotations

import numpy as np

# The depth's index (bit length) rides in the name's low bits.
_DEPTH_BITS = 6


def indexed_names(depth0: int, keys: np.ndarray) -> list[int]:
    """Names of the indexed blocks among ``keys``, the blocks at depths ``depth0 + 1`` to
    ``depth0 + len(keys)`` of a path from the root."""
    out = []
    last = depth0 + len(keys)
    p = 1 << depth0.bit_length()  # the first power of two past depth0
    while p <= last:
        out.append((keys.item(p - 1 - depth0) << _DEPTH_BITS) | p.bit_length())
        p <<= 1
    return out


class PrefixIndex:
    """Indexed block name -> bitmask of the instances holding it. A second add of a name for
    the same instance (two prefixes that share it) is counted apart, so removals stay
    exact."""

    def __init__(self) -> None:
        self._held: dict[int, int] = {}
        self._extra: dict[tuple[int, int], int] = {}

    def listener(self, position: int) -> CacheListener:
        return CacheListener(self, position)

    def add(self, bit: int, names: list[int]) -> None:
        held = self._held
        for h in names:
            mask = held.get(h, 0)
            if mask & bit:
                self._extra[(h, bit)] = self._extra.get((h, bit), 0) + 1
            else:
                held[h] = mask | bit

    def remove(self, bit: int, names: list[int]) -> None:
        held, extra = self._held, self._extra
        for h in names:
            if extra and (h, bit) in extra:
                left = extra.pop((h, bit)) - 1
                if left:
                    extra[(h, bit)] = left
                continue
            mask = held[h] & ~bit
            if mask:
                held[h] = mask
            else:
                del held[h]

    def levels(self, keys: np.ndarray) -> list[tuple[int, int]]:
        """(bound, mask) per indexed depth of ``keys`` some instance holds with every
        shallower one: ``mask`` the instances that do, ``bound`` the most blocks of ``keys``
        they can match (the next indexed depth less one, at most ``len(keys)``)."""
        held = self._held
        out: list[tuple[int, int]] = []
        mask = -1
        n = len(keys)
        p = 1
        while p <= n:
            mask &= held.get((keys.item(p - 1) << _DEPTH_BITS) | p.bit_length(), 0)
            if not mask:
                break
            out.append((min(n, 2 * p - 1), mask))
            p <<= 1
        return out

    def __len__(self) -> int:
        return len(self._held)


class CacheListener:
    """One instance's cache as the index sees it (``RadixCache.listener``): told of the
    blocks at depths ``depth0 + 1 ..`` that became reachable or stopped being so."""

    __slots__ = ("index", "bit")

    def __init__(self, index: PrefixIndex, position: int):
        self.index = index
        self.bit = 1 << position

    # Each first tests whether depths depth0 + 1 .. depth0 + len(keys) reach a power of two
    # (``indexed_names`` is then not empty): most inserted suffixes and evicted tails sit
    # between two, and are told here at every insert and eviction.
    def added(self, depth0: int, keys: np.ndarray) -> None:
        if depth0 + len(keys) >= 1 << depth0.bit_length():
            self.index.add(self.bit, indexed_names(depth0, keys))

    def removed(self, depth0: int, keys: np.ndarray) -> None:
        if depth0 + len(keys) >= 1 << depth0.bit_length():
            self.index.remove(self.bit, indexed_names(depth0, keys))
