"""Azure LLM inference traces (workload.format: azure): the loader, an open-loop replay at
the recorded arrivals, the CLI on the shipped 2023 trace, and bad files."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from inferasim.cli.main import cli
from inferasim.config.errors import ConfigError
from inferasim.config.loader import load_scenario
from inferasim.report.run_report import replay_summary
from inferasim.serve.simulation import simulate
from inferasim.workload.azure import load_azure
from inferasim.workload.sources import workload_source
from inferasim.workload.trace_stats import trace_stats
from tests.conftest import shared_data

CONV = ("azure-2023", "AzureLLMInferenceTrace_conv.csv")
ROWS = ("TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,374,44\n"
        "2023-11-16 18:15:50.9951690,374,109\n"
        "2023-11-16 18:15:51.2224670,879,0\n")


def _scenario(path, *overrides):
    return load_scenario(None, ["workload.format=azure", f"workload.trace={path}",
                                "model.name=llama-3.1-8b", "gpu.name=h100", *overrides])


def test_arrivals_are_the_recorded_stamps_from_the_first(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(ROWS)
    arrivals = list(workload_source(_scenario(path), np.random.default_rng(0)).arrivals())
    assert [a.time_s for a in arrivals] == pytest.approx([0.0, 4.314579, 4.541877])
    assert [a.request.prompt_tokens for a in arrivals] == [374, 374, 879]
    assert [a.request.output_tokens for a in arrivals] == [44, 109, 1]  # a first token
    halved = workload_source(_scenario(path, "workload.rate_scale=2"),
                             np.random.default_rng(0)).arrivals()
    assert [a.time_s for a in halved] == pytest.approx([0.0, 2.1572895, 2.2709385])


def test_no_two_requests_share_a_prefix(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(ROWS.splitlines(True)[0] + "".join(
        f"2023-11-16 18:15:{10 + i:02d}.0,4096,8\n" for i in range(20)))
    summary = replay_summary(simulate(_scenario(path)))[1]
    assert summary["requests_completed"] == 20 and summary["prefix_hit_rate"] == 0.0


def test_the_shipped_conversation_trace_replays_whole():
    path = shared_data(*CONV)
    trace = load_azure(path)
    assert len(trace) == 19366  # the README's row count
    assert trace.times_s[-1] == pytest.approx(3502, abs=1.0)
    assert trace.input_tokens.mean() == pytest.approx(1154.7, abs=0.1)
    stats = trace_stats(path)
    assert stats["format"] == "azure" and stats["ideal_prefix_reuse"] == 0.0
    sc = _scenario(path, "workload.duration_s=300")
    summary = replay_summary(simulate(sc))[1]
    sent = int((trace.times_s < 300).sum())
    assert summary["requests_completed"] == sent > 1000
    assert summary["input_tok_s"] * summary["window_s"] == pytest.approx(
        trace.input_tokens[trace.times_s < 300].sum(), rel=1e-9)


def test_the_cli_runs_the_trace_and_reads_its_stats():
    path = shared_data(*CONV)
    out = CliRunner().invoke(cli, ["run", "--set", "workload.format=azure", "--set",
                                   f"workload.trace={path}", "--set", "workload.duration_s=60",
                                   "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["requests_completed"] > 100
    stats = CliRunner().invoke(cli, ["trace", "stats", str(path)])
    assert stats.exit_code == 0 and "(azure)" in stats.output


@pytest.mark.parametrize("text, words", [
    ("time,in,out\n1,2,3\n", "expected a CSV with columns TIMESTAMP, ContextTokens"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n", "no requests"),
    (ROWS + "yesterday,10,10\n", "line 5: expected a timestamp"),
    (ROWS + "2023-11-16 18:15:52.0,0,10\n", "line 5: .*ContextTokens >= 1"),
    (ROWS + "2023-11-16 18:15:52.0,12.5,10\n", "line 5: .*whole numbers"),
])
def test_a_file_that_is_no_azure_trace_is_refused_naming_the_line(text, words, tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(ConfigError, match=words) as err:
        simulate(_scenario(path))
    assert err.value.file == str(path)
