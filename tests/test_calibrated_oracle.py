"""The anchor-calibrated oracle: a measured step moved to the target by the whole analytic step
(design.md; behaviour.md 1 and 3 "Transport by the whole step", "The fitted KV stream scales
with the target's KV width")."""

from __future__ import annotations

import math

import attrs
import numpy as np
import pytest

from inferasim.anchors.loading import default_store
from inferasim.anchors.record import AnchorRecord
from inferasim.anchors.store import AnchorStore
from inferasim.config.catalog import REPO_ROOT
from inferasim.config.knobs import Knobs
from inferasim.config.loader import load_scenario
from inferasim.cost.calibrated import CalibratedOracle, oracle_for
from inferasim.cost.oracle import AnalyticOracle, StepBatch
from inferasim.cost.prefill_reading import _prefill_beside_decodes, analytic_prefill_seconds
from inferasim.cost.ttft_model import (
    LATENCY_EXPONENT_MAX,
    LATENCY_LOAD_EXPONENT,
    closed_loop_sojourn,
)
from inferasim.serve.simulation import simulate

SCENARIO = REPO_ROOT / "scenarios" / "inferencemax" / "dsr1-mi355x-sglang-fp8-tp8.yaml"
ISL, OSL = 1024, 8192
CTX = ISL + OSL / 2
# A measured decode step per concurrency (seconds): not the analytic shape, on purpose.
MEASURED = {4: 0.0110, 16: 0.0150, 64: 0.0260}


def record(conc: int, step: float, *, gpu: str = "mi355x", isl: int = ISL, osl: int = OSL,
           ttft: float | None = None, kv: str | None = None, dpa: int = 1) -> AnchorRecord:
    regime = {"model": "deepseek-r1", "engine": "sglang", "gpu": gpu, "weight_dtype": "fp8",
              "spec_method": "none", "tp": 8, "ep": 1, "dp_attention": dpa, "num_gpus": 8}
    if kv:
        regime["kv_dtype"] = kv
    return AnchorRecord.from_dict({
        "id": f"t-{gpu}-{isl}-{osl}-c{conc}", "provenance": {"source": "test"},
        "regime": regime,
        "workload": {"isl": isl, "osl": osl, "concurrency": conc},
        "measurements": {"itl_median_s": step, "tpot_mean_s": step,
                         **({"ttft_median_s": ttft} if ttft else {})},
    })


@pytest.fixture(scope="module")
def scenario():
    # a bf16 KV cache (the launch script's older version): its pool holds about 330 requests
    # of 1k/8k, between the sweep's 64 and 512 clients, which the memory-wait tests need
    return load_scenario(SCENARIO, ["engine.version=", "engine.kv_dtype=bf16"])


@pytest.fixture(scope="module")
def store():
    return AnchorStore([record(c, s) for c, s in MEASURED.items()])


def with_kv(scenario, kv: str):
    return attrs.evolve(scenario, engine=attrs.evolve(scenario.engine, kv_dtype=kv))


def decode(oracle, n: int, ctx: float = CTX) -> float:
    return oracle.step(StepBatch(decode_context=np.full(n, float(ctx)))).seconds


def test_transport_ratio_is_measured_at_the_anchors_own_point(scenario, store):
    oracle = CalibratedOracle(scenario, store)
    assert oracle.calibration["mode"] == "anchored"
    assert sorted(oracle.calibration["anchors_used"]) == sorted(r.id for r in store)
    for conc, step in MEASURED.items():
        assert decode(oracle, conc) == pytest.approx(step, rel=1e-9)
    # between anchors the ratio is interpolated; past the sweep the end segment's trend is
    # carried on (not flat), bounded to a factor EXTRAPOLATION_LIMIT of the end ratio
    r4, r16, r64 = (oracle.decode_ratio(c) for c in (4, 16, 64))
    assert min(r4, r16) <= oracle.decode_ratio(8) <= max(r4, r16)
    from inferasim.cost.ratio_table import EXTRAPOLATION_LIMIT

    for far, end, near in ((1, r4, r16), (512, r64, r16)):
        got = oracle.decode_ratio(far)
        assert end / EXTRAPOLATION_LIMIT - 1e-12 <= got <= end * EXTRAPOLATION_LIMIT + 1e-12
        if end != near:  # the trend continues the way the end segment moves
            assert (got - end) * (end - near) >= 0


def test_past_the_sweep_a_plain_trend_is_carried_only_where_it_raises_the_ratio():
    """The measured/analytic ratio is U-shaped in the batch: a segment falling towards an end
    is held there (plain decoding), a rising one is carried; speculative sweeps carry both."""
    from inferasim.cost.ratio_table import EXTRAPOLATION_LIMIT, ratio_at

    xs = np.log(np.array([4.0, 8.0, 16.0]))
    falling = np.array([1.3, 1.1, 1.0])   # falls towards the high end
    assert ratio_at(np.log(64.0), xs, falling, one_sided=True) == pytest.approx(1.0)
    assert ratio_at(np.log(64.0), xs, falling) < 1.0
    # towards the low end the same sweep rises: carried, bounded
    low = ratio_at(np.log(1.0), xs, falling, one_sided=True)
    assert 1.3 < low <= 1.3 * EXTRAPOLATION_LIMIT + 1e-12
    assert low == pytest.approx(ratio_at(np.log(1.0), xs, falling))
    rising = np.array([1.0, 1.1, 1.3])
    assert ratio_at(np.log(1.0), xs, rising, one_sided=True) == pytest.approx(1.0)
    assert ratio_at(np.log(64.0), xs, rising, one_sided=True) > 1.3


def test_the_oracle_holds_only_plain_targets_one_sided(scenario):
    store = AnchorStore([record(4, 0.0140), record(8, 0.0150)])  # ratio falls with the batch
    plain = CalibratedOracle(scenario, store)
    assert plain.decode_ratio(8) < plain.decode_ratio(4)
    assert plain.decode_ratio(64) == pytest.approx(plain.decode_ratio(8), rel=1e-12)
    assert plain.decode_ratio(1) > plain.decode_ratio(4)
    assert "where it raises the ratio" in plain.calibration["note"]
    mtp = attrs.evolve(scenario, speculative=attrs.evolve(scenario.speculative, method="mtp",
                                                          draft_tokens=3))
    spec_store = AnchorStore([attrs.evolve(r, regime=attrs.evolve(r.regime, spec_method="mtp"))
                              for r in store])
    spec = CalibratedOracle(mtp, spec_store)
    assert spec.calibrated and "trend carried, bounded" in spec.calibration["note"]
    assert "where it raises the ratio" not in spec.calibration["note"]


def test_the_whole_step_is_transported_fixed_costs_included(scenario, store):
    oracle = CalibratedOracle(scenario, store)
    whole = oracle.analytic.step(StepBatch(decode_context=np.full(16, CTX)))
    assert whole.breakdown["overhead"] > 0
    cost = oracle.step(StepBatch(decode_context=np.full(16, CTX)))
    ratio = oracle.decode_ratio(16)
    assert cost.seconds == pytest.approx(ratio * whole.seconds)
    assert cost.breakdown["overhead"] == pytest.approx(ratio * whole.breakdown["overhead"])
    assert cost.seconds == pytest.approx(sum(cost.breakdown.values()))


def test_twice_the_context_costs_more(scenario, store):
    oracle = CalibratedOracle(scenario, store)
    assert decode(oracle, 16, 2 * CTX) > decode(oracle, 16, CTX)
    assert decode(oracle, 64, 2 * CTX) > decode(oracle, 64, CTX)


def test_fp8_and_bf16_kv_project_differently(scenario, store):
    # The anchors do not record their KV dtype: skipped, read as the target's, never guessed.
    bf16 = CalibratedOracle(with_kv(scenario, "bf16"), store)
    fp8 = CalibratedOracle(with_kv(scenario, "fp8"), store)
    assert any("KV dtype" in n for n in fp8.calibration["notes"])
    for oracle in (bf16, fp8):
        assert decode(oracle, 64) == pytest.approx(MEASURED[64], rel=1e-9)
    # away from the anchor's point the KV delta is carried at the target's width
    grow_bf16 = decode(bf16, 64, 4 * CTX) / decode(bf16, 64, CTX)
    grow_fp8 = decode(fp8, 64, 4 * CTX) / decode(fp8, 64, CTX)
    assert 1.0 < grow_fp8 < grow_bf16
    assert decode(fp8, 64, 4 * CTX) < decode(bf16, 64, 4 * CTX)


def test_an_anchor_that_records_its_kv_width_transports_it(scenario):
    # An fp8-KV anchor priced for an fp8 target: the KV stream is the anchor's own width.
    fp8_anchor = AnchorStore([record(c, s, kv="fp8") for c, s in MEASURED.items()])
    fp8 = CalibratedOracle(with_kv(scenario, "fp8"), fp8_anchor)
    assert fp8.calibration["mode"] == "anchored"
    assert decode(fp8, 16) == pytest.approx(MEASURED[16], rel=1e-9)
    # a bf16 target is refused by the regime (kv_dtype is a regime axis): the anchors then
    # price it only as a prior (read against their own fp8 KV), or not at all without one
    bf16 = CalibratedOracle(with_kv(scenario, "bf16"), fp8_anchor)
    assert bf16.calibration["mode"] == "prior"
    assert bf16.calibration["refused"] == {"kv_dtype": 3}
    bare = with_kv(scenario, "bf16")
    bare = attrs.evolve(bare, sim=attrs.evolve(bare.sim, prior="none"))
    assert CalibratedOracle(bare, fp8_anchor).calibration["mode"] == "analytic"


def test_no_usable_anchor_falls_back_to_analytic_with_the_reason(scenario):
    other_part = AnchorStore([record(16, 0.015, gpu="mi325x")])
    oracle = CalibratedOracle(scenario, other_part)
    cal = oracle.calibration
    assert cal["mode"] == "analytic" and cal["anchors_used"] == []
    assert "no usable anchor" in cal["fallback"] and "gpu" in cal["fallback"]
    assert cal["refused"] == {"gpu": 1}
    analytic = AnalyticOracle(scenario)
    batch = StepBatch(decode_context=np.full(16, CTX))
    assert oracle.step(batch).seconds == analytic.step(batch).seconds
    assert CalibratedOracle(scenario, None).calibration["mode"] == "analytic"


def test_decode_steps_equal_single_steps(scenario, store):
    oracle = CalibratedOracle(scenario, store)
    for n in (3, 8, 40, 100):
        ctx0 = np.linspace(1100.0, 9000.0, n)
        many = oracle.decode_steps(ctx0, 7, 1.0, 1)
        singles = [oracle.step(StepBatch(decode_context=ctx0 + j)).seconds for j in range(7)]
        np.testing.assert_allclose(many, singles, rtol=1e-12)


def _lone_prompt(tokens: float) -> StepBatch:
    """One whole prompt in one step, nothing resident."""
    return StepBatch(prefill_tokens=np.array([tokens]), prefill_resident=np.array([0.0]),
                     prefill_samples=1)


def test_prefill_stays_analytic_when_the_probe_is_refused(scenario, store):
    oracle = CalibratedOracle(scenario, store)
    cal = oracle.calibration
    assert cal["prefill"] == "analytic"
    assert any("prefill" in n for n in cal["notes"])
    prefill = _lone_prompt(1024.0)
    assert oracle.step(prefill).seconds == oracle.analytic.step(prefill).seconds
    # a mixed step: the decode part calibrated, the prefill part analytic
    mixed = StepBatch(prefill_tokens=np.array([1024.0]), prefill_resident=np.array([0.0]),
                      prefill_samples=1, decode_context=np.full(16, CTX))
    dec = oracle.analytic.step(StepBatch(decode_context=np.full(16, CTX))).seconds
    whole = oracle.analytic.step(mixed).seconds
    assert oracle.step(mixed).seconds == pytest.approx(
        oracle.decode_ratio(16) * dec + (whole - dec))


def _lone_prefill(oracle, isl: int) -> float:
    return analytic_prefill_seconds(oracle.analytic, isl)


def test_three_isls_fit_a_prefill_slope_and_a_frontend_latency(scenario):
    isls = (1024, 4096, 16384)
    plain = CalibratedOracle(scenario, AnchorStore([record(c, s) for c, s in MEASURED.items()]))
    # At one client nothing waits: TTFT = latency + slope x the lone prefill, exactly.
    records = [record(1, 0.01, isl=i, osl=1024, ttft=0.08 + 2.5 * _lone_prefill(plain, i))
               for i in isls]
    records += [record(16, 0.015, isl=i, osl=1024, ttft=0.9) for i in isls]  # not the lowest
    target = attrs.evolve(scenario, workload=attrs.evolve(scenario.workload, isl=4096))
    oracle = CalibratedOracle(target, AnchorStore(records))
    cal = oracle.calibration
    assert cal["prefill"] == "calibrated" and len(cal["prefill_fit"]) == 3
    assert oracle.prefill_slope == pytest.approx(2.5, rel=1e-6)
    assert oracle.frontend_latency_s == pytest.approx(0.08, rel=1e-6)
    assert cal["frontend_latency_ms"] == pytest.approx(80.0)
    prefill = _lone_prompt(1024.0)
    assert oracle.step(prefill).seconds == pytest.approx(2.5 * oracle.analytic.step(prefill).seconds)


def test_one_isl_calibrates_latency_only_and_the_slope_only_near_its_isl(scenario):
    plain = CalibratedOracle(scenario, AnchorStore([record(c, s) for c, s in MEASURED.items()]))
    ttft = 0.3 + _lone_prefill(plain, ISL)
    records = [record(1, 0.01, ttft=ttft), record(16, 0.015, ttft=0.5)]
    near = CalibratedOracle(scenario, AnchorStore(records))  # the target's ISL is the probe's
    assert near.calibration["prefill"] == "calibrated"
    # one ISL cannot tell a slower prefill from a fixed latency: the engine time stays analytic
    assert near.prefill_slope == 1.0
    assert near.frontend_latency_s == pytest.approx(0.3, rel=1e-6)
    far = attrs.evolve(scenario, workload=attrs.evolve(scenario.workload, isl=8 * ISL))
    refused = CalibratedOracle(far, AnchorStore(records))
    cal = refused.calibration
    assert cal["prefill"] == "analytic"
    assert any("not within" in n for n in cal["notes"])
    # the prefill is analytic at the far ISL ...
    prefill = _lone_prompt(2048.0)
    assert refused.step(prefill).seconds == refused.analytic.step(prefill).seconds
    # ... but the time outside the engine is per request, not per prompt token: it is carried
    assert refused.frontend_modelled
    assert refused.frontend_latency(1) == pytest.approx(near.frontend_latency(1), rel=1e-9)
    assert cal["frontend_latency_ms"] == pytest.approx(300.0)
    assert "frontend latency carried" in cal["note"]


def test_a_target_beyond_the_probed_isls_carries_the_fitted_slope_on(scenario):
    plain = CalibratedOracle(scenario, AnchorStore([record(c, s) for c, s in MEASURED.items()]))
    records = [record(1, 0.01, isl=i, osl=1024, ttft=0.08 + 2.5 * _lone_prefill(plain, i))
               for i in (1024, 2048, 4096)]
    far = attrs.evolve(scenario, workload=attrs.evolve(scenario.workload, isl=65536))
    oracle = CalibratedOracle(far, AnchorStore(records))
    cal = oracle.calibration
    # a curve over three ISLs is an efficiency of the analytic prefill: it goes on past them,
    # and the report says it was carried
    assert cal["prefill"] == "calibrated"
    assert oracle.prefill_slope == pytest.approx(2.5, rel=1e-6)
    assert oracle.frontend_latency_s == pytest.approx(0.08, rel=1e-6)
    assert any(n.startswith("prefill transported") for n in cal["notes"])
    prefill = _lone_prompt(32768.0)
    assert oracle.step(prefill).seconds == pytest.approx(
        2.5 * oracle.analytic.step(prefill).seconds)


def _fixed(r: AnchorRecord) -> AnchorRecord:
    return attrs.evolve(r, workload=attrs.evolve(r.workload, range_ratio=1.0))


def test_fixed_length_clients_are_read_as_waves_of_prompts(scenario):
    """With fixed lengths a closed loop's clients send together: a prompt's TTFT is the
    wave's queue (the prompts before it in the engine's chunks), not a random loop's."""
    plain = CalibratedOracle(scenario, AnchorStore([record(c, s) for c, s in MEASURED.items()]))
    isls = (1024, 4096, 16384)
    probe = [_fixed(record(4, 0.012, isl=i, osl=1024, ttft=1.0)) for i in isls]
    reader = CalibratedOracle(scenario, AnchorStore(probe))
    waves = [reader._wave_prefill(r, 4) for r in probe]
    lone = [_lone_prefill(plain, i) for i in isls]
    # four prompts in one burst: the mean prompt waits for about half the others
    assert all(w > 2.0 * p for w, p in zip(waves, lone, strict=True))
    records = [_fixed(record(4, 0.012, isl=i, osl=1024, ttft=0.05 + 3.0 * w))
               for i, w in zip(isls, waves, strict=True)]
    oracle = CalibratedOracle(scenario, AnchorStore(records))
    assert oracle.prefill_slope == pytest.approx(3.0, rel=0.02)
    assert oracle.frontend_latency_s == pytest.approx(0.05, abs=0.01)
    # the same TTFTs from a random-length loop are not waves: a different reading
    loose = CalibratedOracle(scenario, AnchorStore(
        [attrs.evolve(r, workload=attrs.evolve(r.workload, range_ratio=None)) for r in records]))
    assert loose.prefill_slope > 1.5 * oracle.prefill_slope


def test_the_decode_ratio_follows_the_context_where_one_batch_was_measured_at_several(scenario):
    plain = AnalyticOracle(scenario)
    ctxs = (1024, 2048, 4096, 8192)

    def measured(ctx: int) -> float:
        # the anchors' step grows faster with the context than the analytic one: ctx^0.3 more
        return 1.5 * (ctx / 1024) ** 0.3 * plain.step(
            StepBatch(decode_context=np.full(8, ctx + 64.0))).seconds

    records = [record(8, measured(c), isl=c, osl=128) for c in ctxs]
    records = [attrs.evolve(r, id=f"{r.id}-{i}") for i, r in enumerate(records)]
    oracle = CalibratedOracle(scenario, AnchorStore(records))
    assert oracle._context_slope(1) == pytest.approx(0.3, abs=0.02)
    at = {c: decode(oracle, 8, c) / decode(plain, 8, c) for c in (1088, 8256, 16448)}
    assert at[8256] == pytest.approx(1.5 * 8 ** 0.3, rel=0.03)
    # carried past the longest measured context, bounded by CONTEXT_RATIO_LIMIT
    assert at[16448] == pytest.approx(1.5 * 16 ** 0.3, rel=0.03)
    # one context per batch (the shipped anchors): no trend, the ratio as before
    flat = CalibratedOracle(scenario, AnchorStore([record(c, s) for c, s in MEASURED.items()]))
    assert flat._context_slope(1) == 0.0
    assert flat.decode_ratio(16, 1, 100000.0) == flat.decode_ratio(16, 1)


def test_the_decode_ratio_is_read_at_the_measured_contexts_around_the_target_and_carried_from_the_nearest(
        scenario):
    # one batch measured at 1k, 2k and 4k with a ratio that is no power of the context: the
    # ratio at 3k lies between the 2k and 4k ones (in log context), and past 4k it is the 4k
    # ratio carried by the context slope, not the sweep's mean ratio carried from its mean
    plain = AnalyticOracle(scenario)
    ratios = {1024: 1.2, 2048: 1.3, 4096: 1.9}
    records = [record(8, r * decode(plain, 8, c + 64), isl=c, osl=128)
               for c, r in ratios.items()]
    records = [attrs.evolve(r, id=f"{r.id}-{i}") for i, r in enumerate(records)]
    oracle = CalibratedOracle(scenario, AnchorStore(records))
    slope = oracle._context_slope(1)
    assert slope > 0

    def ratio(ctx: float) -> float:
        return decode(oracle, 8, ctx) / decode(plain, 8, ctx)

    for c, r in ratios.items():
        assert ratio(c + 64) == pytest.approx(r, rel=1e-6)
    w = math.log(3072 / 2112) / math.log(4160 / 2112)
    assert ratio(3072) == pytest.approx(1.3 ** (1 - w) * 1.9 ** w, rel=1e-6)
    assert ratio(8256) == pytest.approx(1.9 * (8256 / 4160) ** slope, rel=1e-6)
    assert ratio(600) == pytest.approx(1.2 * (600 / 1088) ** slope, rel=1e-6)
    # the mean ratio carried from the mean context would have priced 8k lower
    mean = math.exp(np.mean(np.log(list(ratios.values()))))
    own = math.exp(np.mean(np.log([c + 64 for c in ratios])))
    assert ratio(8256) > 1.03 * mean * (8256 / own) ** slope


def test_closed_loop_sojourn_is_bounded_by_the_population():
    # one client, or nobody else's prompts: the prompt's own engine time
    assert closed_loop_sojourn(0.5, 1, 2.0) == 0.5
    assert closed_loop_sojourn(0.5, 8, float("inf")) == 0.5
    # clients away for long barely queue; clients that come straight back queue behind all
    assert closed_loop_sojourn(0.5, 4, 1e6) == pytest.approx(0.5, rel=1e-5)
    assert closed_loop_sojourn(0.5, 4, 0.0) == pytest.approx(4 * 0.5)
    # more clients, more queueing, never more than every other client's prompt ahead
    seq = [closed_loop_sojourn(0.5, c, 3.0) for c in (1, 2, 4, 8, 16)]
    assert seq == sorted(seq) and all(s <= c * 0.5 for s, c in zip(seq, (1, 2, 4, 8, 16), strict=True))
    # two clients, exponential service (MVA is exact): the other is ahead with probability
    # S / (S + Z) at an arrival, so the sojourn is S (1 + S / (S + Z))
    assert closed_loop_sojourn(0.5, 2, 3.0) == pytest.approx(0.5 * (1 + 0.5 / 3.5))


def test_queueing_behind_other_prompts_is_not_read_as_a_slower_prefill(scenario):
    # Four clients with long prompts and short outputs queue behind each other's prefill.
    # TTFTs made by that model (slope 2, latency 0.1 s) are fitted back to slope 2: read as
    # engine time alone the queueing would have inflated the slope.
    isls = (2048, 8192, 16384, 32768)
    step, osl, slope, latency = 0.015, 128, 2.0, 0.1
    others = [record(c, s) for c, s in MEASURED.items() if c != 4]
    target = attrs.evolve(scenario, workload=attrs.evolve(scenario.workload, isl=8192, osl=osl))
    probe = [record(4, step, isl=i, osl=osl, ttft=1.0) for i in isls]
    plain = CalibratedOracle(target, AnchorStore(probe + others))  # the same decode ratios
    rows = [plain._ttft_row(r) for r in probe]
    ttfts = [r.wait + latency + r.sojourn(slope, latency) for r in rows]
    records = [record(4, step, isl=i, osl=osl, ttft=t)
               for i, t in zip(isls, ttfts, strict=True)] + others
    oracle = CalibratedOracle(target, AnchorStore(records))
    assert oracle.prefill_slope == pytest.approx(slope, rel=1e-3)
    assert oracle.frontend_latency_s == pytest.approx(latency, rel=1e-2)
    fit = oracle.calibration["prefill_fit"]
    assert fit[-1]["queue_ms"] > fit[-1]["analytic_prefill_ms"]  # queueing is most of it
    # the old reading (TTFT - wait = latency + slope x prefill) would have taken it as engine time
    x = np.array([r.prefill for r in rows])
    y = np.array([t - r.wait for t, r in zip(ttfts, rows, strict=True)])
    assert np.polyfit(x, y, 1)[0] > 1.5 * slope


def _stalled(conc: int, itl: float, tpot: float, ttft: float, osl: int = 1024) -> AnchorRecord:
    """An anchor whose mean TPOT sits above its median ITL: prefills stalled its decodes."""
    return AnchorRecord.from_dict({
        "id": f"t-stall-c{conc}-{osl}", "provenance": {"source": "test"},
        "regime": {"model": "deepseek-r1", "engine": "sglang", "gpu": "mi355x",
                   "weight_dtype": "fp8", "spec_method": "none", "tp": 8, "ep": 1,
                   "dp_attention": 1, "num_gpus": 8},
        "workload": {"isl": ISL, "osl": osl, "concurrency": conc},
        "measurements": {"itl_median_s": itl, "tpot_mean_s": tpot, "ttft_median_s": ttft},
    })


def test_decode_stalls_price_an_engine_overhead_per_prefilling_step(scenario):
    # mean TPOT above median ITL: every other client's prompt held the decodes up
    records = [_stalled(16, 0.020, 0.024, 0.30), _stalled(64, 0.030, 0.038, 0.35)]
    target = attrs.evolve(scenario, workload=attrs.evolve(scenario.workload, osl=1024))
    oracle = CalibratedOracle(target, AnchorStore(records))
    lone = _lone_prefill(oracle, ISL)
    per_prefill = []
    for r in records:
        m, c = r.measurements, r.workload.concurrency
        life = 1023 * m.tpot_mean_s
        per_prefill.append((m.tpot_mean_s - m.itl_median_s) * 1023
                           / ((c - 1) * life / (life + m.ttft_median_s)))
    expected = float(np.median([p - lone for p in per_prefill]))
    assert expected > 0.05  # far above the analytic 1k prefill: engine time, not noise
    assert oracle.prefill_step_overhead_s == pytest.approx(expected, rel=1e-9)
    cal = oracle.calibration
    assert cal["prefill_step_overhead_ms"] == pytest.approx(expected * 1e3, abs=0.01)
    assert len(cal["prefill_stalls"]) == 2
    assert f"each prefill step +{expected * 1e3:.0f} ms" in cal["note"]
    # every step that prefills pays it, decode-only steps do not
    prefill = _lone_prompt(1024.0)
    cost = oracle.step(prefill)
    assert cost.breakdown["prefill_overhead"] == pytest.approx(expected)
    assert cost.seconds == pytest.approx(oracle.analytic.step(prefill).seconds + expected)
    decode = StepBatch(decode_context=np.full(16, CTX))
    assert "prefill_overhead" not in oracle.step(decode).breakdown
    mixed = StepBatch(prefill_tokens=np.array([512.0]), prefill_resident=np.array([0.0]),
                      prefill_samples=1, decode_context=np.full(16, CTX))
    for batch in (prefill, decode, mixed):
        assert oracle.step_seconds(batch) == pytest.approx(oracle.step(batch).seconds, rel=1e-12)
    # the stall was engine time: the TTFT left outside the engine shrinks by it
    plain = CalibratedOracle(target, AnchorStore(
        [_stalled(16, 0.020, 0.0201, 0.30), _stalled(64, 0.030, 0.0301, 0.35)]))
    assert plain.prefill_step_overhead_s == 0.0  # a gap under STALL_MIN_SHARE is not read
    assert oracle.frontend_latency(16) < plain.frontend_latency(16) - 0.5 * expected


def test_a_probe_refused_for_prefill_carries_no_stall_into_the_engine(scenario):
    """The same stalled anchors, read for a target at 16 times their ISL: the probe is refused
    for prefill, so no per-step overhead read from it reaches a prefilling step (the report
    says analytic, and it is)."""
    records = [_stalled(16, 0.020, 0.024, 0.30), _stalled(64, 0.030, 0.038, 0.35)]
    target = attrs.evolve(scenario, workload=attrs.evolve(scenario.workload, isl=16 * ISL,
                                                          osl=1024))
    oracle = CalibratedOracle(target, AnchorStore(records))
    cal = oracle.calibration
    assert oracle.calibrated and cal["prefill"] == "analytic"
    assert oracle.prefill_step_overhead_s == 0.0 and "prefill_step_overhead_ms" not in cal
    assert "each prefill step" not in cal["note"]
    prefill = _lone_prompt(16.0 * ISL)
    assert oracle.step(prefill).seconds == oracle.analytic.step(prefill).seconds
    assert oracle.step_seconds(prefill) == pytest.approx(oracle.analytic.step_seconds(prefill))


def test_a_stall_reading_past_the_ttft_is_held_to_it(scenario):
    """The prefill step's engine time is at most the measured TTFT less the wait for the step
    in flight: a request's first token comes out of its own prefill step. A stall reading
    above that (the ITL distribution's skew read as stall) is held to it."""
    records = [_stalled(16, 0.020, 0.024, 0.07), _stalled(64, 0.030, 0.038, 0.08)]
    target = attrs.evolve(scenario, workload=attrs.evolve(scenario.workload, osl=1024))
    oracle = CalibratedOracle(target, AnchorStore(records))
    row = min(oracle.prefill_points, key=lambda r: r.clients)
    ceiling = row.ttft - row.wait - oracle.prefill_slope * row.prefill
    assert 0 < ceiling < 0.05  # the readings give more (above)
    assert oracle.prefill_step_overhead_s == pytest.approx(ceiling, rel=1e-9)
    assert oracle.frontend_latency(16) == pytest.approx(0.0, abs=1e-9)


def test_a_median_tpot_gives_the_stall_reading_too(scenario):
    """The InferenceMAX history records TPOT by its median over requests only: each request's
    TPOT counts the stalls it sat through, so the median reads them as the mean does."""
    def median_only(conc, itl, tpot, ttft):
        rec = _stalled(conc, itl, tpot, ttft)
        return attrs.evolve(rec, measurements=attrs.evolve(rec.measurements, tpot_mean_s=None,
                                                           tpot_median_s=tpot))
    target = attrs.evolve(scenario, workload=attrs.evolve(scenario.workload, osl=1024))
    means = CalibratedOracle(target, AnchorStore(
        [_stalled(16, 0.020, 0.024, 0.30), _stalled(64, 0.030, 0.038, 0.35)]))
    medians = CalibratedOracle(target, AnchorStore(
        [median_only(16, 0.020, 0.024, 0.30), median_only(64, 0.030, 0.038, 0.35)]))
    assert medians.prefill_step_overhead_s > 0.05
    assert medians.prefill_step_overhead_s == pytest.approx(means.prefill_step_overhead_s)


def test_a_coalesced_stream_gives_no_stall_reading(scenario):
    # median ITL far above mean TPOT: tokens arrive in chunks, the ITL is not the step
    records = [_stalled(16, 0.080, 0.024, 0.20), _stalled(64, 0.120, 0.038, 0.25)]
    oracle = CalibratedOracle(scenario, AnchorStore(records))
    assert oracle.calibrated and oracle.prefill_step_overhead_s == 0.0
    assert "prefill_step_overhead_ms" not in oracle.calibration


def test_a_step_read_from_tpot_leaves_out_the_stalls_the_replay_simulates(scenario):
    # a coalesced stream (median ITL far above TPOT): the step is read from mean TPOT, which
    # carries the other clients' prefills; the replay prices those prefills again
    records = [_stalled(16, 0.080, 0.024, 0.20), _stalled(64, 0.120, 0.038, 0.25)]
    oracle = CalibratedOracle(scenario, AnchorStore(records))
    lone = _lone_prefill(oracle, ISL)
    for point, r in zip(oracle.points, records, strict=True):
        m, c = r.measurements, r.workload.concurrency
        life = 1023 * m.tpot_mean_s
        # each arriving prompt's chunks beside the anchor's decodes, at the fitted slope
        beside = _prefill_beside_decodes(oracle._anchor_oracle(r)[0], ISL, point.batch,
                                         ISL + OSL / 2.0, 1)
        assert 0 < beside < lone  # the mixed step reads the weights once for both
        stall = (c - 1) * life / (life + m.ttft_median_s) * beside \
            * oracle.prefill_slope / 1023
        assert point.measured_s == pytest.approx(m.tpot_mean_s - stall, rel=1e-6)
        assert 0 < stall < 0.2 * m.tpot_mean_s
    # a step read from the median ITL has no stall in it: taken as measured
    itl = CalibratedOracle(scenario, AnchorStore([_stalled(16, 0.020, 0.024, 0.20),
                                                  _stalled(64, 0.030, 0.038, 0.25)]))
    assert [p.measured_s for p in itl.points] == [0.020, 0.030]


def test_the_stalls_a_tpot_read_step_loses_are_priced_at_the_fitted_prefill_slope(scenario):
    # the replay prices the other clients' prompts at the prefill slope, so the stall taken
    # out of the measured step is priced there too (read again once the slope is fitted)
    records = [_stalled(16, 0.080, 0.024, 0.20), _stalled(64, 0.120, 0.038, 0.25)]
    oracle = CalibratedOracle(scenario, AnchorStore(records))
    r, batch = records[0], oracle.points[0].batch
    tpot = r.measurements.tpot_mean_s
    oracle._stall_scale = 1.0
    one = oracle._modelled_stall(r, tpot, batch)
    oracle._stall_scale = 1.5
    assert oracle._modelled_stall(r, tpot, batch) == pytest.approx(1.5 * one)


def test_clients_beyond_the_running_slots_wait_for_one_and_it_is_not_latency(scenario):
    # 64 clients, 48 running slots: each round, 16 clients wait for a slot
    def capped(conc: int, ttft: float) -> AnchorRecord:
        return AnchorRecord.from_dict({
            "id": f"t-capped-c{conc}", "provenance": {"source": "test"},
            "regime": {"model": "deepseek-r1", "engine": "sglang", "gpu": "mi355x",
                       "weight_dtype": "fp8", "spec_method": "none", "tp": 8, "ep": 1,
                       "dp_attention": 1, "num_gpus": 8, "max_num_seqs": 48},
            "workload": {"isl": ISL, "osl": 1024, "concurrency": conc},
            "measurements": {"itl_median_s": 0.013, "tpot_mean_s": 0.0137,
                             "ttft_median_s": ttft},
        })
    records = [capped(32, 0.12), capped(64, 4.34)]
    oracle = CalibratedOracle(scenario, AnchorStore(records))
    # the decode batch is the slots, not the clients
    assert sorted(p.batch for p in oracle.points) == [32, 48]
    decode = 1023 * 0.0137
    low, high = (oracle._ttft_row(r) for r in records)
    assert high.wait - low.wait == pytest.approx(decode * (64 / 48 - 1), rel=0.05)
    # so the c64 row's 4.3 s is not read as 4 s of frontend latency
    assert oracle.frontend_latency(64) < 0.5


def test_clients_beyond_what_the_kv_pool_holds_wait_for_memory_and_it_is_not_latency(scenario):
    """A sweep run past the pool: the requests the anchor's pool holds at their mean resident
    context (ISL + OSL / 2) run, the rest of the clients queue for memory. That queue is
    neither frontend latency nor the anchor's decode batch. The pool is the memory model's
    for the anchor's deployment, whatever pool the target states."""
    from inferasim.arch.memory import memory_plan

    fits = memory_plan(scenario).kv_pool_tokens // CTX  # about 330 requests of 1k/8k
    assert 64 < fits < 512
    memory_wait = (OSL - 1) * 0.045 * (512 / fits - 1)  # over a minute
    records = [record(64, 0.026, ttft=0.15), record(512, 0.045, ttft=0.3 + memory_wait)]
    stated = attrs.evolve(scenario, engine=attrs.evolve(scenario.engine, kv_pool_tokens=50_000))
    for target in (scenario, stated):
        oracle = CalibratedOracle(target, AnchorStore(records))
        assert sorted(p.batch for p in oracle.points) == [64, fits]
        low, high = (oracle._ttft_row(r) for r in records)
        assert high.wait - low.wait == pytest.approx(memory_wait, rel=0.05)
        assert oracle.frontend_latency(512) < 1.0


def test_a_queue_for_memory_longer_than_the_pool_bound_explains_is_not_latency(scenario):
    """The engine's admission sets how long a sweep past the pool queues (SGLang reserves the
    running requests' remaining output), which the Little's-law bound reads only roughly: a
    memory-bound anchor's residue stays out of the latency by load, which the anchors within
    their pool set (the residue of B200 SGLang fp8 MTP 1k/8k c512 once put 90 s on 1k/1k)."""
    from inferasim.arch.memory import memory_plan

    fits = memory_plan(scenario).kv_pool_tokens // CTX
    memory_wait = (OSL - 1) * 0.045 * (512 / fits - 1)
    within = [record(4, 0.011, ttft=0.15), record(64, 0.026, ttft=0.6)]
    past = record(512, 0.045, ttft=0.3 + 3 * memory_wait)   # twice the bound's wait beyond
    oracle = CalibratedOracle(scenario, AnchorStore([*within, past]))
    assert oracle._memory_bound(past) and not any(oracle._memory_bound(r) for r in within)
    alone = CalibratedOracle(scenario, AnchorStore(within))
    assert oracle.frontend_latency(512) == pytest.approx(alone.frontend_latency(512), rel=1e-9)
    assert oracle.frontend_latency(512) < 0.1 * memory_wait


def test_frontend_latency_grows_with_the_load_the_anchors_measured_it_at(scenario):
    records = [record(4, 0.011, ttft=0.15), record(16, 0.015, ttft=0.25),
               record(64, 0.026, ttft=0.60)]
    oracle = CalibratedOracle(scenario, AnchorStore(records))
    excess = {}
    for r in records:
        row = oracle._ttft_row(r)
        # the model's queueing of these short prompts is a small part of the excess
        assert 0 <= row.queue(1.0, oracle.frontend_latency_s) < 0.05 * row.ttft
        excess[r.workload.concurrency] = row.excess(1.0, oracle.frontend_latency_s)
    for conc, value in excess.items():
        assert oracle.frontend_latency(conc) == pytest.approx(value, rel=1e-9)
    assert excess[4] < oracle.frontend_latency(8) < excess[16] < excess[64]
    # past the measured loads the end segment's power law goes on (its exponent clipped)
    low = math.log(excess[16] / excess[4]) / math.log(4)
    high = min(math.log(excess[64] / excess[16]) / math.log(4), LATENCY_EXPONENT_MAX)
    assert 0 < low and 0 < high
    assert oracle.frontend_latency(1) == pytest.approx(excess[4] * 0.25 ** low)
    assert oracle.frontend_latency(512) == pytest.approx(excess[64] * 8 ** high)
    by_conc = oracle.calibration["frontend_latency_ms_by_concurrency"]
    assert sorted(by_conc) == [4, 16, 64]


def test_one_measured_load_extrapolates_the_latency_by_the_prior_exponent(scenario):
    # one anchor at c512 with 3 s of TTFT must not put 3 s on every request at c4 (1k/1k:
    # the pool holds all 512; at 1k/8k they would queue for memory, which is not latency)
    records = [record(512, 0.03, osl=1024, ttft=3.0), record(256, 0.025, osl=1024)]
    oracle = CalibratedOracle(scenario, AnchorStore(records))
    at512 = oracle.frontend_latency(512)
    assert at512 > 2.5
    assert oracle.frontend_latency(4) == pytest.approx(
        at512 * (4 / 512) ** LATENCY_LOAD_EXPONENT, rel=1e-9)
    assert oracle.frontend_latency(4) < 0.5 * at512
    # a latency that falls with the load is not extrapolated downward: held flat
    falling = CalibratedOracle(scenario, AnchorStore(
        [record(4, 0.011, ttft=0.30), record(16, 0.015, ttft=0.20)]))
    assert falling.frontend_latency(64) == pytest.approx(falling.frontend_latency(16))


def test_a_self_contradicting_anchor_does_not_calibrate(scenario):
    good = [record(c, s) for c, s in MEASURED.items()]
    bad = AnchorRecord.from_dict({
        "id": "t-contradicts", "provenance": {"source": "test"},
        "regime": {
            "model": "deepseek-r1", "engine": "sglang", "gpu": "mi355x", "weight_dtype": "fp8",
            "spec_method": "none", "tp": 8, "ep": 1, "dp_attention": 1, "num_gpus": 8},
        "workload": {"isl": ISL, "osl": OSL, "concurrency": 256},
        # 256 clients x 9216 tokens / 100 s / 8 GPUs = 2949 tok/s/GPU, not 50
        "measurements": {"tpot_mean_s": 0.2, "e2e_mean_s": 100.0, "tput_per_gpu_total": 50.0},
    })
    oracle = CalibratedOracle(scenario, AnchorStore([*good, bad]))
    assert "t-contradicts" not in oracle.calibration["anchors_used"]
    assert any("t-contradicts does not calibrate" in n for n in oracle.calibration["notes"])
    assert decode(oracle, 256) == pytest.approx(decode(CalibratedOracle(scenario, AnchorStore(good)), 256))


def test_frontend_latency_delays_ttft_and_e2e_not_the_engine(scenario):
    one = load_scenario(SCENARIO, ["workload.duration_s=20", "workload.concurrency=1",
                                   "workload.osl=64", "workload.isl=1024",
                                   "workload.random_range_ratio=1.0"])
    base = AnalyticOracle(one)
    plain = simulate(one, oracle=base)
    delayed_oracle = AnalyticOracle(one)
    delayed_oracle.frontend_latency = lambda in_flight: 0.25 * in_flight  # one open: 0.25 s
    delayed = simulate(one, oracle=delayed_oracle)
    first = lambda r: (r.first_token - r.arrival, r.finish - r.first_token)  # noqa: E731
    (ttft0, dec0), (ttft1, dec1) = first(plain.requests[0]), first(delayed.requests[0])
    assert ttft1 == pytest.approx(ttft0 + 0.25, rel=1e-9)
    assert dec1 == pytest.approx(dec0, rel=1e-9)   # the engine's steps are untouched
    assert len(delayed.requests) < len(plain.requests)  # the closed loop turns slower


def test_attention_dp_ranks_priced_apart_see_the_anchor_at_their_own_batch(scenario):
    dpa = attrs.evolve(scenario, parallel=attrs.evolve(scenario.parallel, dp_attention=8))
    store = AnchorStore([record(c, s, dpa=8) for c, s in MEASURED.items()])
    shared = CalibratedOracle(dpa, store)
    ranks = CalibratedOracle(dpa, store, Knobs(des_lockstep=1), rank_level=True)
    assert shared.calibration["mode"] == ranks.calibration["mode"] == "anchored"
    # concurrency 64 over 8 ranks: one scheduler holds 64, a rank holds 8
    assert decode(shared, 64) == pytest.approx(MEASURED[64], rel=1e-9)
    assert decode(ranks, 8) == pytest.approx(MEASURED[64], rel=1e-9)
    ctx0 = np.linspace(1100.0, 9000.0, 6)
    np.testing.assert_allclose(
        ranks.decode_steps(ctx0, 4, 1.0, 1),
        [ranks.step(StepBatch(decode_context=ctx0 + j)).seconds for j in range(4)], rtol=1e-12)


@pytest.mark.parametrize("group", [0, 4])
def test_ranks_in_lockstep_see_the_anchor_as_their_group_step(scenario, group):
    # An anchor of 8 ranks measured the step they took together; a lockstep group prices its
    # steps at the group's combined batch, so at the anchor's own load (64 clients: 8 a rank)
    # the group step of its ranks is the measured step.
    dpa = attrs.evolve(scenario, parallel=attrs.evolve(scenario.parallel, dp_attention=8))
    store = AnchorStore([record(c, s, dpa=8) for c, s in MEASURED.items()])
    oracle = CalibratedOracle(dpa, store, Knobs(des_lockstep=group), rank_level=True)
    size = group or 8
    assert oracle.group == size
    ranks = [StepBatch(decode_context=np.full(8, float(CTX))) for _ in range(size)]
    assert oracle.step_group(ranks).seconds == pytest.approx(MEASURED[64], rel=1e-9)
    assert sorted(oracle.calibration["decode_ratio"]) == sorted(c * size // 8 for c in MEASURED)


def test_ranks_in_lockstep_read_a_closed_loops_prompts_as_a_wave(scenario):
    # Fixed-length clients of ranks stepping together send their prompts at once, and every
    # group step runs the GEMMs over all the ranks' chunks: an anchor's TTFT is then its
    # frontend latency plus that wave. Anchors built so (TTFT = 0.3 s + the analytic wave)
    # must read 0.3 s of frontend latency at each load; read as lone prefills queued per
    # rank, the wave would stay in the latency and a replay would add it again.
    from inferasim.config.loader import rank_scenario

    dpa = attrs.evolve(scenario, parallel=attrs.evolve(scenario.parallel, dp_attention=8))
    budget = rank_scenario(dpa).engine.chunked_prefill_size
    assert 2 * ISL <= budget  # at c16 each rank's two prompts go in one step
    lockstep = AnalyticOracle(dpa, rank_level=True)

    def wave(clients: int) -> float:
        prompts = clients // 8 or 1
        rank = StepBatch(prefill_tokens=np.full(prompts, float(ISL)),
                         prefill_resident=np.zeros(prompts), prefill_samples=prompts)
        return lockstep.step_group([rank] * min(clients, 8)).seconds

    # the FFN and expert GEMMs run over all 16 prompts (each rank projects its own two)
    assert wave(16) > 3 * analytic_prefill_seconds(lockstep, ISL)
    latency = 0.3
    store = AnchorStore([record(c, MEASURED.get(c, 0.012), dpa=8, ttft=latency + wave(c))
                         for c in (4, 8, 16)])
    oracle = CalibratedOracle(dpa, store, Knobs(), rank_level=True)
    for c in (4, 8, 16):
        assert oracle.frontend_latency(c) == pytest.approx(latency, rel=1e-9)
    apart = CalibratedOracle(dpa, store, Knobs(des_lockstep=1), rank_level=True)
    assert apart.frontend_latency(16) > latency + 0.5 * wave(16)


def test_simulate_uses_the_shipped_anchors_and_keeps_injection(scenario):
    short = load_scenario(SCENARIO, ["workload.duration_s=30", "workload.concurrency=8",
                                     "workload.osl=512"])
    assert oracle_for(short).calibration["mode"] == "anchored"
    result = simulate(short)
    assert result.calibration["mode"] == "anchored"
    # every shipped row has ISL 1024: one prompt length identifies no slope, so the regime
    # carries the one the store's prompt sweeps identify, at 1024 as at 8192
    # (cost/prefill_prior.py)
    assert result.calibration["prefill"] == "carried"
    # the scenario's build (v0.5.12) shows its prefills in the decode stalls; the older
    # build's TTFTs show time outside the engine
    assert result.calibration["prefill_step_overhead_ms"] > 0
    older = load_scenario(SCENARIO, ["workload.duration_s=30", "workload.concurrency=8",
                                     "engine.version=v0.5.9-rocm700-mi35x"])
    assert oracle_for(older).calibration["frontend_latency_ms"] > 0
    far = load_scenario(SCENARIO, ["workload.isl=8192"])
    assert oracle_for(far).calibration["prefill"] == "carried"
    assert oracle_for(far, store=AnchorStore(
        r for r in default_store() if r.regime.engine == "sglang")).calibration[
            "prefill"] == "analytic"   # no regime of the store identifies a slope
    injected = simulate(short, oracle=AnalyticOracle(short))
    assert injected.calibration["mode"] == "analytic"


def test_trend_past_the_sweep_is_held_flat_between_anchors_of_different_context(scenario):
    """Two anchors at 1k/1k and 1k/8k differ in batch and in context: their ratio trend
    carries both, so past the sweep the end ratio is held, not extrapolated; anchors at one
    shape carry their trend."""
    from inferasim.cost.ratio_table import TREND_CONTEXT_SPAN

    def ratios(shapes):
        store = AnchorStore([record(c, s, isl=isl, osl=osl) for c, s, isl, osl in shapes])
        oracle = CalibratedOracle(scenario, store)
        return oracle, [oracle.decode_ratio(c) for c in (4, 8, 64)]

    same, (r4, r8, r64) = ratios([(4, 0.010, 1024, 8192), (8, 0.012, 1024, 8192)])
    assert r64 > r8 * 1.01                      # the rising trend is carried on
    mixed, (m4, m8, m64) = ratios([(4, 0.010, 1024, 8192), (8, 0.012, 1024, 1024)])
    assert m64 == pytest.approx(m8, rel=1e-12)  # held at the end ratio
    assert (1024 + 8192 / 2) / (1024 + 1024 / 2) > TREND_CONTEXT_SPAN
    assert "held flat" in mixed.calibration["note"]
    assert "held flat" not in same.calibration["note"]


def test_the_wait_for_the_schedulers_next_read_is_taken_out_of_the_latency(scenario):
    """An anchor served with SGLang's receive interval N waited, on average, for the step in
    flight and (N - 1) / 2 more decode steps before its prompt was read: that engine-side wait
    is in the TTFT row, not in the frontend latency carried to the target."""
    def with_interval(r: AnchorRecord, every: int | None) -> AnchorRecord:
        return attrs.evolve(r, regime=attrs.evolve(r.regime, scheduler_recv_interval=every))

    ttft = {4: 0.30, 16: 0.45, 64: 0.80}
    base = [record(c, s, ttft=ttft[c]) for c, s in MEASURED.items()]
    plain = CalibratedOracle(scenario, AnchorStore(base))
    polled = CalibratedOracle(scenario, AnchorStore([with_interval(r, 30) for r in base]))
    for r in base:
        row, row30 = plain._ttft_row(r), polled._ttft_row(with_interval(r, 30))
        half_step = row.wait  # half a decode step of the other clients: the step in flight
        assert half_step > 0
        assert row30.wait == pytest.approx(30 * half_step, rel=1e-9)
    for c in ttft:
        assert polled.frontend_latency(c) < plain.frontend_latency(c)
    assert any("receive interval 30" in n for n in polled.calibration["notes"])
    assert not any("receive interval" in n for n in plain.calibration["notes"])


def test_one_concurrency_holds_the_ratio_but_a_speculative_target_carries_the_mtp_trend(scenario):
    """Anchors at a single concurrency give no trend: a plain target holds their ratio at every
    batch, an MTP target carries SPEC_RATIO_BATCH_EXPONENT (every measured MTP sweep's ratio
    grows with the batch), bounded like any carried trend."""
    from inferasim.cost.decode_ratios import SPEC_RATIO_BATCH_EXPONENT
    from inferasim.cost.ratio_table import EXTRAPOLATION_LIMIT

    plain = CalibratedOracle(scenario, AnchorStore([record(16, 0.015)]))
    assert plain.decode_ratio(64) == pytest.approx(plain.decode_ratio(16), rel=1e-12)
    assert plain.decode_ratio(4) == pytest.approx(plain.decode_ratio(16), rel=1e-12)
    assert "held flat" in plain.calibration["note"]

    mtp_target = attrs.evolve(scenario, speculative=attrs.evolve(
        scenario.speculative, method="mtp", draft_tokens=3))
    mtp_anchor = record(16, 0.015)
    mtp_anchor = attrs.evolve(mtp_anchor, regime=attrs.evolve(
        mtp_anchor.regime, spec_method="mtp", draft_tokens=3))
    mtp = CalibratedOracle(mtp_target, AnchorStore([mtp_anchor]))
    assert mtp.calibration["mode"] == "anchored"
    r16 = mtp.decode_ratio(16)
    assert mtp.decode_ratio(32) == pytest.approx(r16 * 2 ** SPEC_RATIO_BATCH_EXPONENT, rel=1e-9)
    assert mtp.decode_ratio(8) == pytest.approx(r16 / 2 ** SPEC_RATIO_BATCH_EXPONENT, rel=1e-9)
    assert mtp.decode_ratio(4096) == pytest.approx(r16 * EXTRAPOLATION_LIMIT, rel=1e-9)
    assert "speculative sweeps' shared trend" in mtp.calibration["note"]


def _on_build(r: AnchorRecord, version: str) -> AnchorRecord:
    return attrs.evolve(r, id=f"{r.id}-{version}",
                        provenance=attrs.evolve(r.provenance, engine_version=version))


def test_pooled_trend_fits_the_slope_within_each_sweep():
    """Sweeps on different builds differ in level; the shared slope is fitted within each, so
    the levels do not tilt it, and a sweep at one batch carries no trend."""
    from inferasim.cost.ratio_table import pooled_trend

    xs = np.log(np.array([4.0, 16.0, 64.0]))
    low = [(x, 0.1 + 0.15 * x) for x in xs]
    high = [(x, 0.6 + 0.15 * x) for x in xs[:2]]
    slope, used = pooled_trend([low, high, [(xs[0], 0.3)]])
    assert used == 2
    assert slope == pytest.approx(0.15, rel=1e-12)
    # pooled over the levels instead, the same points would give another slope
    allx = np.array([x for x, _ in low + high])
    ally = np.array([y for _, y in low + high])
    assert np.polyfit(allx, ally, 1)[0] != pytest.approx(0.15, rel=0.05)
    assert pooled_trend([[(xs[0], 0.3)]]) == (0.0, 0)
    assert pooled_trend([]) == (0.0, 0)


def test_one_concurrency_carries_the_trend_of_the_regimes_other_builds(scenario):
    """The target's build measured one concurrency, an older build a sweep: the older sweep's
    level is set aside, but its ratio's slope in the batch is carried past the target's
    anchor, and the calibration note names where it came from."""
    from inferasim.cost.ratio_table import pooled_trend

    target = attrs.evolve(scenario, engine=attrs.evolve(scenario.engine, version="0.5.12"))
    own = _on_build(record(16, 0.015), "0.5.12")
    older = [_on_build(record(c, s), "0.5.9") for c, s in MEASURED.items()]
    oracle = CalibratedOracle(target, AnchorStore([own, *older]))
    assert oracle.calibration["anchors_used"] == [own.id]
    sweep = CalibratedOracle(attrs.evolve(target, engine=attrs.evolve(
        target.engine, version="0.5.9")), AnchorStore(older))
    slope, used = pooled_trend([[(math.log(c), math.log(sweep.decode_ratio(c)))
                                 for c in MEASURED]])
    assert used == 1 and slope != 0
    r16 = oracle.decode_ratio(16)
    for c in (4, 8, 32):
        want = r16 * (c / 16) ** slope
        if slope * (c - 16) < 0:   # plain decoding: a trend lowering the ratio is held
            want = r16
        assert oracle.decode_ratio(c) == pytest.approx(want, rel=1e-9)
    assert "other builds: 0.5.9" in oracle.calibration["note"]
    # without the other build the single concurrency is held flat; so it is beside anchors
    # that name no build (set aside, but one sweep of them could span builds)
    alone = CalibratedOracle(target, AnchorStore([own]))
    assert alone.decode_ratio(64) == pytest.approx(alone.decode_ratio(16), rel=1e-12)
    unnamed = CalibratedOracle(target, AnchorStore(
        [own, *(record(c, s) for c, s in MEASURED.items())]))
    assert len(unnamed.result.set_aside) == len(MEASURED)
    for c in (4, 64):
        assert unnamed.decode_ratio(c) == pytest.approx(unnamed.decode_ratio(16), rel=1e-12)
    # the target's own sweep needs no borrowed trend: the older build changes nothing
    own_sweep = [_on_build(record(c, s * 1.3), "0.5.12") for c, s in MEASURED.items()]
    mixed = CalibratedOracle(target, AnchorStore(own_sweep + older))
    plain = CalibratedOracle(target, AnchorStore(own_sweep))
    for c in (1, 8, 512):
        assert mixed.decode_ratio(c) == pytest.approx(plain.decode_ratio(c), rel=1e-12)


def test_a_verify_step_is_the_anchors_tpot_times_the_tokens_their_stream_shows(scenario):
    """An MTP anchor whose stream sends one chunk per verify step (mean ITL = 2.4 x mean TPOT)
    emitted 2.4 tokens a step: its verify step is 2.4 x TPOT whatever the target's acceptance
    (a target that accepts less emits fewer tokens from the same step)."""
    mtp_anchor = record(16, 0.010)
    mtp_anchor = attrs.evolve(
        mtp_anchor, regime=attrs.evolve(mtp_anchor.regime, spec_method="mtp", draft_tokens=3),
        measurements=attrs.evolve(mtp_anchor.measurements, itl_mean_s=0.024))
    spec = attrs.evolve(scenario.speculative, method="mtp", draft_tokens=3)
    steps = {}
    for tokens in (2.4, 1.0):
        target = attrs.evolve(scenario, speculative=spec.with_tokens_per_step(tokens))
        oracle = CalibratedOracle(target, AnchorStore([mtp_anchor]))
        steps[tokens] = oracle.step(StepBatch(decode_context=np.full(16, CTX),
                                              width=4)).seconds
        assert any("emitted 2.40 tokens" in n for n in oracle.calibration["notes"])
    assert steps[2.4] == pytest.approx(0.024, rel=1e-6)
    assert steps[1.0] == pytest.approx(steps[2.4], rel=1e-9)


def _assert_macro_steps_equal_exact_steps(path, common) -> None:
    """The scenario replayed step by step and in macro-steps: the same first tokens and
    finishes."""
    from inferasim.report.run_report import replay_summary
    from inferasim.serve.simulation import simulate

    exact, macro = [
        replay_summary(simulate(load_scenario(path, [*common, f"sim.exact_steps={e}"])))[0]
        for e in ("true", "false")]
    assert len(exact) == len(macro) > 8
    for col in ("first_token_s", "finish_s"):
        np.testing.assert_allclose(macro[col], exact[col], rtol=1e-9)


def test_macro_steps_equal_exact_steps_where_the_decode_ratio_follows_the_context():
    """The ISL grid measured each batch at several prompt lengths, so the decode ratio is read
    at each step's own context: a macro-step's steps must each take their own ratio, as step by
    step (one ratio for the whole run, read at its first step, drifted by 1e-5 of a finish)."""
    common = ["workload.isl=4096", "workload.concurrency=8", "workload.duration_s=60"]
    path = REPO_ROOT / "scenarios/isl-grid/glm5-h200-vllm-fp8-mtp-tp8.yaml"
    macro_sc = load_scenario(path, common)
    oracle = oracle_for(macro_sc)
    assert oracle.calibrated and oracle._trend_context(oracle.width, np.full(4, 5000.0))
    _assert_macro_steps_equal_exact_steps(path, common)


def test_macro_steps_equal_exact_steps_where_a_priors_split_follows_the_context(tmp_path):
    """A prior that prices the attention apart (``prior.fit_split``) reads its ratio at each
    step's context: MiniMax-M2.5 MXFP4 on one MI355X with its own AgentX ladder left out of the
    store, long prompts whose context grows through the decode. Macro-steps and the step-exact
    mode must give the same finishes."""
    from inferasim.anchors.loading import default_store
    from inferasim.anchors.store import write_anchor_file
    from inferasim.config.recipes import recipe_path

    held = tmp_path / "held.json"
    write_anchor_file(held, [r for r in default_store().records
                             if not (r.regime.model == "minimax-m2.5" and r.regime.tp == 1)])
    common = ["model.name=minimax-m2.5", "model.weight_dtype=mxfp4", "gpu.name=mi355x",
              "engine.name=vllm", "parallel.tp=1", f"sim.anchors={held}",
              "workload.format=random", "workload.isl=32768", "workload.osl=512",
              "workload.concurrency=4", "workload.duration_s=60"]
    path = recipe_path("vllm", "mi355x", "minimax-m2.5", "mxfp4")
    oracle = oracle_for(load_scenario(path, common))
    assert oracle.prior is not None and oracle.prior.split is not None
    _assert_macro_steps_equal_exact_steps(path, common)


def test_decode_ratios_of_a_run_of_contexts_equal_each_decode_ratio(tmp_path):
    # A macro-step reads its steps' ratios in one evaluation (decode_ratios): each must be the
    # ratio the step-exact mode reads at that context, for a ratio following the context by
    # the anchors' rows or slope (the GLM-5 grid), a prior's split, and a flat ratio.
    from inferasim.anchors.loading import default_store
    from inferasim.anchors.store import write_anchor_file
    from inferasim.config.recipes import recipe_path

    held = tmp_path / "held.json"
    write_anchor_file(held, [r for r in default_store().records
                             if not (r.regime.model == "minimax-m2.5" and r.regime.tp == 1)])
    oracles = {
        "grid": oracle_for(load_scenario(
            REPO_ROOT / "scenarios/isl-grid/glm5-h200-vllm-fp8-mtp-tp8.yaml",
            ["workload.isl=4096"])),
        "split": oracle_for(load_scenario(
            recipe_path("vllm", "mi355x", "minimax-m2.5", "mxfp4"),
            ["model.name=minimax-m2.5", "model.weight_dtype=mxfp4", "gpu.name=mi355x",
             "engine.name=vllm", "parallel.tp=1", f"sim.anchors={held}"])),
        "flat": oracle_for(load_scenario(
            REPO_ROOT / "scenarios/inferencemax/dsr1-mi355x-sglang-fp8-tp8.yaml")),
    }
    assert oracles["split"].prior is not None and oracles["split"].prior.split is not None
    assert oracles["grid"]._context_rows(oracles["grid"].width) is not None
    contexts = np.linspace(300.0, 90000.0, 57)
    for name, oracle in oracles.items():
        for n in (1, 7, 64):
            run = oracle.decode_ratios(n, oracle.width, contexts)
            one = [oracle.decode_ratio(n, oracle.width, float(c)) for c in contexts]
            np.testing.assert_allclose(run, one, rtol=1e-12, err_msg=f"{name} n={n}")


@pytest.mark.parametrize("one_sided", [False, True])
@pytest.mark.parametrize("prior_slope", [0.0, 0.3])
def test_ratio_at_each_equals_ratio_at_row_by_row(one_sided, prior_slope):
    # Inside the sweep, past either end (trend carried, bounded, or held where the end
    # anchors' contexts differ too much), and a one-concurrency table.
    from inferasim.cost.ratio_table import ratio_at, ratio_at_each

    rng = np.random.default_rng(3)
    xs = np.log(np.array([4.0, 16.0, 64.0, 256.0]))
    log_ratios = rng.normal(0.0, 0.4, size=(9, xs.size))
    for log_ctx in (None, np.log([1000.0, 1100.0, 1200.0, 9000.0])):
        for x in (math.log(1.0), xs[0], math.log(9.0), xs[2], xs[-1], math.log(2048.0)):
            run = ratio_at_each(x, xs, log_ratios, log_ctx, prior_slope, one_sided)
            one = [ratio_at(x, xs, np.exp(row), log_ctx, prior_slope, one_sided)
                   for row in log_ratios]
            np.testing.assert_allclose(run, one, rtol=1e-12)
    single = log_ratios[:, :1]
    run = ratio_at_each(math.log(50.0), xs[:1], single, None, prior_slope, one_sided)
    np.testing.assert_allclose(run, [ratio_at(math.log(50.0), xs[:1], np.exp(r), None,
                                              prior_slope, one_sided) for r in single],
                               rtol=1e-12)


def test_decode_ratios_read_an_empty_context_at_the_anchors_own():
    oracle = oracle_for(load_scenario(
        REPO_ROOT / "scenarios/isl-grid/glm5-h200-vllm-fp8-mtp-tp8.yaml", ["workload.isl=4096"]))
    run = oracle.decode_ratios(8, oracle.width, np.array([0.0, 5000.0, -1.0]))
    assert run[0] == run[2] == oracle.decode_ratio(8, oracle.width)
    assert run[1] == pytest.approx(oracle.decode_ratio(8, oracle.width, 5000.0), rel=1e-12)
