"""Replaceable engine policies, chosen by name from the scenario: queue order and preemption victim."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

from inferasim.serve.live import LiveRequest

if TYPE_CHECKING:
    from inferasim.serve.kv_manager import KVManager


def fcfs_order(waiting: list[LiveRequest], kv: KVManager, lpm_max: int) -> list[LiveRequest]:
    return list(waiting)


def lpm_order(waiting: list[LiveRequest], kv: KVManager, lpm_max: int,
              dedup_tokens: int = 0) -> list[LiveRequest]:
    """Longest cached prefix first (SGLang's LPM); arrival order past ``lpm_max`` waiting.

    ``dedup_tokens`` (SGLang: 32): a request the cache serves at most that many tokens of,
    whose first ``dedup_tokens`` it shares with a request earlier in this order, goes to the
    back for this pass, so that the prefix is computed once and the later request can hit
    it in a later pass (engines.md 3.2, in-batch prefix caching)."""
    if len(waiting) > lpm_max or len(waiting) < 2:
        return list(waiting)
    hits = [kv.peek(r) for r in waiting]
    order = sorted(range(len(waiting)), key=lambda i: -hits[i])
    if not dedup_tokens:
        return [waiting[i] for i in order]
    blocks = -(-dedup_tokens // kv.bt)
    seen: set[bytes] = set()
    first: list[LiveRequest] = []
    later: list[LiveRequest] = []
    for i in order:
        req = waiting[i]
        keys = req.match_keys
        if hits[i] * kv.bt <= dedup_tokens and len(keys) >= blocks:
            head = keys[:blocks].tobytes()
            if head in seen:
                later.append(req)
                continue
            seen.add(head)
        first.append(req)
    return first + later


QUEUE_ORDERS: dict[str, Callable[[list[LiveRequest], KVManager, int], list[LiveRequest]]] = {
    "fcfs": fcfs_order,
    "lpm": lpm_order,
}


def queue_order_for(policy: str, dedup_tokens: int = 0):
    """The queue order an engine runs: ``policy``, with lpm's in-batch dedup when set."""
    if policy == "lpm" and dedup_tokens:
        return functools.partial(lpm_order, dedup_tokens=dedup_tokens)
    return QUEUE_ORDERS[policy]


def newest_victim(running: list[LiveRequest]) -> LiveRequest:
    """vLLM: the most recently admitted request is recomputed."""
    return max(running, key=lambda r: r.admitted_seq)


def fewest_output_victim(running: list[LiveRequest]) -> LiveRequest:
    """SGLang's retraction: fewest generated tokens, ties to the longest prompt."""
    return min(running, key=lambda r: (r.generated, -r.spec.prompt_tokens, -r.admitted_seq))


VICTIMS: dict[str, Callable[[list[LiveRequest]], LiveRequest]] = {
    "recompute-newest": newest_victim,
    "retract-fewest-output": fewest_output_victim,
}


def victim_for(preemption: str, speculative: bool):
    """The preemption victim an engine picks: SGLang's retraction sorts by generated tokens,
    except under speculative decoding, where it pops the back of the batch unsorted (the
    newest request; engines.md 3.2). The requeue position stays the policy's."""
    if preemption == "retract-fewest-output" and speculative:
        return newest_victim
    return VICTIMS[preemption]

