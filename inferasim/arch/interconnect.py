"""Which interconnect a collective or a KV transfer crosses, and what crossing it costs.

A GPU shares a scale-up domain (NVLink / xGMI: ``gpu.scaleup_domain`` GPUs, 8 on an HGX or
MI node, 72 on an NVL72 rack) and reaches every other GPU through its own NIC on the
scale-out network (``gpu.scaleout_bw_per_gpu``, ``gpu.scaleout_latency_s``). The layout
decides which one a piece of traffic takes: a group of ranks that fits one domain stays on
the scale-up links (priced as before this module existed, to the bit), a larger one pays
the NICs for its cross-domain share. The formulas and their sources: docs/interconnect.md.
"""

from __future__ import annotations

import math

import attrs

from inferasim.arch.gpu import GpuSpec
from inferasim.config.errors import ConfigError
from inferasim.config.scenario import Scenario

SCALE_UP = "scale-up"
SCALE_OUT = "scale-out"


def domains_spanned(gpu: GpuSpec, ranks: int) -> tuple[int, float]:
    """(domains, ranks per domain) of a group of ``ranks``: the fewest domains that hold it,
    the ranks spread evenly over them (a group of 16 on 8-GPU nodes is 2 x 8; one of 12 is
    2 x 6, as a launcher places a TP group over two nodes)."""
    domain = max(1, gpu.scaleup_domain)
    if ranks <= domain:
        return 1, float(ranks)
    spanned = math.ceil(ranks / domain)
    return spanned, ranks / spanned


def scaleout_bw(gpu: GpuSpec, scenario: Scenario | None, needs: str,
                remedy: str = "") -> float:
    """The part's NIC bandwidth, or a ConfigError naming the key when the catalog does not
    record it and ``needs`` (what crosses domains) does."""
    if gpu.scaleout_bw_per_gpu > 0:
        return gpu.scaleout_bw_per_gpu
    remedy = remedy or f"keep the group within one scale-up domain ({gpu.scaleup_domain} GPUs)"
    raise ConfigError(
        f"{gpu.name} records no scale-out bandwidth (gpu.scaleout_bw_per_gpu is 0 in its "
        f"GPU base), which {needs} needs: give the part's NIC bandwidth there (bytes/s one "
        f"way per GPU), or {remedy}",
        file=scenario.origin_of("gpu.name") if scenario is not None else None,
        key="gpu.scaleout_bw_per_gpu")


def check_scaleout(gpu: GpuSpec, scenario: Scenario | None, tp: int, ep: int) -> None:
    """Fail at set-up, not mid-replay, when a collective group leaves the domain of a part
    whose NIC bandwidth is unknown."""
    for what, ranks in (("tensor-parallel all-reduce", tp), ("expert-parallel all-to-all", ep)):
        spanned, _ = domains_spanned(gpu, ranks)
        if spanned > 1:
            scaleout_bw(gpu, scenario, f"a {what} over {ranks} ranks ({spanned} scale-up "
                                       "domains)")


def allreduce_seconds(gpu: GpuSpec, bytes_per_token: float, tokens: float, ranks: int) -> float:
    """One all-reduce of ``bytes_per_token x tokens`` bytes per GPU over ``ranks`` GPUs.

    Inside one domain: a ring on the scale-up links plus a latency per log2(ranks) hop.
    Across m domains of d ranks: reduce-scatter inside each domain, an all-reduce of each
    GPU's 1/d shard with its peers of the other domains over the NICs, all-gather inside
    (NCCL's tree / hierarchical all-reduce), plus one scale-out latency per log2(m) hop."""
    eff = gpu.efficiency.collective
    up = gpu.scaleup_bw_per_dir * eff
    spanned, per_domain = domains_spanned(gpu, ranks)
    if spanned == 1:
        # the pre-layout expression, evaluated in the same order (fidelity figures unchanged)
        ring = 2.0 * (ranks - 1) / ranks * bytes_per_token * tokens / up
        return ring + gpu.collective_latency_s * math.log2(ranks)
    out = scaleout_bw(gpu, None, "an all-reduce across scale-up domains") * eff
    nbytes = bytes_per_token * tokens
    inside = 2.0 * (per_domain - 1) / per_domain * nbytes / up       # RS + AG on scale-up
    across = 2.0 * (spanned - 1) / spanned * (nbytes / per_domain) / out  # the shard's ring
    return (inside + across + gpu.collective_latency_s * math.log2(per_domain)
            + gpu.scaleout_latency_s * math.log2(spanned))


def alltoall_seconds(gpu: GpuSpec, remote_bytes_per_token: float, tokens: float,
                     ranks: int, rounds: int = 1) -> float:
    """Expert-parallel dispatch + combine over ``ranks`` GPUs, ``rounds`` times (once per MoE
    layer); ``remote_bytes_per_token`` is the token's traffic to the other ranks over all
    the rounds ((ranks - 1) / ranks of its expert traffic under uniform routing).

    Of that, the (d - 1) / (ranks - 1) share to ranks of the sender's own domain of d goes on
    the scale-up links and the rest on its NIC; the two run at once, so the slower sets the
    time. Each of the two phases of every round pays a scale-up hop, and a scale-out one
    when traffic leaves the domain."""
    up = gpu.scaleup_bw_per_dir * gpu.efficiency.collective
    spanned, per_domain = domains_spanned(gpu, ranks)
    if spanned == 1:
        return remote_bytes_per_token * tokens / up + 2 * rounds * gpu.collective_latency_s
    out = scaleout_bw(gpu, None, "an all-to-all across scale-up domains") \
        * gpu.efficiency.collective
    remote = remote_bytes_per_token * tokens
    inside = remote * (per_domain - 1) / (ranks - 1)
    leaving = remote * (ranks - per_domain) / (ranks - 1)
    return max(inside / up, leaving / out) \
        + 2 * rounds * (gpu.collective_latency_s + gpu.scaleout_latency_s)


@attrs.frozen
class KvLinkPlan:
    """The prefill -> decode KV link of a disaggregated deployment, per prefill instance."""

    bytes_per_s: float
    latency_s: float
    crosses: str              # SCALE_UP or SCALE_OUT: the fabric the layout puts it on
    sender_gpus: int          # GPUs of one prefill instance (each sends its own shard)
    deployment_gpus: int      # prefill + decode GPUs of the deployment
    domain: int               # GPUs in one scale-up domain of the part
    bandwidth_from: str       # "topology.link_bandwidth_gbs" when given, else the catalog key
    latency_from: str

    def describe(self) -> str:
        return (f"KV link: {self.bytes_per_s / 1e9:,.0f} GB/s per prefill instance, "
                f"{self.latency_s * 1e6:.0f} us per transfer, over {self.crosses} "
                f"({self.deployment_gpus} GPUs {'within' if self.crosses == SCALE_UP else 'past'}"
                f" one {self.domain}-GPU domain; bandwidth from {self.bandwidth_from}, "
                f"latency from {self.latency_from})")


def _pool_gpus(scenario: Scenario, role: str) -> int:
    # a pool's GPUs per instance are its own parallel.tp over the scenario's (pool_scenario's
    # rule, as Scenario.total_gpus counts them)
    return int(getattr(scenario.topology, role).parallel.get("tp", scenario.parallel.tp))


def kv_link_plan(scenario: Scenario) -> KvLinkPlan:
    """The KV link the layout gives: when every prefill and decode GPU fits one scale-up
    domain the KV crosses the scale-up fabric (the instance's GPUs x ``scaleup_bw_per_dir``,
    a scale-up hop of latency); otherwise it crosses the scale-out network (its GPUs x
    ``scaleout_bw_per_gpu``, ``scaleout_latency_s``). ``topology.link_bandwidth_gbs`` and
    ``link_latency_us``, when given, win."""
    topo, gpu = scenario.topology, scenario.gpu
    sender = _pool_gpus(scenario, "prefill")
    total = scenario.total_gpus
    crosses = SCALE_UP if total <= gpu.scaleup_domain else SCALE_OUT
    if topo.link_bandwidth_gbs is not None:
        bw, bw_from = topo.link_bandwidth_gbs * 1e9, "topology.link_bandwidth_gbs"
    elif crosses == SCALE_UP:
        bw, bw_from = sender * gpu.scaleup_bw_per_dir, "gpu.scaleup_bw_per_dir"
    else:
        needs = (f"the disaggregated KV link ({total} GPUs, past one {gpu.scaleup_domain}-GPU "
                 "domain)")
        nic = scaleout_bw(gpu, scenario, needs, remedy="set topology.link_bandwidth_gbs")
        bw, bw_from = sender * nic, "gpu.scaleout_bw_per_gpu"
    if topo.link_latency_us is not None:
        lat, lat_from = topo.link_latency_us * 1e-6, "topology.link_latency_us"
    elif crosses == SCALE_UP:
        lat, lat_from = gpu.collective_latency_s, "gpu.collective_latency_s"
    else:
        lat, lat_from = gpu.scaleout_latency_s, "gpu.scaleout_latency_s"
    return KvLinkPlan(bytes_per_s=bw, latency_s=lat, crosses=crosses, sender_gpus=sender,
                      deployment_gpus=total, domain=gpu.scaleup_domain, bandwidth_from=bw_from,
                      latency_from=lat_from)
