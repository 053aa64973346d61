"""The InferenceMAX scenarios load, extend their base, and each finds its own anchors."""

from __future__ import annotations

from pathlib import Path

import pytest

from inferasim.anchors import AnchorStore
from inferasim.config.loader import load_scenario

REPO = Path(__file__).resolve().parents[1]
FOLDER = REPO / "scenarios" / "inferencemax"
SCENARIOS = sorted(p for p in FOLDER.glob("*.yaml") if not p.name.startswith("_"))


@pytest.fixture(scope="module")
def store() -> AnchorStore:
    return AnchorStore.load(REPO / "anchors")


def test_one_scenario_per_family():
    assert len(SCENARIOS) >= 20
    assert all(p.name.startswith("dsr1-") for p in SCENARIOS)
    # TensorRT-LLM runs as an engine of its own; Dynamo's disaggregated families do not yet
    assert not any("dynamo" in p.name for p in SCENARIOS)
    assert any("-trt-" in p.name for p in SCENARIOS)


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_scenario_loads_and_is_calibrated_by_its_family(path, store):
    scenario = load_scenario(path)
    assert scenario.model.name == "deepseek-r1"
    assert scenario.workload.format == "random" and scenario.workload.isl == 1024  # from _base
    assert scenario.model.weight_dtype in ("fp8", "mxfp4", "nvfp4")
    assert ("mtp" in path.stem) == (scenario.speculative.method == "mtp")
    result = store.for_target(scenario)
    assert result.usable, f"{path.name}: {result.notes}"
    for record in result.usable:
        reg = record.regime
        assert (reg.engine, reg.gpu, reg.tp, reg.ep) == (
            scenario.engine.name, scenario.gpu.name, scenario.parallel.tp, scenario.parallel.ep)


def test_ladder_by_override():
    path = FOLDER / "dsr1-mi300x-sglang-fp8-tp8.yaml"
    scenario = load_scenario(path, ["workload.concurrency=16", "workload.osl=1024"])
    assert (scenario.workload.concurrency, scenario.workload.osl) == (16, 1024)
