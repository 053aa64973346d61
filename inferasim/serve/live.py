"""A request's state while the server holds it (mutable, one object per request, no per-token objects)."""

from __future__ import annotations

import math

import attrs
import simpy

from inferasim.workload.request import RequestSpec

NAN = math.nan


@attrs.define(slots=True, eq=False)
class LiveRequest:
    rid: int
    spec: RequestSpec
    arrival: float
    done: simpy.Event
    # Tokens to hold before decoding: the prompt, plus what was generated before a preemption.
    target: int = 0
    computed: int = 0          # tokens of ``target`` with KV resident (cached or prefilled)
    cached_first: int = -1     # prompt tokens the cache served at first admission
    # What the engine's own prefix-cache counter added for this request: tokens looked up
    # and tokens hit, over every lookup it counts (engine_policy.PrefixCounter)
    lookup_tokens: int = 0
    lookup_hit_tokens: int = 0
    generated: float = 0.0     # output tokens so far (fractional under speculative decoding)
    # generated = gen_base + decode_steps x advance, in both step modes, so that macro-steps
    # and single steps reach bit-identical token counts.
    gen_base: float = 0.0
    decode_steps: int = 0
    advance: float = 0.0       # tokens a verify step emits for this request (0: the engine's)
    private: int = 0           # pool tokens held privately (uncached tail, decode growth)
    window: int = 0            # pool tokens held for the model's bounded windows while admitted
    tree_tokens: int = 0       # tokens of this request's context held by the prefix cache
    node: object = None        # the cache node this request keeps locked
    admitted_seq: int = -1     # admission order (vLLM preempts the newest)
    admitted: float = NAN
    first_token: float = NAN
    finish: float = NAN
    preemptions: int = 0
    instance: int = 0
    # Disaggregated serving: the prompt's KV arrives from a prefill instance.
    prefilled: bool = False
    # Its prompt KV was allocated on the decode instance before its prefill (SGLang PD).
    preallocated: bool = False
    # A prefill instance's request whose KV a decode instance still has to receive: its
    # finish keeps the prompt's blocks pinned until the frontend releases them after the
    # transfer (vLLM's delay_free_blocks, SGLang's inflight queue; engines.md 6).
    holds_kv: bool = False
    kv_held: bool = False      # ...and it has finished: its blocks are pinned for the transfer
    # Called as on_chunk(computed_tokens, time) when a prompt chunk that does not finish the
    # prompt completes (KVManager.chunk_done): SGLang's prefill sends each chunk's KV then.
    on_chunk: object = None
    # Prompt tokens a host KV tier served at admission (loaded, not computed), and how many
    # of them the engine still has to wait for in the step that first prefills the request
    reload_tokens: int = 0
    reload_pending: int = 0
    # (reload_tokens: the host tier's share; reload_pending: everything loaded). Those a
    # storage tier behind the host served, and how many of them the first step reads
    # from the drive
    storage_tokens: int = 0
    storage_pending: int = 0
    prefill_admitted: float = NAN
    prefill_done: float = NAN
    transfer_start: float = NAN  # the decode side took it: its KV starts to cross
    transfer_done: float = NAN
    failed: str = ""           # why the server refused it (never admissible), else empty
    peek_version: tuple = ()   # (target, witness) the remembered match holds for
    peek_blocks: int = 0
    row: int = -1              # index in the engine's DecodeSet while decoding, else -1
    # The block keys of everything it had computed when it was preempted on an engine that
    # keeps those blocks cached (vLLM): its re-admission matches them, not the prompt alone.
    resume_keys: object = None

    def __attrs_post_init__(self) -> None:
        self.target = self.spec.prompt_tokens

    @property
    def context(self) -> float:
        """Tokens resident once prefill is done: prompt plus generated output."""
        return self.spec.prompt_tokens + self.generated

    @property
    def match_keys(self):
        """The block keys an admission matches against the cache."""
        return self.spec.keys if self.resume_keys is None else self.resume_keys
