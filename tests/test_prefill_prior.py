"""The prefill slope carried to a regime measured at one prompt length (cost/prefill_prior.py):
its levels and exclusions, its report, and the hold-out it answers (8k prompts from 1k)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from inferasim.anchors.loading import default_store
from inferasim.anchors.record import Regime
from inferasim.anchors.regime import Target
from inferasim.anchors.store import AnchorStore
from inferasim.cli.main import cli
from inferasim.config.catalog import REPO_ROOT
from inferasim.config.knobs import Knobs
from inferasim.config.loader import load_scenario
from inferasim.cost.calibrated import CalibratedOracle
from inferasim.cost.prefill_prior import (
    CarriedSlope,
    SlopeReading,
    carried_slope,
    store_slopes,
)
from inferasim.cost.ttft_model import PREFILL_SLOPE_LIMITS
from tests.conftest import shared_data

SCENARIO = REPO_ROOT / "scenarios" / "inferencemax" / "dsr1-h200-sglang-fp8-tp8.yaml"


def reading(model: str, engine: str, gpu: str, slope: float, ids: tuple[str, ...]):
    regime = Regime(model=model, engine=engine, gpu=gpu, tp=8, ep=1, dp_attention=1)
    return SlopeReading(f"{model} {engine} {gpu}", model, engine, gpu, slope, "prompt lengths",
                        frozenset(ids), regime)


TARGET = Target(model="deepseek-r1", engine="sglang", gpu="h200", tp=8, ep=1, dp_attention=1)
READINGS = (
    reading("glm-5", "vllm", "h200", 0.8, ("a",)),
    reading("minimax-m2.5", "vllm", "h200", 2.4, ("b",)),
    reading("minimax-m2.5", "vllm", "mi355x", 1.4, ("c",)),
    reading("kimi-k2.5", "sglang", "h200", 1.2, ("d",)),
)
EVERY = frozenset("abcd")


def test_a_level_of_one_reading_gives_way_to_the_next():
    # one SGLang H200 reading: not a level of its own; the same engine holds only it too
    carried = carried_slope(READINGS, TARGET, EVERY)
    assert carried.level == "every engine"
    assert carried.slope == pytest.approx(np.median([0.8, 2.4, 1.4, 1.2]))
    two = READINGS + (reading("qwen3.5", "sglang", "h200", 1.6, ("e",)),)
    carried = carried_slope(two, TARGET, EVERY | {"e"})
    assert carried.level == "the same part and engine"
    assert carried.slope == pytest.approx(1.4)


def test_a_reading_whose_anchors_the_store_lacks_is_no_reading():
    carried = carried_slope(READINGS, TARGET, frozenset("ab"))
    assert {r.model for r in carried.readings} == {"glm-5", "minimax-m2.5"}
    assert carried.slope == pytest.approx(1.6)
    assert carried_slope(READINGS, TARGET, frozenset()) is None


def test_the_targets_own_regime_never_carries_to_it():
    own = Target(model="glm-5", engine="vllm", gpu="h200", tp=8, ep=1, dp_attention=1)
    carried = carried_slope(READINGS, own, EVERY)
    assert "glm-5 vllm h200" not in {r.label for r in carried.readings}
    assert carried.level == "the same engine"   # the two MiniMax readings under vLLM
    assert carried.slope == pytest.approx(1.9)


def test_the_note_names_the_level_and_each_reading():
    note = CarriedSlope(1.4, "every engine", READINGS[:2]).note()
    assert "x1.4" in note and "every engine" in note
    assert "glm-5 vllm h200 x0.80" in note and "too few prompt lengths" in note


@pytest.fixture(scope="module")
def store():
    found = default_store()
    if found is None or not len(found):
        pytest.skip("no shipped anchors")
    return found


def test_the_shipped_store_reads_slopes_only_from_regimes_that_identify_one(store):
    readings = store_slopes(store, Knobs())
    assert readings, "the grids and the AgentX ladders identify slopes"
    lo, hi = PREFILL_SLOPE_LIMITS
    for r in readings:
        assert lo < r.slope < hi, r   # a fit held at its bound is no reading
        assert r.how in ("prompt lengths", "mixed steps")
    # Qwen3.5's grid fit stops at the bound (its 1k prompts take 4.5 s at four clients)
    assert not any(r.model.startswith("qwen") for r in readings)
    assert store_slopes(store, Knobs()) is readings   # read once per store


def test_a_regime_of_one_prompt_length_prices_its_prefill_at_the_carried_slope(store):
    target = load_scenario(SCENARIO, ["workload.isl=8192", "workload.concurrency=4"])
    oracle = CalibratedOracle(target, store)
    cal = oracle.calibration
    assert cal["mode"] == "anchored" and cal["prefill"] == "carried"
    carried = cal["prefill_slope_carried"]
    assert carried["level"] == "every engine"   # no SGLang regime identifies one
    assert oracle.prefill_slope == pytest.approx(np.median(list(carried["regimes"].values())),
                                                rel=1e-3)
    assert any("carried from the regimes of every engine" in n for n in cal["notes"])
    # its prefill steps are priced at that slope of the analytic step
    from inferasim.cost.oracle import StepBatch

    batch = StepBatch(prefill_tokens=np.array([8192.0]), prefill_resident=np.zeros(1),
                      prefill_samples=1)
    assert oracle.step(batch).seconds == pytest.approx(
        oracle.prefill_slope * oracle.analytic.step(batch).seconds
        + oracle.prefill_step_overhead_s)
    # its own regime alone: nothing to carry from, the prefill stays the analytic model's
    own = AnchorStore(r for r in store if r.id in set(cal["anchors_used"]))
    alone = CalibratedOracle(target, own)
    assert alone.calibration["prefill"] == "analytic" and alone.prefill_slope == 1.0
    # and off, as for the oracles that read the slopes
    off = CalibratedOracle(target, store, carry_prefill=False)
    assert off.carried_slope is None and off.prefill_slope == 1.0


def test_a_regime_that_identifies_its_slope_keeps_its_own(store):
    grid = REPO_ROOT / "scenarios" / "isl-grid" / "glm5-h200-vllm-fp8-mtp-tp8.yaml"
    target = load_scenario(grid, [])
    oracle = CalibratedOracle(target, store)
    assert oracle.identified_slope == "prompt lengths" and oracle.carried_slope is None
    assert oracle.calibration["prefill"] == "calibrated"


def test_eight_k_prompts_projected_from_one_k_lean_far_less_than_the_analytic_prefill():
    """The InferenceMAX case on the grids: 8k prompts from 1k ones (the analytic prefill read
    +56% throughput, -26% TPOT and -30% TTFT there; docs/anchors.md)."""
    shared_data("isl-concurrency-grid")
    result = CliRunner().invoke(cli, ["anchors", "validate", "--hold-out", "isl",
                                      "--isl-split", "1024:8192:8192", "--json"])
    assert result.exit_code == 0, result.output
    overall = json.loads(result.stdout)["overall"]
    assert overall["tput_per_gpu"]["n"] >= 12
    assert overall["tput_per_gpu"]["median_abs"] < 0.25
    assert abs(overall["tput_per_gpu"]["median_signed"]) < 0.25
    assert abs(overall["ttft"]["median_signed"]) < 0.25


@pytest.mark.parametrize("text", ["8192", "a:b", "8192:1024", "1024:8192:4096"])
def test_a_bad_isl_split_is_a_clear_error(text):
    result = CliRunner().invoke(cli, ["anchors", "validate", "--hold-out", "isl",
                                      "--isl-split", text])
    assert result.exit_code == 2, result.output
    assert "--isl-split" in result.output and "Traceback" not in result.output


def test_an_isl_split_needs_the_isl_hold_out():
    result = CliRunner().invoke(cli, ["anchors", "validate", "--isl-split", "1024:8192"])
    assert result.exit_code == 2 and "--hold-out isl" in result.output

