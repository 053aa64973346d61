"""One engine instance as a SimPy process: form a batch, ask the oracle, advance the clock.

Time advance: runs of steps whose shape is known in advance are one timeout (macro-steps):
a steady decode batch (nothing admissible waiting, nothing finishing, growth within free +
evictable memory), a prompt's full chunks (nothing can be admitted beside them), the batch
left after a finish when nothing waits (it decodes on without a scheduling pass), and, on a
lone instance, the decode steps after a step that settles the batch. An arrival interrupts a
decode macro-step; the steps completed by then are applied, the step in flight finishes,
and scheduling resumes — so per-request results equal the step-by-step reference mode
(``sim.exact_steps``). docs/architecture.md ("Time") gives the conditions.
"""

from __future__ import annotations

from bisect import bisect_right

import numpy as np
import simpy

from inferasim.config.scenario import Scenario
from inferasim.cost.oracle import StepBatch
from inferasim.serve.engine_core import EngineCore
from inferasim.serve.kv_manager import KVManager
from inferasim.serve.live import LiveRequest
from inferasim.serve.scheduler import Step


class EngineInstance(EngineCore):
    """The SimPy driver of one engine: its process forms a step (``EngineCore``), prices it,
    waits, and applies it; runs of steps of known shape are one timeout (macro-steps)."""

    def __init__(self, env: simpy.Environment, scenario: Scenario, oracle, kv: KVManager,
                 index: int = 0, driven: bool = False):
        super().__init__(scenario, oracle, kv, index, on_done=lambda req: req.done.succeed())
        self.env = env
        self.exact = scenario.sim.exact_steps
        self.max_macro = max(1, scenario.sim.max_macro_steps)
        # Disaggregated decode: requests waiting for their prompt's pages before their
        # prefill (FIFO), and how many hold pages here before their KV has arrived.
        self.prealloc_queue: list[tuple[LiveRequest, simpy.Event]] = []
        self._prealloc_held = 0
        self._prealloc_keep = scenario.engine.disagg_prealloc_reserved_tokens
        self._idle = False
        self._cut_step: int | None = None   # the step a pending read cuts the macro-step at
        self._wake: simpy.Event = env.event()
        self._in_macro = False
        self._through_ends: np.ndarray = _EMPTY
        self._through_first = 1
        self._plan: tuple[np.ndarray, int] | None = None  # (step ends, steps) of a macro-step
        # (step ends, request, chunk, computed before) of a chunk macro-step whose chunks the
        # cache takes as they complete (``caches_prompt_chunks``)
        self._chunk_plan: tuple[np.ndarray, LiveRequest, int, int] | None = None
        self._chunks_cached = 0  # of its chunks, those a read has already cached
        # The only engine on its clock (set by the topology): nothing reads its state between
        # its own events, so a step's effects may be applied ahead, stamped with its end.
        self.solo = False
        self._group = None
        self.process = env.process(self._run()) if not driven else None

    # -- what a lockstep group drives (lockstep.py) ---------------------------------------
    def join_group(self, group) -> None:
        """Step with ``group`` (attention-DP lockstep): it forms, prices and applies the steps."""
        self._group = group

    def steady_steps(self, step: Step) -> int:
        """Decode steps ``step``'s batch runs unchanged (0: not steady); see ``_macro_length``."""
        return self._macro_length(step)

    def hold_plan(self, ends: np.ndarray | None, steps: int = 0) -> None:
        """The run of decode steps in flight (None: none), for a router reading mid-run."""
        self._plan = None if ends is None else (ends, steps)
        if self._watch is not None and self._evictions_stamped():
            self._watch.set_eager(self._watch_at, ends is not None)

    def account_decode_run(self, step: Step, done: int, busy_s: float) -> None:
        """``done`` decode steps of a run that ended now (see ``_decoded``)."""
        self._decoded(step, done, busy_s)

    def form_step(self, now: float) -> Step | None:
        if self.prealloc_queue:
            self._serve_preallocs()
        return super().form_step(now)

    def apply_step(self, step: Step, seconds: float, now: float | None = None) -> None:
        """``EngineCore.apply_step`` at ``now`` (default: the clock)."""
        super().apply_step(step, seconds, self.env.now if now is None else now)

    def _sample_occupancy(self) -> None:
        self.sample_occupancy(self.env.now)

    def preallocate(self, req: LiveRequest) -> simpy.Event:
        """Queue ``req`` for its prompt's pages ahead of its prefill (SGLang PD decode); the
        event fires when they are held, or with ``req.failed`` set when they never can be."""
        done = self.env.event()
        self.prealloc_queue.append((req, done))
        self._arriving(req)
        if len(self.prealloc_queue) == 1:  # behind a blocked head it cannot go first
            self._poke()
        return done

    def pages_in_flight(self) -> int:
        return self._prealloc_held

    def release_prealloc(self, req: LiveRequest) -> None:
        """A preallocated request that will not decode here (its prefill failed, or the
        prefill's one token was the whole answer) gives its pages back."""
        self._arrived(req)
        if req.preallocated and req.private:
            self.kv.release(req)
            self._prealloc_held -= 1
            self._poke()

    def _serve_preallocs(self) -> None:
        """Preallocate from the head of the queue while the pool keeps, beside the prompt,
        ``disagg_prealloc_reserved_tokens`` per request this instance holds and the sequence
        limit has room (head-of-line, as SGLang's pop_preallocated)."""
        queue = self.prealloc_queue
        while queue:
            req, done = queue[0]
            held = len(self.running) + len(self.waiting) + len(self.inbox) + self._prealloc_held
            if held >= self.max_num_seqs:
                return
            keep = self._prealloc_keep * (held + 1)
            if not self.kv.preallocate(req, keep, self.env.now):
                if held == 0:  # an empty instance cannot take it: it never will
                    req.failed = self.kv.refusal(req.spec.prompt_tokens, "decode pool")
                    queue.pop(0)
                    self._arrived(req)
                    done.succeed()
                    continue
                return
            queue.pop(0)
            self._prealloc_held += 1
            done.succeed()

    def _poke(self) -> None:
        """Have the scheduler look at its queues now: wake it, or cut its macro-step."""
        if self._group is not None:
            self._group.notify()
            return
        if not self._wake.triggered:
            self._wake.succeed()
        if self._in_macro:
            self._in_macro = False
            self.process.interrupt("arrival")

    def _arriving(self, req: LiveRequest) -> None:
        self.incoming[id(req)] = req
        self._load_moved()

    def _arrived(self, req: LiveRequest) -> None:
        if self.incoming.pop(id(req), None) is not None:
            self._load_moved()

    def submit(self, req: LiveRequest) -> None:
        req.instance = self.index
        self.incoming.pop(id(req), None)   # now counted where it waits
        if not self.chunks_prompts and not req.prefilled \
                and req.spec.prompt_tokens > self.max_batched_tokens:
            # Without chunked prefill TensorRT-LLM's LLM API answers 400 for a prompt longer
            # than max_num_tokens (its _check_arguments): refused at once, never queued
            req.failed = (f"a prompt of {req.spec.prompt_tokens} tokens exceeds the step's "
                          f"token budget ({self.max_batched_tokens}, max_num_tokens) with "
                          "chunked prefill off (engine.chunked_prefill, "
                          "engine.max_num_batched_tokens)")
            self._done(req)
            return
        if req.preallocated and req.private:
            self._prealloc_held -= 1  # now a waiting request like any other
        if self._recv_every > 1 and not self._idle:
            self.inbox.append(req)
            self._load_moved()
            if self._in_macro:
                self._cut_at_read()
            return
        self.waiting.append(req)
        self._load_moved()
        self._poke()

    def peek(self, req: LiveRequest) -> int:
        """Cached prefix blocks for the router (asked once per request and instance)."""
        self.catch_up()
        return self.kv.peek_once(req)

    def catch_up(self) -> None:
        """Allocate what a running macro-step's steps have grown into by now, the step in
        flight included, as the step-exact mode has: a router reading this instance's cache
        mid-macro-step then sees the evictions step-by-step growth would have made. Growth
        is idempotent, so the macro-step's own allocation at its end only adds the rest."""
        if self._chunk_plan is not None:
            # the chunks completed by now are cached, each stamped with its step's end, as
            # the step-exact mode caches them (one tree node per chunk)
            ends, req, chunk, before = self._chunk_plan
            done = bisect_right(ends, self.env.now)
            for j in range(self._chunks_cached + 1, done + 1):
                self.kv.chunk_done(req, before + j * chunk, float(ends[j - 1]))
            self._chunks_cached = max(self._chunks_cached, done)
        if self._plan is None:
            return
        ends, k = self._plan
        in_flight = min(k, bisect_right(ends, self.env.now) + 1)
        if in_flight > 1:
            self.grow_through(in_flight)

    def _evictions_stamped(self) -> bool:
        """A catch-up's evictions are written to a host tier stamped with the read's time:
        a router catches such an instance up at every read (fleet_routing)."""
        return self.kv.cache.on_evict is not None

    def wait_for_work(self):
        self._wake = self.env.event()
        return self._wake

    def _cut_at_read(self) -> None:
        """A request sent during a macro-step is read at the first read after the step in
        flight: cut the macro-step there (the interrupt lands inside that step, which then
        completes, as ``_through`` handles an arrival)."""
        ends, first = self._through_ends, self._through_first
        now = self.env.now
        in_flight = bisect_right(ends, now) + 1
        every = self._recv_every
        cut = first if first >= in_flight else first + -(-(in_flight - first) // every) * every
        if cut > ends.size or (self._cut_step is not None and self._cut_step <= cut):
            return
        self._cut_step = cut
        if cut == in_flight:
            self._cut_now(ends)
            return
        wake = self.env.timeout(0.5 * (float(ends[cut - 2]) + float(ends[cut - 1])) - now)
        wake.callbacks.append(lambda _ev: self._cut_now(ends))

    def _cut_now(self, ends: np.ndarray) -> None:
        """Interrupt the macro-step over ``ends`` if it is still the one running."""
        if self._in_macro and ends is self._through_ends:
            self._in_macro = False
            self.process.interrupt("read")

    def _run(self):
        env = self.env
        while True:
            if self.inbox:
                self._read_inbox()
            step = self.form_step(env.now)
            if step is None:
                self._idle = True
                yield self.wait_for_work()
                self._idle = False
                continue
            k = 0 if self.exact else self._macro_length(step)
            if k >= 2:
                if (yield from self._macro(step, k)):
                    yield from self._decode_on()
            elif not self.exact and (k := self._chunk_length(step)) >= 2:
                yield from self._chunk_macro(step, k)
            else:
                seconds = self.oracle.step_seconds(self.batch(step))
                seconds += self.reload_stall(step, seconds)
                if not self.exact and self.solo and self._settles(step):
                    if (yield from self._step_then_decode(step, seconds)):
                        yield from self._decode_on()
                else:
                    yield env.timeout(seconds)
                    self.apply_step(step, seconds)
            self._sample_occupancy()

    def _macro_length(self, step: Step) -> int:
        """How many decode steps this batch runs unchanged (0 = not steady)."""
        if step.prefills or not step.all_decoders or len(step.decodes) != len(self.running):
            return 0
        if self.waiting and len(self.running) < self.max_num_seqs:
            return 0
        return self._steady_length(self._macro_limit())

    def _macro_limit(self) -> int:
        """A macro-step stops at the scheduler's next read when a request waits to be read."""
        if self.inbox:
            return min(self.max_macro, self._to_read())
        return self.max_macro

    def _steady_length(self, limit: int, allocated: bool = True) -> int:
        """Steps (at most ``limit``) the decoding batch runs before its first finish, that
        step included, with page growth that needs no preemption; 0 when under 2.
        ``allocated``: the scheduler already grew the batch for the first of them."""
        dec = self.decoding
        n = len(dec)
        k = int(min(limit, dec.next_finish())) if n else limit
        if k < 2 or not n:
            return k if k >= 2 else 0
        # Page growth of steps 2..k (step 1 was allocated by the scheduler) must be
        # satisfiable from free memory plus eviction of unpinned cache: nothing else touches
        # the cache during a steady batch, so evicting at the end, in LRU order, frees the
        # same blocks that step-by-step growth would have. A step that would need a
        # preemption is taken singly.
        room = self.kv.pool.free + self.kv.cache.evictable_tokens
        page = self.kv.page
        width = self.width
        # Steps 2..k grow the batch, or 1..k when the scheduler has not grown the first.
        growing = k - 1 if allocated else k
        most = self.advance if self._advance_of is None else float(width)
        if n * (growing * most + width + 2 * page) <= room:
            return k  # more than the batch could grow by (a page of rounding each side)
        prompt, base, done, adv = dec.prompt[:n], dec.gen_base[:n], dec.steps[:n], dec.adv[:n]
        tree = dec.tree[:n]
        priv = dec.cap[:n] - tree

        def need(js: np.ndarray) -> np.ndarray:
            """Pages (in tokens) the batch must add to run through step j + 1, per j (the
            context by ``DecodeSet.context_after``'s operations)."""
            ctx = prompt[None, :] + (base[None, :] + (done[None, :] + js[:, None]) * adv[None, :])
            tokens = np.ceil(ctx + width - tree[None, :])
            return np.maximum(0.0, np.ceil(tokens / page) * page - priv[None, :]).sum(axis=1)

        # Growth only accumulates: when the last step fits, every earlier one does.
        if need(np.array([k - 1.0]))[0] > room:
            first = 1 if allocated else 0
            over = np.nonzero(need(np.arange(first, k, dtype=np.float64)) > room)[0]
            k = int(over[0]) + first
        return k if k >= 2 else 0

    def _chunk_length(self, step: Step) -> int:
        """How many steps a lone prompt chunk that fills the step's whole prefill budget
        repeats before the step of its last chunk (0 = fewer than 2).

        Such a step admits nothing, whatever waits, so until the last chunk only a decode
        finish or page growth beyond free + evictable memory changes the next step."""
        if len(step.prefills) != 1 or (step.decodes and not step.all_decoders):
            return 0
        req, chunk = step.prefills[0]
        if chunk <= 0 or chunk != step.prefill_budget:
            return 0
        # Step j (from 1) computes a full chunk without finishing while target - computed
        # - (j - 1) x chunk > chunk.
        k = min(self.max_macro, (req.target - req.computed - 1) // chunk)
        if k < 2:
            return 0
        if self.policy.allocates_per_step:
            # chunks 2..k take their pages as they are scheduled: they, and at most a step's
            # growth plus two pages of rounding per decoding request each step, must fit in
            # free + evictable memory, or the steps go one by one (a preemption may come)
            room = self.kv.available - len(step.decodes) * (k * self.width + 2 * self.kv.page)
            need = self.kv.pages(req.computed + k * chunk - req.tree_tokens) - req.private
            if need > room:
                return 0
        return self._steady_length(k) if step.decodes else k

    def _macro(self, step: Step, k: int):
        """``k`` steady decode steps in one interruptible timeout, priced in one call;
        returns whether all of them ran (no arrival cut them short)."""
        env = self.env
        ctx0 = self.decoding.context()
        times = self.oracle.decode_steps(ctx0, k, self._advances(), self.width)
        t0 = env.now
        ends = step_ends(t0, times)
        self._plan = (ends, k)
        eager = self._watch is not None and self._evictions_stamped()
        if eager:
            self._watch.set_eager(self._watch_at, True)
        done = yield from self._through(ends, self._to_read())
        self._plan = None
        if eager:
            self._watch.set_eager(self._watch_at, False)
        self._decoded(step, done, float(ends[done - 1]) - t0)
        return done == k

    def _decode_on(self):
        """Decode macro-steps back to back, without forming each step, while nothing waits,
        prefills or asks for preallocated pages: the scheduler would take every decoding
        request (the batch within the token budget, its growth within free + evictable
        memory, as ``_steady_length`` checks), so after a finish the remaining batch runs on.
        A finish is applied at its step's end, as step by step, so a router reading this
        instance then sees what it would have. Stops at an arrival (it waits; scheduling
        resumes) or when the batch is done. Stands down while a preallocation waits: a finish
        may free the room for it, which only a scheduling pass hands out."""
        dec = self.decoding
        while (not self.waiting and not self.inbox and not self.prefilling
               and not self.prealloc_queue
               and len(dec) and len(dec) * self.width <= self._decode_budget):
            k = self._steady_length(self.max_macro, allocated=False)
            if k < 2:
                return
            if not self.solo:
                # the first step's pages now, as the scheduling pass would have grown them: a
                # router reading this instance mid-step sees them held (nobody reads a solo
                # instance: the macro-step's end grows them with the rest, freeing the same
                # LRU blocks)
                self.grow_through(1)
            ran_all = yield from self._macro(_EVERY_DECODER, k)
            self.stats.continued_macro_steps += 1
            self._sample_occupancy()
            if not ran_all:
                return

    def _through(self, ends: np.ndarray, first_read: int = 1):
        """Wait through consecutive steps ending at ``ends``: an arrival's interrupt lets the
        step in flight complete and drops the rest. Returns how many steps completed.
        ``first_read``: the step after which the scheduler first reads its socket (then every
        receive interval); an arrival is seen there (``_cut_at_read``)."""
        self._through_ends, self._through_first = ends, first_read
        self._cut_step = None
        return (yield from wait_through(self.env, ends, self))

    def _decoded(self, step: Step, done: int, busy_s: float) -> None:
        """Account ``done`` decode steps of a macro-step that ended now."""
        stats = self.stats
        stats.steps += done
        stats.decode_steps += done
        stats.macro_steps += 1
        stats.busy_s += busy_s
        self._counted(done, False)
        self.grow_through(done)
        if self._reserve_output:
            self.new_token_ratio = max(self._ratio_min,
                                       self.new_token_ratio - done * self._ratio_decay)
        self._apply_decode(step, done, self.env.now)

    def _chunk_macro(self, step: Step, k: int):
        """``k`` steps of the lone full-budget chunk (see ``_chunk_length``), each priced as
        the single step is. An arrival cannot change them, so it does not interrupt."""
        env = self.env
        req, chunk = step.prefills[0]
        dec = self.decoding
        decodes = bool(step.decodes)
        tokens = np.array([float(chunk)])
        if self.policy.allocates_per_step and not self.kv.grow(req, req.computed + k * chunk):
            raise AssertionError("chunk macro-step pages exceeded the room it was sized for")
        times = np.empty(k)
        for j in range(k):
            batch = StepBatch(prefill_tokens=tokens,
                              prefill_resident=np.array([float(req.computed + j * chunk)]),
                              decode_context=dec.context_after(j) if decodes else _EMPTY,
                              width=self.width)
            times[j] = self.oracle.step_seconds(batch)
        times[0] += self.reload_stall(step, float(times[0]))
        req.reload_pending = req.storage_pending = 0
        t0 = env.now
        ends = step_ends(t0, times)
        self._plan = (ends, k) if decodes else None
        held = None
        if self._caches_chunks:
            self._chunk_plan = (ends, req, chunk, req.computed)
            self._chunks_cached = 0
            if self._watch is not None:
                # a router's index counts the chunks as cached already: a bound, not a hit
                held = self._watch.hold(self._watch_at, self.kv.chunk_keys(
                    req, req.computed + k * chunk))
        eager = self._watch is not None and decodes and self._evictions_stamped()
        if eager:
            self._watch.set_eager(self._watch_at, True)
        yield env.timeout(float(ends[-1]) - t0)
        self._plan = self._chunk_plan = None
        if eager:
            self._watch.set_eager(self._watch_at, False)
        stats = self.stats
        stats.steps += k
        stats.prefill_steps += k
        stats.macro_steps += 1
        stats.chunk_macro_steps += 1
        if decodes:
            stats.mixed_steps += k
        stats.busy_s += float(ends[-1]) - t0
        self._counted(k, True)
        before = req.computed
        req.computed += k * chunk
        if self._caches_chunks:
            # none of the k chunks finishes the prompt; each is cached as its step ended, as
            # step by step: the tree's nodes (what a whole-leaf eviction frees) come out alike
            for j in range(self._chunks_cached + 1, k + 1):
                self.kv.chunk_done(req, before + j * chunk, float(ends[j - 1]))
            if held is not None:
                self._watch.release(self._watch_at, held)
        if decodes:
            self.grow_through(k)
            self._apply_decode(step, k, env.now)

    def _settles(self, step: Step) -> bool:
        """After this step every running request decodes and nothing waits: it completes
        every prompt in flight, none of them or of its decodes finishes (a finish is seen by
        its client), so the steps after it are a steady decode batch."""
        if (not step.prefills or self.waiting or self.inbox
                or len(step.prefills) != len(self.prefilling)):
            return False
        if step.decodes and (not step.all_decoders
                             or self.decoding.next_finish() <= 1):
            return False
        return all(r.computed + c >= r.target and r.generated + 1.0 < r.spec.output_tokens
                   for r, c in step.prefills)

    def _step_then_decode(self, step: Step, seconds: float):
        """A step that settles the batch (``_settles``) and the steady decode steps after it
        as one timeout. A lone instance is read by nobody until its next event, so the step's
        effects are applied at once, stamped with its end; an arrival interrupts as in
        ``_macro`` (the step in flight completes, the rest is dropped)."""
        env = self.env
        t0 = env.now
        self.apply_step(step, seconds, now=t0 + seconds)
        k = self._steady_length(self.max_macro, allocated=False)
        if k < 2:
            yield env.timeout(seconds)
            return False
        dec = self.decoding
        times = self.oracle.decode_steps(dec.context(), k, self._advances(), self.width)
        ends = step_ends(t0, times, first=seconds)
        done = yield from self._through(ends)  # the prefill step is followed by a read
        if done > 1:
            self.stats.settled_macro_steps += 1
            # the first decode step is included in the growth: no scheduler grew it
            self._decoded(_EVERY_DECODER, done - 1, float(ends[done - 1]) - float(ends[0]))
        return done == k + 1


_EMPTY = np.zeros(0, dtype=np.float64)
_EVERY_DECODER = Step(all_decoders=True)  # read only: which rows a macro-step advanced


def wait_through(env: simpy.Environment, ends: np.ndarray, holder):
    """Wait through consecutive steps ending at ``ends`` with ``holder._in_macro`` set (its
    owner interrupts the waiting process then, and clears the flag): the step in flight
    completes and the rest are dropped. Returns how many steps completed."""
    k = ends.size
    done = k
    holder._in_macro = True
    try:
        yield env.timeout(float(ends[-1]) - env.now)
    except simpy.Interrupt:
        # the steps ended by now, plus the one in flight (bisect: a few probes, cheaper
        # than numpy's call overhead on this path)
        done = min(k, bisect_right(ends, env.now) + 1)
        end = float(ends[done - 1])
        while env.now < end:
            try:
                yield env.timeout(end - env.now)
            except simpy.Interrupt:
                pass
    holder._in_macro = False
    return done


def step_ends(t0: float, seconds: np.ndarray, first: float | None = None) -> np.ndarray:
    """End time of each of consecutive steps (``first``, when given, then ``seconds``): added
    one at a time onto ``t0``, as the clock does when each step is its own timeout. Takes
    ``seconds`` over (the ends are written into it when no ``first`` leads)."""
    if first is None:
        ends = seconds
        ends[0] += t0
    else:
        ends = np.empty(seconds.size + 1)
        ends[0] = t0 + first
        ends[1:] = seconds
    return np.cumsum(ends, out=ends)
