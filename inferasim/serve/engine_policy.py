"""One policy object per engine: how it orders its queue, whom it preempts and where the
victim goes, what the cache keeps, what admission reserves, and how its prefix-cache counter
counts. Built once from the resolved ``EngineSpec`` (name, version and every overridable
key), so the scheduler reads one object instead of flags one by one. Which engine does what,
with sources: docs/engines.md.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from inferasim.config.scenario import EngineSpec
from inferasim.config.versions import version_tuple
from inferasim.serve.policies import QUEUE_ORDERS, queue_order_for, victim_for

# vLLM recorded a waiting request's prefix lookup every time the scheduler tried it, so a
# request blocked for N steps counted N queries (vllm issue #43736); the fix (PR #48860,
# merged 2026-07-16) records it once, at admission. The first release holding the fix is
# taken as 0.25 [U: 0.25 was not downloaded; 0.24.0 predates the merge on our reading].
_VLLM_LOOKUP_FIX = (0, 25)
_VLLM_FULL_ISL_GATE = (0, 19)
_SGLANG_FCFS_FROM = (0, 4, 3)

__all__ = ["EnginePolicy", "PrefixCounter", "queue_policy_for", "version_tuple"]


@attrs.frozen
class PrefixCounter:
    """What the engine's own prefix-cache counter adds up: every lookup (a request blocked at
    the head of the queue is looked up again each step) or one per admission."""

    per_lookup: bool = False

    @classmethod
    def for_engine(cls, spec: EngineSpec) -> PrefixCounter:
        mode = spec.prefix_counter
        if mode == "auto":
            mode = "per-admission"
            if spec.name == "vllm":
                v = version_tuple(spec.version)
                if v is not None and v < _VLLM_LOOKUP_FIX:
                    mode = "per-lookup"
        return cls(per_lookup=mode == "per-lookup")


def queue_policy_for(spec: EngineSpec) -> str:
    """The queue order the engine runs: the scenario's, or with ``auto`` the engine and
    version's own. SGLang's default schedule_policy was lpm in 0.4.0-0.4.2 and is fcfs from
    0.4.3.post4 (0.4.3 to 0.4.3.post3 were not checked: taken as fcfs; engines.md 3.2);
    vLLM, ATOM and TensorRT-LLM admit in arrival order."""
    if spec.queue_policy != "auto":
        return spec.queue_policy
    if spec.name in ("sglang", "mori-sglang"):
        v = version_tuple(spec.version)
        if v is not None and v < _SGLANG_FCFS_FROM:
            return "lpm"
    return "fcfs"


def _gates_whole_sequence(spec: EngineSpec) -> bool:
    """vLLM admits a waiting request only when free blocks cover its whole sequence from 0.19
    (``scheduler_reserve_full_isl``), its first chunk before (engines.md 3.1)."""
    if spec.name != "vllm":
        return True
    v = version_tuple(spec.version)
    return v is None or v >= _VLLM_FULL_ISL_GATE


# Engines that cap a request's length at what their KV pool holds, where vLLM refuses to
# start instead (engines.md 1.1): SGLang's max_req_len is min(context_len, pool) - 1
# (scheduler init), TensorRT-LLM's KV cache manager lowers max_seq_len and the attention
# window to what one sequence can fill in the pool's whole blocks (its
# get_max_atten_window_upper_bound), and both deduce an unsent max_tokens from it.
_CAPS_REQUEST_AT_POOL = ("sglang", "mori-sglang", "trt")


@attrs.frozen
class EnginePolicy:
    name: str
    queue_policy: str
    order: Callable
    lpm_max_waiting: int
    victim: Callable
    requeue_front: bool
    keeps_blocks: bool          # a preempted request's computed blocks stay cached
    caches_chunks: bool         # an unfinished prompt's chunks are cached as they complete
    eviction: str               # the prefix cache's eviction policy
    reserve_output: bool        # admission reserves outputs (SGLang's PrefillAdder, TRT-LLM)
    output_reserve_clip: float
    # the share of running requests' remaining output admission keeps for them: SGLang's
    # new_token_ratio (from init, decaying to min over decay_steps decode steps); 1 throughout
    # under TensorRT-LLM's GUARANTEED_NO_EVICT
    ratio_init: float
    ratio_min: float
    ratio_decay_steps: int
    counter: PrefixCounter
    allocates_per_step: bool    # a prompt's pages are taken chunk by chunk (vLLM)
    gates_whole_sequence: bool  # ...and admission checks its whole sequence fits (vLLM 0.19+)
    caps_request_at_pool: bool  # the longest request is what the pool holds (SGLang, TRT-LLM)

    @classmethod
    def for_engine(cls, spec: EngineSpec, speculative: bool) -> EnginePolicy:
        queue = queue_policy_for(spec)
        if queue not in QUEUE_ORDERS:
            raise ValueError(f"unknown queue policy {spec.queue_policy!r}")
        reserve = spec.reserve_output_on_admission
        clip: float = spec.output_reserve_clip
        ratio = (spec.new_token_ratio_init, spec.new_token_ratio_min,
                 spec.new_token_ratio_decay_steps)
        if spec.capacity_policy == "guaranteed-no-evict":
            # the whole remaining output of every request, new and running, unclipped
            reserve, clip, ratio = True, float("inf"), (1.0, 1.0, 1)
        elif spec.capacity_policy == "max-utilization":
            reserve = False
        return cls(
            name=spec.name,
            queue_policy=queue,
            order=queue_order_for(queue, spec.lpm_in_batch_dedup_tokens),
            lpm_max_waiting=spec.lpm_max_waiting,
            victim=victim_for(spec.preemption, speculative),
            requeue_front=spec.preemption == "recompute-newest",
            keeps_blocks=spec.preemption_keeps_blocks,
            caches_chunks=spec.caches_prompt_chunks,
            eviction=spec.eviction_policy,
            reserve_output=reserve,
            output_reserve_clip=clip,
            ratio_init=ratio[0], ratio_min=ratio[1], ratio_decay_steps=ratio[2],
            counter=PrefixCounter.for_engine(spec),
            allocates_per_step=spec.kv_allocation == "per-step",
            gates_whole_sequence=_gates_whole_sequence(spec),
            caps_request_at_pool=spec.name in _CAPS_REQUEST_AT_POOL,
        )
