"""The typed, frozen scenario: what is deployed (model, GPU, engine, parallelism) and what load it sees."""

from __future__ import annotations

import functools
from typing import Any

import attrs

from inferasim.arch.gpu import GPU_VENDORS, GpuSpec
from inferasim.arch.spec import WEIGHT_DTYPES, ModelSpec
from inferasim.config.typed import above, at_least, between, choices

ENGINES = ("vllm", "sglang", "mori-sglang", "atom", "trt")
WORKLOAD_FORMATS = ("synthetic", "random", "mooncake", "bailian", "azure", "agentx",
                    "sessions")
# Workload formats whose load is the trace's own: no client count drives them.
RECORDED_FORMATS = ("mooncake", "bailian", "azure")
# Workload formats replayed as agentic lanes (workload/lanes.py).
LANE_FORMATS = ("agentx", "sessions")

# Upper bounds that catch a mistyped size before it builds clients or instances without end.
MAX_CONCURRENCY = 1_000_000
MAX_INSTANCES = 4096
MAX_PAGE_TOKENS = 1 << 16
MAX_STEP_TOKENS = 1 << 24  # tokens one step may batch
# Tokens one verify step drafts: the engines run 1-7 (MTP, EAGLE chains) and EAGLE trees a few
# dozen nodes; a mistyped 1e30 otherwise samples acceptance draws without end.
MAX_DRAFT_TOKENS = 64
# A week of simulated arrivals: past any trace or benchmark run (the Mooncake traces span
# hours), and a mistyped 1e12 would otherwise replay until it runs out of memory.
MAX_DURATION_S = 7 * 24 * 3600.0
# Open-loop arrivals a replay draws up front (rate x its horizon): 50 M is hours of replay on
# one core and 400 MB of times; a mistyped rate of 1e12 would ask for an array past memory.
MAX_ARRIVALS = 50_000_000

# The engines each KV offload connector runs under: LMCache's vLLM v1 connector and its SGLang
# integration (--enable-lmcache), SGLang's HiCache (SGLang and AMD's MoRI build of it), vLLM's
# own OffloadingConnector (LMCache and SGLang docs, read with the search tool [3P]).
OFFLOAD_ENGINES = {"lmcache": ("vllm", "sglang", "mori-sglang"),
                   "hicache": ("sglang", "mori-sglang"),
                   "vllm-native": ("vllm",)}


@attrs.frozen
class ModelRef:
    name: str
    weight_dtype: str | None = attrs.field(default=None, metadata=choices(*WEIGHT_DTYPES))


@attrs.frozen
class GpuRef:
    name: str


# Routing policies, for instances (``topology.router``) and attention-DP ranks.
ROUTERS = ("round-robin", "least-loaded", "least-requests", "prefix-affinity", "kv-aware")


@attrs.frozen
class EngineSpec:
    """An engine's scheduling and memory behaviour; defaults come from its catalog base."""

    name: str = attrs.field(metadata=choices(*ENGINES))
    source: str = ""
    version: str = ""
    scheduler: str = attrs.field(default="unified", metadata=choices("unified", "prefill-exclusive"))
    # ``auto``: the engine and version's own (SGLang: lpm in 0.4.0-0.4.2, fcfs from
    # 0.4.3.post4; every other engine fcfs); docs/engines.md.
    queue_policy: str = attrs.field(default="auto", metadata=choices("auto", "fcfs", "lpm"))
    # LPM falls back to arrival order past this many waiting requests (SGLang: 128).
    lpm_max_waiting: int = attrs.field(default=128, metadata=at_least(0))
    # Under lpm, a request the cache serves at most this many tokens of that shares them with
    # a request ahead of it in the pass goes to the back (SGLang: 32); 0 = off.
    lpm_in_batch_dedup_tokens: int = attrs.field(default=0, metadata=at_least(0))
    preemption: str = attrs.field(default="recompute-newest",
                                  metadata=choices("recompute-newest", "retract-fewest-output"))
    # The prefix cache's eviction order (docs/engines.md): ``block-pool`` (vLLM, ATOM: a
    # free-block queue in release order, a chain's tail first), ``radix-leaf`` (SGLang: LRU
    # leaves freed whole), ``leaf-lru`` (LRU leaves trimmed to what is needed), ``recency``.
    eviction_policy: str = attrs.field(
        default="leaf-lru", metadata=choices("leaf-lru", "radix-leaf", "block-pool", "recency"))
    # What the engine's prefix-cache counter (prefix_hit_rate) adds up: every lookup, a
    # request blocked at the queue's head counted again each step (vLLM before 0.25), or
    # one per admission; ``auto`` takes the engine and version's own.
    prefix_counter: str = attrs.field(
        default="auto", metadata=choices("auto", "per-admission", "per-lookup"))
    # When a prompt's KV is allocated: ``admission`` (its whole uncached part when admitted:
    # SGLang's and ATOM's admission reserves it) or ``per-step`` (vLLM's allocate_slots: each
    # step's tokens as they are scheduled; admission only checks that free blocks cover the
    # whole sequence from 0.19, the first chunk before; engines.md 3.1).
    kv_allocation: str = attrs.field(default="admission", metadata=choices("admission", "per-step"))
    # TensorRT-LLM's capacity scheduler (CapacitySchedulerPolicy): guaranteed-no-evict admits
    # a request only when its prompt and whole max output fit beside every running request's
    # remaining output, so nothing is ever paused; max-utilization packs and pauses
    # (preempts) on a full pool; none = the engine's own reserve keys decide.
    capacity_policy: str = attrs.field(
        default="none", metadata=choices("none", "guaranteed-no-evict", "max-utilization"))
    # A KV tier in host memory behind the GPU pool (serve/offload.py, docs/engines.md "KV
    # offload"): lmcache (vLLM + LMCache), hicache (SGLang HiCache), vllm-native (vLLM's
    # OffloadingConnector); none by default.
    kv_offload: str = attrs.field(default="none",
                                  metadata=choices("none", *OFFLOAD_ENGINES))
    # Host memory the tier may hold per instance, GiB (LMCache's max_local_cpu_size summed
    # over ranks; HiCache's --hicache-size); None = twice the instance's GPU KV pool
    # (HiCache's default --hicache-ratio 2).
    offload_host_gib: float | None = attrs.field(default=None, metadata=above(0))
    # The tier's unit: LMCache stores and matches whole chunks of 256 tokens (chunk_size).
    offload_chunk_tokens: int = attrs.field(default=256, metadata=at_least(1))
    # A storage tier behind the host tier (LMCache's local_disk with max_local_disk_size;
    # HiCache's --hicache-storage-backend file), GiB per instance; None = none (both
    # engines' default). Written with every host write; docs/engines.md "KV offload".
    offload_storage_gib: float | None = attrs.field(default=None, metadata=above(0))
    # What one GPU reads from its drive, bytes/s, and a read's latency: one PCIe Gen5 NVMe
    # drive per GPU (Micron 9550: 14,000 MB/s sequential read, 60 us typical read latency,
    # its datasheet as StorageReview tabulates it) [3P].
    offload_storage_read_bw: float = attrs.field(default=14.0e9, metadata=above(0))
    offload_storage_latency_s: float = attrs.field(default=60e-6, metadata=at_least(0))
    # A preempted request's computed blocks (prompt and decode) stay cached, so recomputing it
    # matches them (vLLM hashes blocks as they fill); otherwise only what the prompt's
    # completion cached stays (SGLang frees decode tokens uninserted).
    preemption_keeps_blocks: bool = False
    # An unfinished prompt's computed chunks are cached as they complete (vLLM hashes blocks
    # as they fill, SGLang inserts each chunk), so a request admitted meanwhile hits them;
    # otherwise the prompt is cached when it completes.
    caches_prompt_chunks: bool = False
    prefix_caching: bool = True
    kv_dtype: str = attrs.field(default="auto", metadata=choices("auto", "bf16", "fp8"))
    # What ``auto`` means on this engine (the model's stack dtype unless the engine forces fp8).
    kv_dtype_auto: str = attrs.field(default="bf16", metadata=choices("bf16", "fp8"))
    mem_fraction: float = attrs.field(default=0.9, metadata=between(0.01, 1.0))
    # Whose rules derive mem_fraction and chunked_prefill_size from the deployment (GPU
    # memory, TP, attention-DP, speculative method) where the scenario leaves them unset:
    # ``sglang`` (engines.md 1.2, inferasim.config.engine_defaults); ``none`` keeps the
    # catalog's figures.
    deployment_defaults: str = attrs.field(default="none", metadata=choices("none", "sglang"))
    # How the engine sizes its KV budget (inferasim.arch.engine_memory, engines.md 1):
    # fixed-reserve = HBM x mem_fraction - weights - reserve_gib; vllm-profile, sglang-static,
    # atom-profile = the engine's own rule (profile-run activation peak, non-torch memory,
    # CUDA-graph estimate, safety margin), with reserve_gib an extra margin on top.
    memory_rule: str = attrs.field(default="fixed-reserve",
                                   metadata=choices("fixed-reserve", "vllm-profile",
                                                    "sglang-static", "atom-profile",
                                                    "trt-free-fraction"))
    # Whether the CUDA-graph estimate leaves the KV budget (vLLM's
    # VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1/0 = subtract/ignore): auto = the version's
    # default; never on ROCm.
    cuda_graph_memory: str = attrs.field(default="auto",
                                         metadata=choices("auto", "subtract", "ignore"))
    # Kept out of the KV budget, GiB per GPU: the whole reserve (activation peak, graphs and
    # workspace) under fixed-reserve, an extra margin under the engines' own rules.
    reserve_gib: float = attrs.field(default=4.0, metadata=at_least(0))
    page_size: int = attrs.field(default=16, metadata=between(1, MAX_PAGE_TOKENS))
    max_num_seqs: int = attrs.field(default=1024, metadata=between(1, MAX_CONCURRENCY))
    # The running limit speculative decoding brings when the scenario leaves max_num_seqs
    # unset (SGLang: 48 with an EAGLE-family draft, MTP included; None: no change).
    speculative_max_num_seqs: int | None = attrs.field(default=None, metadata=at_least(1))
    max_num_batched_tokens: int = attrs.field(default=8192,
                                              metadata=between(1, MAX_STEP_TOKENS))
    # SGLang ``--scheduler-recv-interval``: busy with decode steps, the scheduler reads new
    # requests only every this many steps (at once after a prefill step or when idle); 1 =
    # every step, as vLLM and ATOM do.
    scheduler_recv_interval: int = attrs.field(default=1, metadata=at_least(1))
    # TensorRT-LLM attention_dp_config (attention-DP ranks stepping together): with
    # attention_dp_balance a rank starts its prompts only when every rank has one, else after
    # attention_dp_timeout_iters steps, and holds them attention_dp_batching_wait_iters more
    # when every rank also decodes (serve/adp_balance.py). TensorRT-LLM's own defaults: off,
    # 50, 10 [3P: its AttentionDpConfig]; InferenceMAX's recipes set on, 60, 0.
    attention_dp_balance: bool = False
    attention_dp_timeout_iters: int = attrs.field(default=50, metadata=at_least(1))
    attention_dp_batching_wait_iters: int = attrs.field(default=10, metadata=at_least(0))
    # --stream-interval (vLLM >= 0.12, SGLang): tokens a stream buffers before the server
    # sends them (the first goes at once). Only the client-side ITL (itl_client_mean_ms)
    # sees it; a speculative step's tokens arrive together even at 1 (engines.md 8).
    stream_interval: int = attrs.field(default=1, metadata=at_least(1))
    chunked_prefill_size: int = attrs.field(default=8192, metadata=between(1, MAX_STEP_TOKENS))
    # Whether a prompt may be split over steps. TensorRT-LLM runs without chunked context by
    # default (enable_chunked_prefill false): a prompt enters a step whole, when the step's
    # token budget (max_num_batched_tokens = its max_num_tokens) still holds it, else it waits
    # at the head of the queue (serve/scheduler.py).
    chunked_prefill: bool = True
    # TensorRT-LLM's batch waiting (batch_wait_timeout_iters, batch_wait_max_tokens_ratio;
    # both 0 = off, its default): on a step with decodes and without attention DP, new prompts
    # wait until the step's tokens reach the ratio of max_num_tokens or the wait has lasted
    # the timeout's steps (serve/batch_wait.py).
    batch_wait_timeout_iters: int = attrs.field(default=0, metadata=at_least(0))
    batch_wait_max_tokens_ratio: float = attrs.field(default=0.0, metadata=between(0.0, 1.0))
    # The pool the engine really allocated (tokens); overrides the memory model.
    kv_pool_tokens: int | None = attrs.field(default=None, metadata=at_least(1))
    # The longest request the server is started to serve (vLLM's --max-model-len, SGLang's
    # --context-length, TensorRT-LLM's --max_seq_len); None: the model's context.
    max_model_len: int | None = attrs.field(default=None, metadata=at_least(2))
    # mori-sglang shards the MLA latent across attention-TP ranks; vLLM and SGLang replicate it.
    mla_latent_sharded: bool = False
    # The GPU vendors whose parts the engine runs on (TensorRT-LLM is CUDA-only; ATOM and
    # MoRI are ROCm-only; vLLM and SGLang build for both): a scenario pairing the engine
    # with another vendor's part is refused, not priced.
    vendors: tuple[str, ...] = attrs.field(default=GPU_VENDORS, metadata=choices(*GPU_VENDORS))
    # Attention-DP decode of a kind that neither selects nor compresses is charged dense times
    # this factor when set (a measured sparse-attention factor of the engine's DPA decode
    # kernel; behaviour.md 3). Selection and compression price themselves and ignore it.
    dpa_decode_attention_scale: float | None = attrs.field(default=None, metadata=above(0))
    attention_backend: str = ""
    # Host-side time each step pays on top of the GPU's own fixed cost; seconds.
    step_overhead_s: float = attrs.field(default=0.0, metadata=at_least(0))
    # Opt-in host-side TTFT term per uncached prompt token (behaviour.md 5); 0 = off.
    uncached_prompt_latency_us: float = attrs.field(default=0.0, metadata=at_least(0))
    # At most this many uncached tokens are charged; 0 = no cap.
    uncached_prompt_latency_max_tokens: int = attrs.field(default=0, metadata=at_least(0))
    # SGLang's admission reserves each new request's remaining output (clipped) and each
    # running request's at ``new_token_ratio``; vLLM reserves nothing for outputs.
    # Under attention-DP each rank's scheduler gets these (SGLang: chunked_prefill_size //= dp,
    # schedule_conservativeness x 0.3, which scales the new_token_ratio reservation); off by
    # default, as vLLM and ATOM ranks keep the engine's own figures.
    # How the engine spreads requests over its attention-DP ranks when the scenario's
    # topology.rank_router is ``engine`` (SGLang: round robin; vLLM: waiting x 4 + running;
    # ATOM: least requests; engines.md 5).
    dp_rank_router: str = attrs.field(default="round-robin", metadata=choices(*ROUTERS))
    # A disaggregated decode instance's prefix cache when its pool does not set one (None:
    # prefix_caching). SGLang's PD decode servers run a chunk cache, no radix (<= 0.5.10).
    disagg_decode_prefix_caching: bool | None = None
    # A disaggregated decode instance allocates each request's prompt KV before the prefill
    # instance admits it (SGLang's DecodePreallocQueue, FIFO): while the decode pool is full,
    # requests wait ahead of their prefill, not after it (engines.md 6).
    disagg_decode_preallocates: bool = False
    # The decode tokens that allocation keeps free per request the decode instance holds
    # (SGLang's num_reserved_decode_tokens).
    disagg_prealloc_reserved_tokens: int = attrs.field(default=512, metadata=at_least(0))
    # How a prompt's KV crosses to the decode instance (engines.md 6): ``streamed`` = the
    # prefill instance sends each prefill chunk's KV as the chunk completes (SGLang's
    # send_kv_chunk), so only the last chunk's is exposed after the prefill; ``whole`` = the
    # decode instance pulls it after the prefill, only the full blocks its own prefix cache
    # lacks (vLLM's NIXL get_num_new_matched_tokens; ATOM's RDMA reads).
    disagg_transfer: str = attrs.field(default="whole", metadata=choices("whole", "streamed"))
    dp_attention_splits_chunk: bool = False
    dp_attention_reserve_scale: float = attrs.field(default=1.0, metadata=above(0))
    reserve_output_on_admission: bool = False
    output_reserve_clip: int = attrs.field(default=4096, metadata=at_least(0))
    new_token_ratio_init: float = 0.7
    new_token_ratio_min: float = 0.098
    new_token_ratio_decay_steps: int = 600

    def __attrs_post_init__(self) -> None:
        if not self.vendors:
            raise ValueError("vendors: expected at least one of the vendors whose parts the "
                             f"engine runs on ({', '.join(GPU_VENDORS)}); got none")
        # storage is a level behind the host tier: without one it would be ignored
        if self.offload_storage_gib is not None and self.kv_offload in ("none", "vllm-native"):
            raise ValueError(
                f"offload_storage_gib: a storage tier sits behind a host tier that writes to "
                f"it (kv_offload lmcache or hicache); kv_offload is {self.kv_offload!r}")

    @property
    def prompt_budget(self) -> int:
        """The prompt tokens one step may take: the unified scheduler's batched-token budget,
        else (prefill steps apart from decodes) the prefill chunk; at least one."""
        return max(1, int(self.max_num_batched_tokens if self.scheduler == "unified"
                          else self.chunked_prefill_size))


@attrs.frozen
class ParallelSpec:
    tp: int = 1
    ep: int = 1
    dp_attention: int = 1
    dcp: int = 1
    # Expert slots beyond the routed experts that expert-parallel load balancing (EPLB) places
    # copies of busy experts in (SGLang --ep-num-redundant-experts; TensorRT-LLM's
    # num_slots - experts): the slots, not the experts, are split over the EP ranks.
    redundant_experts: int = 0

    def __attrs_post_init__(self) -> None:
        for name in ("tp", "ep", "dp_attention", "dcp"):
            if getattr(self, name) < 1:
                raise ValueError(f"parallel.{name} must be at least 1")
        if self.redundant_experts < 0:
            raise ValueError("parallel.redundant_experts must be at least 0")

    def relaid(self, **layout: int) -> ParallelSpec:
        """This deployment in another layout (``layout``: tp, ep, dp_attention, dcp), as a row
        or a pool that names only its layout means it: the EPLB slots kept where that layout
        runs expert parallel, none where it does not."""
        ep = layout.get("ep", self.ep)
        return attrs.evolve(self, **layout,
                            redundant_experts=self.redundant_experts if ep > 1 else 0)

    @property
    def attn_tp(self) -> int:
        return self.tp // self.dp_attention


@attrs.frozen
class SpeculativeSpec:
    method: str = attrs.field(default="none", metadata=choices("none", "mtp", "eagle3", "dspark"))
    draft_tokens: int = attrs.field(default=0, metadata=between(0, MAX_DRAFT_TOKENS))
    # Per draft position, conditional on the previous. None: read from the anchors that
    # measured the method, else published (anchors/acceptance.py), before anything is priced.
    acceptance: float | None = attrs.field(default=None, metadata=between(0.0, 1.0))
    # How much the tokens a verify step emits vary between requests: the coefficient of
    # variation of their TPOT, at this workload's output length (0: every request accepts
    # alike). Each request draws one rate for its decode, within 1 and the verify width.
    acceptance_cv: float = attrs.field(default=0.0, metadata=between(0.0, 1.0))
    # The output length a stated acceptance was read at: on a random-prompt workload of
    # another output length the tokens a verify step emits are carried to it
    # (anchors.acceptance.OUTPUT_LENGTH_EXPONENT). None: the acceptance holds at any length.
    acceptance_osl: int | None = attrs.field(default=None, metadata=at_least(1))
    # Where a resolved acceptance came from (anchors.acceptance.AcceptanceReading). Not a
    # setting: left out of equality and of the resolved YAML.
    _reading: Any = attrs.field(default=None, eq=False, hash=False, repr=False)

    def __attrs_post_init__(self) -> None:
        # A speculative method with nothing drafted would be filed, and matched to anchors,
        # under a speculative label while it decodes plainly (behaviour.md section 2).
        if self.method != "none" and self.draft_tokens < 1:
            raise ValueError(f"method {self.method} needs draft_tokens of at least 1 "
                             "(or method none)")

    @property
    def verify_width(self) -> int:
        return 1 + (self.draft_tokens if self.method != "none" else 0)

    @property
    def tokens_per_step(self) -> float:
        """Tokens a verify step emits on average: the bonus token plus each draft accepted
        in turn (acceptance is per draft position, conditional on the previous)."""
        if self.method == "none":
            return 1.0
        if self.acceptance is None:
            raise ValueError(f"speculative.acceptance of {self.method} not resolved "
                             "(anchors.acceptance.with_acceptance)")
        return verify_tokens(self.acceptance, self.draft_tokens)

    def with_tokens_per_step(self, tokens: float) -> SpeculativeSpec:
        """This spec with the per-draft acceptance whose verify steps emit ``tokens`` on
        average, clipped to what the draft depth can emit (``acceptance_for_tokens``)."""
        return attrs.evolve(self, acceptance=acceptance_for_tokens(tokens, self.draft_tokens))


def verify_tokens(acceptance: float, draft_tokens: int) -> float:
    """Tokens a verify step of ``draft_tokens`` drafts emits at a per-position acceptance."""
    return 1.0 + sum(acceptance**i for i in range(1, draft_tokens + 1))


@functools.lru_cache(maxsize=4096)
def acceptance_for_tokens(tokens: float, draft_tokens: int) -> float:
    """The per-position acceptance at which ``draft_tokens`` drafts emit ``tokens`` a verify
    step (bisection: the tokens rise with the acceptance), to six places. Memoised: a pure
    function the anchor readings call for every speculative anchor of every candidate."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if verify_tokens(mid, draft_tokens) < tokens:
            lo = mid
        else:
            hi = mid
    return round(lo, 6)


@attrs.frozen
class SyntheticSpec:
    """Multi-turn chat sessions. Lengths are fitted to the Mooncake conversation trace, think
    time to the AgentX corpus; docs/workloads.md gives the figures used."""

    system_prompt_tokens: int = attrs.field(default=512, metadata=at_least(0))
    first_prompt_tokens_median: float = attrs.field(default=5200.0, metadata=above(0))
    # lognormal sigmas: past 4 a draw overflows (e^(4 x 6 sigma)) rather than being a length
    first_prompt_sigma: float = attrs.field(default=1.24, metadata=between(0.0, 4.0))
    turn_tokens_median: float = attrs.field(default=490.0, metadata=above(0))
    turn_sigma: float = attrs.field(default=1.8, metadata=between(0.0, 4.0))
    output_tokens_median: float = attrs.field(default=350.0, metadata=above(0))
    output_sigma: float = attrs.field(default=0.42, metadata=between(0.0, 4.0))
    turns_mean: float = attrs.field(default=1.63, metadata=at_least(1))
    think_time_median_s: float = attrs.field(default=10.0, metadata=above(0))
    think_time_sigma: float = attrs.field(default=1.3, metadata=between(0.0, 4.0))
    max_prompt_tokens: int = attrs.field(default=131072, metadata=at_least(2))
    # The max_tokens every client sends, which also ends an answer drawn longer; None: the
    # clients send none, and the engine deduces it from its longest request (SGLang and
    # TensorRT-LLM reserve KV against it, EngineCore.max_new).
    max_tokens: int | None = attrs.field(default=None, metadata=at_least(1))
    # Granularity of the prompt's block keys (the prefix cache's unit).
    block_tokens: int = attrs.field(default=16, metadata=at_least(1))

    def __attrs_post_init__(self) -> None:
        # every session starts with the shared system prompt, so it must leave room for a turn
        if self.system_prompt_tokens >= self.max_prompt_tokens:
            raise ValueError(
                f"system_prompt_tokens ({self.system_prompt_tokens}) must be below "
                f"max_prompt_tokens ({self.max_prompt_tokens})")


@attrs.frozen
class WorkloadSpec:
    format: str = attrs.field(default="synthetic", metadata=choices(*WORKLOAD_FORMATS))
    trace: str | None = None
    isl: int = attrs.field(default=1024, metadata=at_least(1))
    osl: int = attrs.field(default=1024, metadata=at_least(1))
    # Random lengths drawn uniformly from [ratio x isl, isl] (and likewise osl); 1 = fixed.
    # The default is the InferenceMAX harness's spread (scenarios/inferencemax/_base.yaml):
    # fixed lengths put closed-loop clients in lockstep, and their TTFT becomes queueing.
    random_range_ratio: float = attrs.field(default=0.8, metadata=between(0.0, 1.0))
    # bounded so that a typo (1e30) is an error, not a run that spawns clients until it
    # exhausts memory; a million clients is past any single deployment's measured ladder
    concurrency: int = attrs.field(default=8, metadata=between(1, MAX_CONCURRENCY))
    # Seconds of arrivals after the warm-up; None = 600 s for generated workloads, 1800 s for
    # agentic lanes (agentx, sessions: the harness's --benchmark-duration), the whole trace
    # for other recorded ones.
    duration_s: float | None = attrs.field(default=None,
                                           metadata={**above(0), "max": MAX_DURATION_S})
    warmup_s: float = attrs.field(default=0.0, metadata=between(0, MAX_DURATION_S))
    seed: int = attrs.field(default=42, metadata=at_least(0))
    # Open-loop arrival rate (requests/s) for random and synthetic workloads; None = closed loop.
    rate: float | None = attrs.field(default=None, metadata=above(0))
    # Trace time is divided by this: 2.0 replays a trace twice as fast.
    rate_scale: float = attrs.field(default=1.0, metadata=above(0))
    max_requests: int | None = attrs.field(default=None, metadata=at_least(1))
    # Length-biased mean of resident tokens per session, when known: the closed-form projection
    # sizes its admission by it (`project`); a replay admits from the requests' own prompts.
    resident_tokens: int | None = attrs.field(default=None, metadata=at_least(1))
    # Mooncake without session_id: replay the implicit follow-up turns (a request extending an
    # earlier one's prefix) as sessions instead of at their stamps. A trace with session_id
    # (AIPerf's multi-turn rows) and a Bailian trace always replay as their sessions.
    mooncake_sessions: bool = False
    # Agentic lanes (formats agentx and sessions; docs/agentic.md). Which tree a lane draws
    # next: file order, a seeded permutation per pass, or uniform with replacement.
    sampler: str = attrs.field(default="sequential",
                               metadata=choices("sequential", "shuffle", "random"))
    # A lane's first tree starts at a uniform point of this span of its root stream (the turn
    # before it is sent as warm-up); 0 and 0 start at turn 0. Published AgentX runs: 0.25-0.75.
    start_min_ratio: float = 0.25
    start_max_ratio: float = 0.75
    # Replay each tree's subagent streams (formats agentx and sessions); false strips them,
    # as the no-subagents corpora the AgentX runs of May-June 2026 replayed were published
    # (docs/agentic.md, "The harness of the published runs").
    subagents: bool = True
    # The next turn's prompt carries the server's own response to this one, whose blocks the
    # engine cached as it generated them (AIPerf's live-assistant mode); false: the recorded
    # response, as new content the next prompt brings (formats agentx and sessions).
    live_responses: bool = False
    # Delay before a turn: the recorded end-to-start gap, or the recorded think time.
    timing: str = attrs.field(default="end-to-start",
                              metadata=choices("end-to-start", "think-time"))
    # Idle guard: while nothing of a lane is in flight its timers run at most this long
    # (seconds; null = uncapped). idle_cap_ms, when set, overrides it (the CLI's
    # --idle-cap-ms; negative = uncapped).
    idle_cap_s: float | None = 10.0
    idle_cap_ms: float | None = None
    # Each recorded output length (and the max_tokens the harness sends) times this, rounded
    # (at least one token); the recorded prompts are kept. For a corpus snapshot whose
    # requests carry another output per prompt token than the run being reproduced
    # (`validate agentx` matches it to the measured ladders; docs/agentic.md).
    output_scale: float = attrs.field(default=1.0, metadata={**above(0), "max": 1000.0})
    synthetic: SyntheticSpec = attrs.field(factory=SyntheticSpec)

    @property
    def clients_drive_load(self) -> bool:
        """Closed-loop clients set the load; else a rate or a recorded trace's stamps do,
        and the client count is no axis."""
        return self.rate is None and self.format not in RECORDED_FORMATS


@attrs.frozen
class PoolSpec:
    """One pool of a disaggregated deployment: its instances and what differs from the scenario."""

    instances: int = attrs.field(default=1, metadata=between(1, MAX_INSTANCES))
    # Parallel layout and engine keys of this pool's instances, over the scenario's own.
    parallel: dict[str, int] = attrs.field(factory=dict)
    engine: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class TopologySpec:
    kind: str = attrs.field(default="colocated", metadata=choices("colocated", "disaggregated"))
    # Colocated: identical engine instances behind one router.
    instances: int = attrs.field(default=1, metadata=between(1, MAX_INSTANCES))
    # ``auto``: the orchestrator's own (Dynamo's frontend: round robin, its default without
    # ``--router-mode kv``), else least-loaded.
    router: str = attrs.field(default="auto", metadata=choices("auto", *ROUTERS))
    # Routers requests are dealt to in turn, each with its own state: Dynamo frontends behind
    # nginx's round robin (srt-slurm's launcher starts up to 10 unless told not to); each
    # keeps its own round-robin turn. 1: one router.
    frontends: int = attrs.field(default=1, metadata=between(1, 64))
    # How requests are spread over the attention-DP ranks of one instance: ``engine`` = the
    # engine's own policy (engine.dp_rank_router), or one of the routers by name.
    rank_router: str = attrs.field(default="engine", metadata=choices("engine", *ROUTERS))
    prefill: PoolSpec = attrs.field(factory=PoolSpec)
    decode: PoolSpec = attrs.field(factory=PoolSpec)
    # Who runs a disaggregated deployment's pools: the engine's own router and transfer
    # (``native``: SGLang's router, vLLM's proxy) or NVIDIA Dynamo (``dynamo``: its frontend
    # routes by KV overlap and load, NIXL moves the KV). InferenceMAX spells the second as
    # its own framework (dynamo-trt, dynamo-sglang): a regime of its own (docs/anchors.md).
    orchestrator: str = attrs.field(default="native", metadata=choices("native", "dynamo"))
    # The prefill -> decode KV link: GB/s of each prefill instance's GPUs, shared by the
    # transfers in flight from it (serve/kv_link.py), and the fixed latency of one transfer.
    # None = from the layout (arch/interconnect.py kv_link_plan): the scale-up fabric when
    # every prefill and decode GPU fits one scale-up domain, else the GPUs' NICs.
    link_bandwidth_gbs: float | None = attrs.field(default=None, metadata=above(0))
    link_latency_us: float | None = attrs.field(default=None, metadata=at_least(0))

    @property
    def router_policy(self) -> str:
        """The instance router in force (``router``, with ``auto`` resolved)."""
        if self.router != "auto":
            return self.router
        return "round-robin" if self.orchestrator == "dynamo" else "least-loaded"

    def __attrs_post_init__(self) -> None:
        if self.instances < 1 or self.prefill.instances < 1 or self.decode.instances < 1:
            raise ValueError("instance counts must be at least 1")
        if self.link_bandwidth_gbs is not None and self.link_bandwidth_gbs <= 0:
            raise ValueError("link_bandwidth_gbs must be positive")


@attrs.frozen
class SimSpec:
    # Simulate every engine step instead of advancing steady decode in macro-steps.
    exact_steps: bool = False
    # Most decode steps one macro-step may cover.
    max_macro_steps: int = attrs.field(default=512, metadata=at_least(1))
    # The anchors the oracle is calibrated from: a folder or an anchor file (relative to the
    # scenario's folder, then the working directory); empty = the shipped anchors/; "none" =
    # no anchors, the analytic model alone.
    anchors: str = ""
    # Where no anchor of the scenario's regime exists: "auto" prices it from a prior, the
    # anchors of other models or layouts on the same part (store.PRIOR_LEVELS); "none" keeps
    # the analytic model.
    prior: str = attrs.field(default="auto", metadata=choices("auto", "none"))


@attrs.frozen
class ScenarioSpec:
    """The scenario file's own keys (before catalog resolution)."""

    model: ModelRef
    gpu: GpuRef
    engine: dict[str, Any]
    name: str = "scenario"
    description: str = ""
    parallel: ParallelSpec = attrs.field(factory=ParallelSpec)
    speculative: SpeculativeSpec = attrs.field(factory=SpeculativeSpec)
    workload: WorkloadSpec = attrs.field(factory=WorkloadSpec)
    topology: TopologySpec = attrs.field(factory=TopologySpec)
    sim: SimSpec = attrs.field(factory=SimSpec)


@attrs.frozen
class Scenario:
    """A resolved scenario: catalog entries merged in, every value concrete."""

    name: str
    description: str
    path: str
    model: ModelSpec
    gpu: GpuSpec
    engine: EngineSpec
    parallel: ParallelSpec
    speculative: SpeculativeSpec
    workload: WorkloadSpec
    sim: SimSpec
    topology: TopologySpec = attrs.field(factory=TopologySpec)
    # The pool of a disaggregated deployment this scenario is ("prefill", "decode"; "" for
    # a whole deployment): its anchors are those that measured that pool (regime.Target).
    # Not a setting: left out of the resolved YAML, kept in equality (two pools of one
    # layout still calibrate apart).
    _pool: str = ""
    # dotted key -> the file (or --set) that gave it: an error found after loading (a trace
    # or an anchor folder that is not there) names where the value came from. Not a setting:
    # left out of equality, hashing and the resolved YAML.
    _origins: dict[str, str] = attrs.field(factory=dict, eq=False, hash=False, repr=False)

    def origin_of(self, key: str) -> str:
        """Where ``key``'s value was given: a scenario or base file, or ``--set``."""
        return self._origins.get(key, self.path)

    @property
    def weight_dtype(self) -> str:
        return self.model.weight_dtype

    @property
    def context_limit(self) -> int:
        """The longest request (prompt + output) the server serves: its max_model_len, else
        the model's context."""
        return self.engine.max_model_len or self.model.max_context

    @property
    def kv_dtype(self) -> str:
        return self.engine.kv_dtype_auto if self.engine.kv_dtype == "auto" else self.engine.kv_dtype

    @property
    def rank_router(self) -> str:
        """The attention-DP rank routing policy in force: the scenario's, else the engine's."""
        chosen = self.topology.rank_router
        if chosen == "engine" and self.topology.router_policy == "kv-aware":
            # Dynamo's KV router picks the attention-DP rank itself and pins it (strict
            # routing: Dynamo docs, "DP Rank Routing" [3P]); its round robin leaves it to
            # the engine
            return "kv-aware"
        return self.engine.dp_rank_router if chosen == "engine" else chosen

    @property
    def pool_role(self) -> str:
        return self._pool

    @property
    def gpus_per_instance(self) -> int:
        return self.parallel.tp

    @property
    def total_gpus(self) -> int:
        topo = self.topology
        if topo.kind == "colocated":
            return topo.instances * self.parallel.tp
        tp = self.parallel.tp
        return (topo.prefill.instances * topo.prefill.parallel.get("tp", tp)
                + topo.decode.instances * topo.decode.parallel.get("tp", tp))

    def evolve(self, **sections: Any) -> Scenario:
        return attrs.evolve(self, **sections)
