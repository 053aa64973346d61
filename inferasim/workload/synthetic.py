"""Synthetic multi-turn chat sessions (``workload.format: synthetic``).

Each session opens with a shared system prompt and a first user message; every later turn
resends the whole conversation (previous prompt + answer) plus a new message, so its prompt
extends the previous one block for block. Lengths are lognormal, the number of turns
geometric, think time lognormal — fitted figures in docs/workloads.md.
"""

from __future__ import annotations

import numpy as np

from inferasim.config.scenario import SyntheticSpec
from inferasim.workload.keys import session_base, stream_keys
from inferasim.workload.request import RequestSpec, Session, Turn


class SyntheticSessions:
    def __init__(self, spec: SyntheticSpec, max_context: int, rng: np.random.Generator):
        self.spec = spec
        self.rng = rng
        self.max_context = min(max_context, spec.max_prompt_tokens)
        self.bt = spec.block_tokens
        n_shared = spec.system_prompt_tokens // self.bt
        # Negative ids cannot collide with session namespaces.
        self.shared = -np.arange(1, n_shared + 1, dtype=np.int64)
        self._next_id = 0

    def _lognormal(self, median: float, sigma: float) -> int:
        return max(1, int(round(median * float(np.exp(sigma * self.rng.standard_normal())))))

    def _capped(self, out: int) -> int:
        """An answer ends at the max_tokens its client sent, if it sent one."""
        cap = self.spec.max_tokens
        return out if cap is None else min(out, cap)

    def next_session(self) -> Session:
        s, rng = self.spec, self.rng
        sid = self._next_id
        self._next_id += 1
        base = session_base(sid)
        n_turns = int(rng.geometric(1.0 / max(s.turns_mean, 1.0)))
        turns = []
        history = s.system_prompt_tokens + self._lognormal(s.first_prompt_tokens_median,
                                                           s.first_prompt_sigma)
        for t in range(n_turns):
            if t > 0:
                history += self._lognormal(s.turn_tokens_median, s.turn_sigma)
            out = self._capped(self._lognormal(s.output_tokens_median, s.output_sigma))
            if history + out > self.max_context:
                break
            prompt = history
            keys = stream_keys(self.shared, base, prompt // self.bt)
            finish = stream_keys(self.shared, base, (prompt + out) // self.bt)
            think = 0.0 if t == 0 else float(np.exp(np.log(s.think_time_median_s)
                                                     + s.think_time_sigma * rng.standard_normal()))
            turns.append(Turn(think, RequestSpec(prompt, out, keys, self.bt, finish, sid, t,
                                                 max_tokens=s.max_tokens)))
            history = prompt + out
        if not turns:
            prompt = min(history, self.max_context // 2)
            out = max(1, min(self._capped(self._lognormal(s.output_tokens_median,
                                                          s.output_sigma)),
                             self.max_context - prompt))
            keys = stream_keys(self.shared, base, prompt // self.bt)
            turns.append(Turn(0.0, RequestSpec(prompt, out, keys, self.bt, None, sid, 0,
                                               max_tokens=s.max_tokens)))
        return Session(sid, tuple(turns))
