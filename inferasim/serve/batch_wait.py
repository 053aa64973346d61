"""TensorRT-LLM's batch waiting (``batch_wait_timeout_iters``, ``batch_wait_max_tokens_ratio``).

On a step that has both new prompts and decodes (and no attention DP), the executor holds
the prompts back unless the step's tokens (the prompts' and the decodes', drafts included)
reach ``max_tokens_ratio x max_num_tokens``, or it has held them ``timeout_iters`` steps
already; holding moves the count up by one, releasing sets it to 0. A step without decodes,
or without prompts, neither holds nor counts ("no generation requests, no need to wait").
Read from TensorRT-LLM's PyExecutor (``_waiting_requests`` and its caller, read with the
search tool; written here): docs/engines.md.
"""

from __future__ import annotations

import attrs


@attrs.define
class BatchWait:
    timeout_iters: int
    max_tokens_ratio: float
    max_num_tokens: int
    held: int = 0      # steps the prompts have been held since the last release

    @property
    def enabled(self) -> bool:
        return self.timeout_iters > 0 or self.max_tokens_ratio > 0

    def releases(self, prompt_tokens: float, decode_tokens: float) -> bool:
        """One step with prompts and decodes: whether its prompts go in; moves the count."""
        tokens = prompt_tokens + decode_tokens
        if self.held >= self.timeout_iters or tokens >= self.max_tokens_ratio * self.max_num_tokens:
            self.held = 0
            return True
        self.held += 1
        return False
