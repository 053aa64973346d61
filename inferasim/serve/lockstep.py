"""Attention-DP ranks stepping together (INFERASIM_DES_LOCKSTEP; by default every rank of an
instance).

SGLang's and vLLM's DP ranks synchronise at every MoE layer: each rank forms its own batch
(prefill, decode or idle: an idle rank runs a dummy batch), the MoE runs over their combined
tokens, and the step ends for all at once. The group prices each step at the combined batch
(``oracle.step_group``) and applies every rank's step at the same end time.

Time advance: while every rank that runs anything runs a steady decode batch (its own
``EngineInstance.steady_steps``: decode only, nothing admissible waiting, no finish before
the last step, growth within its memory), the group's steps until the first of them ends
are one timeout, each step priced as the group step it is. An arrival at any rank cuts it
as it cuts one engine's macro-step (the step in flight completes), so per-request results
equal the step-by-step mode (``sim.exact_steps``).
"""

from __future__ import annotations

import numpy as np
import simpy

from inferasim.cost.oracle import StepBatch
from inferasim.serve.adp_balance import AdpBalance
from inferasim.serve.engine import step_ends, wait_through


class LockstepGroup:
    def __init__(self, env: simpy.Environment, ranks: list, oracle):
        self.env = env
        self.ranks = ranks
        self.oracle = oracle
        self.exact = ranks[0].exact
        self.max_macro = ranks[0].max_macro
        self._wake: simpy.Event = env.event()
        self._in_macro = False
        self._cut = False  # an arrival cut the run in flight
        for rank in ranks:
            rank.join_group(self)
        eng = oracle.scenario.engine
        # TensorRT-LLM's attention-DP prompt balancing (adp_balance.py)
        self.balance = AdpBalance(eng.attention_dp_timeout_iters,
                                  eng.attention_dp_batching_wait_iters) \
            if eng.attention_dp_balance and len(ranks) > 1 else None
        self.steps = 0
        self.macro_steps = 0
        self.process = env.process(self._run())

    def notify(self) -> None:
        """A rank has new work: wake the group, or cut its macro-step."""
        if not self._wake.triggered:
            self._wake.succeed()
        if self._in_macro:
            self._in_macro = False
            self._cut = True
            self.process.interrupt("arrival")

    def _run(self):
        env = self.env
        while True:
            now = env.now
            if self.balance is not None:
                hold = not self.balance.admits(*self._rank_state())
                for rank in self.ranks:
                    rank.hold_prompts = hold
            steps = [rank.form_step(now) for rank in self.ranks]
            if all(s is None for s in steps):
                self._wake = env.event()
                yield self._wake
                continue
            k = 0 if self.exact else self._macro_length(steps)
            if k >= 2:
                yield from self._macro(steps, k)
                continue
            batches = [rank.batch(s) if s is not None else StepBatch(width=rank.width)
                       for rank, s in zip(self.ranks, steps, strict=True)]
            seconds = self.oracle.step_group_seconds(batches)
            # the group waits for the rank whose host-tier reload takes longest
            seconds += max((rank.reload_stall(s, seconds) for rank, s in
                            zip(self.ranks, steps, strict=True) if s is not None), default=0.0)
            yield env.timeout(seconds)
            self.steps += 1
            for rank, s in zip(self.ranks, steps, strict=True):
                if s is not None:
                    rank.apply_step(s, seconds)
                    rank.sample_occupancy(env.now)

    def _rank_state(self) -> tuple[list[bool], list[bool], list[bool]]:
        """Per rank: a prompt to start, requests it decodes, a free running slot."""
        return ([bool(r.waiting or r.prefilling) for r in self.ranks],
                [bool(r.decoding) for r in self.ranks],
                [len(r.running) < r.max_num_seqs for r in self.ranks])

    def _macro_length(self, steps: list) -> int:
        """Group steps every busy rank's batch runs unchanged (0 = some rank is not steady);
        an idle rank has nothing waiting and stays idle until an arrival cuts the run."""
        k = self.max_macro
        for rank, step in zip(self.ranks, steps, strict=True):
            if step is None:
                continue
            own = rank.steady_steps(step)
            if own < 2:
                return 0
            k = min(k, own)
        return k

    def _macro(self, steps: list, k: int):
        """``k`` steady group steps as one interruptible run: step j prices each busy rank's
        batch at its context after j steps (``DecodeSet.contexts_after``), by the operations
        a single step is priced with (``oracle.group_decode_steps``). They are priced and
        waited through in pieces that double from ``FIRST_PIECE`` steps: a group's run is
        cut by any rank's arrival, usually long before its end, and the steps priced past
        the cut would be wasted."""
        env = self.env
        busy = [(rank, step) for rank, step in zip(self.ranks, steps, strict=True)
                if step is not None]
        # the ranks as every step of the run saw them (an arrival that cuts it comes after)
        state = self._rank_state() if self.balance is not None else None
        t0 = env.now
        ends = _EMPTY
        done = start = 0
        piece = FIRST_PIECE
        self._cut = False
        while done == start < k and not self._cut:
            stop = min(k, start + piece)
            js = np.arange(start, stop, dtype=np.float64)
            times = self.oracle.group_decode_steps(
                [rank.decoding.contexts_after(js) if s is not None else None
                 for rank, s in zip(self.ranks, steps, strict=True)], self.ranks[0].width)
            # each end added onto the last, as the clock would one step at a time
            ends = np.concatenate((ends, step_ends(float(ends[-1]) if start else t0, times)))
            for rank, _ in busy:
                rank.hold_plan(ends, k)  # a router reading a rank mid-run sees its growth
            done = start + (yield from wait_through(env, ends[start:], self))
            start, piece = stop, 2 * piece
        self.steps += done
        self.macro_steps += 1
        if self.balance is not None:
            # the run's first step was counted when it was formed; the rest count here
            self.balance.advance(done - 1, *state)
        seconds = float(ends[done - 1]) - t0
        for rank, step in busy:
            rank.hold_plan(None)
            rank.account_decode_run(step, done, seconds)
            rank.sample_occupancy(self.env.now)


# Steps of a group run priced before the first wait (then 2x, 4x ...).
FIRST_PIECE = 16
_EMPTY = np.zeros(0, dtype=np.float64)
