"""Attention-DP ranks stepping together (INFERASIM_DES_LOCKSTEP=N).

SGLang's DP-attention ranks synchronise at every MoE layer: each rank forms its own batch
(prefill, decode or idle), the MoE runs over their combined tokens, and the step ends for
all at once — an idle rank still waits. The group prices each step at the combined batch
(``oracle.step_group``) and applies every rank's step at the same end time.
"""

from __future__ import annotations

import simpy

from inferasim.cost.oracle import StepBatch


class LockstepGroup:
    def __init__(self, env: simpy.Environment, ranks: list, oracle):
        self.env = env
        self.ranks = ranks
        self.oracle = oracle
        self._wake: simpy.Event = env.event()
        for rank in ranks:
            rank._group = self
        self.steps = 0
        self.process = env.process(self._run())

    def notify(self) -> None:
        if not self._wake.triggered:
            self._wake.succeed()

    def _run(self):
        env = self.env
        while True:
            now = env.now
            steps = [rank.form_step(now) for rank in self.ranks]
            if all(s is None for s in steps):
                self._wake = env.event()
                yield self._wake
                continue
            batches = [rank.batch(s) if s is not None else StepBatch(width=rank.width)
                       for rank, s in zip(self.ranks, steps, strict=True)]
            cost = self.oracle.step_group(batches)
            yield env.timeout(cost.seconds)
            self.steps += 1
            for rank, s in zip(self.ranks, steps, strict=True):
                if s is not None:
                    rank.apply_step(s, cost.seconds)
                    rank._sample_occupancy()
