"""The interconnect as a layout (docs/interconnect.md): collectives priced by the domains
their group spans, and the disaggregated KV link by the fabric the deployment crosses."""

from __future__ import annotations

import json
import math

import pytest
import simpy
from click.testing import CliRunner

from inferasim.arch.interconnect import (
    SCALE_OUT,
    SCALE_UP,
    allreduce_seconds,
    alltoall_seconds,
    kv_link_plan,
)
from inferasim.cli.main import cli
from inferasim.config.errors import ConfigError
from inferasim.config.knobs import Knobs
from inferasim.config.loader import load_scenario
from inferasim.cost.oracle import AnalyticOracle
from inferasim.serve.topology import build_topology

TOKENS = 256.0
DISAGG = ["topology.kind=disaggregated"]


def _oracle(*overrides) -> AnalyticOracle:
    return AnalyticOracle(load_scenario(None, list(overrides)))


def _links(*overrides):
    sc = load_scenario(None, [*DISAGG, *overrides])
    topo = build_topology(simpy.Environment(), sc, Knobs(), 16, lambda s, r: AnalyticOracle(s))
    return sc, topo.frontend.links


# -- catalog --------------------------------------------------------------------------------

@pytest.mark.parametrize("name, nic, domain", [
    ("h100", 50e9, 8), ("h200", 50e9, 8), ("b200", 100e9, 8), ("gb200", 100e9, 72),
    ("b300", 100e9, 8), ("gb300", 100e9, 72), ("mi300x", 50e9, 8), ("mi325x", 50e9, 8),
    ("mi350x", 50e9, 8), ("mi355x", 50e9, 8), ("l4", 0.0, 8), ("a100", 25e9, 8)])
def test_catalog_records_each_parts_nic_and_domain(name, nic, domain):
    gpu = load_scenario(None, [f"gpu.name={name}"], check_fit=False).gpu
    assert gpu.scaleout_bw_per_gpu == nic  # 0 on L4: unknown
    assert gpu.scaleup_domain == domain
    if nic:
        # a cross-domain hop of a few microseconds (NCCL's inter-node step)
        assert 5e-6 <= gpu.scaleout_latency_s <= 10e-6


# -- TP all-reduce ----------------------------------------------------------------------------

def test_tp_allreduce_inside_the_domain_is_priced_as_before():
    o = _oracle("model.name=llama-3.1-70b", "gpu.name=h100", "parallel.tp=8")
    w, gpu = o.work, o.gpu
    bw = gpu.scaleup_bw_per_dir * gpu.efficiency.collective
    # the pre-layout expression, verbatim: the same bits
    ring = 2.0 * (w.tp - 1) / w.tp * w.allreduce_bytes_per_token * TOKENS / bw
    before = w.allreduces_per_step * (ring + gpu.collective_latency_s * math.log2(w.tp))
    assert o._comm_seconds(TOKENS) == before


def test_tp_allreduce_past_the_domain_pays_the_nics_for_the_shard():
    o = _oracle("model.name=llama-3.1-70b", "gpu.name=h100", "parallel.tp=16")
    w = o.work
    assert (w.tp, w.allreduces_per_step, w.allreduce_bytes_per_token) == (16, 160, 8192 * 2.0)
    # by hand: 2 nodes of 8 H100s; RS + AG inside at 450 GB/s x 0.7, the 1/8 shard
    # all-reduced between the 2 nodes at 50 GB/s x 0.7, 3 NVLink hops + 1 NIC hop of 8 us
    nbytes = 16384.0 * TOKENS
    up, out = 450e9 * 0.7, 50e9 * 0.7
    inside = 2 * 7 / 8 * nbytes / up
    across = 2 * 1 / 2 * (nbytes / 8) / out
    one = inside + across + 8e-6 * 3 + 8e-6 * 1
    assert o._comm_seconds(TOKENS) == pytest.approx(160 * one, rel=1e-12)
    # slower than the same group would be on one 16-GPU NVLink domain, by the NIC's share
    flat = 2 * 15 / 16 * nbytes / up + 8e-6 * 4
    assert one - flat == pytest.approx(across - (2 * 15 / 16 - 2 * 7 / 8) * nbytes / up,
                                       rel=1e-9)
    assert one > flat


def test_a_group_not_a_multiple_of_the_domain_spreads_evenly():
    gpu = load_scenario(None, ["gpu.name=h100"]).gpu
    # 12 ranks on 8-GPU nodes: 2 x 6
    nbytes = 1e6
    up, out = 450e9 * 0.7, 50e9 * 0.7
    expect = 2 * 5 / 6 * nbytes / up + 2 * 1 / 2 * nbytes / 6 / out \
        + 8e-6 * math.log2(6) + 8e-6
    assert allreduce_seconds(gpu, nbytes, 1.0, 12) == pytest.approx(expect, rel=1e-12)


# -- EP all-to-all ----------------------------------------------------------------------------

R1_EP16 = ["model.name=deepseek-r1", "parallel.tp=16", "parallel.ep=16"]


def test_ep_alltoall_inside_the_domain_pays_a_hop_per_moe_layer():
    o = _oracle("model.name=deepseek-r1", "gpu.name=b200", "parallel.tp=8", "parallel.ep=8")
    w, gpu = o.work, o.gpu
    # DeepSeek-R1: 61 layers, the first 3 dense; each MoE layer dispatches and combines
    assert w.alltoalls_per_step == 58
    bw = gpu.scaleup_bw_per_dir * gpu.efficiency.collective
    ring = 2.0 * (w.tp - 1) / w.tp * w.allreduce_bytes_per_token * TOKENS / bw
    expected = w.allreduces_per_step * (ring + gpu.collective_latency_s * math.log2(w.tp))
    expected += w.alltoall_bytes_per_token * TOKENS / bw + 2 * 58 * gpu.collective_latency_s
    assert o._comm_seconds(TOKENS) == pytest.approx(expected, rel=1e-12)
    # the latency is paid per round, the bytes once: a single-round call is 57 x 2 hops less
    one = alltoall_seconds(gpu, w.alltoall_bytes_per_token, TOKENS, 8)
    every = alltoall_seconds(gpu, w.alltoall_bytes_per_token, TOKENS, 8, rounds=58)
    assert every - one == pytest.approx(2 * 57 * gpu.collective_latency_s, rel=1e-9)


def test_a_dense_model_or_a_layout_without_ep_has_no_alltoall_rounds():
    assert _oracle("model.name=llama-3.1-70b", "gpu.name=h100", "parallel.tp=8") \
        .work.alltoalls_per_step == 0
    assert _oracle("model.name=deepseek-r1", "gpu.name=b200", "parallel.tp=8") \
        .work.alltoalls_per_step == 0


def test_ep16_alltoall_is_cheaper_in_one_nvl72_rack_than_over_two_hgx_nodes():
    hgx = _oracle("gpu.name=b200", *R1_EP16)
    rack = _oracle("gpu.name=gb200", *R1_EP16)
    # same scale-up links, efficiencies and traffic: only the domain differs
    assert hgx.work == rack.work and hgx.work.ep == 16
    a2a = hgx.work.alltoall_bytes_per_token
    on_hgx = alltoall_seconds(hgx.gpu, a2a, TOKENS, 16)
    on_rack = alltoall_seconds(rack.gpu, a2a, TOKENS, 16)
    # by hand: 7 of the 15 remote ranks share the sender's 8-GPU node, 8 are past its NIC
    remote = a2a * TOKENS
    up, out = 900e9 * 0.7, 100e9 * 0.7
    assert on_hgx == pytest.approx(max(remote * 7 / 15 / up, remote * 8 / 15 / out)
                                   + 2 * (8e-6 + 8e-6), rel=1e-12)
    assert on_rack == pytest.approx(remote / up + 2 * 8e-6, rel=1e-12)
    assert on_rack < on_hgx
    # and the whole step's communication (the TP16 all-reduces cross the nodes too)
    assert rack._comm_seconds(TOKENS) < hgx._comm_seconds(TOKENS)


def test_a_collective_past_an_unknown_nic_is_a_config_error_naming_the_key():
    with pytest.raises(ConfigError) as err:
        _oracle("gpu.name=l4", "parallel.tp=16")
    assert err.value.key == "gpu.scaleout_bw_per_gpu"
    assert "l4" in str(err.value) and "16 ranks" in str(err.value)
    _oracle("gpu.name=l4", "parallel.tp=8")  # inside its 8 cards: nothing asked


# -- the disaggregated KV link ---------------------------------------------------------------

def test_kv_link_inside_one_nvl72_rack_uses_nvlink():
    # 1P + 1D of 8 GB200s: 16 GPUs within the 72-GPU NVLink domain
    sc, links = _links("model.name=deepseek-r1", "gpu.name=gb200", "parallel.tp=8")
    plan = kv_link_plan(sc)
    assert (plan.crosses, plan.deployment_gpus, plan.sender_gpus) == (SCALE_UP, 16, 8)
    assert links[0].bytes_per_s == 8 * 900e9
    assert links[0].latency_s == sc.gpu.collective_latency_s


def test_kv_link_over_two_hgx_nodes_uses_the_nics():
    # the same layout on B200: two 8-GPU nodes, the KV leaves through the prefill GPUs' NICs
    sc, links = _links("model.name=deepseek-r1", "gpu.name=b200", "parallel.tp=8")
    assert kv_link_plan(sc).crosses == SCALE_OUT
    assert links[0].bytes_per_s == 8 * 100e9
    assert links[0].latency_s == 8e-6
    # each prefill instance its own link, its own GPUs' bandwidth
    sc, links = _links("model.name=deepseek-r1", "gpu.name=b200", "parallel.tp=8",
                       "topology.prefill.instances=2", "topology.prefill.parallel={tp: 4}")
    assert kv_link_plan(sc).deployment_gpus == 2 * 4 + 8
    assert links[0] is not links[-1] and links[0].bytes_per_s == 4 * 100e9


def test_a_small_deployment_inside_one_node_crosses_the_scale_up_links():
    sc, links = _links()  # the quickstart's H100, 1P + 1D of one GPU each
    assert kv_link_plan(sc).crosses == SCALE_UP
    assert links[0].bytes_per_s == 450e9


def test_an_explicit_link_wins():
    sc, links = _links("model.name=deepseek-r1", "gpu.name=gb200", "parallel.tp=8",
                       "topology.link_bandwidth_gbs=100")
    assert links[0].bytes_per_s == 100e9
    # the latency not given stays the layout's
    assert links[0].latency_s == sc.gpu.collective_latency_s
    assert kv_link_plan(sc).bandwidth_from == "topology.link_bandwidth_gbs"
    _, links = _links("model.name=deepseek-r1", "gpu.name=b200", "parallel.tp=8",
                      "topology.link_latency_us=200")
    assert (links[0].bytes_per_s, links[0].latency_s) == (800e9, pytest.approx(200e-6))
    # the shipped 1P1D MI355X scenario's 400 GB/s is what its layout gives anyway (8 x 50)
    shipped = load_scenario("scenarios/topologies/glm52-disagg-1p1d.yaml")
    plan = kv_link_plan(shipped)
    assert plan.bytes_per_s == 400e9 and plan.bandwidth_from == "topology.link_bandwidth_gbs"
    auto = kv_link_plan(load_scenario("scenarios/topologies/glm52-disagg-1p1d.yaml",
                                      ["topology.link_bandwidth_gbs=null"]))
    assert auto.crosses == SCALE_OUT and auto.bytes_per_s == 400e9


def test_a_kv_link_past_an_unknown_nic_is_a_config_error_naming_the_key():
    # 1P + 1D of 8 L4 cards: 16 cards, past the 8 of one box, and L4 records no NIC
    with pytest.raises(ConfigError) as err:
        _links("gpu.name=l4", "parallel.tp=8")
    assert err.value.key == "gpu.scaleout_bw_per_gpu"
    assert "topology.link_bandwidth_gbs" in str(err.value)
    # describe reports it beside the deployment instead of failing
    result = CliRunner().invoke(cli, ["describe", "--set", "gpu.name=l4", "--set",
                                      "parallel.tp=8", *[a for s in DISAGG for a in ("--set", s)]])
    assert result.exit_code == 0 and "KV link: " in result.output
    assert "gpu.scaleout_bw_per_gpu" in result.output
    # a link the scenario gives needs no catalog figure
    _, links = _links("gpu.name=l4", "parallel.tp=8", "topology.link_bandwidth_gbs=25")
    assert links[0].bytes_per_s == 25e9


def test_describe_says_which_fabric_the_kv_link_crosses():
    args = ["describe", "--set", "topology.kind=disaggregated", "--set", "gpu.name=b200",
            "--set", "model.name=deepseek-r1", "--set", "parallel.tp=8"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "KV link: 800 GB/s per prefill instance" in result.output
    assert "over scale-out" in result.output
    data = json.loads(CliRunner().invoke(cli, [*args, "--json"]).output)
    assert data["kv_link"]["crosses"] == SCALE_OUT
    assert data["kv_link"]["bytes_per_s"] == 800e9
