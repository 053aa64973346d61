"""A GPU part: peak rates from its datasheet and the efficiencies that turn peaks into step time."""

from __future__ import annotations

import attrs

from inferasim.config.typed import above, at_least, choices

#: The GPU vendors the catalog knows: a part names one, an engine the ones it runs on.
GPU_VENDORS = ("amd", "nvidia")


@attrs.frozen
class Efficiency:
    """Fractions of peak a serving step reaches; declared per GPU base, never defaulted silently."""

    gemm: float
    attention: float
    memory: float
    collective: float


def _head_multiples(_spec, _attribute, value: dict[str, int]) -> None:
    for dtype, multiple in value.items():
        if dtype not in ("bf16", "fp8"):
            raise ValueError(f"sparse_mla_head_multiple: expected KV dtypes bf16 and fp8 as "
                             f"keys, got {dtype!r}")
        if multiple < 1:
            raise ValueError(f"sparse_mla_head_multiple.{dtype}: expected a value of at least "
                             f"1, got {multiple!r}")


@attrs.frozen
class GpuSpec:
    name: str
    source: str
    vendor: str = attrs.field(metadata=choices(*GPU_VENDORS))
    arch: str
    isa: str
    hbm_bytes: float
    hbm_bw: float
    bf16_flops: float
    fp8_flops: float | None  # None: no fp8 tensor cores (Ampere)
    fp4_flops: float | None
    scaleup_bw_per_dir: float
    scaleup_domain: int
    efficiency: Efficiency
    # Launch and scheduling time every step pays whatever its size (kernel launches,
    # sampler, host bookkeeping); seconds.
    step_overhead_s: float
    # Latency of one collective hop; seconds.
    collective_latency_s: float
    # Time every transformer layer adds to a forward pass whatever its size: the launch, ramp
    # and tail of its ~15-20 small kernels under graph replay; seconds. Without it the
    # analytic step grows too steeply with the batch (measured/analytic falls ~0.8x from c4 to
    # c64 on the InferenceMAX R1 sweeps), so a ratio carried past a sweep's end mispredicts.
    layer_latency_s: float = 0.0
    # Relative cost of the sparse-attention indexer kernel on this part: 1.0 for a fused
    # kernel, more for an unfused one (Torch on gfx942).
    sparse_indexer_cost_scale: float = 1.0
    # Relative cost of the sparse-selection prefill kernel (DSA's top-k MLA prefill) on this
    # part against the attained attention rate: 1.0 for a kernel that attains it, more where
    # the kernel measured runs below it (SGLang's TileLang kernel on gfx950).
    sparse_prefill_cost_scale: float = attrs.field(default=1.0, metadata=above(0))
    # The query heads a sparse-MLA (DSA) kernel launch runs, in multiples of, per KV dtype
    # ({"bf16": 64, "fp8": 64}): a rank holding fewer heads has its query padded up to the
    # multiple and pays for the padded heads' selection (FlashMLA's sparse kernels on NVIDIA);
    # empty = the kernel runs the rank's own heads.
    sparse_mla_head_multiple: dict[str, int] = attrs.field(factory=dict,
                                                            validator=_head_multiples)
    # A GEMM of M rows runs its compute side as if it had M + this many (the tiles' fill and
    # last partial wave; cost/oracle.py GEMM_RAMP_ROWS): measured on H100 only (Vidur's
    # operator profiles), so set on the Hopper parts and 0 (the hard roofline) elsewhere.
    gemm_ramp_rows: float = attrs.field(default=0.0, metadata=at_least(0))
    l2_bytes: float = 0.0
    # The GPU's own NIC on the scale-out network (RDMA between scale-up domains), bytes/s
    # one way, and the latency one cross-domain hop adds; 0 = not known, and a layout whose
    # collectives or KV link leave the domain asks for it (arch/interconnect.py).
    scaleout_bw_per_gpu: float = attrs.field(default=0.0, metadata=at_least(0))
    scaleout_latency_s: float = attrs.field(default=0.0, metadata=at_least(0))
    # GPU <-> host memory, bytes/s one way per GPU (the host link a KV offload tier reloads
    # over: PCIe Gen5 x16 on most parts, NVLink-C2C to Grace on GB200); 0 = not known.
    host_link_bw_per_dir: float = 0.0
    # Device memory the serving stack holds on this part that no engine's own accounting
    # sees (runtime, communicator and kernel-library workspaces allocated at start-up), GiB
    # per GPU: kept out of the KV pool under every profiled or fraction-of-memory rule. Each
    # catalog entry says where its figure comes from (0 = none measured).
    unaccounted_memory_gib: float = attrs.field(default=0.0, metadata=at_least(0))
    # What a deployment search needs to turn throughput into money and energy. The price is a
    # rental rate in USD per GPU-hour with where it was read (None: no sourced rate, and a
    # cost objective asks for --price); the board power limit is the datasheet TDP, watts.
    price_per_gpu_hour: float | None = attrs.field(default=None, metadata=above(0))
    price_source: str = ""
    tdp_w: float = attrs.field(default=0.0, metadata=at_least(0))

    def peak_flops(self, dtype: str) -> float:
        if dtype in ("mxfp4", "nvfp4", "fp4") and self.fp4_flops:
            return self.fp4_flops
        if dtype in ("fp8", "int8", "mxfp4", "nvfp4", "fp4") and self.fp8_flops:
            # 4-bit weights without native 4-bit math run as fp8 (or dequantised) GEMMs.
            return self.fp8_flops
        # Without fp8 math (Ampere) fp8 and 4-bit weights are weight-only: dequantised into
        # bf16 GEMMs (Marlin's W8A16 / W4A16 kernels), so the math runs at the bf16 rate.
        # int4 checkpoints are W4A16: the math runs in bf16.
        return self.bf16_flops
