"""Two runs of one scenario write byte-identical result folders, except timing.json (wall
times, the executor and its workers): `diff -r` or a hash compares two results."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
from click.testing import CliRunner

from inferasim.cli.main import cli

TIMING = "timing.json"
RUN = ["run", "--set", "workload.duration_s=30", "--set", "workload.concurrency=4"]
SWEEP = ["sweep", "--set", "workload.duration_s=20", "--concurrency", "1,2",
         "--grid", "engine.max_num_seqs=1,64"]


def _hashes(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.iterdir()) if p.name != TIMING}


def _twice(tmp_path: Path, args: list[str], *extra: list[str]) -> tuple[Path, Path]:
    outs = []
    for i, more in enumerate(extra):
        out = tmp_path / f"out{i}"
        result = CliRunner().invoke(cli, [*args, *more, "--out", str(out)])
        assert result.exit_code == 0, result.output
        outs.append(out)
    return outs[0], outs[1]


def test_two_runs_write_the_same_folder_but_timing(tmp_path):
    a, b = _twice(tmp_path, RUN, [], [])
    assert _hashes(a) == _hashes(b)
    assert {"requests.csv", "occupancy.csv", "summary.json", "scenario.resolved.yaml"} \
        <= set(_hashes(a))
    assert "wall_s" not in json.loads((a / "summary.json").read_text())
    assert json.loads((a / TIMING).read_text())["wall_s"] > 0


def test_two_sweeps_write_the_same_folder_whatever_the_jobs(tmp_path):
    # the executor and its workers are how the sweep ran, in timing.json with the wall times
    a, b = _twice(tmp_path, SWEEP, ["--jobs", "1"], ["--jobs", "2"])
    hashes = _hashes(a)
    assert hashes == _hashes(b)
    assert {"results.csv", "sweep.json", "pareto.png", "throughput_ttft.png",
            "throughput_e2e.png"} <= set(hashes)
    assert "wall_s" not in pd.read_csv(a / "results.csv").columns
    spec = json.loads((a / "sweep.json").read_text())
    assert not {"wall_s", "executor", "workers"} & set(spec)
    timing = json.loads((b / TIMING).read_text())
    assert timing["workers"] == 2 and timing["executor"]
    assert [r["rung"] for r in timing["rungs"]] == [0, 1, 2, 3]
    assert all(r["wall_s"] > 0 for r in timing["rungs"])
