"""Build the serving side of a scenario: colocated instances behind a router, attention-DP
ranks inside an instance (independent or in lockstep), or disaggregated prefill and decode
pools joined by a KV link — all on the caller's one SimPy clock."""

from __future__ import annotations

from collections.abc import Callable

import attrs
import simpy

from inferasim.arch.attention import attention_for
from inferasim.arch.memory import memory_plan
from inferasim.config.knobs import Knobs
from inferasim.config.loader import rank_scenario
from inferasim.config.scenario import Scenario
from inferasim.serve.engine import EngineInstance
from inferasim.serve.engine_policy import PrefixCounter
from inferasim.serve.kv_manager import KVManager
from inferasim.serve.live import LiveRequest
from inferasim.serve.lockstep import LockstepGroup
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
        tokens = req.spec.prompt_tokens + req.spec.output_tokens
        if req.spec.prompt_tokens < 1:
            # The servers reject an empty prompt (a trace entry without its input length).
            req.failed = "an empty prompt (0 tokens)"
            req.done.succeed(req)
            return
        if tokens > self.max_context:
            # The server answers at once with an error, as vLLM and SGLang do for a prompt
            # plus requested output past the model's context length.
            req.failed = (f"prompt + output = {tokens} tokens exceed the model's context of "
                          f"{self.max_context}")
            req.done.succeed(req)
            return
        self.frontend.submit(req)


def _instance(env: simpy.Environment, scenario: Scenario, knobs: Knobs, block_tokens: int,
              make_oracle: OracleFactory, first_index: int) -> tuple[object, list]:
    """One engine instance; with attention-DP, one scheduler + pool + cache per rank."""
    eng = scenario.engine
    plan = memory_plan(scenario)
    dp = scenario.parallel.dp_attention

    def kv() -> KVManager:
        return KVManager(plan.kv_pool_tokens, eng.page_size, block_tokens, eng.eviction_policy,
                         eng.prefix_caching, window_tokens=plan.kv_window_pool_tokens,
                         counter=PrefixCounter.for_engine(eng))

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
          first_index: int) -> tuple[Router, list[EngineInstance]]:
    targets, engines = [], []
    for _ in range(count):
        target, ranks = _instance(env, scenario, knobs, block_tokens, make_oracle,
                                  first_index + len(engines))
        targets.append(target)
        engines.extend(ranks)
    return Router(targets, router), engines


class DisaggregatedFrontend:
    """Prefill on the prefill pool, KV over the link, decode on the decode pool.

    The prefill instance computes the prompt and samples the first token; the whole prompt's
    KV (one copy of every layer's cache, as SGLang sends it) then crosses the link in
    ``latency + bytes / bandwidth``; the decode instance admits the request with its KV
    already resident and decodes the rest. The client reads the stream from the decode
    instance (SGLang's router, vLLM's proxy), so its first token arrives when the decode
    instance admits the request: TTFT = queue + prefill + KV transfer + decode admission
    (engines.md 6). Where the decode engine preallocates (SGLang), the request first waits on
    the decode instance it is routed to for its prompt's pages, then goes to prefill: a full
    decode pool holds requests ahead of their prefill, and the prefill does not run ahead of
    the decode side."""

    def __init__(self, env: simpy.Environment, prefill: Router, decode: Router,
                 kv_bytes_per_token: float, link_bytes_per_s: float, link_latency_s: float,
                 decode_preallocates: bool = False):
        self.env = env
        self.decode_preallocates = decode_preallocates
        self.prefill = prefill
        self.decode = decode
        self.kv_bytes_per_token = kv_bytes_per_token
        self.link_bytes_per_s = link_bytes_per_s
        self.link_latency_s = link_latency_s

    def transfer_seconds(self, prompt_tokens: int) -> float:
        return self.link_latency_s + prompt_tokens * self.kv_bytes_per_token / self.link_bytes_per_s

    def submit(self, req: LiveRequest) -> None:
        self.env.process(self._flow(req))

    def _flow(self, req: LiveRequest):
        env = self.env
        decoder = None
        if self.decode_preallocates:
            # the decode instance holds the prompt's pages before the prefill admits it
            decoder = self.decode.choose(req)
            yield decoder.preallocate(req)
            if req.failed:
                req.done.succeed(req)
                return
        first = LiveRequest(req.rid, attrs.evolve(req.spec, output_tokens=1, finish_keys=None),
                            req.arrival,
                            env.event())
        self.prefill.submit(first)
        yield first.done
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
            req.done.succeed(req)
            return
        req.admitted = first.admitted
        if req.spec.output_tokens <= 1:
            # nothing to decode: the prefill instance's one token is the whole answer
            req.first_token = first.first_token
            req.finish = first.finish
            req.done.succeed(req)
            return
        yield env.timeout(self.transfer_seconds(req.spec.prompt_tokens))
        req.transfer_done = env.now
        req.prefilled = True
        if decoder is not None:
            decoder.submit(req)
        else:
            self.decode.submit(req)


def build_topology(env: simpy.Environment, scenario: Scenario, knobs: Knobs, block_tokens: int,
                   make_oracle: OracleFactory) -> Topology:
    topo = scenario.topology
    if topo.kind == "colocated":
        router, engines = _pool(env, scenario, knobs, block_tokens, make_oracle,
                                topo.instances, topo.router, 0)
        if len(engines) == 1 and engines[0].process is not None:
            engines[0].solo = True
        return Topology(router, engines, memory_plan(scenario).kv_pool_tokens,
                        scenario.model.max_context)
    from inferasim.config.loader import pool_scenario

    pre_sc = pool_scenario(scenario, "prefill")
    dec_sc = pool_scenario(scenario, "decode")
    pre, pre_eng = _pool(env, pre_sc, knobs, block_tokens, make_oracle,
                         topo.prefill.instances, topo.router, 0)
    dec, dec_eng = _pool(env, dec_sc, knobs, block_tokens, make_oracle,
                         topo.decode.instances, topo.router, len(pre_eng))
    kind = attention_for(scenario.model)
    kv_bytes = kind.kv_bytes_per_token(pre_sc.kv_dtype, attn_tp=1, dcp=1, latent_sharded=False)
    front = DisaggregatedFrontend(env, pre, dec, kv_bytes, topo.link_bandwidth_gbs * 1e9,
                                  topo.link_latency_us * 1e-6,
                                  dec_sc.engine.disagg_decode_preallocates)
    return Topology(front, pre_eng + dec_eng, memory_plan(dec_sc).kv_pool_tokens,
                    scenario.model.max_context,
                    prefill_kv_pool_tokens=memory_plan(pre_sc).kv_pool_tokens)
