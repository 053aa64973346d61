"""A speculative scenario that states no acceptance reads it from the anchors, nearest level
first (anchors/acceptance.py), and every path that prices it reads the same figure."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from inferasim.anchors.acceptance import (
    OUTPUT_LENGTH_EXPONENT,
    PUBLISHED_FIRST_DRAFT,
    carry_tokens_per_step,
    per_position,
    read_acceptance,
    resolved,
    with_acceptance,
)
from inferasim.anchors.record import AnchorRecord
from inferasim.anchors.store import AnchorStore
from inferasim.config.errors import ConfigError
from inferasim.config.loader import load_scenario
from inferasim.config.scenario import SpeculativeSpec
from inferasim.cost.calibrated import CalibratedOracle
from inferasim.report.run_report import replay_summary
from inferasim.serve.simulation import simulate
from inferasim.sweep.projection import project

MTP = ["model.name=deepseek-r1", "model.weight_dtype=fp8", "gpu.name=mi355x", "parallel.tp=8",
       "engine.name=sglang",
       "workload.format=random", "workload.isl=1024", "workload.osl=256",
       "workload.concurrency=8", "workload.duration_s=60", "speculative.method=mtp",
       "speculative.draft_tokens=3", "sim.anchors=none"]


def _record(rid: str, tokens: float, *, model: str = "deepseek-r1", engine: str = "sglang",
            gpu: str = "mi355x", draft: int | None = None, osl: int = 256) -> AnchorRecord:
    """A speculative record whose stream sends one chunk per verify step of ``tokens`` (at
    the MTP scenario's output length unless ``osl`` says otherwise)."""
    return AnchorRecord.from_dict({
        "id": rid, "provenance": {"source": "test"},
        "regime": {"model": model, "engine": engine, "gpu": gpu, "spec_method": "mtp",
                   "weight_dtype": "fp8", **({"draft_tokens": draft} if draft else {})},
        "workload": {"isl": 1024, "osl": osl, "concurrency": 16},
        "measurements": {"tpot_mean_s": 0.010, "itl_mean_s": 0.010 * tokens}})


@given(st.integers(1, 6), st.floats(0.0, 0.99))
def test_per_position_inverts_tokens_per_step(depth, rate):
    tokens = SpeculativeSpec(method="mtp", draft_tokens=depth, acceptance=rate).tokens_per_step
    assert per_position(tokens, depth) == pytest.approx(rate, abs=1e-6)


def test_the_scenario_own_figure_stands():
    sc = load_scenario(None, [*MTP, "speculative.acceptance=0.4"])
    out, reading = with_acceptance(sc, [_record("a", 2.5)])
    assert out is sc and reading.level == "scenario" and reading.acceptance == 0.4


def test_nearest_level_first():
    sc = load_scenario(None, MTP)
    regime = _record("own", 2.0)
    other_part = _record("part", 2.5, gpu="b200", engine="trt")
    other_model = _record("model", 3.0, model="glm-5")
    cases = [([regime, other_part, other_model], "regime", 2.0),
             ([other_part, other_model], "model and method", 2.5),
             ([other_model], "method", 3.0)]
    for records, level, tokens in cases:
        out, reading = with_acceptance(sc, records)
        assert reading.level == level
        assert out.speculative.tokens_per_step == pytest.approx(tokens, rel=1e-4)
        assert reading.anchors == 1
    # nothing measured: the method's published figure
    out, reading = with_acceptance(sc, [])
    assert reading.level == "published"
    # only the published first draft is credited, at any depth
    for depth in (1, 3):
        deep = load_scenario(None, [*MTP, f"speculative.draft_tokens={depth}"])
        spec = with_acceptance(deep, [])[0].speculative
        assert spec.tokens_per_step == pytest.approx(1 + PUBLISHED_FIRST_DRAFT["mtp"], abs=1e-5)


def test_a_measured_depth_is_carried_per_position():
    sc = load_scenario(None, [*MTP, "speculative.draft_tokens=1"])
    # three drafts emitting 1 + 0.5 + 0.25 + 0.125 tokens read 0.5 a position
    out, _ = with_acceptance(sc, [_record("a", 1.875, draft=3)])
    assert out.speculative.acceptance == pytest.approx(0.5, abs=1e-5)
    assert out.speculative.tokens_per_step == pytest.approx(1.5, abs=1e-5)


def test_a_resolved_scenario_keeps_its_reading():
    sc = load_scenario(None, MTP)
    once, first = with_acceptance(sc, [_record("own", 2.0)])
    again, second = with_acceptance(once, [])
    assert again is once and second is first and second.level == "regime"


def test_a_method_without_measurement_or_publication_names_its_key():
    sc = load_scenario(None, [*MTP, "speculative.method=eagle3"])
    with pytest.raises(ConfigError, match="speculative.acceptance") as err:
        read_acceptance(sc, [_record("a", 2.0)])  # an MTP anchor is no EAGLE-3 one
    assert "eagle3" in str(err.value)


def test_unresolved_acceptance_is_refused_where_it_would_price():
    with pytest.raises(ValueError, match="not resolved"):
        _ = SpeculativeSpec(method="mtp", draft_tokens=3).tokens_per_step


def test_the_replay_the_projection_and_the_oracle_read_one_figure():
    sc = load_scenario(None, MTP)
    store = AnchorStore([_record("own", 2.0), _record("far", 3.0, model="glm-5")])
    oracle = CalibratedOracle(sc, store)
    assert oracle.scenario.speculative.tokens_per_step == pytest.approx(2.0, rel=1e-4)
    assert oracle.calibration["speculative_acceptance"]["level"] == "regime"
    assert any("speculative acceptance" in n for n in oracle.calibration["notes"])
    result = simulate(sc, store=store)
    assert result.scenario.speculative.tokens_per_step == pytest.approx(2.0, rel=1e-4)
    # without anchors (sim.anchors none) both the replay and the projection publish
    alone = simulate(sc)
    published = 1 + PUBLISHED_FIRST_DRAFT["mtp"]
    assert alone.scenario.speculative.tokens_per_step == pytest.approx(published, abs=1e-5)
    assert resolved(sc).speculative.tokens_per_step == pytest.approx(published, abs=1e-5)
    assert project(sc)["output_tok_s"] > 0


def test_more_accepted_drafts_decode_faster():
    """The figure is used: read from another part's anchors (which cannot price this one's
    step), 2.5 tokens a verify step replay more output than 1.5. (Anchors of the target's own
    regime price its step from their TPOT, which carries whatever they accepted.)"""
    sc = load_scenario(None, MTP)
    far = {"gpu": "b200", "engine": "trt"}
    slow = simulate(sc, store=AnchorStore([_record("b200", 1.5, **far)]))
    fast = simulate(sc, store=AnchorStore([_record("b200", 2.5, **far)]))
    assert slow.calibration["mode"] == "analytic"
    assert fast.calibration["speculative_acceptance"]["level"] == "model and method"
    tokens = [replay_summary(res)[1]["output_tok_s"] for res in (slow, fast)]
    assert tokens[1] > 1.3 * tokens[0]


def test_describe_says_where_the_acceptance_comes_from():
    from click.testing import CliRunner

    from inferasim.cli.main import cli

    scenario = "scenarios/inferencemax/dsr1-b200-trt-fp8-mtp-tp8.yaml"
    out = CliRunner().invoke(cli, ["describe", "--json", scenario])
    assert out.exit_code == 0, out.output
    read = json.loads(out.output)["speculative_acceptance"]
    # the shipped DeepSeek-R1 MTP streams were measured on MI355X and H100, not on B200
    assert read["level"] == "model and method" and read["anchors"] > 0
    assert 1.0 < read["tokens_per_step"] < 4.0


def test_a_run_of_an_unmeasured_method_is_refused_naming_the_key():
    from click.testing import CliRunner

    from inferasim.cli.main import cli

    out = CliRunner().invoke(cli, ["run", *(f"--set={s}" for s in MTP),
                                   "--set", "speculative.method=eagle3"])
    assert out.exit_code == 2
    assert "speculative.acceptance" in out.output and "Traceback" not in out.output


def test_tokens_a_step_emits_grow_with_the_output_length_within_the_width():
    assert carry_tokens_per_step(2.4, 1024, 8192, 4) == pytest.approx(
        2.4 * 8 ** OUTPUT_LENGTH_EXPONENT)
    assert 2.85 < carry_tokens_per_step(2.4, 1024, 8192, 4) < 2.95   # about 1.2x over 8x
    assert carry_tokens_per_step(2.4, 8192, 1024, 4) < 2.4
    assert carry_tokens_per_step(3.9, 1024, 65536, 4) == 4.0
    assert carry_tokens_per_step(1.02, 8192, 16, 4) == 1.0
    assert carry_tokens_per_step(2.4, None, 8192, 4) == 2.4
    assert carry_tokens_per_step(2.4, 1024, None, 4) == 2.4


def test_an_anchor_of_another_output_length_is_carried_to_the_scenarios():
    sc = load_scenario(None, [*MTP, "workload.osl=8192"])
    reading = read_acceptance(sc, [_record("long", 2.4, osl=1024)])
    assert reading.tokens_per_step == pytest.approx(carry_tokens_per_step(2.4, 1024, 8192, 4),
                                                    rel=1e-4)
    # a trace's text is not random: no carry
    plain = [o for o in MTP if not o.startswith(("workload.isl", "workload.osl", "workload.format"))]
    trace = load_scenario(None, [*plain, "workload.format=synthetic"])
    assert read_acceptance(trace, [_record("long", 2.4, osl=1024)]).tokens_per_step == \
        pytest.approx(2.4, rel=1e-4)


def test_a_stated_acceptance_read_at_one_length_is_carried_to_another():
    stated = [*MTP, "speculative.acceptance=0.6", "speculative.acceptance_osl=1024"]
    at_1k = load_scenario(None, [*stated, "workload.osl=1024"])
    at_8k = load_scenario(None, [*stated, "workload.osl=8192"])
    assert with_acceptance(at_1k, [])[0] is at_1k
    out, reading = with_acceptance(at_8k, [])
    tokens = carry_tokens_per_step(at_1k.speculative.tokens_per_step, 1024, 8192, 4)
    assert out.speculative.tokens_per_step == pytest.approx(tokens, rel=1e-4)
    assert out.speculative.acceptance_osl == 8192
    assert with_acceptance(out, [])[0].speculative == out.speculative   # resolved once


def test_the_calibration_reads_each_anchor_at_its_own_lengths_tokens_a_step():
    """Two anchors of one regime at 1k/1k and 1k/8k whose steps take the same time, their
    TPOT apart by the tokens a step emits at each length, read as the same step."""
    sc = load_scenario(None, [*MTP, "workload.osl=1024", "speculative.acceptance=0.6",
                              "speculative.acceptance_osl=1024"])
    step = 0.024
    at = {osl: carry_tokens_per_step(sc.speculative.tokens_per_step, 1024, osl, 4)
          for osl in (1024, 8192)}

    def row(osl: int) -> AnchorRecord:
        return AnchorRecord.from_dict({
            "id": f"t-{osl}", "provenance": {"source": "test"},
            "regime": {"model": "deepseek-r1", "engine": "sglang", "gpu": "mi355x",
                       "spec_method": "mtp", "weight_dtype": "fp8", "tp": 8},
            "workload": {"isl": 1024, "osl": osl, "concurrency": 4},
            "measurements": {"tpot_mean_s": step / at[osl]}})
    oracle = CalibratedOracle(sc, AnchorStore([row(1024), row(8192)]))
    steps = sorted(p.measured_s for p in oracle.points)
    assert steps == pytest.approx([step, step], rel=1e-6)
