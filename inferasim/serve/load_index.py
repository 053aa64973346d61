"""Instances by load score, kept as they change, for a router's least-loaded pick: the
lowest (score, position) over all instances or over a subset given as a bitmask, without
reading every instance (docs/fleet.md)."""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Sequence

# A subset this small is read instance by instance; a larger one walks the score buckets.
SCAN_AT_MOST = 4


def lowest_bit(mask: int) -> int:
    return (mask & -mask).bit_length() - 1


def bits(mask: int):
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


class LoadIndex:
    """Score -> bitmask of the instances with that score, and the scores present, sorted.
    ``score(target)``: the router's measure (``load_score``, ``request_count``).

    An instance whose queues moved is marked in ``stale`` and re-read at the next ``least``:
    queues move about three times per request and the router reads once, and the index is a
    function of the current scores alone, so reading late picks what updating at once
    would."""

    def __init__(self, targets: Sequence, score: Callable[[object], int]):
        self.targets = targets
        self.score = score
        self.scores = [score(t) for t in targets]
        self._by_score: dict[int, int] = {}
        for i, s in enumerate(self.scores):
            self._by_score[s] = self._by_score.get(s, 0) | (1 << i)
        self._present = sorted(self._by_score)
        self.all = (1 << len(targets)) - 1
        self.stale = 0  # bitmask: instances whose score may have moved since the last read

    def refresh(self) -> None:
        """Re-read the stale instances' scores."""
        stale, self.stale = self.stale, 0
        for i in bits(stale):
            self.changed(i)

    def changed(self, position: int) -> None:
        """Re-read one instance's score (it may have moved)."""
        new = self.score(self.targets[position])
        old = self.scores[position]
        if new == old:
            return
        self.scores[position] = new
        bit = 1 << position
        by = self._by_score
        left = by[old] & ~bit
        if left:
            by[old] = left
        else:
            del by[old]
            del self._present[bisect_left(self._present, old)]
        if new in by:
            by[new] |= bit
        else:
            by[new] = bit
            insort(self._present, new)

    def least(self, subset: int | None = None) -> int:
        """The position of the lowest (score, position), over ``subset`` (a bitmask; None:
        every instance)."""
        if self.stale:
            self.refresh()
        by = self._by_score
        if subset is None or subset == self.all:
            return lowest_bit(by[self._present[0]])
        if subset.bit_count() <= SCAN_AT_MOST:
            scores = self.scores
            return min(bits(subset), key=lambda i: (scores[i], i))
        for s in self._present:
            mask = by[s] & subset
            if mask:
                return lowest_bit(mask)
        raise ValueError("empty subset")
