"""The analytic oracle's scaling: attention grows with context, a memory-bound decode step
does not double with the batch, the breakdown names its terms, macro pricing equals single steps."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from inferasim.config.loader import load_scenario
from inferasim.cost.oracle import AnalyticOracle, StepBatch

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def oracle():
    return AnalyticOracle(load_scenario(None, []))


def decode(oracle, ctx, n):
    return oracle.step(StepBatch(decode_context=np.full(n, float(ctx))))


def test_twice_the_context_costs_more_attention(oracle):
    a, b = decode(oracle, 4096, 8), decode(oracle, 8192, 8)
    att = lambda c: sum(v for k, v in c.breakdown.items() if k.startswith("attn_"))  # noqa: E731
    assert att(b) == pytest.approx(2 * att(a), rel=0.01)
    assert b.seconds > a.seconds


def test_twice_the_batch_does_not_double_a_memory_bound_decode_step(oracle):
    a, b = decode(oracle, 1024, 4), decode(oracle, 1024, 8)
    assert b.seconds < 1.5 * a.seconds
    # weights are read once per step whatever the batch
    assert b.breakdown["gemm_attention"] == pytest.approx(a.breakdown["gemm_attention"])


def test_prefill_is_compute_bound_and_superlinear_in_length(oracle):
    short = oracle.step(StepBatch(prefill_tokens=np.array([2048.0]),
                                  prefill_resident=np.array([0.0]), prefill_samples=1))
    long = oracle.step(StepBatch(prefill_tokens=np.array([8192.0]),
                                 prefill_resident=np.array([0.0]), prefill_samples=1))
    assert long.seconds > 4 * short.seconds * 0.9
    resident = oracle.step(StepBatch(prefill_tokens=np.array([2048.0]),
                                     prefill_resident=np.array([32768.0]), prefill_samples=1))
    # a chunk is priced at the context already resident, not at its own length
    assert resident.breakdown["attn_prefill_dense"] > 10 * short.breakdown["attn_prefill_dense"]


def test_breakdown_names_terms_and_sums(oracle):
    c = decode(oracle, 2048, 16)
    assert {"gemm_attention", "gemm_dense_ffn", "lm_head", "attn_decode_dense", "overhead"} \
        <= set(c.breakdown)
    assert c.seconds == pytest.approx(sum(c.breakdown.values()))


def test_decode_steps_equal_single_steps(oracle):
    ctx0 = np.array([100.0, 2000.0, 5000.0])
    many = oracle.decode_steps(ctx0, 5, 1.0, 1)
    singles = [oracle.step(StepBatch(decode_context=ctx0 + j)).seconds for j in range(5)]
    np.testing.assert_allclose(many, singles, rtol=1e-12)


def test_tp_adds_communication_and_cuts_per_gpu_gemm():
    one = AnalyticOracle(load_scenario(None, ["model.name=llama-3.1-70b", "gpu.name=h100",
                                              "parallel.tp=4"]))
    c = one.step(StepBatch(decode_context=np.full(8, 1024.0)))
    assert c.breakdown["communication"] > 0
    two = AnalyticOracle(load_scenario(None, ["model.name=llama-3.1-70b", "gpu.name=h100",
                                              "parallel.tp=8"]))
    d = two.step(StepBatch(decode_context=np.full(8, 1024.0)))
    assert d.breakdown["gemm_dense_ffn"] == pytest.approx(c.breakdown["gemm_dense_ffn"] / 2)


@pytest.mark.parametrize("overrides", [
    [],
    ["model.name=deepseek-r1", "gpu.name=mi355x", "parallel.tp=8", "engine.kv_dtype=fp8"],
    ["model.name=deepseek-r1", "gpu.name=mi355x", "parallel.tp=8", "parallel.dp_attention=8"],
    ["model.name=qwen3-235b-a22b", "gpu.name=h200", "parallel.tp=8"],
])
def test_linear_attention_fast_path_equals_the_full_model(overrides):
    """Dense attention is priced from per-unit coefficients on the hot path; it must equal
    the full per-sequence model for any batch and verify width."""
    oracle = AnalyticOracle(load_scenario(None, overrides))
    assert oracle._linear
    rng = np.random.default_rng(7)
    for width in (1, 3):
        ctx = rng.integers(1, 200_000, 17).astype(float)
        fast = oracle._decode_attention(ctx, width)
        full = oracle._decode_attention_full(ctx, width)
        assert fast.keys() == full.keys()
        for term in fast:
            np.testing.assert_allclose(fast[term], full[term], rtol=1e-12)
    chunk = rng.integers(1, 16_384, 9).astype(float)
    resident = rng.integers(0, 100_000, 9).astype(float)
    fast = oracle._prefill_attention(chunk, resident)
    full = oracle._prefill_attention_full(chunk, resident)
    for term in fast:
        np.testing.assert_allclose(fast[term], full[term], rtol=1e-12)


def test_windowed_and_sparse_attention_take_the_full_path():
    for overrides in (["model.name=gpt-oss-120b"],
                      ["model.name=glm-5.2", "gpu.name=mi355x", "parallel.tp=8"]):
        assert not AnalyticOracle(load_scenario(None, overrides))._linear


def test_every_layer_adds_its_latency_to_each_step_whatever_the_batch():
    base = load_scenario(None, [])
    deep = load_scenario(None, ["model.name=llama-3.1-70b", "parallel.tp=4"])
    for sc in (base, deep):
        o = AnalyticOracle(sc)
        per_layer = sc.gpu.layer_latency_s
        assert per_layer > 0
        expected = sc.gpu.step_overhead_s + sc.engine.step_overhead_s \
            + per_layer * sc.model.num_layers
        for n in (1, 64):
            assert decode(o, 2048, n).breakdown["overhead"] == pytest.approx(expected)
    # 80 layers pay more than 32: the floor follows the depth, not a per-step constant
    assert AnalyticOracle(deep).fixed_s - deep.gpu.step_overhead_s > \
        AnalyticOracle(base).fixed_s - base.gpu.step_overhead_s


@pytest.mark.parametrize(("overrides", "anchored"), [
    ([], False),  # dense GQA: the seconds-only path
    # MTP: vLLM on MI355X measured it nowhere; its plain regimes there are the prior
    (["model.name=deepseek-r1", "gpu.name=mi355x", "parallel.tp=8", "speculative.method=mtp",
      "speculative.draft_tokens=3"], True),
    (["model.name=gpt-oss-120b", "gpu.name=h100"], False),  # windowed layers: through step()
    (["scenarios/inferencemax/dsr1-b200-sglang-fp8-tp8.yaml"], True),  # by its own anchors
    # attention not linear in its work: compressed (V4, a prior) and selected (GLM-5, MTP)
    (["model.name=deepseek-v4-pro", "gpu.name=b200", "parallel.tp=8",
      "engine.name=sglang"], True),
    (["scenarios/inferencemax/dsr1-b200-sglang-fp8-tp8.yaml", "model.name=glm-5",
      "speculative.method=mtp", "speculative.draft_tokens=2",
      "speculative.acceptance=0.7"], True),
])
def test_step_seconds_equals_the_step_with_its_breakdown(overrides, anchored):
    """The engine prices steps without building breakdowns: the same seconds, any mix of
    prefill chunks and decodes."""
    from inferasim.anchors.loading import default_store
    from inferasim.cost.calibrated import CalibratedOracle

    path = overrides[0] if overrides and overrides[0].endswith(".yaml") else None
    sc = load_scenario(path and str(REPO / path), overrides[1:] if path else overrides)
    width = sc.speculative.verify_width
    batches = [
        StepBatch(decode_context=np.array([100.0, 2000.0, 5000.0]), width=width),
        StepBatch(prefill_tokens=np.array([2048.0, 300.0]),
                  prefill_resident=np.array([0.0, 4096.0]), prefill_samples=1, width=width),
        StepBatch(prefill_tokens=np.array([512.0]), prefill_resident=np.array([1024.0]),
                  decode_context=np.array([3000.0, 70.0]), width=width),
    ]
    calibrated = CalibratedOracle(sc, default_store())
    assert calibrated.calibrated == anchored
    for oracle in (AnalyticOracle(sc), calibrated):
        for batch in batches:
            assert oracle.step_seconds(batch) == pytest.approx(oracle.step(batch).seconds,
                                                               rel=1e-12)


def test_lockstep_group_runs_gemms_over_all_ranks_and_waits_for_the_slowest_attention():
    # INFERASIM_DES_LOCKSTEP (behaviour.md 5): the MoE and dense layers see the combined tokens
    # of every rank; each rank projects and attends over its own sequences and its own prefill
    # chunk, in parallel, so the group waits for the busiest rank's projections and the
    # slowest rank's attention, not for their sums.
    sc = load_scenario(None, ["model.name=deepseek-r1", "gpu.name=mi355x", "parallel.tp=8",
                              "parallel.dp_attention=8", "engine.name=sglang"])
    o = AnalyticOracle(sc, rank_level=True)
    ranks = [
        StepBatch(prefill_tokens=np.array([4096.0]), prefill_resident=np.array([2048.0]),
                  prefill_samples=1, decode_context=np.full(4, 8192.0)),
        StepBatch(decode_context=np.full(16, 32768.0)),
        StepBatch(decode_context=np.full(1, 1024.0)),
    ]
    combined = StepBatch(prefill_tokens=np.array([4096.0]), prefill_resident=np.array([2048.0]),
                         prefill_samples=1,
                         decode_context=np.concatenate([b.decode_context for b in ranks]))

    def attention(cost):
        return sum(v for k, v in cost.breakdown.items() if k.startswith("attn"))

    group = o.step_group(ranks)
    whole = o.step(combined)
    per_rank = [attention(o.step(b)) for b in ranks]
    busiest = o.step(ranks[0])   # 4,096 prompt tokens and 4 decodes
    for term in ("gemm_dense_ffn", "gemm_shared_experts", "gemm_moe", "lm_head", "overhead"):
        assert group.breakdown[term] == pytest.approx(whole.breakdown[term], rel=1e-12)
    assert group.breakdown["gemm_attention"] == pytest.approx(
        busiest.breakdown["gemm_attention"], rel=1e-12)
    assert group.breakdown["gemm_attention"] < whole.breakdown["gemm_attention"]
    assert attention(group) == pytest.approx(max(per_rank))
    assert group.seconds < whole.seconds  # attention summed over the ranks would be the whole
    # One rank alone is that rank's own step.
    assert o.step_group(ranks[1:2]).seconds == pytest.approx(o.step(ranks[1]).seconds)
    # The per-step price the engine uses and the run of decode-only group steps a macro-step
    # prices are that same step (neither adds the ranks' attention up).
    assert o.step_group_seconds(ranks) == pytest.approx(group.seconds, rel=1e-12)
    decoding = [StepBatch(decode_context=b.decode_context) for b in ranks]
    run = o.group_decode_steps([b.decode_context[None, :] + np.arange(3.0)[:, None]
                                for b in decoding], 1)
    for j in range(3):
        step = [StepBatch(decode_context=b.decode_context + j) for b in decoding]
        assert run[j] == pytest.approx(o.step_group(step).seconds, rel=1e-12)
        assert run[j] == pytest.approx(o.step_group_seconds(step), rel=1e-12)
    assert run[0] < o.step(StepBatch(decode_context=np.concatenate(
        [b.decode_context for b in decoding]))).seconds


def test_attention_dp_ranks_project_and_dispatch_only_their_own_tokens():
    # Under attention DP every GPU holds the attention weights and runs the projections for
    # its own rank's sequences, and sends its own tokens to the experts; one scheduler for
    # all the ranks prices them at an even share each, as the ranks' own steps would.
    from inferasim.arch.interconnect import alltoall_seconds

    sc = load_scenario(None, ["model.name=deepseek-r1", "gpu.name=b200", "parallel.tp=8",
                              "parallel.ep=8", "parallel.dp_attention=8",
                              "engine.name=sglang"])
    whole = AnalyticOracle(sc)
    rank = AnalyticOracle(sc, rank_level=True)
    big = whole.step(StepBatch(decode_context=np.full(4096, 2048.0))).breakdown
    own = rank.step(StepBatch(decode_context=np.full(512, 2048.0))).breakdown
    assert big["gemm_attention"] == pytest.approx(own["gemm_attention"], rel=1e-12)
    assert big["gemm_moe"] > own["gemm_moe"]   # the experts see every rank's tokens
    w = whole.work
    assert w.attn_allreduces_per_step == 0     # attention TP 1: nothing to reduce
    moe_layers = sc.model.num_layers - sc.model.ffn.first_k_dense
    assert w.allreduces_per_step == sc.model.num_layers - moe_layers  # the dense FFNs'
    a2a = alltoall_seconds(sc.gpu, w.alltoall_bytes_per_token, 512.0, 8)
    reduce = big["communication"] - a2a
    assert 0 < reduce < a2a


@pytest.mark.parametrize("model", ["deepseek-v4-pro", "glm-5"])
def test_group_decode_steps_of_attention_not_linear_in_context_equal_their_steps(model):
    # Compressed (DeepSeek-V4) and selected (DSA) attention is not linear in the context, so
    # a macro-step of group decode steps evaluates each rank's context matrix at once: every
    # row must still be the single group step's price, an idle rank included.
    sc = load_scenario(None, [f"model.name={model}", "gpu.name=b200", "parallel.tp=8",
                              "parallel.ep=8", "parallel.dp_attention=8", "engine.name=sglang"])
    o = AnalyticOracle(sc, rank_level=True)
    assert not o._linear
    rng = np.random.default_rng(7)
    starts = [rng.integers(100, 60000, size=n).astype(np.float64) for n in (5, 12, 1)]
    steps = 6
    run = o.group_decode_steps(
        [s[None, :] + np.arange(float(steps))[:, None] for s in starts] + [None], 1)
    assert run.shape == (steps,)
    for j in range(steps):
        group = [StepBatch(decode_context=s + j) for s in starts] + [StepBatch()]
        assert run[j] == pytest.approx(o.step_group(group).seconds, rel=1e-12)
        assert run[j] == pytest.approx(o.step_group_seconds(group), rel=1e-12)
    assert run[-1] > run[0]


@pytest.mark.parametrize("model", ["deepseek-v4-pro", "glm-5", "qwen3.5-397b-a17b"])
def test_a_group_step_of_attention_not_linear_in_its_work_prices_as_its_breakdown(model):
    # The per-step price of ranks stepping together evaluates every rank's sequences and
    # prompt chunks at once: it must be the breakdown's total, ranks prefilling, decoding,
    # doing both, or idle.
    sc = load_scenario(None, [f"model.name={model}", "gpu.name=mi355x", "parallel.tp=8",
                              "parallel.ep=8", "parallel.dp_attention=8", "engine.name=sglang"])
    o = AnalyticOracle(sc, rank_level=True)
    assert not o._linear
    ranks = [
        StepBatch(prefill_tokens=np.array([4096.0, 512.0]),
                  prefill_resident=np.array([2048.0, 0.0]), prefill_samples=1,
                  decode_context=np.array([8192.0, 100.0, 70000.0])),
        StepBatch(decode_context=np.full(16, 32768.0)),
        StepBatch(),
        StepBatch(prefill_tokens=np.array([16384.0]), prefill_resident=np.array([0.0]),
                  prefill_samples=1),
        StepBatch(decode_context=np.array([5.0])),
    ]
    for group in (ranks, ranks[1:], ranks[2:4], [ranks[2], ranks[2]]):
        assert o.step_group_seconds(group) == pytest.approx(o.step_group(group).seconds,
                                                            rel=1e-12)
