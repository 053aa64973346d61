"""The running requests past their prompt, held as arrays: the per-step work of a decode
batch (growth checks, token counts, finishes) is a few numpy operations, not a Python loop
over every sequence.

While a request is in the set, the arrays are the truth for its decode progress and page
capacity (hence its private tokens: capacity less what the tree holds); ``sync`` writes them
back to the request objects before any code that reads them one by one (preemption,
growth one request at a time, release).
"""

from __future__ import annotations

import math
import operator

import numpy as np

from inferasim.serve.live import LiveRequest


class DecodeSet:
    # Up to this many rows the per-step bookkeeping (growth, finishes, contexts) loops over
    # Python floats: a numpy operation costs about a microsecond whatever its size, a row of
    # Python arithmetic a tenth of that, so a small batch (the peers' one-instance shape)
    # pays the calls, not the work. Only elementwise operations and minima take the short
    # path, so both paths give the same bits (tests run both).
    few_rows = 16

    def __init__(self, advance: float, capacity: int = 64):
        self.advance = advance
        self.reqs: list[LiveRequest] = []
        self.prompt = np.zeros(capacity)
        self.gen_base = np.zeros(capacity)
        self.steps = np.zeros(capacity)
        self.cap = np.zeros(capacity)     # tokens the request's pages hold (tree + private)
        self.tree = np.zeros(capacity)    # of which the prefix cache holds
        self.out = np.zeros(capacity)
        self.adv = np.zeros(capacity)     # tokens a step emits, per request
        # Decode steps at which the output target is reached: fixed while the request is in
        # the set, so finishes and macro lengths compare step counts instead of re-deriving
        # token counts every step.
        self.fin = np.zeros(capacity)
        self._context: np.ndarray | None = None  # remembered until progress or rows change
        self._next_finish: float | None = None  # next_finish(), while the rows stay
        # (prompt, gen_base, advance) per row as Python floats, while the rows stay: they
        # change only when a row joins or leaves (context_after_floats)
        self._row_floats: list[tuple[float, float, float]] | None = None

    def __len__(self) -> int:
        return len(self.reqs)

    def _grow(self) -> None:
        size = 2 * self.prompt.size
        for name in ("prompt", "gen_base", "steps", "cap", "tree", "out", "adv", "fin"):
            arr = getattr(self, name)
            new = np.zeros(size)
            new[: arr.size] = arr
            setattr(self, name, new)

    def add(self, req: LiveRequest, max_new: float | None = None) -> None:
        """``max_new``: the output the engine believes the request may reach (its max_tokens;
        default the true output), which the output reserve reads."""
        self._context = self._next_finish = self._row_floats = None
        i = len(self.reqs)
        if i == self.prompt.size:
            self._grow()
        self.reqs.append(req)
        req.row = i
        self.prompt[i] = req.spec.prompt_tokens
        self.gen_base[i] = req.gen_base
        self.steps[i] = req.decode_steps
        self.cap[i] = req.tree_tokens + req.private
        self.tree[i] = req.tree_tokens
        self.out[i] = req.spec.output_tokens if max_new is None else max_new
        adv = self.adv[i] = req.advance or self.advance
        self.fin[i] = finish_step(req.gen_base, req.spec.output_tokens, adv)

    def sync_row(self, i: int) -> None:
        req = self.reqs[i]
        req.decode_steps = int(self.steps[i])
        req.generated = self.gen_base[i] + self.steps[i] * self.adv[i]
        req.private = int(self.cap[i] - self.tree[i])

    def sync(self) -> None:
        for i in range(len(self.reqs)):
            self.sync_row(i)

    def remove(self, req: LiveRequest) -> None:
        """Take a request out (finish, preemption), its progress written back first.

        The last row moves into the hole: order in the set carries no meaning."""
        i = req.row
        self.sync_row(i)
        self._context = self._next_finish = self._row_floats = None
        last = len(self.reqs) - 1
        if i != last:
            moved = self.reqs[last]
            self.reqs[i] = moved
            moved.row = i
            for arr in (self.prompt, self.gen_base, self.steps, self.cap, self.tree, self.out,
                        self.adv, self.fin):
                arr[i] = arr[last]
        self.reqs.pop()
        req.row = -1

    def refresh_cap(self, req: LiveRequest) -> None:
        self.cap[req.row] = req.tree_tokens + req.private
        self.tree[req.row] = req.tree_tokens

    # -- views over the live rows ---------------------------------------------------------
    def generated(self) -> np.ndarray:
        n = len(self.reqs)
        return self.gen_base[:n] + self.steps[:n] * self.adv[:n]

    def add_steps(self, rows: np.ndarray | None, steps: int,
                  first: int | None = None) -> np.ndarray:
        """``steps`` more decode steps for the requests at ``rows`` (None: every row, or the
        ``first`` rows: those added since come after them); returns the rows that reached
        their output target."""
        self._context = None
        if rows is None:
            n = len(self.reqs)
            if first is not None and first < n:
                n = first  # the rows after them stay: the remembered finish no longer holds
                self._next_finish = None
            self._advance_rows(n, steps)
            if self._next_finish is not None:
                self._next_finish -= steps  # every row moved on alike (integers in floats)
                if self._next_finish > 0:
                    return _NO_ROWS
            return self._reached(n)
        self._next_finish = None
        self.steps[rows] += steps
        return rows[self.steps[rows] >= self.fin[rows]]

    def _advance_rows(self, n: int, steps: int) -> None:
        """``steps`` more decode steps for the first ``n`` rows."""
        if n > self.few_rows:
            self.steps[:n] += steps
            return
        done = self.steps
        for i in range(n):
            done[i] += steps

    def _reached(self, n: int) -> np.ndarray | list[int]:
        """The rows among the first ``n`` at their output target."""
        if n > self.few_rows:
            return (self.steps[:n] >= self.fin[:n]).nonzero()[0]
        return [i for i, (s, f) in enumerate(zip(self.steps[:n].tolist(), self.fin[:n].tolist(),
                                                      strict=True))
                if s >= f]

    def next_finish(self) -> float:
        """The fewest decode steps from now through the one that reaches a row's target (>= 1;
        rows required), remembered while only whole-batch steps pass: every macro-step plan
        asks it."""
        if self._next_finish is None:
            n = len(self.reqs)
            if n <= self.few_rows:
                self._next_finish = min(map(operator.sub, self.fin[:n].tolist(),
                                            self.steps[:n].tolist()))
            else:
                # np.minimum.reduce is ndarray.min without its Python wrapper (a hot path)
                self._next_finish = float(np.minimum.reduce(self.fin[:n] - self.steps[:n]))
        return self._next_finish

    def context(self) -> np.ndarray:
        """Tokens resident per decoding request (read-only: shared until the next change)."""
        if self._context is None:
            n = len(self.reqs)
            if n <= self.few_rows:
                self._context = np.array(self.context_after_floats(0))
            else:
                self._context = self.prompt[:n] + self.generated()
        return self._context

    def context_after(self, steps: int) -> np.ndarray:
        """``context()`` as it will be after ``steps`` more decode steps of every row, by the
        same float operations, so a step priced ahead matches the one taken singly."""
        if steps == 0:
            return self.context()
        n = len(self.reqs)
        return self.prompt[:n] + (self.gen_base[:n] + (self.steps[:n] + steps) * self.adv[:n])

    def context_after_floats(self, steps: int) -> list[float]:
        """``context_after(steps)`` as Python floats, by the same operations (``few_rows``)."""
        n = len(self.reqs)
        rows = self._row_floats
        if rows is None:
            rows = self._row_floats = list(zip(self.prompt[:n].tolist(),
                                               self.gen_base[:n].tolist(),
                                               self.adv[:n].tolist(), strict=True))
        return [p + (b + (k + steps) * a)
                for (p, b, a), k in zip(rows, self.steps[:n].tolist(), strict=True)]

    def contexts_after(self, steps: np.ndarray) -> np.ndarray:
        """``context_after(j)`` for each j of ``steps`` (float), one row per j, by the same
        float operations element by element."""
        n = len(self.reqs)
        return self.prompt[:n] + (self.gen_base[:n]
                                  + (self.steps[:n] + steps[:, None]) * self.adv[:n])

    def remaining_output(self) -> np.ndarray:
        """Output each row may still generate as the engine believes it (its max_tokens, the
        ``max_new`` given to ``add``), not the true length: the output reserve reads it."""
        return self.out[: len(self.reqs)] - self.generated()


_NO_ROWS = np.zeros(0, dtype=np.int64)
_NO_ROWS.setflags(write=False)  # shared by every caller: read only


def finish_step(gen_base: float, output: float, advance: float) -> float:
    """The fewest decode steps s with ``gen_base + s * advance >= output`` (at least 1), by
    the float formula every token count uses, so the step agrees with the counts bit for bit."""
    s = max(1.0, float(math.ceil((output - gen_base) / advance)))
    while s > 1 and gen_base + (s - 1) * advance >= output:
        s -= 1
    while gen_base + s * advance < output:
        s += 1
    return s
