"""AgentX ladders as decode anchors (``anchors import --from agentx-ladder``) and each rung
below the cliff predicted from its ladder's other rungs (``validate agentx --hold-out rung``)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from inferasim.anchors.importers.agentx_ladder import cliff_between, import_agentx_ladder
from inferasim.anchors.store import AnchorStore
from inferasim.cli.main import cli
from inferasim.config.errors import ConfigError
from inferasim.cost.calibrated import CalibratedOracle
from inferasim.validate.agentx import read_ladders, rung_scenario
from tests.conftest import shared_data


@pytest.fixture(scope="module")
def ladders():
    return shared_data("agentx-measured", "agentx_dev_ladders.csv")


def test_rungs_below_the_cliff_import_as_decode_anchors(ladders):
    import pandas as pd

    records = import_agentx_ladder(ladders, below_cliff=True)
    everything = import_agentx_ladder(ladders)
    # past the cliff as mixed steps, but for GLM-5.1, whose ladder records no hit rate
    assert len(everything) == len(pd.read_csv(ladders)) - 5
    # every rung with a hit rate carries its uncached prompt tokens per step, below the
    # cliff (a tail of a few tokens a step on average) as past it (thousands)
    assert all(r.workload.prefill_per_step is not None for r in everything
               if r.regime.engine == "vllm")
    assert not any(r.workload.prefill_per_step for r in everything if r.regime.engine == "sglang")
    assert max(r.workload.prefill_per_step for r in records if r.regime.engine == "vllm") < 100
    assert min(r.workload.prefill_per_step for r in everything
               if r.workload.concurrency >= 40) > 1000
    concs = {(w, e): sorted(r.workload.concurrency for r in records
                            if r.regime.weight_dtype == w and r.regime.engine == e)
             for w, e in (("fp8", "vllm"), ("mxfp4", "vllm"), ("mxfp4", "sglang"))}
    # the measured cliffs: FP8 c16 -> c32, MXFP4 c8 -> c16, GLM-5.1 (by TTFT) c4 -> c8
    assert concs[("fp8", "vllm")] == [1, 2, 4, 8, 16]
    assert concs[("mxfp4", "vllm")] == [1, 2, 4, 8]
    assert concs[("mxfp4", "sglang")] == [4]
    row = pd.read_csv(ladders).iloc[3]   # MiniMax FP8 TP2 c8
    (c8,) = [r for r in records if r.id == "agentx-minimax-m2.5-vllm-mi355x-tp2-c8"]
    assert c8.workload.decode_batch == pytest.approx(row.output_tput_tps * row.mean_itl)
    assert c8.workload.isl == round(row.input_tput_tps * row.duration_seconds
                                    / row.num_requests_successful)
    assert c8.decode_step == (row.mean_itl, "mean_itl")
    assert c8.workload.prefix_hit_rate == pytest.approx(row.server_gpu_cache_hit_rate)
    assert c8.workload.prefill_per_step == pytest.approx(
        row.input_tput_tps * (1 - row.server_gpu_cache_hit_rate) * row.mean_itl)
    assert c8.ttft_s is None          # a cached prompt's TTFT is not a lone prefill
    assert c8.measurements.tput_per_gpu_output == pytest.approx(row.output_tput_tps / 2)


def test_a_rung_past_the_cliff_is_a_mixed_step_that_calibrates_the_prefill(ladders):
    import pandas as pd

    records = [r for r in import_agentx_ladder(ladders)
               if r.regime.weight_dtype == "fp8" and r.regime.engine == "vllm"]
    row = pd.read_csv(ladders).iloc[6]   # MiniMax FP8 TP2 c40, hit rate 0.002
    (c40,) = [r for r in records if r.id.endswith("tp2-c40")]
    assert c40.workload.prefill_per_step == pytest.approx(
        row.input_tput_tps * (1 - row.server_gpu_cache_hit_rate) * row.mean_itl)
    rung = next(r for r in read_ladders(ladders) if "fp8" in r.ladder and r.concurrency == 8)
    past = {r.id for r in records if r.workload.concurrency >= 32}
    both = CalibratedOracle(rung_scenario(rung), AnchorStore(records))
    decode_only = CalibratedOracle(rung_scenario(rung), AnchorStore(
        [r for r in records if r.id not in past]))
    # the rungs below the cliff price the decodes, those past it the prompt tokens
    assert {p.id for p in both.points} == {r.id for r in records} - past
    assert {p.id for p in decode_only.points} == {p.id for p in both.points}
    assert decode_only.calibration["prefill"] == "analytic"
    assert both.calibration["prefill"] == "calibrated"
    readings = both.calibration["prefill_mixed_steps"]
    assert set(readings) == past
    # both factors fitted together over all eight steps, not the slope left over by an
    # extrapolated decode ratio (the two MiniMax ladders' slopes were 1.56 and 0.88 so)
    fit = both._share_fit
    assert fit is not None and fit.steps == 8
    assert both.prefill_slope == pytest.approx(fit.prompt_slope)
    assert 1.2 < fit.prompt_slope < 1.7 and 1.2 < fit.decode_ratio < 1.8


def test_the_oracle_reads_the_step_at_the_batch_that_decoded(ladders):
    records = [r for r in import_agentx_ladder(ladders, below_cliff=True)
               if r.regime.weight_dtype == "fp8" and r.regime.engine == "vllm"]
    rung = next(r for r in read_ladders(ladders) if "fp8" in r.ladder and r.concurrency == 8)
    oracle = CalibratedOracle(rung_scenario(rung), AnchorStore(records))
    assert oracle.calibration["mode"] == "anchored"
    batches = {p.id: p.batch for p in oracle.points}
    assert batches["agentx-minimax-m2.5-vllm-mi355x-tp2-c8"] == 4    # 4.38 decoding, not 8
    assert batches["agentx-minimax-m2.5-vllm-mi355x-tp2-c16"] == 10


def test_the_cliff_rule_reads_hit_rates_or_ttft():
    rungs = [{"concurrency": c, "prefix_hit_rate": h, "ttft_mean_s": t}
             for c, h, t in ((4, 0.95, 1.0), (8, 0.6, 2.0), (16, 0.1, 3.0))]
    assert cliff_between(rungs) == (8, 16)
    untimed = [{**r, "prefix_hit_rate": float("nan")} for r in rungs]
    assert cliff_between(untimed) is None          # TTFT never grows 5x
    untimed[2]["ttft_mean_s"] = 11.0
    assert cliff_between(untimed) == (8, 16)


def test_a_ladder_file_without_its_columns_is_refused(tmp_path):
    bad = tmp_path / "l.csv"
    bad.write_text("model,hw,conc\nx,mi355x,4\n")
    with pytest.raises(ConfigError, match="missing columns"):
        import_agentx_ladder(bad)


def test_a_rung_with_no_itl_is_refused_by_row_and_column(ladders, tmp_path):
    text = ladders.read_text().splitlines()
    head = text[0].split(",")
    row = text[1].split(",")
    row[head.index("mean_itl")] = "0"
    path = tmp_path / "l.csv"
    path.write_text("\n".join([text[0], ",".join(row)]) + "\n")
    with pytest.raises(ConfigError) as err:
        import_agentx_ladder(path)
    assert "row 2" in str(err.value) and "mean_itl" in str(err.value)


def test_validate_agentx_hold_out_rung_calibrates_each_rung_by_its_neighbours(ladders):
    shared_data("agentx-traces", "traces_v8_present.jsonl.gz")
    # outputs matched to the measured runs' per prompt token, lanes as the runs' harness drove
    # them: c4 8% slow, c8 24% fast (that ladder's step price, docs/agentic.md)
    out = CliRunner().invoke(cli, ["validate", "agentx", str(ladders), "--ladder", "fp4 1x",
                                   "--concurrency", "4,8", "--hold-out", "rung", "--seeds", "42",
                                   "--jobs", "1", "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert [r["concurrency"] for r in data["rows"]] == [4, 8]
    assert {r["calibration"] for r in data["rows"]} == {"anchored"}
    err = data["held_out"]["all"]["output_tok_s"]
    assert err["n"] == 2 and err["median_abs"] < 0.2


def test_hold_out_rung_with_nothing_to_hold_out_says_so(ladders):
    out = CliRunner().invoke(cli, ["validate", "agentx", str(ladders), "--ladder", "glm",
                                   "--hold-out", "rung", "--jobs", "1"])
    assert out.exit_code == 2 and "no rung below its ladder's cliff" in out.output



def test_hold_out_rung_finds_the_cliff_on_the_whole_ladder_not_the_rungs_asked_for(ladders):
    # c16 and c32 of MXFP4 TP1 both lie past its cliff (c8 -> c16); asked for alone they show
    # none between them, and still none of them is a rung below the cliff to hold out
    out = CliRunner().invoke(cli, ["validate", "agentx", str(ladders), "--ladder", "fp4 1x",
                                   "--concurrency", "16,32", "--hold-out", "rung",
                                   "--seeds", "1", "--jobs", "1"])
    assert out.exit_code != 0
    assert "no rung below its ladder's cliff" in out.output


def test_a_ladder_takes_the_kv_dtype_of_its_deployments_launch_recipe(tmp_path):
    """The rows record no KV dtype; the analytic step an anchor is read against streams the
    KV at one, and a prior reads the regime at it (read at the target's, the MI355X vLLM
    prior's attention factor went 2.63 -> 1.25 for a bf16 target). A deployment with a
    shipped recipe takes the recipe's, with a note; one without keeps it unknown; a
    ``--meta kv_dtype`` hint wins."""
    head = ("model,hw,framework,image,precision,tp,conc,mean_ttft,mean_itl,output_tput_tps,"
            "input_tput_tps,num_requests_successful,duration_seconds,server_gpu_cache_hit_rate\n")
    rows = ("MiniMaxAI/MiniMax-M2.5,mi355x,vllm,vllm/vllm-openai-rocm:v0.22.0,fp8,2,4,0.5,0.013,"
            "108,14710,368,1800,0.97\n"
            "MiniMaxAI/MiniMax-M2.5,gb200,vllm,vllm/vllm-openai:v0.22.0,fp8,2,4,0.5,0.013,"
            "108,14710,368,1800,0.97\n")
    path = tmp_path / "ladders.csv"
    path.write_text(head + rows)
    mi355x, gb200 = import_agentx_ladder(path)
    assert mi355x.regime.kv_dtype == "fp8"
    assert any("_recipe-vllm-mi355x-minimax-m2.5.yaml" in n for n in mi355x.provenance.notes)
    assert gb200.regime.kv_dtype is None          # no recipe shipped: unknown
    hinted = import_agentx_ladder(path, {"kv_dtype": "bf16"})
    assert {r.regime.kv_dtype for r in hinted} == {"bf16"}
