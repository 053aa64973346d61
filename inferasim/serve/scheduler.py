"""Step formation: which requests prefill (and how much) and which decode, per engine family.

- ``unified`` (vLLM V1): running requests first (decodes and unfinished prefill chunks), then
  new admissions, all under one token budget; one mixed forward.
- ``prefill-exclusive`` (SGLang, ATOM): if any prefill can be scheduled the step is
  prefill-only (at most one request mid-chunk); otherwise a decode-only step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from inferasim.serve.live import LiveRequest

if TYPE_CHECKING:
    from inferasim.serve.engine import EngineInstance


@attrs.define(slots=True)
class Step:
    prefills: list[tuple[LiveRequest, int]] = attrs.field(factory=list)
    decodes: list[LiveRequest] = attrs.field(factory=list)

    @property
    def empty(self) -> bool:
        return not self.prefills and not self.decodes


def _admit(eng: EngineInstance, step: Step, now: float, budget: int, one_chunk: bool) -> int:
    """Admit waiting requests in policy order while the budget, sequence limit and memory allow.

    Head-of-line: the first request that does not fit stops admission (all three engines)."""
    if not eng.waiting or budget <= 0 or len(eng.running) >= eng.max_num_seqs:
        return budget  # ordering the queue is the costly part: skip it when nothing can enter
    for req in eng.queue_order():
        if budget <= 0 or len(eng.running) >= eng.max_num_seqs:
            break
        if not eng.kv.try_admit(req, now, eng.admission_reserve(req), eng.running_reserve()):
            break
        eng.start(req, now)
        if req.computed >= req.target:
            eng.prompt_done(req, now)  # KV arrived from a prefill instance: decode next step
            continue
        chunk = min(req.target - req.computed, budget)
        step.prefills.append((req, chunk))
        budget -= chunk
        if one_chunk and chunk < req.target - req.computed:
            break  # a single request may be mid-chunk at a time
    return budget


def _decode_room(eng: EngineInstance, step: Step, req: LiveRequest, now: float,
                 preempted: set[int]) -> bool:
    """Grow ``req`` by one step of decode, preempting by the engine's policy until it fits.

    Returns False when ``req`` itself was the victim."""
    width = eng.width
    if req.context + width <= req.tree_tokens + req.private:
        return True  # the request's pages already hold the next tokens
    while not eng.kv.grow(req, req.context + width):
        victim = eng.preempt_one(now)
        preempted.add(victim.rid)
        if victim in step.decodes:
            step.decodes.remove(victim)
        if victim is req:
            return False
    return True


def schedule_unified(eng: EngineInstance, now: float) -> Step:
    step = Step()
    budget = eng.max_batched_tokens
    width = eng.width
    preempted: set[int] = set()
    for req in list(eng.running):
        if req.rid in preempted:
            continue
        if req.in_prefill:
            chunk = min(req.target - req.computed, budget)
            if chunk > 0:
                step.prefills.append((req, chunk))
                budget -= chunk
            continue
        if budget < width:
            continue
        if req.spec.prompt_tokens + req.generated + width <= req.tree_tokens + req.private \
                or _decode_room(eng, step, req, now, preempted):
            step.decodes.append(req)
            budget -= width
    if not preempted:
        _admit(eng, step, now, budget, one_chunk=False)
    return step


def schedule_prefill_exclusive(eng: EngineInstance, now: float) -> Step:
    step = Step()
    budget = eng.chunked_prefill_size
    mid_chunk = next((r for r in eng.running if r.in_prefill), None)
    if mid_chunk is not None:
        chunk = min(mid_chunk.target - mid_chunk.computed, budget)
        step.prefills.append((mid_chunk, chunk))
        budget -= chunk
    if budget > 0:  # the request mid-chunk (if any) finishes its prompt this step
        _admit(eng, step, now, budget, one_chunk=True)
    if step.prefills:
        return step
    preempted: set[int] = set()
    for req in list(eng.running):
        if req.rid not in preempted and _decode_room(eng, step, req, now, preempted):
            step.decodes.append(req)
    return step


SCHEDULERS = {"unified": schedule_unified, "prefill-exclusive": schedule_prefill_exclusive}
