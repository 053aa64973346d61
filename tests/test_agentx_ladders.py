"""The measured AgentX ladders replayed with the engines' own defaults (CI's short version of
``inferasim validate agentx ../shared/data/agentx-measured/agentx_dev_ladders.csv``): the
rungs either side of each cliff, at the harness's full 1800 s. The full table is the command.
"""

import json

import pytest
from click.testing import CliRunner

from inferasim.cli.main import cli
from tests.conftest import shared_data

# the rungs either side of each measured cliff, and one deep past it on the vLLM ladders
RUNGS = "4,8,16,32"


@pytest.fixture(scope="module")
def table():
    csv = shared_data("agentx-measured", "agentx_dev_ladders.csv")
    shared_data("agentx-traces", "traces_v8_present.jsonl.gz")
    result = CliRunner().invoke(cli, ["validate", "agentx", str(csv), "--concurrency", RUNGS,
                                      "--jobs", "2", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _rows(table, ladder):
    return {r["concurrency"]: r for r in table["rows"] if ladder in r["ladder"]}


@pytest.mark.parametrize("ladder, cliff", [("minimax-m2.5 fp4 1x", [8, 16]),
                                           ("minimax-m2.5 fp8 2x", [16, 32]),
                                           ("glm-5.1", [4, 8])])
def test_each_ladder_falls_off_between_the_measured_rungs(table, ladder, cliff):
    (label,) = [k for k in table["cliffs"] if ladder in k]
    assert table["cliffs"][label]["measured"] == cliff
    assert table["cliffs"][label]["simulated"] == cliff


def test_the_engines_counter_tracks_the_measured_hit_rate_before_and_past_the_cliff(table):
    for ladder, rungs in (("minimax-m2.5 fp4 1x", (4, 8, 32)),
                          ("minimax-m2.5 fp8 2x", (4, 8, 16, 32))):
        rows = _rows(table, ladder)
        for c in rungs:
            r = rows[c]
            assert r["simulated_prefix_hit_rate"] == pytest.approx(
                r["measured_prefix_hit_rate"], abs=0.05), (ladder, c)


def test_past_the_cliff_ttft_is_minutes_and_throughput_collapses(table):
    # the collapse as measured, within the bounds the replay meets today on the deep rungs
    rows = _rows(table, "minimax-m2.5 fp4 1x")
    deep = rows[32]
    assert deep["simulated_ttft_mean_s"] == pytest.approx(deep["measured_ttft_mean_s"], rel=0.5)
    assert deep["simulated_output_tok_s"] < 0.5 * rows[8]["simulated_output_tok_s"]


HEADER = "model,hw,framework,image,precision,tp,conc,mean_ttft,p90_ttft,output_tput_tps\n"


@pytest.mark.parametrize("body, needle", [
    (None, "the ladder file is not there"),
    ("model,hw\nx,y\n", "missing columns"),
    (HEADER + "foo/Bar-9,mi355x,vllm,vllm/x:v0.22.0,fp8,1,4,1,1,1\n", "no catalog model"),
    (HEADER + "MiniMaxAI/MiniMax-M2.5,mi355x,vllm,v:v0.22.0,int3,1,4,1,1,1\n", "precision"),
    (HEADER + "MiniMaxAI/MiniMax-M2.5,mi355x,vllm,v:v0.22.0,fp8,1,four,1,1,1\n", "conc"),
    (HEADER + "MiniMaxAI/MiniMax-M2.5,mi355x,vllm,v:v0.22.0,fp8,1,4,1,1,fast\n",
     "output_tput_tps"),
])
def test_a_bad_ladder_file_is_one_line_naming_the_file_and_key(tmp_path, body, needle):
    path = tmp_path / "ladders.csv"
    if body is not None:
        path.write_text(body)
    result = CliRunner().invoke(cli, ["validate", "agentx", str(path), "--jobs", "1"])
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0] and "ladders.csv" in lines[0], result.output


def test_a_host_tier_moves_the_cliff_and_the_table_splits_the_hits():
    # issue 34's ablation: with LMCache's host tier behind the GPU pool the prompts a full
    # GPU cache loses are reloaded, so the cache as a whole keeps serving past c8
    csv = shared_data("agentx-measured", "agentx_dev_ladders.csv")
    shared_data("agentx-traces", "traces_v8_present.jsonl.gz")
    result = CliRunner().invoke(cli, ["validate", "agentx", str(csv), "--concurrency", "8,16",
                                      "--ladder", "fp4 1x", "--jobs", "2", "--json",
                                      "--set", "engine.kv_offload=lmcache",
                                      "--set", "engine.offload_host_gib=1500"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    (label,) = data["cliffs"]
    assert data["cliffs"][label] == {"measured": [8, 16], "simulated": None}
    past = {r["concurrency"]: r for r in data["rows"]}[16]
    assert past["simulated_host_hit_rate"] > 0.5
    assert past["simulated_first_admission_hit_rate"] + past["simulated_host_hit_rate"] \
        + past["simulated_miss_rate"] == pytest.approx(1.0)
