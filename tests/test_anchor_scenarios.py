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
    assert scenario.workload.format == "random"
    assert scenario.model.weight_dtype in ("fp8", "mxfp4", "nvfp4")
    assert ("mtp" in path.stem) == (scenario.speculative.method == "mtp")
    result = store.for_target(scenario, prior=False)
    if scenario.workload.isl == 8192:
        # a server InferenceX runs only at 8k/1k, whose rows the data keep aside: no anchor of
        # its own, priced from its part and engine's other layouts
        assert not result.usable
        assert store.for_target(scenario).prior_level == "part and engine"
        return
    assert scenario.workload.isl == 1024  # from _base
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


@pytest.mark.skipif(not TABLE.is_file(), reason=f"{TABLE} not present (../shared/data)")
def test_families_cli_lists_every_family_and_writes_the_missing(tmp_path):
    from click.testing import CliRunner

    from inferasim.cli.main import cli

    shipped = CliRunner().invoke(cli, ["anchors", "families"])
    assert shipped.exit_code == 0, shipped.output
    assert "0 missing" in shipped.output and "MISSING" not in shipped.output
    # what cannot be priced is said, with the reason (part 6): rows without pools, weights
    # that do not fit at the memory rule of the scenario they replay from (the family's: wide
    # EP past the experts with its redundant slots, a DEP16 pool at its recipe's fraction)
    assert "not priced as measured" in shipped.output
    assert "num_workers 0" in shipped.output and "weights need" in shipped.output
    assert "ep=48 must divide" not in shipped.output and "h100" not in shipped.output.split(
        "not priced as measured")[1]
    # a folder with only the shared base: every family missing (exit 1), then written
    (tmp_path / "_base.yaml").write_text((FOLDER / "_base.yaml").read_text())
    bare = CliRunner().invoke(cli, ["anchors", "families", "--scenarios", str(tmp_path)])
    assert bare.exit_code == 1 and "MISSING" in bare.output
    wrote = CliRunner().invoke(cli, ["anchors", "families", "--scenarios", str(tmp_path),
                                     "--write-missing"])
    assert wrote.exit_code == 0, wrote.output
    written = sorted(tmp_path.glob("dsr1-*.yaml"))
    assert len(written) == 59
    disagg = load_scenario(tmp_path / "dsr1-b200-dynamo-trt-nvfp4-mtp-disagg.yaml")
    assert disagg.topology.kind == "disaggregated" and disagg.topology.orchestrator == "dynamo"
    assert disagg.engine.name == "trt" and disagg.speculative.method == "mtp"
    assert "benchmarks_flat.csv" in written[0].read_text()   # says where it came from
    # the decode workers' running limit of its load, from the recipe, on the decode pool only
    # (B200 FP4 MTP at 6 clients: five decode workers of max_batch_size 1)
    assert pool_scenario(disagg, "decode").engine.max_num_seqs == 1
    assert pool_scenario(disagg, "prefill").engine.max_num_seqs == disagg.engine.max_num_seqs
    # a plain-decoding Dynamo SGLang family takes its recipe's limit (1p1d TEP8: 512), one
    # whose recipes read set none (GB200 FP8) the engine's
    sglang = (tmp_path / "dsr1-b200-dynamo-sglang-fp8-disagg.yaml").read_text()
    assert "max_num_seqs: 512" in sglang
    wide = (tmp_path / "dsr1-gb200-dynamo-sglang-fp8-disagg.yaml").read_text()
    assert "running-request caps" in wide and "max_num_seqs" not in wide
    missing = CliRunner().invoke(cli, ["anchors", "families", "--scenarios",
                                       str(tmp_path / "nowhere")])
    assert missing.exit_code == 2 and "--scenarios" in missing.output
