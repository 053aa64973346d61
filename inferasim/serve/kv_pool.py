"""The KV pool of one engine instance, counted in tokens.

Every token of the pool is exactly one of:

* **free** -- nobody holds it;
* **tree** -- held by the radix prefix cache (evictable when unpinned, protected when pinned;
  the cache keeps that split, the pool only the total);
* **private** -- held by a running request outside the tree: its uncached prompt tail, the
  partial last block and its decode growth.

The prefix cache and the running requests share this one allocation; neither is handed the
whole of it. Ownership moves only through the methods below, so ``free + tree + private ==
capacity`` holds after every call.
"""

from __future__ import annotations


class KVPool:
    __slots__ = ("capacity", "free", "private", "tree")

    def __init__(self, capacity_tokens: int):
        if capacity_tokens < 0:
            raise ValueError(f"capacity_tokens must be >= 0, got {capacity_tokens}")
        self.capacity = int(capacity_tokens)
        self.free = self.capacity
        self.private = 0
        self.tree = 0

    @property
    def used(self) -> int:
        return self.capacity - self.free

    def alloc_private(self, tokens: int) -> bool:
        """Take ``tokens`` free tokens for a request. Never evicts: the caller asks the
        cache to make room first, so the decision to drop cached reuse stays visible."""
        _require_count(tokens)
        if self.free < tokens:
            return False
        self.free -= tokens
        self.private += tokens
        return True

    def free_private(self, tokens: int) -> None:
        _require_count(tokens)
        if tokens > self.private:
            # Freeing more than is held means some request's tokens were freed twice.
            raise ValueError(f"free_private({tokens}) but only {self.private} private tokens")
        self.private -= tokens
        self.free += tokens

    def private_to_tree(self, tokens: int) -> None:
        """A request's computed blocks become cached: ownership moves, no memory is freed."""
        _require_count(tokens)
        if tokens > self.private:
            raise ValueError(f"private_to_tree({tokens}) but only {self.private} private tokens")
        self.private -= tokens
        self.tree += tokens

    def tree_to_free(self, tokens: int) -> None:
        """Evicted cache blocks return to the free list."""
        _require_count(tokens)
        if tokens > self.tree:
            raise ValueError(f"tree_to_free({tokens}) but only {self.tree} tree tokens")
        self.tree -= tokens
        self.free += tokens

    def check(self) -> None:
        assert self.free >= 0, f"free < 0: {self}"
        assert self.private >= 0, f"private < 0: {self}"
        assert self.tree >= 0, f"tree < 0: {self}"
        assert self.free + self.tree + self.private == self.capacity, f"not conserved: {self}"

    def __repr__(self) -> str:
        return (
            f"KVPool(capacity={self.capacity}, free={self.free}, "
            f"tree={self.tree}, private={self.private})"
        )


def _require_count(tokens: int) -> None:
    if tokens < 0:
        raise ValueError(f"token count must be >= 0, got {tokens}")
