"""Build the serving side of a scenario: colocated instances behind a router, attention-DP
ranks inside an instance (independent or in lockstep), or disaggregated prefill and decode
pools joined by a KV link — all on the caller's one SimPy clock."""

from __future__ import annotations

from collections.abc import Callable

import attrs
import simpy

from inferasim.arch.attention import attention_for
from inferasim.arch.interconnect import kv_link_plan
from inferasim.arch.memory import memory_plan
from inferasim.config.errors import ConfigError
from inferasim.config.knobs import Knobs
from inferasim.config.loader import rank_scenario
from inferasim.config.scenario import Scenario
from inferasim.serve.engine import EngineInstance
from inferasim.serve.engine_policy import PrefixCounter
from inferasim.serve.kv_link import ChunkStream, KVLink
from inferasim.serve.kv_manager import KVManager
from inferasim.serve.live import LiveRequest
from inferasim.serve.lockstep import LockstepGroup
from inferasim.serve.offload import KVTier, OffloadPolicy
from inferasim.serve.router import Router

OracleFactory = Callable[[Scenario, bool], object]


class Topology:
    """What the clients submit to, and every engine instance for the report."""

    def __init__(self, frontend, engines: list[EngineInstance], kv_pool_tokens: int,
                 max_context: int, prefill_kv_pool_tokens: int | None = None):
        self.frontend = frontend
        self.engines = engines
        # one instance's pool; a disaggregated deployment's decode instances, whose pools
        # hold the long-lived KV, with the prefill instances' apart
        self.kv_pool_tokens = kv_pool_tokens
        self.prefill_kv_pool_tokens = prefill_kv_pool_tokens
        self.max_context = max_context

    def submit(self, req: LiveRequest) -> None:
        spec, limit = req.spec, self.max_context
        if spec.prompt_tokens < 1:
            # The servers reject an empty prompt (a trace entry without its input length).
            req.failed = "an empty prompt (0 tokens)"
            req.done.succeed()
            return
        # The server answers at once with an error, as vLLM and SGLang do, for a prompt that
        # fills its context (max_model_len) or a prompt and max_tokens past it; without
        # max_tokens it takes the rest of its context as the limit and the answer ends there
        # (vLLM's default max_tokens, SGLang's max_new_tokens).
        if spec.prompt_tokens >= limit:
            req.failed = (f"a prompt of {spec.prompt_tokens} tokens leaves no room for its "
                          f"answer in the server's context of {limit}")
        elif spec.max_tokens is not None and spec.prompt_tokens + spec.max_tokens > limit:
            req.failed = (f"prompt + max_tokens = {spec.prompt_tokens + spec.max_tokens} "
                          f"tokens exceed the server's context of {limit}")
        elif spec.prompt_tokens + spec.output_tokens > limit:
            out = limit - spec.prompt_tokens
            kept = None if spec.finish_keys is None \
                else spec.finish_keys[:(spec.prompt_tokens + out) // spec.block_tokens]
            req.spec = attrs.evolve(spec, output_tokens=out, finish_keys=kept)
        if req.failed:
            req.done.succeed()
            return
        self.frontend.submit(req)


def full_kv_bytes_per_token(scenario: Scenario) -> float:
    """One copy of every layer's KV for a token, however the ranks split it: what crosses
    the prefill-to-decode link, and what a host tier stores once."""
    return attention_for(scenario.model).kv_bytes_per_token(
        scenario.kv_dtype, attn_tp=1, dcp=1, latent_sharded=False)


def _tier_tokens(scenario: Scenario, gib: float) -> int:
    """Tokens ``gib`` of a tier holds for one attention-DP rank, each token stored once."""
    return int(gib * 2**30 / scenario.parallel.dp_attention // full_kv_bytes_per_token(scenario))


def host_tier_tokens(scenario: Scenario, plan) -> int:
    """A scheduler's host tier (``engine.offload_host_gib``, default twice the GPU pool,
    HiCache's ratio 2), in tokens."""
    gib = scenario.engine.offload_host_gib
    return 2 * plan.kv_pool_tokens if gib is None else _tier_tokens(scenario, gib)


def attach_host_tier(env: simpy.Environment, scenario: Scenario, kv: KVManager, plan,
                     block_tokens: int) -> KVTier:
    """A host KV tier behind ``kv``'s pool (``engine.kv_offload``): its capacity from
    ``engine.offload_host_gib`` over the instance's attention-DP ranks (default: twice the
    GPU pool, HiCache's ratio 2), each token's distinct KV stored once; a reload moves each
    GPU's shard over its own host link (``gpu.host_link_bw_per_dir``). With
    ``engine.offload_storage_gib``, a storage tier behind it, each GPU reading its shard
    from its own drive (``engine.offload_storage_read_bw``)."""
    eng, gpu = scenario.engine, scenario.gpu
    if gpu.host_link_bw_per_dir <= 0:
        raise ConfigError(f"{gpu.name} records no host link (gpu.host_link_bw_per_dir), which "
                          "a host KV tier reloads over", key="engine.kv_offload")
    capacity = host_tier_tokens(scenario, plan)
    policy = OffloadPolicy.named(eng.kv_offload, eng.offload_chunk_tokens)
    tier = KVTier(policy, capacity, block_tokens, bytes_per_token=plan.kv_bytes_per_token,
                  link_bytes_per_s=gpu.host_link_bw_per_dir)
    if eng.offload_storage_gib is not None:  # EngineSpec refused it without a host writer
        tier.below = KVTier(policy, _tier_tokens(scenario, eng.offload_storage_gib),
                            block_tokens,
                            bytes_per_token=plan.kv_bytes_per_token,
                            link_bytes_per_s=eng.offload_storage_read_bw,
                            latency_s=eng.offload_storage_latency_s, name="storage")
    kv.tier = tier
    if policy.writes == "evicted":
        kv.cache.on_evict = lambda keys: tier.write(keys, env.now)
    return tier


def _instance(env: simpy.Environment, scenario: Scenario, knobs: Knobs, block_tokens: int,
              make_oracle: OracleFactory, first_index: int) -> tuple[object, list]:
    """One engine instance; with attention-DP, one scheduler + pool + cache per rank."""
    eng = scenario.engine
    plan = memory_plan(scenario)
    dp = scenario.parallel.dp_attention

    def kv() -> KVManager:
        manager = KVManager(plan.kv_pool_tokens, eng.page_size, block_tokens,
                            eng.eviction_policy, eng.prefix_caching,
                            window_tokens=plan.kv_window_pool_tokens,
                            counter=PrefixCounter.for_engine(eng))
        if eng.kv_offload != "none":
            attach_host_tier(env, scenario, manager, plan, block_tokens)
        return manager

    if dp == 1:
        engine = EngineInstance(env, scenario, make_oracle(scenario, False), kv(), first_index)
        return engine, [engine]
    knobs.check(scenario)
    lockstep = knobs.lockstep_group(dp)
    oracle = make_oracle(scenario, True)
    driven = lockstep > 1
    per_rank = rank_scenario(scenario)
    ranks = [EngineInstance(env, per_rank, oracle, kv(), first_index + r, driven=driven)
             for r in range(dp)]
    if driven:
        for g in range(0, dp, lockstep):
            LockstepGroup(env, ranks[g:g + lockstep], oracle)
    return Router(ranks, scenario.rank_router), ranks


def _pool(env, scenario, knobs, block_tokens, make_oracle, count: int, router: str,
          first_index: int, prealloc_matches: bool = False
          ) -> tuple[Router, list[EngineInstance], list[list]]:
    """``count`` instances behind a router (as many of them as ``topology.frontends``, dealt
    requests in turn); also each instance's ranks (its engines). ``prealloc_matches``: a
    disaggregated decode pool that matches its own prefix cache before it pulls
    (``KVManager.prealloc_matches``)."""
    targets, engines, instances = [], [], []
    for _ in range(count):
        target, ranks = _instance(env, scenario, knobs, block_tokens, make_oracle,
                                  first_index + len(engines))
        for rank in ranks:
            rank.kv.prealloc_matches = prealloc_matches
        targets.append(target)
        engines.extend(ranks)
        instances.append(ranks)
    return Router(targets, router, scenario.topology.frontends), engines, instances


class DisaggregatedFrontend:
    """Prefill on the prefill pool, KV over the link, decode on the decode pool.

    The prefill instance computes the prompt and samples the first token; the prompt's KV
    (one copy of every layer's cache) crosses its prefill instance's ``KVLink``, shared with
    every other transfer in flight from that instance; the decode instance admits the
    request with its KV resident and decodes the rest. The client reads the stream from the
    decode instance (SGLang's router, vLLM's proxy), so its first token arrives when the
    decode instance admits the request: TTFT = queue + prefill + KV transfer + decode
    admission (engines.md 6).

    How the KV crosses is the engine's (``engine.disagg_transfer``, engines.md 6):
    ``streamed`` (SGLang): each prefill chunk's KV is sent as the chunk completes, the last
    chunk's after the prefill; ``whole`` (vLLM's NIXL pull, ATOM): after the prefill the
    decode instance allocates the prompt's pages, matching its own prefix cache first, and
    pulls the full blocks it lacks (``floor(prompt / block) x block - local hits``; the
    partial last block is computed on the decode side, a sub-block prefill not charged).
    Either way the prefill instance keeps the prompt's blocks pinned until the transfer
    ends (vLLM's delay_free_blocks, SGLang's inflight queue), then caches them as a finish
    does. Where the decode engine preallocates (SGLang), the request first waits on the
    decode instance it is routed to for its prompt's pages, then goes to prefill: a full
    decode pool holds requests ahead of their prefill, and the prefill does not run ahead of
    the decode side."""

    def __init__(self, env: simpy.Environment, prefill: Router, decode: Router,
                 prefill_engines: list[EngineInstance], links: list[KVLink],
                 kv_bytes_per_token: float, transfer: str = "whole", stream_page: int = 1,
                 decode_preallocates: bool = False):
        """``links[i]``: the link prefill engine ``i`` (by ``EngineInstance.index``) sends
        through; the ranks of one instance share one."""
        self.env = env
        self.decode_preallocates = decode_preallocates
        self.prefill = prefill
        self.decode = decode
        self.prefill_engines = prefill_engines
        self.links = links
        self.kv_bytes_per_token = kv_bytes_per_token
        self.streamed = transfer == "streamed"
        self.stream_page = stream_page
        # per prefill engine: fires at the next release of a held request's KV there
        self._released: dict[int, simpy.Event] = {}

    def transfer_seconds(self, prompt_tokens: int) -> float:
        """A whole prompt's KV over an idle link."""
        return self.links[0].seconds_alone(prompt_tokens * self.kv_bytes_per_token)

    def submit(self, req: LiveRequest) -> None:
        self.env.process(self._flow(req))

    def _prefill_request(self, req: LiveRequest, stream: ChunkStream | None) -> LiveRequest:
        """The prefill instance's one-token request; it holds its KV when a decode side
        will receive it, and streams its chunks under ``streamed``."""
        first = LiveRequest(req.rid, attrs.evolve(req.spec, output_tokens=1, finish_keys=None),
                            req.arrival, self.env.event())
        first.holds_kv = req.spec.output_tokens > 1
        if stream is not None:
            links = self.links

            def chunk_done(computed: float, _at: float) -> None:
                # the prefill pool runs step by step under ``streamed``, so a chunk's end is
                # the clock's now (build_topology)
                stream.send_upto(links[first.instance], int(computed))

            first.on_chunk = chunk_done
        return first

    def _release(self, engine: EngineInstance, first: LiveRequest) -> None:
        """The prefill instance frees the held KV into its cache (after the decode side's
        read); requests its empty pool refused meanwhile try again."""
        engine.kv.release_held(first)
        waiting = self._released.pop(engine.index, None)
        if waiting is not None:
            waiting.succeed()

    def _prefill(self, req: LiveRequest, stream: ChunkStream | None):
        """Prefill ``req``'s prompt; returns the prefill instance's request and engine.

        An engine refuses the head of its queue when nothing runs and it does not fit;
        with a pool held by finished requests awaiting their transfers that is a wait, not
        a refusal (the real engine keeps the request queued): it is sent again to the same
        instance at that instance's next release."""
        target = None
        lookups = hits = preemptions = 0
        while True:
            first = self._prefill_request(req, stream)
            (self.prefill if target is None else target).submit(first)
            yield first.done
            target = self.prefill_engines[first.instance]
            lookups += first.lookup_tokens
            hits += first.lookup_hit_tokens
            preemptions += first.preemptions
            if not (first.failed and target.kv.held):
                break
            if target.index not in self._released:
                self._released[target.index] = self.env.event()
            yield self._released[target.index]
        first.lookup_tokens, first.lookup_hit_tokens, first.preemptions = lookups, hits, preemptions
        return first, target

    def _flow(self, req: LiveRequest):
        env = self.env
        decoder = None
        if self.decode_preallocates:
            # the decode instance holds the prompt's pages before the prefill admits it
            decoder = self.decode.choose(req)
            yield decoder.preallocate(req)
            if req.failed:
                req.done.succeed()
                return
        stream = ChunkStream(self.kv_bytes_per_token, self.stream_page) if self.streamed \
            else None
        first, engine = yield from self._prefill(req, stream)
        req.prefill_admitted = first.admitted
        req.prefill_done = first.first_token
        req.cached_first = first.cached_first
        # the prefill pool's counter is the deployment's (the decode side only lands KV)
        req.lookup_tokens, req.lookup_hit_tokens = first.lookup_tokens, first.lookup_hit_tokens
        req.preemptions += first.preemptions
        if first.failed or req.spec.output_tokens <= 1:
            if decoder is not None:
                decoder.release_prealloc(req)
        if first.failed:
            req.failed = first.failed
            req.done.succeed()
            return
        req.admitted = first.admitted
        if req.spec.output_tokens <= 1:
            # nothing to decode: the prefill instance's one token is the whole answer
            req.first_token = first.first_token
            req.finish = first.finish
            req.done.succeed()
            return
        link = self.links[first.instance]
        req.transfer_start = env.now
        if stream is not None:
            # the last chunk's KV (with the first token) after the prefill; the earlier
            # chunks' went as they completed and may still be crossing
            stream.send_upto(link, req.spec.prompt_tokens, last=True)
            yield env.all_of(stream.transfers)
        elif decoder is not None:
            # pages preallocated ahead of the prefill: the whole prompt crosses
            yield link.transfer(req.spec.prompt_tokens * self.kv_bytes_per_token)
        else:
            # vLLM: the decode instance allocates the prompt's pages when its scheduler first
            # looks at the request, counting its own cached prefix, then pulls the rest
            decoder = self.decode.choose(req)
            yield decoder.preallocate(req)
            if req.failed:
                self._release(engine, first)
                req.done.succeed()
                return
            req.transfer_start = env.now  # the wait for the decode side is its admission
            yield link.transfer(self.remote_tokens(req, decoder) * self.kv_bytes_per_token)
        req.transfer_done = env.now
        self._release(engine, first)
        req.prefilled = True
        if decoder is not None:
            decoder.submit(req)
        else:
            self.decode.submit(req)

    @staticmethod
    def remote_tokens(req: LiveRequest, decoder: EngineInstance) -> int:
        """Prompt tokens a pulling decode instance reads: its full blocks less those its own
        cache matched at allocation (vLLM's get_num_new_matched_tokens, engines.md 6)."""
        bt = decoder.kv.bt
        return max(0, req.spec.prompt_tokens // bt * bt - req.tree_tokens)


def build_topology(env: simpy.Environment, scenario: Scenario, knobs: Knobs, block_tokens: int,
                   make_oracle: OracleFactory) -> Topology:
    topo = scenario.topology
    if topo.kind == "colocated":
        router, engines, _ = _pool(env, scenario, knobs, block_tokens, make_oracle,
                                   topo.instances, topo.router_policy, 0)
        if len(engines) == 1 and engines[0].process is not None:
            engines[0].solo = True
        return Topology(router, engines, memory_plan(scenario).kv_pool_tokens,
                        scenario.context_limit)
    from inferasim.config.loader import resolved_pools

    pre_sc, dec_sc = resolved_pools(scenario)
    transfer = pre_sc.engine.disagg_transfer
    if transfer == "streamed":
        # every chunk's end on the clock, where its KV starts across the link: a chunk
        # macro-step would report its chunks at its end (a prefill instance never decodes,
        # so these are the only macro-steps it gives up)
        pre_sc = attrs.evolve(pre_sc, sim=attrs.evolve(pre_sc.sim, exact_steps=True))
    pre, pre_eng, pre_instances = _pool(env, pre_sc, knobs, block_tokens, make_oracle,
                                        topo.prefill.instances, topo.router_policy, 0)
    pulls = transfer == "whole" and not dec_sc.engine.disagg_decode_preallocates
    dec, dec_eng, _ = _pool(env, dec_sc, knobs, block_tokens, make_oracle,
                            topo.decode.instances, topo.router_policy, len(pre_eng),
                            prealloc_matches=pulls)
    kv_bytes = full_kv_bytes_per_token(pre_sc)
    # one link per prefill instance: its GPUs send through their own links (scale-up or
    # NICs, as the layout puts the deployment: kv_link_plan), so transfers from one prefill
    # instance share its bandwidth and instances do not share theirs
    plan = kv_link_plan(scenario)
    links: list[KVLink] = []
    for i, ranks in enumerate(pre_instances):
        link = KVLink(env, plan.bytes_per_s, plan.latency_s, name=f"prefill{i}")
        links.extend(link for _ in ranks)
    front = DisaggregatedFrontend(env, pre, dec, pre_eng, links, kv_bytes, transfer,
                                  pre_sc.engine.page_size,
                                  dec_sc.engine.disagg_decode_preallocates)
    return Topology(front, pre_eng + dec_eng, memory_plan(dec_sc).kv_pool_tokens,
                    scenario.context_limit,
                    prefill_kv_pool_tokens=memory_plan(pre_sc).kv_pool_tokens)
