"""SGLang's deployment-derived defaults (engines.md 1.2): mem_fraction_static and
chunked_prefill_size follow the GPU, the layout and the speculative method."""

from __future__ import annotations

import pytest

from inferasim.config.engine_defaults import sglang_chunked_prefill_size, sglang_mem_fraction
from inferasim.config.loader import load_scenario, pool_scenario

MIB = 2**20
R1 = ["model.name=deepseek-r1", "parallel.tp=8", "engine.name=sglang"]


@pytest.mark.parametrize("gpu_mib, vendor, dp, mla, speculative, expected", [
    # engines.md 1.2's derived table for SGLang 0.5.10 at TP8
    (143_771, "nvidia", 1, True, "none", 0.886),    # H200, MLA with piecewise graphs
    (143_771, "nvidia", 1, False, "none", 0.897),   # H200, no piecewise graph
    (143_771, "nvidia", 8, True, "none", 0.769),    # H200, attention-DP 8
    (196_608, "amd", 1, True, "none", 0.733),       # MI300X after the aiter x0.85
    (196_608, "amd", 8, True, "none", 0.653),
    (294_912, "amd", 1, True, "none", 0.772),       # MI355X
    (294_912, "amd", 8, True, "none", 0.718),
    (294_912, "amd", 1, True, "mtp", 0.760),        # + 4 GiB for the EAGLE-family draft
])
def test_mem_fraction_reproduces_the_engines_derived_figures(gpu_mib, vendor, dp, mla,
                                                             speculative, expected):
    gpu = gpu_mib * MIB
    got = sglang_mem_fraction(gpu_bytes=gpu, vendor=vendor, tp=8, dp_attention=dp,
                              chunked_prefill_size=sglang_chunked_prefill_size(gpu), mla=mla,
                              speculative=speculative, context_len=163_840)
    assert got == pytest.approx(expected, abs=0.0015)


def test_chunk_tiers_follow_gpu_memory():
    assert sglang_chunked_prefill_size(80 * 2**30) == 8192       # H100
    assert sglang_chunked_prefill_size(141 * 2**30) == 8192      # H200
    assert sglang_chunked_prefill_size(180 * 2**30) == 16384     # B200 and the MI3xx
    assert sglang_chunked_prefill_size(24 * 2**30) == 2048


def test_scenarios_get_the_derived_figures_unless_they_set_them():
    h200 = load_scenario(None, [*R1, "gpu.name=h200"], check_fit=False).engine
    assert (h200.chunked_prefill_size, h200.mem_fraction) == (8192, pytest.approx(0.887, abs=1e-3))
    mi355 = load_scenario(None, [*R1, "gpu.name=mi355x"]).engine
    assert (mi355.chunked_prefill_size, mi355.mem_fraction) == (16384, pytest.approx(0.772, abs=1e-3))
    told = load_scenario(None, [*R1, "gpu.name=mi355x", "engine.mem_fraction=0.8",
                                "engine.chunked_prefill_size=4096"]).engine
    assert (told.chunked_prefill_size, told.mem_fraction) == (4096, 0.8)
    # vLLM keeps its own utilisation whatever the part
    vllm = load_scenario(None, ["model.name=deepseek-r1", "parallel.tp=8", "gpu.name=mi355x",
                                "engine.name=vllm"]).engine
    assert vllm.mem_fraction == 0.92


def test_a_dp_decode_pool_derives_its_own_fraction():
    sc = load_scenario(None, [*R1, "gpu.name=mi355x", "topology.kind=disaggregated",
                              "topology.decode.parallel={dp_attention: 8}"])
    assert pool_scenario(sc, "prefill").engine.mem_fraction == pytest.approx(0.772, abs=1e-3)
    assert pool_scenario(sc, "decode").engine.mem_fraction == pytest.approx(0.718, abs=1e-3)
    told = load_scenario(None, [*R1, "gpu.name=mi355x", "engine.mem_fraction=0.75",
                                "topology.kind=disaggregated",
                                "topology.decode.parallel={dp_attention: 8}"])
    assert pool_scenario(told, "decode").engine.mem_fraction == 0.75


def test_sglang_max_running_requests_follows_its_pool():
    # engines.md 1.2: min(clamp(pool / context x 512, 2048, 4096), pool // 2) when unset.
    from inferasim.config.engine_defaults import sglang_max_running_requests

    assert sglang_max_running_requests(2_196_426, 163_840) == 4096   # R1 on 8 x MI355X
    assert sglang_max_running_requests(425_352, 131_072) == 2048     # 8B on one H100
    assert sglang_max_running_requests(3_000, 131_072) == 1500       # a tiny pool
    big = load_scenario(None, [*R1, "gpu.name=mi355x"]).engine
    assert big.max_num_seqs == 4096
    told = load_scenario(None, [*R1, "gpu.name=mi355x", "engine.max_num_seqs=300"]).engine
    assert told.max_num_seqs == 300
    mtp = load_scenario(None, [*R1, "gpu.name=mi355x", "speculative.method=mtp",
                               "speculative.draft_tokens=1"]).engine
    assert mtp.max_num_seqs == 48
    # the server's 48, divided among attention-DP ranks as a value the user sets would be
    ranks = load_scenario(None, [*R1, "gpu.name=mi355x", "speculative.method=mtp",
                                 "speculative.draft_tokens=1", "parallel.ep=8",
                                 "parallel.dp_attention=8"]).engine
    assert ranks.max_num_seqs == 6


@pytest.mark.parametrize("gpu, version, tokens, seqs", [
    ("h100", "0.24", 8192, 1024), ("a100", "0.24", 2048, 256), ("l4", "0.24", 2048, 256),
    ("mi300x", "0.27", 8192, 1024), ("mi300x", "0.28", 16384, 1024),
    ("h200", "0.33", 8192, 1024), ("b200", "0.30", 16384, 1024)])
def test_vllm_takes_its_budget_and_running_limit_by_part_and_release(gpu, version, tokens,
                                                                      seqs):
    sc = load_scenario(None, [f"gpu.name={gpu}", f"engine.version={version}"])
    assert (sc.engine.max_num_batched_tokens, sc.engine.max_num_seqs) == (tokens, seqs)
    given = load_scenario(None, [f"gpu.name={gpu}", f"engine.version={version}",
                                 "engine.max_num_batched_tokens=4096", "engine.max_num_seqs=64"])
    assert (given.engine.max_num_batched_tokens, given.engine.max_num_seqs) == (4096, 64)


def test_a_release_is_read_as_typed_never_as_a_number(tmp_path):
    """vLLM 0.20 changed its memory default (0.9 -> 0.92): --set engine.version=0.20 must not
    become 0.2, and an unquoted 0.20 in a file, which YAML reads as 0.2, is refused."""
    from inferasim.config.errors import ConfigError

    sc = load_scenario(None, ["engine.version=0.20"])
    assert sc.engine.version == "0.20" and sc.engine.mem_fraction == 0.92
    path = tmp_path / "s.yaml"
    path.write_text("model: {name: llama-3.1-8b}\ngpu: {name: h100}\n"
                    "engine: {name: vllm, version: 0.20}\n")
    with pytest.raises(ConfigError) as err:
        load_scenario(path)
    assert err.value.key == "engine.version" and '"0.20"' in str(err.value)
