"""The InferenceMAX scenarios load, extend their base, and each finds its own anchors."""

from __future__ import annotations

from pathlib import Path

import pytest

from inferasim.anchors import AnchorStore
from inferasim.anchors.regime import Target
from inferasim.config.loader import load_scenario, pool_scenario

REPO = Path(__file__).resolve().parents[1]
FOLDER = REPO / "scenarios" / "inferencemax"
SCENARIOS = sorted(p for p in FOLDER.glob("*.yaml") if not p.name.startswith("_"))
TABLE = REPO.parent / "shared" / "data" / "inferencemax" / "benchmarks_flat.csv"


@pytest.fixture(scope="module")
def store() -> AnchorStore:
    return AnchorStore.load(REPO / "anchors")


def test_one_scenario_per_family():
    assert len(SCENARIOS) >= 59
    assert all(p.name.startswith("dsr1-") for p in SCENARIOS)
    assert any("-trt-" in p.name for p in SCENARIOS)
    assert any("dynamo-trt" in p.name for p in SCENARIOS)


@pytest.mark.skipif(not TABLE.is_file(), reason=f"{TABLE} not present (../shared/data)")
def test_every_family_of_the_table_has_its_scenario():
    from inferasim.anchors.families import families, scenario_for
    from inferasim.anchors.importers.inferencemax import import_inferencemax
    from inferasim.anchors.regime import Target

    found = families(import_inferencemax(TABLE, include_disaggregated=True))
    assert len(found) >= 59
    assert any(f.disaggregated for f in found) and any(not f.disaggregated for f in found)
    targets = {p.name: Target.from_scenario(load_scenario(p, [], check_fit=False))
               for p in SCENARIOS}
    missing = [f.label for f in found if scenario_for(f, targets) is None]
    assert not missing


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_scenario_loads_and_is_calibrated_by_its_family(path, store):
    scenario = load_scenario(path)
    assert scenario.model.name == "deepseek-r1"
    assert scenario.workload.format == "random" and scenario.workload.isl == 1024  # from _base
    assert scenario.model.weight_dtype in ("fp8", "mxfp4", "nvfp4")
    assert ("mtp" in path.stem) == (scenario.speculative.method == "mtp")
    result = store.for_target(scenario, prior=False)
    assert result.usable, f"{path.name}: {result.notes}"
    framework = Target.from_scenario(scenario).engine
    for record in result.usable:
        reg = record.regime
        assert (reg.engine, reg.gpu, reg.tp, reg.ep) == (
            framework, scenario.gpu.name, scenario.parallel.tp, scenario.parallel.ep)
        assert reg.disaggregated == (scenario.topology.kind == "disaggregated")
    if scenario.topology.kind == "disaggregated":
        # each pool finds the anchors that measured a pool of its layout
        prefill = store.for_target(pool_scenario(scenario, "prefill"), prior=False)
        par = pool_scenario(scenario, "prefill").parallel
        assert prefill.usable
        assert all((r.regime.prefill_tp, r.regime.prefill_ep) == (par.tp, par.ep)
                   for r in prefill.usable)


def test_ladder_by_override():
    path = FOLDER / "dsr1-mi300x-sglang-fp8-tp8.yaml"
    scenario = load_scenario(path, ["workload.concurrency=16", "workload.osl=1024"])
    assert (scenario.workload.concurrency, scenario.workload.osl) == (16, 1024)
