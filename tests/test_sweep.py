"""inferasim sweep: ladder parsing, bad input (one line, exit 2), results, plots, executors."""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pandas as pd
import pytest
from click.testing import CliRunner

from inferasim.cli.errors import ConfigErrorGroup as _Group
from inferasim.cli.sweep_cmd import sweep
from inferasim.config.errors import ConfigError
from inferasim.config.knobs import Knobs
from inferasim.config.loader import load_scenario
from inferasim.sweep.executors import InProcessExecutor, LocalPoolExecutor, make_executor
from inferasim.sweep.ladder import (
    RUN_COLUMNS,
    build_ladder,
    flat_summary,
    parse_concurrency,
    parse_grid,
    run_ladder,
)
from tests.conftest import REPO

SMALL = ["--set", "workload.duration_s=20"]


def _cli() -> click.Group:
    @click.group(cls=_Group)
    def group() -> None:
        pass

    group.add_command(sweep)
    return group


def _invoke(*args: str):
    return CliRunner().invoke(_cli(), ["sweep", *args])


def test_parse_concurrency():
    assert parse_concurrency("1, 2,4,4,8") == [1, 2, 4, 8]
    assert parse_concurrency(None) is None
    for bad in ("", " , ", "1,,2", "1,x", "2.5", "0", "-4"):
        with pytest.raises(ConfigError):
            parse_concurrency(bad)


def test_parse_grid():
    assert parse_grid(["engine.max_num_seqs=4,8", "INFERASIM_DPA_DECODE_DENSE=0,1"]) == [
        ("engine.max_num_seqs", ["4", "8"]), ("INFERASIM_DPA_DECODE_DENSE", ["0", "1"])]
    for bad in (["engine.max_num_seqs"], ["=1,2"], ["engine.max_num_seqs="],
                ["workload.concurrency=1,2"], ["a.b=1", "a.b=2"], ["a.b=1,,2"]):
        with pytest.raises(ConfigError):
            parse_grid(bad)


def _has(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


@pytest.mark.parametrize("args, needle", [
    (["--concurrency", ""], "empty ladder"),
    (["--concurrency", "1,two"], "expected integers"),
    (["--concurrency", "0"], "at least 1"),
    (["--grid", "INFERASIM_NOPE=1,2", "--concurrency", "1"], "unknown knob"),
    (["--grid", "engine.max_num_seqs=a,b", "--concurrency", "1"],
     "--grid: engine.max_num_seqs: expected an integer"),
    (["--concurrency", "1", "--jobs", "0"], "--jobs"),
    (["--concurrency", "1,16", "--set", "workload.format=mooncake", "--set",
      "workload.trace=trace.jsonl"], "a recorded trace (mooncake) replays its own arrivals"),
    pytest.param(["--concurrency", "1", "--ray", "127.0.0.1:1"], "cannot reach a Ray cluster",
                 marks=pytest.mark.skipif(not _has("ray"), reason="ray is not installed "
                                          "(pip install 'inferasim[ray]')")),
    (["--concurrency", "1", "--ray", "not-an-address"], "HOST:PORT"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, needle):
    out = tmp_path / "out"
    result = _invoke(*SMALL, *args, "--out", str(out))
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0], result.output
    assert not out.exists()


def test_small_sweep_writes_results_and_plots(tmp_path):
    out = tmp_path / "sweep"
    out.mkdir()  # an earlier result (its marker file), replaced whole and atomically
    (out / "scenario.resolved.yaml").write_text("name: earlier\n")
    (out / "stale.txt").write_text("replaced atomically")
    result = _invoke(*SMALL, "--concurrency", "1,2", "--grid", "engine.max_num_seqs=1,64",
                     "--jobs", "2", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "c=" not in result.output                 # no progress bar off a terminal
    frame = pd.read_csv(out / "results.csv")
    assert list(frame["rung"]) == [0, 1, 2, 3]
    assert list(frame["concurrency"]) == [1, 2, 1, 2]
    assert list(frame["engine.max_num_seqs"]) == [1, 1, 64, 64]
    assert {"config", "INFERASIM_DPA_DECODE_DENSE", "INFERASIM_DES_LOCKSTEP", "output_tok_s",
            "ttft_mean_s", "itl_mean_ms", "interactivity_tok_s", "prefix_hit_rate",
            "calibration.mode", "vllm_bench.p99_ttft_ms"} <= set(frame.columns)
    assert "wall_s" not in frame.columns        # in timing.json: results.csv is reproducible
    assert json.loads((out / "timing.json").read_text())["rungs"][3]["wall_s"] > 0
    assert (frame["requests_completed"] > 0).all()
    for name in ("pareto.png", "throughput_ttft.png", "throughput_e2e.png", "latency.png",
                 "prefix_hit.png"):
        data = (out / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    assert (out / "scenario.resolved.yaml").exists() and not (out / "stale.txt").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["sweep"]      # no temp folder left
    # the parquet copy is written only with the parquet extra (issue 32: skip, not fail)
    pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install "
                                          "'inferasim[parquet]')")
    assert pd.read_parquet(out / "results.parquet").shape == frame.shape


def test_same_results_whatever_the_jobs():
    rungs = build_ladder(None, ["workload.duration_s=20"], [1, 3, 2], [("INFERASIM_DPA_DECODE_DENSE",
                         ["0", "1"])], Knobs(), resolve=lambda p, o: load_scenario(p, o))
    assert [r.index for r in rungs] == list(range(6))
    assert [r.knobs.dpa_decode_dense for r in rungs] == [False] * 3 + [True] * 3
    serial = run_ladder(rungs, InProcessExecutor())
    with make_executor(2, tasks=len(rungs)) as pool:
        assert isinstance(pool, LocalPoolExecutor)
        parallel = run_ladder(rungs, pool)
    assert list(serial["concurrency"]) == [1, 3, 2, 1, 3, 2]
    pd.testing.assert_frame_equal(serial.drop(columns=list(RUN_COLUMNS)),
                                  parallel.drop(columns=list(RUN_COLUMNS)))


def test_executor_choice():
    assert isinstance(make_executor(1), InProcessExecutor)
    assert isinstance(make_executor(8, tasks=1), InProcessExecutor)
    assert make_executor(None, tasks=64).workers >= 1


def test_flat_summary_encodes_calibration():
    flat = flat_summary({"a": 1.5, "calibration": {"mode": "analytic", "anchors_used": ["x"]},
                         "ids": [1, 2]})
    assert flat == {"a": 1.5, "calibration.mode": "analytic",
                    "calibration.anchors_used": '["x"]', "ids": "[1, 2]"}


def test_no_plotting_library_at_cli_start_up():
    code = ("import sys, inferasim.cli.main, inferasim.cli.sweep_cmd, inferasim.cli.ablate_cmd, "
            "inferasim.cli.project_cmd; bad = [m for m in ('matplotlib', 'ray') if m in "
            "sys.modules]; print(bad); sys.exit(1 if bad else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_knob_that_cannot_apply_fails_before_any_rung_runs():
    # INFERASIM_DES_LOCKSTEP=3 cannot group 8 ranks: found while the ladder is built, not
    # after the rungs before it have replayed
    from inferasim.sweep.ladder import build_ladder

    dpa = ["model.name=deepseek-r1", "gpu.name=mi355x", "parallel.tp=8", "parallel.ep=8",
           "parallel.dp_attention=8", "engine.name=sglang"]
    with pytest.raises(ConfigError, match="INFERASIM_DES_LOCKSTEP=3 must divide"):
        build_ladder(None, dpa, [4], [("INFERASIM_DES_LOCKSTEP", ["1", "3"])])


def test_sweep_reports_the_asked_percentiles_and_goodput_on_every_rung(tmp_path):
    from inferasim.cli.main import cli

    result = CliRunner().invoke(cli, ["sweep", "--concurrency", "2,4", "--set",
                                      "workload.duration_s=60", "--percentiles", "99.9",
                                      "--slo", "ttft=500,tpot=50", "--out",
                                      str(tmp_path / "s"), "--no-plots", "--jobs", "1",
                                      "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [r["concurrency"] for r in rows] == [2, 4]
    for row in rows:
        assert row["ttft_p99.9_s"] >= row["ttft_p99_s"]
        assert 0 <= row["request_goodput"] <= row["request_throughput"]


def test_a_grid_combination_that_cannot_run_is_skipped_and_a_value_that_never_runs_refused():
    from inferasim.config.errors import ConfigWarning

    vendors = [("engine.name", ["vllm", "trt"]), ("gpu.name", ["h100", "mi300x"])]
    with pytest.warns(ConfigWarning, match="engine.name=trt, gpu.name=mi300x cannot run"):
        rungs = build_ladder(None, [], [4], vendors)
    assert [dict(r.config) for r in rungs] == [
        {"engine.name": "vllm", "gpu.name": "h100"}, {"engine.name": "vllm", "gpu.name": "mi300x"},
        {"engine.name": "trt", "gpu.name": "h100"}]
    # a value no combination runs is the value's fault: refused, naming the grid
    with pytest.raises(ConfigError, match="unknown engine 'vlm'") as bad:
        build_ladder(None, [], [4], [("engine.name", ["vlm", "trt"]), vendors[1]])
    assert bad.value.file == "--grid"
    with pytest.raises(ConfigError, match="trt runs on nvidia parts only"):
        build_ladder(None, [], [4], [("engine.name", ["trt"]), ("gpu.name", ["mi300x", "mi355x"])])
    # a one-key grid has no combinations: its bad value is refused as before
    with pytest.raises(ConfigError, match="runs on nvidia parts only"):
        build_ladder(None, ["engine.name=trt"], [4], [("gpu.name", ["h100", "mi300x"])])


def test_a_warning_is_said_once_in_one_line_whatever_the_workers(tmp_path):
    """A disaggregated rung whose layout draws a warning: the parent says it when it resolves
    the ladder; the pool workers that replay each rung say nothing more, and nothing reaches
    stderr as Python's raw 'ConfigWarning:' with a source excerpt."""
    args = ["sweep", "scenarios/quickstart.yaml", "--set", "model.name=llama-3.1-70b",
            "--set", "gpu.name=h100", "--set", "parallel.tp=2", "--set",
            "topology.kind=disaggregated", "--set", "workload.duration_s=20",
            "--concurrency", "2,4", "--jobs", "2", "--out", str(tmp_path / "out"),
            "--no-plots"]
    done = subprocess.run([sys.executable, "-c", "from inferasim.cli.main import main; main()",
                           *args], capture_output=True, text=True, timeout=300,
                          cwd=REPO)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if "warning" in line.lower()]
    assert len(lines) == 1 and lines[0].startswith("inferasim: warning: ")
    assert "vLLM would refuse to start" in lines[0]
    assert "ConfigWarning" not in done.stderr


def test_kv_cliffs_name_the_rungs_either_side_per_configuration():
    from inferasim.sweep.cliff import cliff_text, kv_cliffs

    def rows(config, hits, ttfts):
        return [{"config": config, "concurrency": c, "prefix_hit_rate": h, "ttft_mean_s": t}
                for c, h, t in zip((16, 4, 8), hits, ttfts, strict=True)]

    frame = pd.DataFrame(rows("falls", [0.0, 0.95, 0.6], [90.0, 1.0, 2.0])
                         + rows("holds", [0.7, 0.95, 0.9], [3.0, 1.0, 2.0])
                         + rows("queues", [float("nan"), 0.95, 0.9], [90.0, 1.0, 2.0]))
    (cliff,) = kv_cliffs(frame)
    assert cliff["config"] == "falls"
    assert (cliff["before"]["concurrency"], cliff["after"]["concurrency"]) == (8, 16)
    assert cliff_text(cliff) == ("KV cliff (falls): between 8 and 16 clients the prefix hit "
                                 "rate falls from 60.0% to 0.0%, mean TTFT 2.00 -> 90.00 s")


def test_an_agentic_sweep_says_where_it_falls_off(tmp_path):
    out = tmp_path / "out"
    res = _invoke("scenarios/agentic-quickstart.yaml", "--concurrency", "4,8", "--jobs", "1",
                  "--set", "workload.duration_s=900", "--out", str(out), "--no-plots")
    assert res.exit_code == 0, res.output
    (cliff,) = json.loads((out / "sweep.json").read_text())["kv_cliffs"]
    assert cliff["before"]["prefix_hit_rate"] >= 0.5 > 0.2 > cliff["after"]["prefix_hit_rate"]
    assert "KV cliff (base): between 4 and 8 clients" in res.output


def test_rungs_with_more_clients_than_running_slots_are_named(tmp_path):
    # the agentic quickstart pins engine.max_num_seqs at 8, its lanes: rungs past it queue
    out = tmp_path / "out"
    res = _invoke("scenarios/agentic-quickstart.yaml", "--concurrency", "4,8,16", "--jobs",
                  "1", "--set", "workload.duration_s=120", "--grid",
                  "engine.max_num_seqs=8,16", "--out", str(out), "--no-plots")
    assert res.exit_code == 0, res.output
    note = json.loads((out / "sweep.json").read_text())["queued_rungs"]
    assert note.startswith("note: c16 offer more clients than the deployment runs at once "
                           "(8 requests")
    assert note in res.output


def test_running_slots_count_every_scheduler_of_the_deployment():
    from inferasim.config.loader import load_scenario
    from inferasim.sweep.slots import running_slots

    assert running_slots(load_scenario(None, ["engine.max_num_seqs=64"])) == 64
    assert running_slots(load_scenario(None, ["engine.max_num_seqs=64",
                                              "topology.instances=3"])) == 192
    disagg = load_scenario(None, ["engine.max_num_seqs=32", "topology.kind=disaggregated",
                                  "topology.decode.instances=2"])
    assert running_slots(disagg) == 64
    from inferasim.sweep.slots import queued_note

    assert queued_note(load_scenario(None, ["engine.max_num_seqs=8"])) == (
        "note: 16 clients, 8 running at once (engine.max_num_seqs per scheduler): the others "
        "queue for a running slot, in their TTFT (raise it with --set engine.max_num_seqs=N)")
    assert queued_note(load_scenario(None, ["engine.max_num_seqs=16"])) is None
    assert queued_note(load_scenario(None, ["engine.max_num_seqs=8", "workload.rate=2"])) is None


def test_a_recorded_traces_rungs_show_no_client_count(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(
        f"2023-11-16 18:15:{10 + i:02d}.0,512,8\n" for i in range(10)))
    res = _invoke("--set", "workload.format=azure", "--set", f"workload.trace={trace}",
                  "--grid", "workload.rate_scale=1,2", "--jobs", "1", "--out",
                  str(tmp_path / "out"), "--no-plots")
    assert res.exit_code == 0, res.output
    rows = [line.split() for line in res.output.splitlines()
            if line.startswith("workload.rate_scale=")]
    assert [r[1] for r in rows] == ["-", "-"]
