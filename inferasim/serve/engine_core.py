"""One engine's scheduler state and step logic, with no clock: its queues, admission,
preemption and what each step does to them (in the manner of nano-vllm's scheduler and
mini-sglang's prefill manager). ``form_step`` decides the next batch under the engine's
policy (``engine_policy.EnginePolicy``) and token budget; ``apply_step`` accounts a step
that ended at a given time. The SimPy driver (``engine.EngineInstance``) owns time: when a
step runs, how long it takes, and the runs of steps it advances at once (macro-steps).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from inferasim.config.scenario import Scenario
from inferasim.cost.oracle import StepBatch
from inferasim.serve.acceptance import RequestAdvance
from inferasim.serve.batch_wait import BatchWait
from inferasim.serve.decode_set import DecodeSet
from inferasim.serve.engine_policy import EnginePolicy
from inferasim.serve.kv_manager import KVManager
from inferasim.serve.live import LiveRequest
from inferasim.serve.scheduler import SCHEDULERS, Step, grow_decoders


class EngineStats:
    __slots__ = ("steps", "prefill_steps", "decode_steps", "mixed_steps", "macro_steps",
                 "chunk_macro_steps", "settled_macro_steps", "continued_macro_steps",
                 "preemptions", "busy_s", "occupancy")

    def __init__(self) -> None:
        self.steps = self.prefill_steps = self.decode_steps = self.macro_steps = 0
        self.chunk_macro_steps = 0  # of the macro-steps, those over a prompt's full chunks
        self.settled_macro_steps = 0  # of the macro-steps, those riding on a settling step
        self.continued_macro_steps = 0  # of the macro-steps, those run on after a finish
        self.mixed_steps = 0  # steps holding both prefill chunks and decodes
        self.preemptions = 0
        self.busy_s = 0.0
        # (time, tokens used by running requests and cache, tokens cached) samples
        self.occupancy: list[tuple[float, int, int]] = []


class EngineCore:
    """What an engine instance holds and decides, without a clock. ``on_done`` is called with
    a request the engine has finished or refused."""

    def __init__(self, scenario: Scenario, oracle, kv: KVManager, index: int,
                 on_done: Callable[[LiveRequest], None]):
        eng = scenario.engine
        self.index = index
        self.oracle = oracle
        self.kv = kv
        self._done = on_done
        self.max_num_seqs = eng.max_num_seqs
        # set by an attention-DP group that balances prompts across its ranks (adp_balance)
        self.hold_prompts = False
        self.max_batched_tokens = eng.max_num_batched_tokens
        # Decode tokens a step may hold (what ``schedule_decodes`` is offered).
        self._decode_budget = float("inf") if eng.scheduler == "prefill-exclusive" \
            else eng.max_num_batched_tokens
        self.chunked_prefill_size = eng.chunked_prefill_size
        # TensorRT-LLM: prompts enter whole (no chunked context), and its batch waiting holds
        # them on steps with decodes; neither applies under attention DP's own balancing
        self.chunks_prompts = eng.chunked_prefill
        wait = BatchWait(eng.batch_wait_timeout_iters, eng.batch_wait_max_tokens_ratio,
                         eng.max_num_batched_tokens)
        self.batch_wait = wait if wait.enabled and scenario.parallel.dp_attention == 1 else None
        # queue order, preemption, what the cache keeps, admission's reserve: the engine's own
        self.policy = policy = EnginePolicy.for_engine(eng, scenario.speculative.method != "none")
        self._caches_chunks = policy.caches_chunks
        self._schedule = SCHEDULERS[eng.scheduler]
        spec = scenario.speculative
        self.width = spec.verify_width
        self.advance = spec.tokens_per_step
        # Requests accept alike unless the scenario spreads them (``acceptance_cv``); each then
        # draws its own tokens per step from the replay's seed and its id, in both step modes.
        self._advance_of = (
            RequestAdvance(self.advance, spec.acceptance_cv, self.width, scenario.workload.seed)
            if spec.acceptance_cv > 0 and spec.method != "none" else None)
        self._host_s_per_token = eng.uncached_prompt_latency_us * 1e-6
        self._host_cap = eng.uncached_prompt_latency_max_tokens
        # SGLang's receive interval: requests sent while the scheduler decodes wait in
        # ``inbox`` until it next reads its socket: after a prefill step, when idle, or every
        # ``_recv_every`` decode steps (``_recv_count`` of them since the last read).
        self._recv_every = eng.scheduler_recv_interval
        self._recv_count = 0
        self.inbox: list[LiveRequest] = []
        self._reserve_output = policy.reserve_output
        self._ratio_min = policy.ratio_min
        self._ratio_decay = (policy.ratio_init - policy.ratio_min) \
            / max(1, policy.ratio_decay_steps)
        self.new_token_ratio = policy.ratio_init
        self.waiting: list[LiveRequest] = []
        self.running: list[LiveRequest] = []      # admission order
        # routed here and not yet submitted (a disaggregated decode instance's requests from
        # its preallocation to their KV's arrival): a router counts them from its decision
        self.incoming: dict[int, LiveRequest] = {}
        self.prefilling: list[LiveRequest] = []   # running, prompt not done, admission order
        self.decoding = DecodeSet(self.advance)   # running, past the prompt
        self.stats = EngineStats()
        self._seq = 0
        # the longest request the engine serves, from which it deduces an unsent max_tokens
        self._max_context = scenario.context_limit
        if policy.caps_request_at_pool and kv.pool.capacity > 0:
            self._max_context = min(self._max_context, kv.pool.capacity)
        # A router's index told of every change of this instance's queues (``watch``)
        self._watch = None
        self._watch_at = 0
        self._watch_load = None  # its LoadIndex, told by a bit (``_load_moved``)
        self._watch_bit = 0

    def watch(self, router, position: int) -> None:
        """Tell ``router`` (``fleet_routing.FleetRouting``) when the queues change, as
        target ``position``."""
        self._watch, self._watch_at = router, position
        self._watch_load, self._watch_bit = router.load, 1 << position

    @property
    def router_index(self):
        """The router index this instance reports to (``fleet_routing.FleetRouting``), if any."""
        return self._watch

    def _load_moved(self) -> None:
        # a mark, not a re-read: the index reads the score when the router next decides
        if self._watch_load is not None:
            self._watch_load.stale |= self._watch_bit

    def max_new(self, req: LiveRequest) -> int:
        """The output the engine believes ``req`` may reach: the client's max_tokens, else the
        rest of the longest request it serves (SGLang caps max_new_tokens at max_req_len -
        prompt when none is sent; TensorRT-LLM's executor deduces max_seq_len - prompt,
        ``_deduce_max_tokens`` in ``executor/base_worker.py`` [3P]; both lengths at most the
        pool, ``EnginePolicy.caps_request_at_pool``). The true output length is the
        simulator's, never the scheduler's."""
        if req.spec.max_tokens is not None:
            return req.spec.max_tokens
        return max(1, self._max_context - req.spec.prompt_tokens - 1)

    @property
    def load_score(self) -> int:
        return 4 * (len(self.waiting) + len(self.inbox) + len(self.incoming)) + len(self.running)

    @property
    def request_count(self) -> int:
        return len(self.waiting) + len(self.inbox) + len(self.incoming) + len(self.running)

    def queue_order(self) -> list[LiveRequest]:
        return self.policy.order(self.waiting, self.kv, self.policy.lpm_max_waiting)

    def start(self, req: LiveRequest, now: float) -> None:
        self.waiting.remove(req)
        self.running.append(req)
        self._load_moved()
        self.prefilling.append(req)
        req.peek_version = ()  # its witness would keep evicted tree nodes alive
        req.admitted_seq = self._seq
        self._seq += 1
        if math.isnan(req.admitted):
            req.admitted = now

    def admission_reserve(self, req: LiveRequest) -> float:
        if not self._reserve_output:
            return 0.0
        reserve = float(min(self.max_new(req) - req.generated, self.policy.output_reserve_clip))
        if self.policy.caps_request_at_pool:
            # its whole sequence is at most the pool, counted in whole blocks (a prompt's
            # last page rounded up here is the output's first tokens there)
            reserve = min(reserve, float(max(0, self.kv.pool.capacity - self.kv.pages(req.target))))
        return reserve

    def running_reserve(self) -> float:
        if not self._reserve_output or not self.running:
            return 0.0
        clip = self.policy.output_reserve_clip
        decoding = float(np.minimum(self.decoding.remaining_output(), clip).sum())
        prefilling = sum(min(self.max_new(r) - r.generated, clip) for r in self.prefilling)
        return self.new_token_ratio * (decoding + prefilling)

    def preempt_one(self, now: float) -> LiveRequest:
        self.decoding.sync()  # victim policies read each request's progress
        victim = self.policy.victim(self.running)
        self.running.remove(victim)
        # KV exists for the prompt chunks computed, or all but the last sampled token
        computed = victim.computed if victim.row < 0 else victim.context - 1
        if victim.row >= 0:
            self.decoding.remove(victim)  # writes its progress and pages back
        else:
            self.prefilling.remove(victim)
        if self.policy.keeps_blocks:
            self.kv.keep_computed(victim, computed, now)
        self.kv.release(victim)
        # Recompute: the prompt and what was generated are prefilled again on re-admission.
        victim.target = victim.spec.prompt_tokens + int(victim.generated)
        victim.computed = 0
        victim.preemptions += 1
        self.stats.preemptions += 1
        if self.policy.requeue_front:
            self.waiting.insert(0, victim)
        else:
            self.waiting.append(victim)
        self._load_moved()
        if self._reserve_output and self._ratio_decay > 0:  # SGLang's adapts; TRT-LLM's is 1
            total_out = sum(self.max_new(r) for r in self.running) + 1
            done = sum(r.generated for r in self.running)
            self.new_token_ratio = min(1.0, (done + 20 * len(self.running)) / total_out)
        return victim

    def form_step(self, now: float) -> Step | None:
        """The next step's batch, or None when the instance has nothing to do."""
        while self.waiting or self.running:
            preempted_before = self.stats.preemptions
            step = self._schedule(self, now)
            if not step.empty:
                return step
            if self.stats.preemptions == preempted_before and not self.running:
                if self.pages_in_flight():
                    # requests holding pages here are on their way (their prefills and
                    # transfers): they will run and free them; wait for them
                    return None
                # Nothing runs and the head of the queue cannot be admitted into an empty
                # pool: it never will be. Refuse it, as an engine refuses a prompt longer
                # than its KV capacity.
                self._refuse(self.queue_order()[0])
            # else everything was preempted while forming the step: form it again
        return None

    def _read_inbox(self) -> None:
        """(Called with requests in the inbox.) The scheduler reads its socket: after a
        prefill step or every ``_recv_every`` decode steps (the count is back at 0), or when
        nothing runs (an idle loop turns over in no time)."""
        if self._recv_count == 0 or not (self.running or self.waiting):
            self.waiting.extend(self.inbox)
            self.inbox.clear()
            self._load_moved()
            self._recv_count = 0

    def _counted(self, decode_steps: int, prefilled: bool) -> None:
        """Advance the receive count by steps that ended: a prefill step makes the next loop
        read (SGLang weighs it past any interval)."""
        if prefilled:
            self._recv_count = 0
        elif self._recv_every > 1:
            self._recv_count = (self._recv_count + decode_steps) % self._recv_every

    def _to_read(self) -> int:
        """Decode steps until the scheduler next reads its socket."""
        return self._recv_every - self._recv_count

    def batch(self, step: Step) -> StepBatch:
        pre = step.prefills
        samples = sum(1 for r, c in pre if r.computed + c >= r.target)
        if step.all_decoders:
            ctx = self.decoding.context()
        else:
            ctx = np.fromiter((r.context for r in step.decodes), np.float64, len(step.decodes))
        return StepBatch(
            prefill_tokens=np.fromiter((c for _, c in pre), np.float64, len(pre)),
            prefill_resident=np.fromiter((r.computed for r, _ in pre), np.float64, len(pre)),
            prefill_samples=samples,
            decode_context=ctx,
            width=self.width,
        )

    def reload_stall(self, step: Step, compute_s: float) -> float:
        """Seconds the step waits, beyond its ``compute_s``, for KV a host tier reloads for
        the requests it prefills first: all of it when the load precedes the forward
        (LMCache), what exceeds the step's compute when it is overlapped layer by layer or
        asynchronous (HiCache, vLLM's offloading connector)."""
        tier = self.kv.tier
        if tier is None or not step.prefills:
            return 0.0
        tokens = sum(r.reload_pending for r, _ in step.prefills)
        if not tokens:
            return 0.0
        load = tier.reload_seconds(tokens)  # everything loaded crosses the host link
        if tier.below is not None and tier.policy.storage_reads == "in-step":
            # a blocking read from the drive into host memory first
            load += tier.below.reload_seconds(sum(r.storage_pending for r, _ in step.prefills))
        return load if tier.policy.reload == "in-step" else max(0.0, load - compute_s)

    def apply_step(self, step: Step, seconds: float, now: float) -> None:
        """Account a step that ended ``now``: chunks computed, tokens generated, requests
        done."""
        self.stats.steps += 1
        self.stats.busy_s += seconds
        if step.prefills and step.decodes:
            self.stats.mixed_steps += 1
        if step.prefills:
            self.stats.prefill_steps += 1
        else:
            self.stats.decode_steps += 1
        # The step's decodes are the rows before it: a prompt it completes samples its first
        # token in it and joins the set after them, to decode from the next step on.
        decoders = len(self.decoding)
        for req, chunk in step.prefills:
            req.reload_pending = req.storage_pending = 0
            req.computed += chunk
            if req.computed >= req.target:
                self.prompt_done(req, now)
            elif self._caches_chunks:
                self.kv.chunk_done(req, req.computed, now)
        if step.decodes:
            self._apply_decode(step, 1, now, decoders)
        if self._reserve_output and not step.prefills and step.decodes:
            self.new_token_ratio = max(self._ratio_min, self.new_token_ratio - self._ratio_decay)
        self._counted(1, bool(step.prefills))

    def prompt_done(self, req: LiveRequest, now: float) -> None:
        self.kv.prompt_done(req, now)
        if math.isnan(req.first_token):
            # The host-side term (tokenisation, scheduling) charged per uncached prompt token
            # delays the first token only.
            uncached = req.spec.prompt_tokens - max(req.cached_first, 0)
            if self._host_cap:
                uncached = min(uncached, self._host_cap)
            req.first_token = now + self._host_s_per_token * uncached
        self.prefilling.remove(req)
        # The step that completes a prompt samples one token.
        req.gen_base = req.generated + 1.0
        req.decode_steps = 0
        req.generated = req.gen_base
        if req.generated >= req.spec.output_tokens:
            self._finish(req, now)
        else:
            if self._advance_of is not None and not req.advance:
                req.advance = self._advance_of(req.rid)
            self.decoding.add(req, self.max_new(req))

    def _apply_decode(self, step: Step, steps: int, now: float,
                      decoders: int | None = None) -> None:
        """``steps`` decode steps of the step's decodes; with every decoder in it, the first
        ``decoders`` rows (None: all), the set's rows when the step was formed."""
        dec = self.decoding
        if step.all_decoders:
            done = dec.add_steps(None, steps, decoders)
        else:
            rows = np.fromiter((r.row for r in step.decodes), np.int64, len(step.decodes))
            done = dec.add_steps(rows, steps)
        if len(done) == 1:
            self._finish(dec.reqs[int(done[0])], now)
        elif len(done):
            # collected before any finishes: a finish moves the set's last row into its hole
            for req in sorted((dec.reqs[i] for i in done), key=lambda r: r.admitted_seq):
                self._finish(req, now)

    def pages_in_flight(self) -> int:
        """Requests holding pages of this pool that have not reached its queues yet (a
        disaggregated decode instance's preallocations): none here."""
        return 0

    def _refuse(self, req: LiveRequest) -> None:
        self.waiting.remove(req)
        self._load_moved()
        req.failed = self.kv.refusal(req.target,
                                     holders=sum(1 for r in self.waiting if r.private))
        self._done(req)

    def _finish(self, req: LiveRequest, now: float) -> None:
        if req.row >= 0:
            self.decoding.remove(req)  # writes its final token count back
        self.kv.finish(req, now)
        self.running.remove(req)
        self._load_moved()
        # The last token cannot reach the client before the first: tokens decoded while the
        # host term (uncached_prompt_latency_us) still holds the first one back arrive with it.
        # The engine's own time (its memory, the next step) is untouched: the term is TTFT's.
        req.finish = req.first_token if now < req.first_token else now
        self._done(req)

    def _advances(self) -> float | np.ndarray:
        """Tokens each decoding request's step emits: one figure when all accept alike."""
        if self._advance_of is None:
            return self.advance
        return self.decoding.adv[: len(self.decoding)]

    def grow_through(self, steps: int) -> None:
        """Allocate the pages steps 1..``steps`` of a macro-step grew into (the first usually
        held already: the scheduler grew it), as the single steps would have (the macro
        length guaranteed they can)."""
        if not grow_decoders(self, steps):
            raise AssertionError("macro-step growth exceeded the room it was sized for")

    def sample_occupancy(self, now: float) -> None:
        pool = self.kv.pool
        self.stats.occupancy.append((now, pool.capacity - pool.free,
                                     self.kv.cache.cached_tokens))
