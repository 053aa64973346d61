"""inferasim ablate: base and knob settings side by side, knobs passed as values."""

from __future__ import annotations

import json
import math
import os

import click
import pytest
from click.testing import CliRunner

from inferasim.cli.ablate_cmd import ablate
from inferasim.cli.errors import ConfigErrorGroup as _Group
from inferasim.config.errors import ConfigError
from inferasim.config.knobs import Knobs
from inferasim.sweep.ablate import deltas, variants

SMALL = ["--set", "workload.duration_s=20", "--set", "workload.concurrency=2"]


def _invoke(*args: str, env: dict | None = None):
    @click.group(cls=_Group)
    def group() -> None:
        pass

    group.add_command(ablate)
    return CliRunner(env=env).invoke(group, ["ablate", *args])


@pytest.mark.parametrize("args, needle", [
    (["--knob", "INFERASIM_DPA_DENSE=1"], "unknown knob (did you mean 'INFERASIM_DPA_DECODE_DENSE'?)"),
    (["--knob", "INFERASIM_DPA_DECODE_DENSE"], "expected NAME=VALUE"),
    (["--knob", "INFERASIM_DPA_DECODE_DENSE=maybe"], "expected 0 or 1"),
    ([], "at least one --knob"),
])
def test_bad_knob_is_one_line_and_exit_2(args, needle):
    result = _invoke(*SMALL, *args)
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0], result.output


def test_variants_apply_each_setting_alone():
    base = Knobs(des_lockstep=3)
    runs = variants(["INFERASIM_DPA_DECODE_DENSE=1", "INFERASIM_DES_LOCKSTEP=2"], base)
    assert [v.label for v in runs] == ["base", "INFERASIM_DPA_DECODE_DENSE=1",
                                       "INFERASIM_DES_LOCKSTEP=2"]
    assert runs[1].knobs == Knobs(dpa_decode_dense=True, des_lockstep=3)
    assert runs[2].knobs == Knobs(dpa_decode_dense=False, des_lockstep=2)
    with pytest.raises(ConfigError):
        variants(["INFERASIM_NOPE=1"], base)


def test_deltas_absolute_and_percent():
    d = deltas({"a": 10.0, "b": 0, "c": "text", "n": 5, "flag": True, "nan": math.nan},
               {"a": 12.5, "b": 3, "c": "other", "n": 4, "flag": False, "nan": 1.0})
    assert d["a"] == {"base": 10.0, "value": 12.5, "abs": 2.5, "pct": 25.0}
    assert d["b"]["pct"] is None and d["b"]["abs"] == 3.0
    assert d["n"]["pct"] == -20.0
    assert "c" not in d and "flag" not in d and d["nan"]["pct"] is None


def test_ablation_json_without_touching_the_environment():
    before = dict(os.environ)
    result = _invoke(*SMALL, "--set", "model.name=deepseek-v3.2", "--set", "gpu.name=h200",
                     "--set", "parallel.tp=8", "--set", "parallel.dp_attention=8",
                     "--set", "engine.name=sglang", "--set", "workload.format=random",
                     "--set", "workload.isl=16384", "--set", "workload.osl=64",
                     "--knob", "INFERASIM_DPA_DECODE_DENSE=1",
                     "--knob", "INFERASIM_DES_LOCKSTEP=0", "--json", "--jobs", "1")
    assert result.exit_code == 0, result.output
    assert dict(os.environ) == before
    data = json.loads(result.output)
    assert data["base"]["knobs"]["INFERASIM_DPA_DECODE_DENSE"] is False
    dense, same = data["variants"]
    assert dense["setting"] == "INFERASIM_DPA_DECODE_DENSE=1"
    assert dense["knobs"]["INFERASIM_DPA_DECODE_DENSE"] is True
    # Dense attention over a 16k context costs more than the selection it replaces.
    itl = dense["delta"]["itl_mean_ms"]
    assert itl["value"] > itl["base"] and itl["abs"] == pytest.approx(itl["value"] - itl["base"])
    assert itl["pct"] == pytest.approx(100 * itl["abs"] / itl["base"])
    assert same["same_knobs_as_base"] and same["no_effect"]
    assert all(d["abs"] == 0 for d in same["delta"].values() if not math.isnan(d["base"]))


def test_ablation_table_and_env_base():
    result = _invoke(*SMALL, "--knob", "INFERASIM_DPA_DECODE_DENSE=1",
                     env={"INFERASIM_DES_LOCKSTEP": "2"})
    assert result.exit_code == 0, result.output
    assert "INFERASIM_DPA_DECODE_DENSE=1" in result.output and "delta %" in result.output
    assert "no metric changed" in result.output   # a dense model has no attention-DP decode


def test_vary_shows_prefix_first_admission_against_arrival_order():
    # behaviour.md 4: vLLM's own arrival order is the default; the ablation shows what
    # prefix-first admission (lpm) would collect. 48 chat clients on 8 running slots: a queue
    # forms, and the request whose previous turn is still cached is the one lpm admits.
    result = _invoke("--set", "workload.duration_s=150", "--set", "workload.concurrency=48",
                     "--max-num-seqs", "8", "--vary", "engine.queue_policy=lpm",
                     "--json", "--jobs", "1")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    (lpm,) = data["variants"]
    assert lpm["setting"] == "engine.queue_policy=lpm" and not lpm["same_knobs_as_base"]
    hit = lpm["delta"]["prefix_hit_rate"]
    assert hit["value"] > 2 * hit["base"] > 0
    assert lpm["delta"]["ttft_mean_s"]["value"] < lpm["delta"]["ttft_mean_s"]["base"]


@pytest.mark.parametrize("setting, needle", [
    ("engine.queue_policy", "expected KEY=VALUE"),
    ("engine.queue_policy=sideways", "--vary: engine.queue_policy"),
    ("engine.nope=1", "--vary: engine.nope"),
    ("workload.concurrency=0", "--vary: workload.concurrency: expected a value of at least 1"),
])
def test_bad_vary_is_one_line_and_exit_2(setting, needle):
    result = _invoke(*SMALL, "--vary", setting)
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0], result.output


def test_vary_with_several_values_applies_each_alone():
    from inferasim.sweep.ablate import expand_varied

    assert expand_varied(["engine.queue_policy=lpm,fcfs", "engine.max_num_seqs=8",
                          "engine.vendors=[nvidia,amd]", "engine.queue_policy=fcfs"]) == [
        "engine.queue_policy=lpm", "engine.queue_policy=fcfs", "engine.max_num_seqs=8",
        "engine.vendors=[nvidia,amd]"]  # a YAML list stays whole; a repeat runs once
    result = _invoke(*SMALL, "--vary", "engine.max_num_seqs=1,64", "--json", "--jobs", "1")
    assert result.exit_code == 0, result.output
    settings = [v["setting"] for v in json.loads(result.output)["variants"]]
    assert settings == ["engine.max_num_seqs=1", "engine.max_num_seqs=64"]
    bad = _invoke(*SMALL, "--vary", "engine.queue_policy=lpm,sideways")
    assert bad.exit_code == 2 and "--vary: engine.queue_policy" in bad.output
