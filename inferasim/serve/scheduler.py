"""Step formation: which requests prefill (and how much) and which decode, per engine family.

- ``unified`` (vLLM V1): running requests first (decodes and unfinished prefill chunks), then
  new admissions, all under one token budget; one mixed forward.
- ``prefill-exclusive`` (SGLang, ATOM): if any prefill can be scheduled the step is
  prefill-only (at most one request mid-chunk); otherwise a decode-only step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
import numpy as np

from inferasim.serve.live import LiveRequest

if TYPE_CHECKING:
    from inferasim.serve.engine import EngineInstance


@attrs.define(slots=True)
class Step:
    prefills: list[tuple[LiveRequest, int]] = attrs.field(factory=list)
    decodes: list[LiveRequest] = attrs.field(factory=list)
    # Every decoding request takes part: the engine's decode arrays describe the batch.
    all_decoders: bool = False
    # Tokens the step offered prefill chunks (what the decodes left of the token budget).
    prefill_budget: int = 0

    @property
    def empty(self) -> bool:
        return not self.prefills and not self.decodes


@attrs.define(slots=True)
class TokenBudget:
    """The tokens a step may still schedule: vLLM's ``token_budget`` (max_num_batched_tokens,
    the decodes' share taken first), SGLang's and ATOM's prefill chunk (chunked_prefill_size,
    PrefillAdder's ``rem_chunk_tokens``)."""

    tokens: float

    @property
    def left(self) -> bool:
        return self.tokens > 0

    def chunk(self, req: LiveRequest) -> int:
        """The next chunk of ``req``'s prompt this budget allows."""
        return min(req.target - req.computed, self.tokens)

    def take(self, tokens: float) -> None:
        self.tokens -= tokens

    def give_back(self, tokens: float) -> None:
        """A scheduled request was preempted after all: its tokens return."""
        self.tokens += tokens


def _admit(eng: EngineInstance, step: Step, now: float, budget: TokenBudget,
           one_chunk: bool) -> None:
    """Admit waiting requests in policy order while the budget, sequence limit and memory allow.

    Head-of-line: the first request that does not fit stops admission (all three engines)."""
    if not eng.waiting or not budget.left or len(eng.running) >= eng.max_num_seqs:
        return  # ordering the queue is the costly part: skip it when nothing can enter
    added = 0.0  # what this pass's admissions reserve beyond running_reserve's share of them
    policy = eng.policy
    for req in eng.queue_order():
        if not budget.left or len(eng.running) >= eng.max_num_seqs:
            break
        if _waits_whole(eng, req.target - req.computed, budget.tokens):
            break  # head-of-line: the prompt waits for a step with room for all of it
        own = eng.admission_reserve(req)
        first = budget.tokens if policy.allocates_per_step else None
        if not eng.kv.try_admit(req, now, own, eng.running_reserve() + added, first,
                                policy.gates_whole_sequence):
            break
        if own:
            # SGLang's PrefillAdder keeps a request added in this pass at its full clipped
            # output plus a page (engines.md 3.2); running_reserve counts it at the ratio.
            added += (1.0 - eng.new_token_ratio) * own + eng.kv.page
        eng.start(req, now)
        if req.computed >= req.target:
            eng.prompt_done(req, now)  # KV arrived from a prefill instance: decode next step
            continue
        chunk = budget.chunk(req)
        step.prefills.append((req, chunk))
        budget.take(chunk)
        if one_chunk and chunk < req.target - req.computed:
            break  # a single request may be mid-chunk at a time


def _waits_whole(eng: EngineInstance, rest: float, room: float) -> bool:
    """Whether a prompt of ``rest`` tokens must wait for a step with ``room`` for all of it:
    never where prompts are chunked; without chunking (TensorRT-LLM's default) while it does
    not fit. A prompt longer than the whole step budget is refused at submission, as
    TensorRT-LLM refuses it (``EngineInstance.submit``); one that grew past it (a paused
    request's prompt and output) is let in and chunked rather than left waiting for ever."""
    return not eng.chunks_prompts and room < rest <= eng.max_batched_tokens


def _prompts_offered(eng: EngineInstance, budget: float) -> float:
    """The prompt tokens a step would take under ``budget``: the unfinished prompts' next
    chunks, then the queue's prompts in order while they fit (memory not consulted), the
    tokens TensorRT-LLM's batch waiting weighs."""
    total = 0.0
    for req in eng.prefilling:
        take = min(req.target - req.computed, budget - total)
        if take <= 0:
            return total
        total += take
    free = eng.max_num_seqs - len(eng.running)
    for req in eng.queue_order():
        rest = req.target - req.computed
        if free <= 0 or total >= budget or _waits_whole(eng, rest, budget - total):
            break
        total += min(rest, budget - total)
        free -= 1
    return total


def _grow_or_preempt(eng: EngineInstance, step: Step, req: LiveRequest, tokens: float,
                     now: float, preempted: set[int], budget: TokenBudget | None = None) -> bool:
    """Make ``req``'s pages cover ``tokens``, preempting by the engine's policy until they
    fit; a victim already in the step leaves it (giving its tokens back to ``budget``, as
    vLLM's running loop does). False when ``req`` itself was the victim."""
    while not eng.kv.grow(req, tokens):
        victim = eng.preempt_one(now)
        preempted.add(victim.rid)
        if victim in step.decodes:
            step.decodes.remove(victim)
            if budget is not None:
                budget.give_back(eng.width)
        if budget is not None:
            for r, c in step.prefills:
                if r is victim:
                    budget.give_back(c)
        step.prefills[:] = [(r, c) for r, c in step.prefills if r is not victim]
        if victim is req:
            return False
    return True


def _decode_room(eng: EngineInstance, step: Step, req: LiveRequest, now: float,
                 preempted: set[int]) -> bool:
    """Grow ``req`` by one step of decode, preempting by the engine's policy until it fits.

    Returns False when ``req`` itself was the victim."""
    width = eng.width
    if req.context + width <= req.tree_tokens + req.private:
        return True  # the request's pages already hold the next tokens
    if not _grow_or_preempt(eng, step, req, req.context + width, now, preempted):
        return False
    eng.decoding.refresh_cap(req)
    return True


def grow_rows(eng: EngineInstance, rows: np.ndarray, context: np.ndarray) -> bool:
    """Give the decoding requests at ``rows`` pages for ``context`` tokens, all or none.

    When the pages can be had from free memory and evictable cache, every growth succeeds
    whatever the order (eviction frees the same LRU blocks), so they are taken at once."""
    dec = eng.decoding
    tree = dec.tree[rows]
    cap = dec.cap[rows]
    delta = eng.kv.page_deltas(context, tree, cap - tree)
    if not eng.kv.take(int(np.add.reduce(delta))):  # delta.sum() without its wrapper
        return False
    # The arrays hold the truth while a request decodes; its private count is written
    # back when it leaves the set or before a code path that reads it (DecodeSet.sync).
    dec.cap[rows] = cap + delta
    return True


def grow_decoders(eng: EngineInstance, steps: int) -> bool:
    """Give every decoding request pages for its next ``steps`` decode steps, all or none:
    the rows whose pages fall short of the context after them grow at once (``grow_rows``).
    The scheduler grows one step; a macro-step, the steps it ran."""
    dec = eng.decoding
    n = len(dec)
    if not n:
        return True
    if n <= dec.few_rows:
        return _grow_few(eng, steps)
    grown = dec.context_after(steps - 1) + eng.width
    rows = (grown > dec.cap[:n]).nonzero()[0]
    return not rows.size or grow_rows(eng, rows, grown[rows])


def _grow_few(eng: EngineInstance, steps: int) -> bool:
    """``grow_decoders`` over a few rows in Python floats: ``KVManager.grow``'s rounding row
    by row, all or none, as ``grow_rows`` does it in arrays (see ``DecodeSet.few_rows``)."""
    dec = eng.decoding
    n = len(dec)
    width, pages = eng.width, eng.kv.pages
    grown: list[tuple[int, float]] = []
    total = 0.0
    for i, (context, cap, tree) in enumerate(zip(dec.context_after_floats(steps - 1),
                                                 dec.cap[:n].tolist(), dec.tree[:n].tolist(),
                                                 strict=True)):
        context += width
        if context > cap:
            # whole pages for the context beyond the tree, less those held: > 0 when short
            delta = pages(context - tree) - (cap - tree)
            total += delta
            grown.append((i, cap + delta))
    if not grown:
        return True
    if not eng.kv.take(int(total)):
        return False
    caps = dec.cap
    for i, cap in grown:
        caps[i] = cap
    return True


def schedule_decodes(eng: EngineInstance, step: Step, now: float, budget: float) -> bool:
    """Every decoding request gets its next tokens' pages; returns True if any was preempted.

    Fast path: when the pages the batch needs can be had from free memory and evictable
    cache, every growth succeeds whatever the order (eviction frees the same LRU blocks), so
    it is done row by row only for the few requests crossing a page. Otherwise the requests
    are taken in admission order, preempting by the engine's policy, as the engines do."""
    dec = eng.decoding
    width = eng.width
    n = len(dec)
    if n == 0:
        return False
    if budget >= n * width and grow_decoders(eng, 1):
        step.decodes = list(dec.reqs)
        step.all_decoders = True
        return False
    dec.sync()
    preempted: set[int] = set()
    for req in sorted(dec.reqs, key=lambda r: r.admitted_seq):
        if req.rid in preempted or budget < width:
            continue
        if _decode_room(eng, step, req, now, preempted):
            step.decodes.append(req)
            budget -= width
    return bool(preempted)


def schedule_unified(eng: EngineInstance, now: float) -> Step:
    """Decoding requests (admitted before any still prefilling) first, then unfinished
    prompts in admission order, then admissions, all under one token budget."""
    step = Step()
    preempted = schedule_decodes(eng, step, now, eng.max_batched_tokens)
    budget = TokenBudget(eng.max_batched_tokens - len(step.decodes) * eng.width)
    step.prefill_budget = budget.tokens
    if eng.hold_prompts:
        # attention-DP balancing holds every prompt this step; it holds them only while every
        # rank decodes (adp_balance), so the step is not empty
        return step
    wait = eng.batch_wait
    if wait is not None and step.decodes and (eng.waiting or eng.prefilling):
        offered = _prompts_offered(eng, budget.tokens)
        if offered and not wait.releases(offered, len(step.decodes) * eng.width):
            return step   # batch waiting: decodes only, the prompts gather
    per_step = eng.policy.allocates_per_step
    preempted_ids: set[int] = set()
    for req in list(eng.prefilling):
        if req.rid in preempted_ids:
            continue
        chunk = budget.chunk(req)
        if chunk > 0:
            if per_step and not _grow_or_preempt(eng, step, req, req.computed + chunk, now,
                                                 preempted_ids, budget):
                break  # the request was its own victim: the running pass stops (vLLM)
            step.prefills.append((req, chunk))
            budget.take(chunk)
    if not preempted and not preempted_ids:
        _admit(eng, step, now, budget, one_chunk=False)
    return step


def schedule_prefill_exclusive(eng: EngineInstance, now: float) -> Step:
    step = Step()
    budget = TokenBudget(eng.chunked_prefill_size)
    step.prefill_budget = eng.chunked_prefill_size
    # attention-DP balancing holds every prompt this step (adp_balance): decodes only
    mid_chunk = eng.prefilling[0] if eng.prefilling and not eng.hold_prompts else None
    if mid_chunk is not None:
        chunk = budget.chunk(mid_chunk)
        # An engine that allocates per step (vLLM's policy, here under an exclusive step)
        # takes the next chunk's pages now, as the unified step does.
        if not eng.policy.allocates_per_step or _grow_or_preempt(
                eng, step, mid_chunk, mid_chunk.computed + chunk, now, set(), budget):
            step.prefills.append((mid_chunk, chunk))
            budget.take(chunk)
    if budget.left and not eng.hold_prompts:  # the request mid-chunk (if any) finishes
        _admit(eng, step, now, budget, one_chunk=True)
    if step.prefills:
        return step
    schedule_decodes(eng, step, now, float("inf"))
    return step


SCHEDULERS = {"unified": schedule_unified, "prefill-exclusive": schedule_prefill_exclusive}
