"""One anchor: a real measurement, the deployment (regime) it measured, and where it came from.

Every field that was not recorded is ``None`` (unknown). Files hold a list of records under one
``schema_version``; a missing key reads as unknown. Units: seconds and tokens per second.
"""

from __future__ import annotations

import math
from typing import Any

import attrs

from inferasim.config.errors import ConfigError
from inferasim.config.typed import (
    above,
    at_least,
    between,
    build_spec,
    choices,
    spec_to_dict,
)

SCHEMA_VERSION = 1

#: Median ITL above this multiple of mean TPOT means the stream coalesces several tokens per
#: chunk (SGLang on NVIDIA: 8-47x in InferenceMAX), so a chunk gap is not a decode step.
COALESCING_RATIO = 1.5
#: Draft depth read for a speculative record that does not state it: DeepSeek MTP's usual 3
#: (SGLang's EAGLE auto choice for MTP checkpoints: 3 steps, top-k 1).
DEFAULT_DRAFT_TOKENS = 3
#: Spread of the per-request TPOT (std / mean) without speculation: the median of the 76
#: shipped SGLang and ATOM rows that do not speculate (quartiles 0.013 and 0.044). What a
#: speculative row spreads beyond it is read as requests accepting differently.
PLAIN_TPOT_CV = 0.021


@attrs.frozen
class Provenance:
    """Where a measurement came from: the tool's file, the run, the engine build."""

    source: str
    file: str | None = None
    url: str | None = None
    run_url: str | None = None
    date: str | None = None
    image: str | None = None
    engine_version: str | None = None
    tool: str | None = None
    notes: list[str] = attrs.field(factory=tuple)

    @property
    def build(self) -> str | None:
        return self.image or self.engine_version


@attrs.frozen
class Regime:
    """The deployment measured. Regime-defining axes are listed in ``regime.REGIME_AXES``;
    ``attention_backend`` (the raw flag), ``page_size``, ``max_num_seqs``,
    ``scheduler_recv_interval``, ``max_num_tokens``, batch waiting, ``num_gpus`` and
    ``replicas`` are recorded for reference."""

    model: str | None = None
    engine: str | None = None
    gpu: str | None = None
    gpu_isa: str | None = None
    kernel_family: str | None = None
    attention_backend: str | None = None
    weight_dtype: str | None = None
    kv_dtype: str | None = None
    spec_method: str | None = None
    draft_tokens: int | None = attrs.field(default=None, metadata=at_least(0))
    acceptance: float | None = attrs.field(default=None, metadata=between(0, 1))
    tp: int | None = attrs.field(default=None, metadata=at_least(1))
    ep: int | None = attrs.field(default=None, metadata=at_least(1))
    dp_attention: int | None = attrs.field(default=None, metadata=at_least(1))
    dcp: int | None = attrs.field(default=None, metadata=at_least(1))
    page_size: int | None = attrs.field(default=None, metadata=at_least(1))
    max_num_seqs: int | None = attrs.field(default=None, metadata=at_least(1))
    # SGLang ``--scheduler-recv-interval`` (decode steps between reads of new requests).
    scheduler_recv_interval: int | None = attrs.field(default=None, metadata=at_least(1))
    # A step's token budget as the launch script set it: TensorRT-LLM ``max_num_tokens`` (no
    # chunked context: a prompt enters whole within it), SGLang ``--chunked-prefill-size`` =
    # ``--max-prefill-tokens``; and TensorRT-LLM's batch waiting (``batch_wait_timeout_iters``,
    # ``batch_wait_max_tokens_ratio``).
    max_num_tokens: int | None = attrs.field(default=None, metadata=at_least(1))
    batch_wait_timeout_iters: int | None = attrs.field(default=None, metadata=at_least(0))
    batch_wait_max_tokens_ratio: float | None = attrs.field(default=None,
                                                           metadata=between(0.0, 1.0))
    # GPUs the whole measurement ran on (divides server-wide throughput).
    num_gpus: int | None = attrs.field(default=None, metadata=at_least(1))
    # Data-parallel replicas behind one endpoint (the client's concurrency is split over them).
    replicas: int | None = attrs.field(default=None, metadata=at_least(1))
    # "colocated" (unknown reads so: every source before disaggregated rows was) or
    # "disaggregated": prefill and decode pools, tp/ep/dp_attention then the decode pool's
    # and the prefill_* fields the prefill pool's, each pool of that many workers
    # (instances). ``num_gpus`` counts both pools.
    topology: str | None = attrs.field(default=None,
                                       metadata=choices("colocated", "disaggregated"))
    prefill_tp: int | None = attrs.field(default=None, metadata=at_least(1))
    prefill_ep: int | None = attrs.field(default=None, metadata=at_least(1))
    prefill_dp_attention: int | None = attrs.field(default=None, metadata=at_least(1))
    prefill_workers: int | None = attrs.field(default=None, metadata=at_least(1))
    decode_workers: int | None = attrs.field(default=None, metadata=at_least(1))

    @property
    def disaggregated(self) -> bool:
        return self.topology == "disaggregated"


@attrs.frozen
class Workload:
    isl: int = attrs.field(metadata=at_least(1))
    osl: int = attrs.field(metadata=at_least(1))
    # Closed-loop clients; None for an open-loop or unbounded run.
    concurrency: int | None = attrs.field(default=None, metadata=at_least(1))
    # Requests per second for an open-loop run; None = as fast as the clients go.
    request_rate: float | None = attrs.field(default=None, metadata=above(0))
    num_requests: int | None = attrs.field(default=None, metadata=at_least(1))
    dataset: str | None = None
    # Shortest prompt over the longest of a random dataset (1.0: every prompt ISL tokens,
    # every output OSL), None where the record does not say. Fixed lengths keep a closed
    # loop's clients in waves: they finish together and send together, and their prompts
    # queue as one burst (the calibrated oracle reads their TTFT so).
    range_ratio: float | None = attrs.field(default=None, metadata=between(0.0, 1.0))
    # Sequences decoding at once on average, where that is not the concurrency: agentic
    # lanes think, wait and prefill between their decodes (Little's law on the output
    # stream: output tok/s x mean ITL). The calibrated oracle reads the step at this batch.
    decode_batch: float | None = attrs.field(default=None, metadata=above(0))
    # Uncached prompt tokens each step computed beside its decodes, on average (an agentic
    # rung: input tok/s x miss rate x mean ITL). Its mean ITL is then a mixed step: below a
    # KV cliff a few dozen tokens a step on average, each request's uncached tail on a long
    # cached prompt; past it, thousands of recomputed prompt tokens.
    prefill_per_step: float | None = attrs.field(default=None, metadata=above(0))
    # The share of its prompt tokens the server's prefix cache held: where the uncached
    # tokens sit (on top of the cached share of the prompt).
    prefix_hit_rate: float | None = attrs.field(default=None, metadata=between(0.0, 1.0))


@attrs.frozen
class Measurements:
    ttft_mean_s: float | None = attrs.field(default=None, metadata=at_least(0))
    ttft_median_s: float | None = attrs.field(default=None, metadata=at_least(0))
    ttft_p90_s: float | None = attrs.field(default=None, metadata=at_least(0))
    tpot_mean_s: float | None = attrs.field(default=None, metadata=at_least(0))
    tpot_median_s: float | None = attrs.field(default=None, metadata=at_least(0))
    # Standard deviation of the per-request TPOT (its spread between requests).
    tpot_std_s: float | None = attrs.field(default=None, metadata=at_least(0))
    itl_mean_s: float | None = attrs.field(default=None, metadata=at_least(0))
    itl_median_s: float | None = attrs.field(default=None, metadata=at_least(0))
    e2e_mean_s: float | None = attrs.field(default=None, metadata=at_least(0))
    # The median request's, where a client records no mean (InferenceMAX's history).
    e2e_median_s: float | None = attrs.field(default=None, metadata=at_least(0))
    # Tokens per second per GPU.
    tput_per_gpu_total: float | None = attrs.field(default=None, metadata=at_least(0))
    tput_per_gpu_output: float | None = attrs.field(default=None, metadata=at_least(0))
    tput_per_gpu_input: float | None = attrs.field(default=None, metadata=at_least(0))
    # Tokens per second for the whole server (when the GPU count is unknown).
    server_tput_total: float | None = attrs.field(default=None, metadata=at_least(0))
    server_tput_output: float | None = attrs.field(default=None, metadata=at_least(0))
    # Output tokens per second per user.
    interactivity: float | None = attrs.field(default=None, metadata=at_least(0))
    # Mean tokens accepted per speculative step, when the client reports it.
    accept_length: float | None = attrs.field(default=None, metadata=at_least(0))
    completed: int | None = attrs.field(default=None, metadata=at_least(0))
    # Mean board power per GPU over the run, watts (InferenceMAX's avg_power_w, where
    # recorded); the search's energy per token reads it before any modelled draw.
    power_w_per_gpu: float | None = attrs.field(default=None, metadata=at_least(0))

    @property
    def tpot_s(self) -> float | None:
        """Mean TPOT where recorded, else the median (the InferenceMAX history): a request's
        TPOT counts the prefill stalls it sat through, its mean or its median alike."""
        return self.tpot_mean_s if _present(self.tpot_mean_s) else self.tpot_median_s

    @property
    def tpot_statistic(self) -> str:
        """Which statistic ``tpot_s`` is ("mean" or "median"): a prediction is scored against
        the same one (a closed loop's per-request TPOT is skewed when its clients convoy)."""
        return "mean" if _present(self.tpot_mean_s) else "median"


#: A measured throughput further than this from its own Little's-law value contradicts the
#: anchor's latencies.
LITTLE_TOLERANCE = 0.25


@attrs.frozen
class AnchorRecord:
    id: str
    provenance: Provenance
    regime: Regime
    workload: Workload
    measurements: Measurements
    server_args: dict[str, Any] = attrs.field(factory=dict)

    @property
    def decode_step(self) -> tuple[float | None, str | None]:
        return derive_decode_step(self.measurements, self.regime.spec_method)

    @property
    def decode_step_s(self) -> float | None:
        return self.decode_step[0]

    @property
    def accept(self) -> tuple[float | None, str | None]:
        """Tokens a verify step emitted on average, and where that came from."""
        return derive_accept_length(self.measurements, self.regime)

    @property
    def accept_length(self) -> float | None:
        return self.accept[0]

    @property
    def accept_spread(self) -> float | None:
        """How much the tokens per step vary between requests, as a coefficient of variation:
        the row's per-request TPOT spread beyond PLAIN_TPOT_CV (in quadrature), where its
        tokens per step are known; else None."""
        m = self.measurements
        if self.accept_length is None or not (_present(m.tpot_std_s)
                                               and _present(m.tpot_mean_s)):
            return None
        cv = m.tpot_std_s / m.tpot_mean_s
        return math.sqrt(max(0.0, cv * cv - PLAIN_TPOT_CV * PLAIN_TPOT_CV))

    @property
    def prompt_share_unknown(self) -> bool:
        """An agentic rung of several lanes that records no prefix hit rate: how many
        uncached prompt tokens of the other lanes its steps computed beside their decodes is
        unknown, so its mean ITL cannot be split into a decode step and prompt work
        (GLM-5.1's c4 rung: 15 tokens a step at a 0.95 hit rate, 75 at 0.75, which at its
        prefill kernel's price is the gap between its decode and its ITL). One lane's prompt
        is computed before its first token, so its inter-token steps hold none. It
        calibrates its own regime, where the same lanes mix alike, but carries no decode
        level into a prior for another (docs/anchors.md)."""
        w = self.workload
        return (w.dataset == "agentx" and w.prefix_hit_rate is None
                and (w.concurrency or 1) > 1)

    def little_mismatch(self) -> str | None:
        """Why the measured throughput contradicts the anchor's own latency (Little's law:
        concurrency x tokens per request / e2e latency / GPUs, off by more than
        LITTLE_TOLERANCE), or None when it agrees or cannot be checked. The mean e2e latency
        where recorded, else the median: with the benchmarks' narrow length spread the two
        differ by a few percent, well inside the tolerance, and the InferenceMAX history
        records only the median (on it the check finds 14 of 670 rows, among them B200
        nvfp4 EP8 c32 at 0.56x and B200 fp8 c64 at 0.67x of their own latency)."""
        m, w, reg = self.measurements, self.workload, self.regime
        # The instance's GPUs (tp counts them all) times its replicas. Not ``num_gpus``:
        # InferenceMAX's num_decode_gpu reads tp x ep on expert-parallel rows while their
        # per-GPU throughput is per tp GPUs.
        gpus = reg.tp * (reg.replicas or 1) if reg.tp else reg.num_gpus
        if reg.disaggregated:
            gpus = reg.num_gpus  # both pools: the throughput is the deployment's
        e2e, which = self.e2e_s, "mean" if m.e2e_mean_s else "median"
        if not (m.tput_per_gpu_total and e2e and w.concurrency and gpus):
            return None
        little = w.concurrency * (w.isl + w.osl) / e2e / gpus
        if abs(m.tput_per_gpu_total / little - 1.0) <= LITTLE_TOLERANCE:
            return None
        return (f"measured {m.tput_per_gpu_total:.1f} tok/s/GPU contradicts its own latency "
                f"(Little's law from the {which} e2e: {little:.1f})")

    @property
    def e2e_s(self) -> float | None:
        """The mean e2e latency where recorded, else the median (the InferenceMAX history)."""
        m = self.measurements
        return m.e2e_mean_s or m.e2e_median_s

    @property
    def ttft_s(self) -> float | None:
        m = self.measurements
        return m.ttft_median_s if m.ttft_median_s is not None else m.ttft_mean_s

    def to_dict(self) -> dict[str, Any]:
        data = _drop_none(spec_to_dict(self))
        derived = {}
        step, basis = self.decode_step
        if step is not None:
            derived.update(decode_step_s=step, decode_step_source=basis)
        accept, source = self.accept
        if accept is not None and source != "accept_length":
            derived.update(accept_length=accept, accept_length_source=source)
        if derived:
            data["derived"] = derived
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, file: str = "<anchors>",
                  key: str = "anchors") -> AnchorRecord:
        if not isinstance(data, dict):
            raise ConfigError(f"expected a mapping, got {type(data).__name__}", file=file, key=key)
        body = {k: v for k, v in data.items() if k != "derived"}
        return build_spec(cls, body, prefix=key, default_file=file)


def _present(value: float | None) -> bool:
    return value is not None and math.isfinite(value) and value > 0


def derive_decode_step(m: Measurements, spec: str | None = None) -> tuple[float | None, str | None]:
    """Seconds per decode step per sequence, and which measurement it came from.

    Median ITL is one chunk gap, i.e. one engine step when each chunk carries one token. When
    median ITL sits above ``COALESCING_RATIO`` x mean TPOT the stream is coalescing tokens, so
    mean TPOT is read instead. Under speculative decoding a chunk carries every token accepted
    in a step, so mean TPOT (per emitted token) is always read: one basis across the sweep
    whatever the acceptance; a verify step is this times the accepted length.
    """
    tpot = m.tpot_s
    tpot_name = "mean_tpot" if _present(m.tpot_mean_s) else "median_tpot"
    itl = m.itl_median_s if _present(m.itl_median_s) else None
    if not _present(tpot):
        tpot = None
    if spec not in (None, "none") and tpot is not None:
        return tpot, f"{tpot_name} (speculative: a chunk carries every accepted token)"
    if itl is not None and tpot is not None and itl > COALESCING_RATIO * tpot:
        return tpot, (f"{tpot_name} (median ITL {itl / tpot:.1f}x > {COALESCING_RATIO}x: "
                      "coalesced stream)")
    if itl is not None:
        return itl, "median_itl"
    if tpot is not None:
        return tpot, f"{tpot_name} (no ITL recorded)"
    if _present(m.itl_mean_s):
        return m.itl_mean_s, "mean_itl"
    return None, None


def derive_accept_length(m: Measurements, regime: Regime) -> tuple[float | None, str | None]:
    """Mean tokens per verify step of a speculative record: the client's own figure when it
    reports one; else read from the stream. A server that sends each step's accepted tokens as
    one chunk has mean ITL = tokens per step x mean TPOT (both average the same decode time,
    over chunks and over tokens). A ratio past the verify width means the stream also groups
    steps (SGLang's stream interval on the NVIDIA rows: 21-65 tokens a chunk): unknown."""
    if regime.spec_method in (None, "none"):
        return None, None
    if _present(m.accept_length):
        return m.accept_length, "accept_length"
    if not (_present(m.itl_mean_s) and _present(m.tpot_mean_s)):
        return None, None
    ratio = m.itl_mean_s / m.tpot_mean_s
    width = 1 + (regime.draft_tokens or DEFAULT_DRAFT_TOKENS)
    if ratio > width:
        return None, None
    return max(1.0, ratio), "mean_itl / mean_tpot (one chunk per verify step)"


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items()
                if v is not None and v != [] and v != {}}
    if isinstance(value, list):
        return [_drop_none(v) for v in value]
    return value
