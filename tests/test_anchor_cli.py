"""``inferasim anchors`` end to end through click's test runner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from inferasim.cli.anchors_cmd import anchors

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
IMAX_CSV = DATA / "inferencemax" / "benchmarks_flat.csv"
SCENARIO = REPO / "scenarios" / "inferencemax" / "dsr1-mi355x-sglang-fp8-tp8.yaml"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"shared data folder {DATA} is absent")


def run(*args: str):
    return CliRunner().invoke(anchors, [str(a) for a in args])


@needs_data
def test_import_list_show_check(tmp_path):
    out = tmp_path / "imax.json"
    result = run("import", "--from", "inferencemax", IMAX_CSV, "--out", out)
    assert result.exit_code == 0, result.output
    assert "imported 130 anchors" in result.output
    doc = json.loads(out.read_text())
    assert doc["schema_version"] == 1 and len(doc["anchors"]) == 130
    assert doc["generated_by"].startswith("inferasim anchors import --from inferencemax")

    listed = run("list", "--anchors", tmp_path)
    assert listed.exit_code == 0 and "130 anchors" in listed.output
    as_json = json.loads(run("list", "--anchors", tmp_path, "--json").output)
    assert len(as_json) == 130

    anchor_id = as_json[0]["id"]
    shown = run("show", anchor_id, "--anchors", tmp_path)
    assert shown.exit_code == 0
    body = json.loads(shown.output)
    assert body["id"] == anchor_id and body["regime"]["kv_dtype"] is None  # unknown shown

    checked = run("check", SCENARIO, "--anchors", tmp_path)
    assert checked.exit_code == 0, checked.output
    assert "usable" in checked.output and "refused by axis" in checked.output
    far = run("check", SCENARIO, "--anchors", tmp_path, "--set", "workload.isl=8192")
    assert "prefill refused" in far.output  # every row has ISL 1024
    report = json.loads(run("check", SCENARIO, "--anchors", tmp_path, "--json",
                            "--set", "workload.concurrency=256").output)
    assert report["usable"] and report["refused"] and not report["crossed_build"]
    assert any(w.startswith("decode:") for w in report["warnings"])
    crossed = json.loads(run("check", SCENARIO, "--anchors", tmp_path, "--json",
                             "--set", "engine.version=0.5.10").output)
    assert crossed["crossed_build"] and "build crossed" in crossed["build_note"]


def test_check_against_the_shipped_anchors():
    result = run("check", SCENARIO)
    assert result.exit_code == 0, result.output
    assert "usable:" in result.output and "imax-mi355x-sglang-fp8" in result.output


@needs_data
def test_import_with_meta_and_server_command(tmp_path):
    outputs = DATA / "engine-outputs"
    cmd = outputs / "engine-logs/vllm/inferencex_kimi-k2.7_mi355x_tp4_conc4_vllm_command.txt"
    src = outputs / ("aiperf/inferencex_aiperf-0.8.0_kimi-k2.7_vllm_mi355x_tp4_conc4_"
                     "profile_export_aiperf.json")
    out = tmp_path / "kimi.yaml"
    result = run("import", "--from", "aiperf", src, "--out", out, "--meta", "engine=vllm",
                 "--meta", "gpu=mi355x", "--server-cmd", cmd)
    assert result.exit_code == 0, result.output
    record = json.loads(run("list", "--anchors", out, "--json").output)[0]
    assert record["regime"]["tp"] == 4 and record["regime"]["gpu"] == "mi355x"


@pytest.mark.parametrize("args, message", [
    (["import", "--from", "grid", "__IMAX__", "--out", "__OUT__"], "not an ISL x concurrency grid"),
    (["import", "--from", "vllm-bench", "__FAILED__", "--out", "__OUT__"], "0 requests completed"),
    (["import", "--from", "inferencemax", "__IMAX__", "--out", "__OUT__", "--meta", "gpux=1"],
     "unknown key"),
    (["import", "--from", "inferencemax", "__IMAX__", "--out", "__OUT__", "--meta", "tp=-3"],
     "--meta tp: expected a value of at least 1"),
    (["import", "--from", "inferencemax", "__IMAX__", "--out", "__OUT__", "--meta", "tp=8",
      "--meta", "tp=4"], "--meta tp: given twice"),
    (["import", "--from", "inferencemax", "__IMAX__", "--out", "__OUT__", "--meta", "gpu=rtx"],
     "--meta gpu: unknown gpu 'rtx'"),
    (["import", "--from", "inferencemax", "__IMAX__", "--out", "__OUT__", "--meta",
      "engine=vlm"], "did you mean 'vllm'"),
    (["import", "--from", "inferencemax", "__MISSING__", "--out", "__OUT__"], "file not found"),
    (["show", "no-such-anchor"], "no anchor 'no-such-anchor'"),
    (["check", "__MISSING__"], "file not found"),
])
def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, args, message):
    if not DATA.is_dir() and any(a in ("__IMAX__", "__FAILED__") for a in args):
        pytest.skip(f"shared data folder {DATA} is absent")
    failed = (DATA / "engine-outputs/vllm-bench-serve/"
              "benchmaq_vllm-bench-serve_glm47-fp8_b200_tp4dp2_in2048_FAILED-all-100.json")
    out = tmp_path / "out.json"
    swap = {"__IMAX__": str(IMAX_CSV), "__OUT__": str(out), "__FAILED__": str(failed),
            "__MISSING__": str(tmp_path / "missing.csv")}
    result = CliRunner().invoke(anchors, [swap.get(a, a) for a in args])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("inferasim: error: ") and message in lines[0]
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_registered_in_the_main_cli():
    from inferasim.cli.main import cli

    result = CliRunner().invoke(cli, ["anchors", "show", "no-such-anchor"])
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1


def test_check_reads_the_anchors_the_run_would(tmp_path, monkeypatch):
    # check used to load anchors/ whatever the scenario's sim.anchors said, and took --dir
    # against the working directory only, where run's --anchors looks beside the scenario too
    off = run("check", SCENARIO, "--set", "sim.anchors=none")
    assert off.exit_code == 0 and "sim.anchors is none" in off.output
    monkeypatch.chdir(tmp_path)
    rel = "../../anchors"  # beside the scenario: scenarios/inferencemax/../../anchors
    checked = run("check", SCENARIO, "--anchors", rel, "--json")
    assert checked.exit_code == 0, checked.output
    assert json.loads(checked.output)["usable"]


def test_a_disaggregated_run_and_check_report_each_pools_anchors():
    # the decode pool (TP4 here) calibrates on its own anchors; run reported only the
    # prefill pool's, and check only the scenario's own layout
    from inferasim.cli.main import cli

    scenario = REPO / "scenarios" / "inferencemax" / "dsr1-mi355x-sglang-mxfp4-tp8.yaml"
    sets = ["--set", "topology.kind=disaggregated", "--set", "topology.decode.parallel.tp=4"]
    ran = CliRunner().invoke(cli, ["run", str(scenario), "--json", *sets,
                                   "--set", "workload.duration_s=20"])
    cal = json.loads(ran.output)["calibration"]
    checked = json.loads(run("check", scenario, *sets, "--json").output)["pools"]
    assert sorted(cal["anchors_used"]) == sorted(checked["prefill"]["usable"])
    assert sorted(cal["decode_pool"]["anchors_used"]) == sorted(checked["decode"]["usable"])
    assert all("-tp4-" in a for a in checked["decode"]["usable"])
    assert not any("-tp4-" in a for a in checked["prefill"]["usable"])
