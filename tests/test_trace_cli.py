"""``inferasim trace stats|synth`` and the bundled agentic quickstart end to end."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner

from inferasim.cli.trace_cmd import trace
from tests.conftest import REPO

BUNDLED = REPO / "traces" / "agentic-small.jsonl"


def invoke(args, group=trace):
    result = CliRunner().invoke(group, args)
    assert result.exit_code == 0, result.output + repr(result.exception)
    return result.output


def test_stats_on_the_bundled_sessions_file():
    stats = json.loads(invoke(["stats", str(BUNDLED), "--json"]))
    assert stats["format"] == "sessions"
    assert stats["sessions"] == 40 and stats["requests"] > 1000
    assert stats["subagents"] > 0
    # Fitted figures (docs/agentic.md): think p50 ~10 s, outputs p50 ~216, reuse ~95 %.
    assert 7 < stats["think_s"]["p50"] < 14
    assert 170 < stats["output_tokens"]["p50"] < 270
    assert 60_000 < stats["root_input_tokens"]["p50"] < 120_000
    assert 0.9 < stats["ideal_prefix_reuse"] < 0.99
    text = invoke(["stats", str(BUNDLED)])
    assert "ideal prefix reuse" in text and "think time (s)" in text


def test_bundled_file_is_small_and_reproducible_from_the_generator(tmp_path):
    assert BUNDLED.stat().st_size < 400_000
    out = tmp_path / "again.jsonl"
    msg = invoke(["synth", "--out", str(out), "--sessions", "40", "--seed", "42",
                  "--subagent-frac", "0.25"])
    assert "40 sessions" in msg
    assert out.read_bytes() == BUNDLED.read_bytes()


def test_synth_seeds_differ_and_stats_detects_the_format(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    invoke(["synth", "--out", str(a), "--sessions", "3", "--seed", "1"])
    invoke(["synth", "--out", str(b), "--sessions", "3", "--seed", "2"])
    assert a.read_text() != b.read_text()
    assert json.loads(invoke(["stats", str(a), "--json"]))["sessions"] == 3


def test_synth_into_an_unwritable_place_is_one_line_and_leaves_nothing(tmp_path):
    from inferasim.cli.main import cli

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    result = CliRunner().invoke(cli, ["trace", "synth", "--out", str(blocker / "s.jsonl"),
                                      "--sessions", "2"])
    assert result.exit_code == 2
    assert "a-file/s.jsonl: cannot write here" in result.output
    assert "Traceback" not in result.output
    assert CliRunner().invoke(trace, ["synth", "--out", str(tmp_path / "s.jsonl"),
                                      "--seed", "-1"]).exit_code == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_stats_mooncake(tmp_path):
    path = tmp_path / "mc.jsonl"
    rows = [{"timestamp": 0, "input_length": 2048, "output_length": 10, "hash_ids": [1, 2, 3, 4]},
            {"timestamp": 500, "input_length": 3000, "output_length": 20,
             "hash_ids": [1, 2, 3, 4, 5, 6]}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    stats = json.loads(invoke(["stats", str(path), "--format", "mooncake", "--json"]))
    assert stats["requests"] == 2 and stats["format"] == "mooncake"
    assert stats["ideal_prefix_reuse"] > 0


def test_stats_refuses_an_unknown_file(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"foo": 1}\n')
    from inferasim.cli.main import cli

    result = CliRunner().invoke(cli, ["trace", "stats", str(path)])
    assert result.exit_code == 2 and "--format" in result.output
    assert result.output.startswith("inferasim: error:") and str(path) in result.output


def test_a_folder_that_is_no_agentx_corpus_names_the_file_to_give(tmp_path):
    from inferasim.cli.main import cli

    (tmp_path / "csvs").mkdir()
    (tmp_path / "csvs" / "AzureLLMInferenceTrace_conv.csv").write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n")
    (tmp_path / "csvs" / "README.md").write_text("x")
    res = CliRunner().invoke(cli, ["trace", "stats", str(tmp_path / "csvs")])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "give a trace file itself (AzureLLMInferenceTrace_conv.csv)" in res.output
    (tmp_path / "mc").mkdir()
    (tmp_path / "mc" / "conversation_trace.jsonl").write_text(
        json.dumps({"timestamp": 0, "input_length": 20, "output_length": 2, "hash_ids": [1]})
        + "\n")
    res = CliRunner().invoke(cli, ["trace", "stats", str(tmp_path / "mc")])
    assert res.exit_code == 2
    assert "conversation_trace.jsonl is a mooncake trace: give the file itself" in res.output
    # a folder where a scenario expects a trace file
    res = CliRunner().invoke(cli, ["run", "--set", "workload.format=mooncake", "--set",
                                   f"workload.trace={tmp_path / 'mc'}"])
    assert res.exit_code == 2 and "expected a file, got a folder" in res.output


def test_run_agentic_quickstart_json(tmp_path):
    from inferasim.cli.main import cli

    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["run", str(REPO / "scenarios" / "agentic-quickstart.yaml"),
                                      "--set", "workload.duration_s=120", "--json",
                                      "--out", str(out)])
    assert result.exit_code == 0, result.output + repr(result.exception)
    summary = json.loads(result.output)
    assert summary["requests_completed"] > 8
    assert summary["requests_completed"] == summary["requests_sent"]
    # The lanes' cache warm-up turns go first, at time 0, and the measured phase opens when
    # the last is done (AIPerf's warm-up phase); rates are over the window plus the drain, to
    # the last measured request's finish past the 120 s horizon; total tok/s counts prompt
    # and generated tokens (behaviour.md 5).
    requests = pd.read_csv(out / "requests.csv")
    warmup = requests[requests.arrival_s == 0.0]
    measured = requests[requests.arrival_s > 0.0]
    assert len(warmup) == 8 and summary["requests_sent"] == len(measured)
    opened = warmup.finish_s.max()
    assert measured.arrival_s.min() == pytest.approx(opened)
    assert summary["window_s"] == pytest.approx(measured.finish_s.max() - opened)
    assert summary["window_s"] >= 120.0
    tokens = measured.prompt_tokens.sum(), measured.output_tokens.sum()
    assert summary["output_tok_s"] == pytest.approx(tokens[1] / summary["window_s"])
    assert summary["total_tok_s"] == pytest.approx(sum(tokens) / summary["window_s"])
    assert 0.0 < summary["prefix_hit_rate"] < 1.0


@pytest.mark.parametrize("value", ["sequential", "shuffle", "random"])
def test_sampler_key_is_validated(value, write_yaml):
    from inferasim.config.loader import load_scenario

    sc = load_scenario(REPO / "scenarios" / "agentic-quickstart.yaml",
                       [f"workload.sampler={value}"])
    assert sc.workload.sampler == value
    from inferasim.config.errors import ConfigError

    with pytest.raises(ConfigError, match="sampler"):
        load_scenario(REPO / "scenarios" / "agentic-quickstart.yaml", ["workload.sampler=lifo"])
