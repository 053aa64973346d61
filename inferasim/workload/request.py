"""What a workload hands the server: requests with prompt keys, grouped into sessions or stamped arrivals."""

from __future__ import annotations

import attrs
import numpy as np


@attrs.frozen(slots=True)
class RequestSpec:
    """One request as the client sends it.

    ``keys`` are the ids of the prompt's full blocks of ``block_tokens`` tokens: two prompts
    share a cacheable prefix exactly as far as their leading keys agree. ``finish_keys`` are
    the full blocks of prompt + output that the engine caches when the request finishes
    (the next turn of a conversation extends them); None when the output cannot be reused.
    """

    prompt_tokens: int
    output_tokens: int
    keys: np.ndarray
    block_tokens: int
    finish_keys: np.ndarray | None = None
    session: int = -1
    turn: int = 0
    # The max_tokens the client sends, which is all an engine knows of the output's length
    # before it ends (SGLang reserves for it); None when the client sends none (the engine
    # then assumes the rest of the context). Benchmark clients that force the length
    # (vllm bench serve --ignore-eos, AIPerf's trace replays, the AgentX harness) send it.
    max_tokens: int | None = None


@attrs.frozen(slots=True)
class Turn:
    think_s: float          # the client's gap before sending this turn
    request: RequestSpec


@attrs.frozen(slots=True)
class Session:
    id: int
    turns: tuple[Turn, ...]


@attrs.frozen(slots=True)
class Arrival:
    time_s: float
    request: RequestSpec
