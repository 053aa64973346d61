"""TensorRT-LLM's attention-DP context balancing (``attention_dp_config.enable_balance``).

Each step every rank of an attention-DP instance tells the others how many prompts it could
start, how many requests it decodes, and so whether it has a free slot. A prompt starts only
when every rank has one to start and a free slot; otherwise the prompts wait, and the waiting
counter goes up by one a step, until it reaches ``timeout_iters`` or some rank has nothing to
decode (then the prompts start and the counter goes back to 0). The counter goes up on steps
with no prompt anywhere as well, so a prompt that arrives alone waits up to ``timeout_iters``
steps, by where the counter stands. When every rank has a prompt and every rank decodes, the
prompts also wait ``batching_wait_iters`` steps. Read from TensorRT-LLM's PyExecutor
(``_balance_adp_requests``, read with the search tool; written here): docs/engines.md.
"""

from __future__ import annotations

import attrs


@attrs.define
class AdpBalance:
    timeout_iters: int
    batching_wait_iters: int = 0
    waiting: int = 0      # steps the prompts have been held for want of every rank having one
    batching: int = 0     # steps held while every rank had one (batching_wait_iters)

    def admits(self, prompts: list[bool], decodes: list[bool], free: list[bool]) -> bool:
        """One step: whether the ranks may start their prompts, per rank whether it has a
        prompt to start, requests it decodes, and a free running slot; moves the counters."""
        if all(free) and all(prompts):
            self.waiting = 0
            if all(decodes):
                if self.batching < self.batching_wait_iters:
                    self.batching += 1
                    return False
                self.batching = 0
            return True
        self.waiting += 1
        if self.waiting >= self.timeout_iters or not all(decodes):
            self.waiting = 0
            return True
        return False

    def advance(self, steps: int, prompts: list[bool], decodes: list[bool],
                free: list[bool]) -> None:
        """The counters after ``steps`` steps that started no prompt, the ranks' state the same
        throughout (a steady run of decode steps): ``admits`` ``steps`` times, in closed
        form."""
        if steps <= 0:
            return
        if all(free) and all(prompts):
            self.waiting = 0
            if all(decodes):   # else the batching counter stands
                self.batching = (self.batching + steps) % (self.batching_wait_iters + 1)
        elif not all(decodes):
            self.waiting = 0
        else:
            self.waiting = (self.waiting + steps) % self.timeout_iters
