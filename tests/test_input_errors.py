"""Issue 32: every input once accepted without a word is refused (exit 2, one line naming
the file or key and what was expected) or warned about (one line, the run goes on)."""

from __future__ import annotations

import gzip
import json

import pytest
from click.testing import CliRunner

from inferasim.cli.main import cli

SHORT = ["--set", "workload.duration_s=5"]


def invoke(*args, env=None):
    return CliRunner().invoke(cli, [str(a) for a in args], env=env)


def one_line(result) -> str:
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1, result.output
    assert "Traceback" not in result.output
    return lines[0]


def warnings_of(result) -> list[str]:
    return [ln for ln in result.output.splitlines() if ln.startswith("inferasim: warning:")]


def mooncake_rows(*stamps_ms) -> str:
    return "".join(json.dumps({"timestamp": t, "input_length": 600, "output_length": 4,
                               "hash_ids": [i, i + 1]}) + "\n" for i, t in enumerate(stamps_ms))


def test_unsorted_trace_timestamps_are_warned_about(tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_text(mooncake_rows(2000, 1000, 3000))
    result = invoke("run", "--set", "workload.format=mooncake", "--set",
                    f"workload.trace={trace}", "--json")
    assert result.exit_code == 0, result.output
    (line,) = warnings_of(result)
    assert str(trace) in line and "not sorted" in line and "record 2" in line


def test_a_run_with_no_completed_request_exits_2_saying_why(tmp_path):
    result = invoke("run", "--set", "workload.format=random", "--set", "workload.isl=2000",
                    "--set", "workload.osl=10", "--set", "workload.rate=1", *SHORT,
                    "--kv-pool-tokens", "1000", "--out", tmp_path / "out")
    assert result.exit_code == 2
    line = one_line(result)
    assert "no request completed" in line and "refused all" in line and "KV" in line
    assert not (tmp_path / "out").exists()


def test_a_trace_whose_arrivals_end_before_the_window_says_so(tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_text(mooncake_rows(0, 100))
    result = invoke("run", "--set", "workload.format=mooncake", "--set",
                    f"workload.trace={trace}", "--set", "workload.warmup_s=50",
                    "--set", "workload.duration_s=1")
    assert result.exit_code == 2
    assert "no request was sent in the measured window" in one_line(result)


def test_a_misspelled_knob_in_the_environment_is_warned_with_a_suggestion():
    result = invoke("run", *SHORT, "--json", env={"INFERASIM_DPA_DENSE": "1"})
    assert result.exit_code == 0, result.output
    (line,) = warnings_of(result)
    assert "INFERASIM_DPA_DENSE" in line and "INFERASIM_DPA_DECODE_DENSE" in line


def test_a_repeated_rung_is_refused(tmp_path):
    result = invoke("sweep", "--concurrency", "4,4", *SHORT, "--out", tmp_path / "s")
    assert result.exit_code == 2
    assert "--concurrency: rung 4 given twice" in one_line(result)
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("text, words", [
    ("name: x\nworkload:\n\tformat: synthetic\n", "line 3, column 1: a tab character"),
    ("name: x\nmodel: {name: llama-3.1-8b\ngpu: {name: h100}\n",
     "inside the '{' opened at line 2, column 8; is it closed?"),
    ("name: x\nmodel: [a\ngpu: {name: h100}\n", "inside the '[' opened at line 2"),
    ('name: "x\nmodel: a\n', "inside the quote opened at line 1"),
    ("name: x\n  model: a\n", "a 'key: value' where a value was expected"),
])
def test_yaml_syntax_errors_say_what_is_wrong(tmp_path, text, words):
    path = tmp_path / "s.yaml"
    path.write_text(text)
    result = invoke("describe", path)
    assert result.exit_code == 2
    line = one_line(result)
    assert str(path) in line and words in line


def test_a_truncated_gzip_trace_is_cut_short_not_undecodable(tmp_path):
    whole = gzip.compress(mooncake_rows(*range(0, 200_000, 100)).encode())
    cut = tmp_path / "t.jsonl.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    result = invoke("run", "--set", "workload.format=mooncake", "--set",
                    f"workload.trace={cut}")
    assert result.exit_code == 2
    line = one_line(result)
    assert "not a whole gzip file" in line and "cut short" in line and "UTF-8" not in line


@pytest.mark.parametrize("fmt", ["mooncake", "bailian"])
def test_gzip_traces_are_read_by_every_reader(tmp_path, fmt):
    if fmt == "mooncake":
        rows = mooncake_rows(0, 500, 1000)
    else:
        rows = "".join(json.dumps({"chat_id": i, "parent_chat_id": -1, "timestamp": i * 0.5,
                                   "input_length": 100, "output_length": 4, "turn": 1,
                                   "hash_ids": [i]}) + "\n" for i in range(3))
    plain = tmp_path / "t.jsonl"
    plain.write_text(rows)
    packed = tmp_path / "t.jsonl.gz"
    packed.write_bytes(gzip.compress(rows.encode()))
    runs = [invoke("run", "--set", f"workload.format={fmt}", "--set", f"workload.trace={p}",
                   "--json") for p in (plain, packed)]
    for r in runs:
        assert r.exit_code == 0, r.output
    got = [json.loads(r.output.splitlines()[-1])["requests_completed"] for r in runs]
    assert got[0] == got[1] == 3


def test_a_duration_past_a_week_is_refused_with_the_limit():
    result = invoke("run", "--set", "workload.duration_s=1e12")
    assert result.exit_code == 2
    assert "workload.duration_s: expected a value of at most 604800" in one_line(result)


def test_an_open_loop_rate_past_any_replay_is_refused_before_it_draws_its_arrivals():
    # the arrival times are drawn up front: 1e30 requests/s asked numpy for an array past memory
    result = invoke("run", "--set", "workload.rate=1e30", "--set", "workload.max_requests=5")
    assert result.exit_code == 2
    line = one_line(result)
    assert "workload.rate" in line and "at most 50,000,000" in line and "duration_s" in line


def test_a_system_prompt_as_long_as_the_prompt_limit_is_refused_with_both_keys():
    result = invoke("run", "--set", "workload.synthetic.system_prompt_tokens=1e30")
    assert result.exit_code == 2
    assert "system_prompt_tokens" in one_line(result) and "max_prompt_tokens" in one_line(result)


def test_a_draft_length_past_any_engine_is_refused_not_sampled_without_end():
    result = invoke("describe", "--set", "speculative.method=mtp", "--set",
                    "speculative.draft_tokens=1e30")
    assert result.exit_code == 2
    assert "speculative.draft_tokens: expected a value of at most 64" in one_line(result)


@pytest.mark.parametrize(("engine", "gpu", "runs"), [
    ("trt", "mi355x", "vllm, sglang, mori-sglang, atom"),
    ("atom", "h100", "vllm, sglang, trt"),
    ("mori-sglang", "b200", "vllm, sglang, trt"),
])
def test_an_engine_on_a_part_of_a_vendor_it_does_not_run_on_is_refused(engine, gpu, runs):
    # TensorRT-LLM on an MI355X was priced like any other engine: nothing runs it there
    result = invoke("describe", "--set", f"engine.name={engine}", "--set", f"gpu.name={gpu}")
    assert result.exit_code == 2
    line = one_line(result)
    assert f"engine.name: {engine} runs on" in line and f"gpu.name {gpu}" in line
    assert f"({runs})" in line


def test_a_pool_renaming_its_engine_is_refused():
    # the pool's keys merged over the deployment's engine: the new name relabelled mori-sglang's
    # settings as TensorRT-LLM's, on an MI355X, without a word
    result = invoke("describe", "scenarios/inferencemax/dsr1-mi355x-mori-sglang-fp8-disagg.yaml",
                    "--set", "topology.decode.engine.name=trt")
    assert result.exit_code == 2
    assert "topology.decode.engine.name: a pool runs the deployment's engine (mori-sglang)" \
        in one_line(result)


def test_an_engine_listing_an_unknown_vendor_or_none_is_refused():
    result = invoke("describe", "--set", "engine.vendors=[nvidia, intel]")
    assert result.exit_code == 2
    assert "engine.vendors: expected one of amd, nvidia; got 'intel'" in one_line(result)
    result = invoke("describe", "--set", "engine.vendors=[]")
    assert result.exit_code == 2
    assert "vendors: expected at least one" in one_line(result)


@pytest.mark.parametrize("role", ["prefill", "decode"])
def test_a_pool_layout_below_one_names_the_pools_key(role):
    # the pool's EP was read (for its EPLB slots) before it was checked: a ValueError escaped
    result = invoke("describe", "scenarios/topologies/glm52-disagg-1p1d.yaml", "--set",
                    f"topology.{role}.parallel.ep=0")
    assert result.exit_code == 2
    line = one_line(result)
    assert f"topology.{role}.parallel" in line and "ep must be at least 1" in line


def test_a_set_key_the_format_does_not_read_is_warned_about():
    result = invoke("describe", "--set", "workload.isl=99", "--json")
    assert result.exit_code == 0, result.output
    (line,) = warnings_of(result)
    assert "workload.isl" in line and "synthetic workload format does not read it" in line
    read = invoke("describe", "--set", "workload.format=random", "--set", "workload.isl=99")
    assert not warnings_of(read)


def test_the_same_set_key_twice_is_warned_about():
    result = invoke("describe", "--set", "workload.concurrency=4", "--set",
                    "workload.concurrency=8", "--json")
    assert result.exit_code == 0, result.output
    (line,) = warnings_of(result)
    assert "workload.concurrency: given twice (4, then 8); the last is used" in line
    assert json.loads(result.output.splitlines()[-1])["scenario"]["workload"]["concurrency"] == 8


def test_importing_a_csv_as_vllm_bench_says_what_was_expected(tmp_path):
    csv = tmp_path / "x.csv"
    csv.write_text("a,b\n1,2\n")
    result = invoke("anchors", "import", csv, "--from", "vllm-bench", "--out",
                    tmp_path / "a.json")
    assert result.exit_code == 2
    line = one_line(result)
    assert "vllm bench serve --save-result" in line and "looks like CSV" in line
    assert not (tmp_path / "a.json").exists()
