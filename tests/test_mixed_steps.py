"""Agentic steps read as decodes and uncached prompt tokens together (cost/mixed_steps.py)."""

from __future__ import annotations

import pytest

from inferasim.anchors.importers.agentx_ladder import import_agentx_ladder
from inferasim.anchors.record import AnchorRecord, Measurements, Provenance, Regime, Workload
from inferasim.anchors.store import AnchorStore
from inferasim.config.loader import load_scenario
from inferasim.cost.calibrated import CalibratedOracle
from inferasim.cost.mixed_steps import StepParts, fit_shares, step_parts
from inferasim.cost.oracle import AnalyticOracle
from inferasim.validate.agentx import read_ladders, rung_scenario
from tests.conftest import shared_data


def _parts(decode_ratio: float, slope: float) -> list[StepParts]:
    shapes = [(8.0, 0.5), (12.0, 2.0), (20.0, 3.0), (35.0, 80.0), (38.0, 95.0)]
    return [StepParts(f"s{i}", decode_ratio * d + slope * p, d, p)
            for i, (d, p) in enumerate(shapes)]


def test_the_two_factors_are_recovered_from_steps_of_both_kinds():
    fit = fit_shares(_parts(1.3, 1.6))
    assert fit is not None and fit.steps == 5
    assert fit.decode_ratio == pytest.approx(1.3) and fit.prompt_slope == pytest.approx(1.6)


def test_steps_of_one_kind_cannot_tell_the_factors_apart():
    parts = _parts(1.3, 1.6)
    assert fit_shares([p for p in parts if not p.prompt_led]) is None
    assert fit_shares([p for p in parts if p.prompt_led]) is None
    # a slope outside the limits is no reading
    assert fit_shares(_parts(1.0, 20.0)) is None


def _agentic(prefill_per_step: float, hit: float) -> AnchorRecord:
    return AnchorRecord(
        id="synthetic", provenance=Provenance(source="test"),
        regime=Regime(model="minimax-m2.5", engine="vllm", gpu="mi355x", tp=2),
        workload=Workload(isl=80_000, osl=700, concurrency=8, decode_batch=4.0,
                          prefill_per_step=prefill_per_step, prefix_hit_rate=hit),
        measurements=Measurements(itl_mean_s=0.024))


def test_a_tail_is_priced_as_the_one_chunk_it_is_not_spread_over_every_step():
    sc = load_scenario(None, ["model.name=minimax-m2.5", "gpu.name=mi355x", "parallel.tp=2",
                              "engine.name=vllm"])
    oracle = AnalyticOracle(sc)
    # 24 tokens a step on average, of a 4,000-token tail (hit rate 0.95 of 80k): one step in
    # about 167 carries the tail, priced at its own chunk
    few = step_parts(_agentic(24.0, 0.95), oracle)
    twice = step_parts(_agentic(48.0, 0.95), oracle)
    assert twice.prompt_s == pytest.approx(2 * few.prompt_s)
    whole_tail = step_parts(_agentic(4000.0, 0.95), oracle)
    assert few.prompt_s == pytest.approx(whole_tail.prompt_s * 24 / 4000)
    # a MoE's experts are read once for the tail's chunk, not once a step for a few tokens:
    # spread over every step the same tokens would cost several times more
    assert few.prompt_s < 0.5 * few.decodes_s
    # past the cliff (hit rate ~0) the prompt is recomputed in chunks of the engine's size
    past = step_parts(_agentic(2600.0, 0.0), oracle)
    assert past.prompt_led


def test_the_two_minimax_ladders_fit_factors_that_transport():
    ladders = shared_data("agentx-measured", "agentx_dev_ladders.csv")
    records = import_agentx_ladder(ladders)
    rungs = read_ladders(ladders)
    fits = {}
    for dtype, label in (("fp8", "fp8 2x"), ("mxfp4", "fp4 1x")):
        mine = [r for r in records if r.regime.weight_dtype == dtype
                and r.regime.engine == "vllm"]
        rung = next(r for r in rungs if label in r.ladder and r.concurrency == 8)
        fits[dtype] = CalibratedOracle(rung_scenario(rung), AnchorStore(mine))._share_fit
    # TP2 FP8 and TP1 MXFP4: another layout and other weights, one part and engine; the
    # slopes read 1.56 and 0.88 when the tails were left out of the decode steps
    a, b = fits["fp8"], fits["mxfp4"]
    assert a is not None and b is not None
    assert a.prompt_slope == pytest.approx(b.prompt_slope, rel=0.15)
    assert a.decode_ratio == pytest.approx(b.decode_ratio, rel=0.15)


def test_without_saturated_steps_a_tail_comes_off_its_decode_reading_at_the_analytic_price():
    import attrs

    ladders = shared_data("agentx-measured", "agentx_dev_ladders.csv")
    below = [r for r in import_agentx_ladder(ladders, below_cliff=True)
             if r.regime.weight_dtype == "fp8" and r.regime.engine == "vllm"]
    bare = [attrs.evolve(r, workload=attrs.evolve(r.workload, prefill_per_step=None,
                                                  prefix_hit_rate=None)) for r in below]
    rung = next(r for r in read_ladders(ladders) if "fp8" in r.ladder and r.concurrency == 8)
    with_tails = CalibratedOracle(rung_scenario(rung), AnchorStore(below))
    without = CalibratedOracle(rung_scenario(rung), AnchorStore(bare))
    # no step led by its prompt tokens: nothing to fit the two factors on
    assert with_tails._share_fit is None and with_tails.calibration["prefill"] == "analytic"
    read = {p.id: p.measured_s for p in with_tails.points}
    raw = {p.id: p.measured_s for p in without.points}
    assert read.keys() == raw.keys() and len(read) == 5
    for pid, parts in with_tails._step_parts.items():
        assert read[pid] == pytest.approx(raw[pid] - parts.prompt_s)
        assert 0 < parts.prompt_s < raw[pid]


def test_the_report_says_where_the_prefill_price_came_from_not_that_it_fell_back():
    ladders = shared_data("agentx-measured", "agentx_dev_ladders.csv")
    records = import_agentx_ladder(ladders)
    rung = next(r for r in read_ladders(ladders) if "fp8" in r.ladder and r.concurrency == 8)
    own = CalibratedOracle(rung_scenario(rung), AnchorStore(
        [r for r in records if r.regime.weight_dtype == "fp8"]))
    other = CalibratedOracle(rung_scenario(rung), AnchorStore(
        [r for r in records if r.regime.weight_dtype == "mxfp4" and r.regime.engine == "vllm"]))
    for oracle, how in ((own, "from the agentic mixed steps"), (other, "at the prior's slope")):
        notes = oracle.calibration["notes"]
        assert oracle.calibration["prefill"] == "calibrated"
        assert not any("falls back to the analytic model" in n for n in notes), notes
        assert any(f"the prefill is priced {how}" in n for n in notes), notes
    assert other.calibration["mode"] == "prior"
