"""The CLI end to end: run the bundled scenario, --json keys, --out contents, describe."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from inferasim.cli.main import cli
from tests.conftest import REPO

REQUIRED = {"requests_completed", "window_s", "output_tok_s", "input_tok_s", "total_tok_s",
            "ttft_mean_s", "ttft_p50_s", "ttft_p90_s", "itl_mean_ms", "tpot_mean_ms",
            "e2e_mean_s", "prefix_hit_rate", "kv_pool_tokens", "calibration"}


def test_run_json_and_out(tmp_path):
    out = tmp_path / "run1"
    result = CliRunner().invoke(cli, ["run", "--set", "workload.duration_s=60",
                                      "--set", "workload.concurrency=4", "--json",
                                      "--out", str(out)])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert REQUIRED <= set(summary)
    assert summary["requests_completed"] > 0
    assert summary["output_tok_s"] > 0 and summary["ttft_mean_s"] > 0
    assert summary["calibration"]["mode"] == "analytic"
    frame = pd.read_csv(out / "requests.csv")
    assert {"arrival_s", "first_token_s", "finish_s", "prompt_tokens", "cached_tokens",
            "output_tokens"} <= set(frame.columns)
    assert (frame.arrival_s <= frame.first_token_s).all()
    assert (frame.first_token_s <= frame.finish_s).all()
    assert (frame.cached_tokens <= frame.prompt_tokens).all()
    assert json.loads((out / "summary.json").read_text())["requests_completed"] == \
        summary["requests_completed"]
    assert (out / "scenario.resolved.yaml").exists() and (out / "occupancy.csv").exists()


def test_run_table():
    result = CliRunner().invoke(cli, ["run", "--set", "workload.duration_s=30"])
    assert result.exit_code == 0, result.output
    assert "output tok/s" in result.output and "prefix hit rate" in result.output


def test_describe_gives_each_disaggregated_pool_what_its_run_allocates():
    # describe showed the scenario's own memory plan and one instance's GPUs, where a
    # disaggregated run allocates each pool by its own layout and counts every GPU
    sets = ["--set", "topology.kind=disaggregated", "--set",
            "topology.decode.engine={mem_fraction: 0.6}", "--set", "workload.duration_s=10"]
    described = json.loads(CliRunner().invoke(cli, ["describe", "--json", *sets]).output)
    ran = json.loads(CliRunner().invoke(cli, ["run", "--json", *sets]).output)
    assert described["pools"]["decode"]["kv_pool_tokens"] == ran["kv_pool_tokens"]
    assert described["pools"]["prefill"]["kv_pool_tokens"] == ran["prefill_kv_pool_tokens"]
    assert ran["kv_pool_tokens"] < ran["prefill_kv_pool_tokens"]
    assert described["gpus"] == ran["gpus"] == 2 and described["gpus_per_instance"] == 1


def test_describe_deepseek_kv_layer_bytes():
    for kv, expect in (("bf16", 1152), ("fp8", 576)):
        result = CliRunner().invoke(cli, ["describe", "--set", "model.name=deepseek-r1",
                                          "--set", f"engine.kv_dtype={kv}", "--json"])
        assert result.exit_code == 0, result.output
        data = json.loads(result.output)
        assert data["kv_bytes_per_token_layer"] == expect
        assert {"weight_bytes_per_gpu", "kv_bytes_per_token", "kv_pool_tokens"} <= set(data)


def test_out_where_nothing_can_be_written_is_one_line(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    result = CliRunner().invoke(cli, ["run", "--set", "workload.duration_s=10",
                                      "--out", str(blocker / "run")])
    assert result.exit_code == 2
    assert "a-file/run: cannot write here" in result.output
    assert "Traceback" not in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_strict_json_writes_missing_metrics_as_null():
    import math

    import numpy as np

    from inferasim.report import strict_json

    text = strict_json.dumps({"a": math.nan, "b": [1.5, np.float64("inf")], "c": {"d": -math.inf},
                              "e": np.float64(2.0), "f": "x"})
    assert json.loads(text) == {"a": None, "b": [1.5, None], "c": {"d": None}, "e": 2.0, "f": "x"}


def test_every_scenario_shortcut_flag_reaches_its_key():
    # behaviour.md 4 and 5 name these as the user's knobs; each must land on its scenario key.
    # describe takes only the sizing flags (issue 32): the replay flags are checked through
    # the options' own resolver, which every replaying command calls
    from inferasim.cli.options import SCENARIO_FLAG_KEYS, flag_overrides
    from inferasim.config.loader import load_scenario, scenario_to_dict

    given = {"--kv-pool-tokens": "100000", "--max-num-seqs": "7",
             "--workload-resident-tokens": "5000", "--idle-cap-ms": "-1",
             "--uncached-prompt-latency-us": "12.5", "--uncached-prompt-latency-max-tokens": "900"}
    flags = {f.removeprefix("--").replace("-", "_"): float(v) for f, v in given.items()}
    flags.update(exact_steps=True, anchors="none")
    resolved = scenario_to_dict(load_scenario(None, flag_overrides(flags)))
    expected = {SCENARIO_FLAG_KEYS[f.removeprefix("--").replace("-", "_")]: float(v)
                for f, v in given.items()}
    expected["sim.exact_steps"] = True
    expected["sim.anchors"] = "none"
    # a new flag needs a line here (the old --des-client-idle-cap-ms maps to idle_cap_ms too)
    assert set(expected) == set(SCENARIO_FLAG_KEYS.values())
    for key, value in expected.items():
        section, name = key.split(".")
        assert resolved[section][name] == value, key
    sized = CliRunner().invoke(cli, ["describe", "--json", "--kv-pool-tokens", "100000",
                                     "--max-num-seqs", "7"])
    assert sized.exit_code == 0, sized.output


def test_resident_tokens_flag_on_a_replay_is_said_unread():
    """Only the projection reads --workload-resident-tokens: a replay admits from the
    requests' own prompts, so run says the flag went unread (on stderr) and runs alike."""
    base = ["run", "--json", "--set", "workload.duration_s=30"]
    plain = CliRunner().invoke(cli, base)
    flagged = CliRunner().invoke(cli, [*base, "--workload-resident-tokens", "5000"])
    assert flagged.exit_code == 0, flagged.output
    assert "read by `inferasim project` only" in flagged.stderr
    assert "resident" not in plain.stderr
    drop = ("wall_s",)
    a, b = json.loads(plain.stdout), json.loads(flagged.stdout)
    assert {k: v for k, v in a.items() if k not in drop} == \
        {k: v for k, v in b.items() if k not in drop}
    projected = CliRunner().invoke(cli, ["project", "--json", "--workload-resident-tokens",
                                         "5000"])
    assert projected.exit_code == 0 and "read by" not in projected.stderr


def test_uncached_prompt_latency_flag_moves_ttft_only():
    base = ["run", "--json", "--set", "workload.duration_s=60", "--set", "workload.seed=3"]
    off = json.loads(CliRunner().invoke(cli, base).output)
    on = json.loads(CliRunner().invoke(cli, [*base, "--uncached-prompt-latency-us", "50",
                                             "--uncached-prompt-latency-max-tokens",
                                             "2000"]).output)
    assert on["ttft_mean_s"] > off["ttft_mean_s"] + 0.01
    # Host time before the first token: the engine's steps, so every finish, are unchanged.
    assert on["e2e_mean_s"] == off["e2e_mean_s"]
    assert on["output_tok_s"] == off["output_tok_s"]


def test_run_table_prints_the_calibration_warnings():
    # behaviour.md 1: a decode sweep short of the asked batch is warned, in the table too.
    result = CliRunner().invoke(cli, [
        "run", str(REPO / "scenarios" / "inferencemax" / "dsr1-mi355x-sglang-fp8-tp8.yaml"),
        "--set", "workload.concurrency=256", "--set", "workload.duration_s=30"])
    assert result.exit_code == 0, result.output
    # the scenario's build (v0.5.12) measured concurrency 4 and 8
    warned = [ln for ln in result.output.splitlines() if "sweep stops at concurrency 8" in ln]
    assert len(warned) == 1 and warned[0].lstrip().startswith("- decode:")


def test_run_table_says_an_analytic_fallback_once():
    # the fallback's reason is the calibration line itself; its notes repeat it (the store's
    # shorter form too), and the table does not print it again under the line
    result = CliRunner().invoke(cli, ["run", "--set", "workload.duration_s=20"])
    assert result.exit_code == 0, result.output
    said = [ln for ln in result.output.splitlines() if "no usable anchor" in ln]
    assert len(said) == 1 and said[0].startswith("calibration")


def test_summary_reports_the_percentiles_aiperf_does():
    # agentx.md: the published runs record mean / p75 / p90 / p95 of TTFT, TPOT and E2E.
    result = CliRunner().invoke(cli, ["run", "--json", "--set", "workload.duration_s=120"])
    s = json.loads(result.output)
    assert s["ttft_p75_s"] <= s["ttft_p90_s"] <= s["ttft_p95_s"] <= s["ttft_p99_s"]
    assert s["tpot_p75_ms"] <= s["tpot_p90_ms"] <= s["tpot_p95_ms"]
    assert s["e2e_p75_s"] <= s["e2e_p90_s"] <= s["e2e_p95_s"]
    assert s["ttft_p75_s"] < s["ttft_p95_s"]  # a spread, not one value copied


def test_client_itl_counts_a_gap_per_streamed_chunk():
    # engines.md 8: a client that records a gap per received chunk sees ITL rise about k-fold
    # under --stream-interval k, and by the tokens per verify step under speculative decoding;
    # TPOT and the per-token ITL do not move.
    def run(*sets):
        args = ["run", "--json", "--set", "workload.duration_s=120"]
        for s in sets:
            args += ["--set", s]
        return json.loads(CliRunner().invoke(cli, args).output)

    plain, buffered = run(), run("engine.stream_interval=10")
    assert plain["itl_client_mean_ms"] == pytest.approx(plain["itl_mean_ms"])
    assert buffered["itl_mean_ms"] == plain["itl_mean_ms"]
    ratio = buffered["itl_client_mean_ms"] / buffered["itl_mean_ms"]
    assert 9.0 < ratio <= 10.0  # each request's last chunk carries the remainder
    mtp = run("speculative.method=mtp", "speculative.draft_tokens=3",
              "speculative.acceptance=0.6")
    emitted = 1 + 0.6 + 0.6**2 + 0.6**3
    assert mtp["itl_client_mean_ms"] / mtp["itl_mean_ms"] == pytest.approx(emitted, rel=0.02)


def test_out_never_replaces_a_folder_inferasim_did_not_write(tmp_path):
    # --out replaces its folder whole; a folder holding someone else's files is refused
    # before the replay, and nothing in it is touched. Earlier results are replaced.
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    args = ["--set", "workload.duration_s=10"]
    refused = CliRunner().invoke(cli, ["run", *args, "--out", str(mine)])
    assert refused.exit_code == 2 and "did not write" in refused.output
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
    swept = CliRunner().invoke(cli, ["sweep", "--concurrency", "1", "--out", str(mine),
                                     "--jobs", "1", "--no-plots", *args])
    assert swept.exit_code == 2 and [p.name for p in mine.iterdir()] == ["notes.txt"]
    result = tmp_path / "result"
    for _ in range(2):  # a new folder, then the earlier result replaced
        assert CliRunner().invoke(cli, ["run", *args, "--out", str(result)]).exit_code == 0
    assert (result / "summary.json").is_file()


def test_out_refuses_the_current_folder_an_empty_path_and_a_link(tmp_path, monkeypatch):
    # Each would have the replacement delete what the user did not name: the folder the shell
    # stands in (or one holding it), or the link instead of where it points.
    args = ["--set", "workload.duration_s=10"]
    result = tmp_path / "result"
    assert CliRunner().invoke(cli, ["run", *args, "--out", str(result)]).exit_code == 0
    before = sorted(p.name for p in result.iterdir())
    link = tmp_path / "link"
    link.symlink_to(result)
    monkeypatch.chdir(result)
    for out, expected in ((".", "current folder"), (str(tmp_path), "current folder"),
                          ("", "--out is empty"), (str(link), "symbolic link")):
        refused = CliRunner().invoke(cli, ["run", *args, "--out", out])
        assert refused.exit_code == 2 and expected in refused.output, (out, refused.output)
    assert sorted(p.name for p in result.iterdir()) == before
    asked = CliRunner().invoke(cli, ["run", *args, "--format", "parquet"])
    assert asked.exit_code == 2 and "give --out too" in asked.output


@pytest.mark.parametrize("args", [
    ["trace", "synth", "--out", ""],
    ["harvest", "plan", str(REPO / "scenarios" / "quickstart.yaml"), "--out", ""],
    ["anchors", "import", "--from", "grid", "x.csv", "--out", ""],
    ["trace", "synth", "--out", "x.jsonl", "--sessions", "1000000000"],
])
def test_an_empty_out_or_an_unbounded_size_is_a_usage_error(tmp_path, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2 and "Invalid value" in result.output, result.output
    assert not any(tmp_path.iterdir())  # nothing written where the shell stands


def test_a_replaced_result_keeps_the_old_one_until_the_new_one_is_in(tmp_path, monkeypatch):
    # The old result is renamed aside, the new one renamed in, then the old one deleted: a
    # failed rename puts the old one back whole, and the new folder has a result's mode.
    import os

    from inferasim.config.errors import ConfigError
    from inferasim.report import atomic

    out = tmp_path / "result"
    out.mkdir()
    (out / atomic.RESULT_MARKER).write_text("old")
    real_replace = os.replace

    def failing(src, dst):
        if Path(src).name.startswith(".result-") and "-old-" not in Path(src).name:
            raise OSError(28, "No space left on device")
        return real_replace(src, dst)

    monkeypatch.setattr(atomic.os, "replace", failing)
    with pytest.raises(ConfigError, match="cannot replace the folder"):
        with atomic.atomic_dir(out) as tmp:
            (tmp / atomic.RESULT_MARKER).write_text("new")
    assert (out / atomic.RESULT_MARKER).read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["result"]  # no placeholder, no temp
    monkeypatch.setattr(atomic.os, "replace", real_replace)
    with atomic.atomic_dir(out) as tmp:
        (tmp / atomic.RESULT_MARKER).write_text("new")
    assert (out / atomic.RESULT_MARKER).read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["result"]
    assert out.stat().st_mode & 0o077 == 0o777 & ~atomic._umask() & 0o077


def test_unreadable_inputs_are_one_line_errors(tmp_path):
    # A binary scenario, a folder where a trace file belongs, and Mooncake rows with a
    # negative length or a NaN stamp: one line naming the file, exit 2, no traceback.
    binary = tmp_path / "scenario.yaml"
    binary.write_bytes(bytes(range(128, 256)))
    folder = tmp_path / "traces"
    folder.mkdir()
    negative = tmp_path / "neg.jsonl"
    negative.write_text('{"timestamp": 0, "input_length": -5, "output_length": 3, '
                        '"hash_ids": [1]}\n')
    nan = tmp_path / "nan.jsonl"
    nan.write_text('{"timestamp": "nan", "input_length": 5, "output_length": 3, '
                   '"hash_ids": [1]}\n')
    cases = [
        (["run", str(binary)], "not UTF-8"),
        (["run", "--set", "workload.format=sessions", "--set", f"workload.trace={folder}"],
         "expected a file, got a folder"),
        (["run", "--set", "workload.format=mooncake", "--set", f"workload.trace={negative}"],
         "input_length >= 1"),
        (["run", "--set", "workload.format=mooncake", "--set", f"workload.trace={nan}"],
         "timestamp must be a finite number"),
        # bytes that are not text name the file they are in, whatever reads them
        (["run", "--set", "workload.format=mooncake", "--set", f"workload.trace={binary}"],
         f"{binary}: line 1: not UTF-8 text"),
        (["anchors", "list", "--anchors", str(binary.with_suffix(".json"))],
         f"{binary.with_suffix('.json')}: expected an anchor file (JSON or YAML), found bytes"),
    ]
    binary.with_suffix(".json").write_bytes(bytes(range(128, 256)))
    cut = tmp_path / "cut.jsonl"
    cut.write_text('{"id": "s1", "turns": [{"id": "t1", "in": 5\n')
    cases.append((["trace", "stats", str(cut)], "line 1: not JSON"))
    for args, needle in cases:
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 2, (args, result.output)
        lines = [ln for ln in result.output.splitlines() if ln.strip()]
        assert len(lines) == 1 and needle in lines[0], (args, result.output)


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_run_stream_rows_writes_what_the_in_memory_run_writes(tmp_path, fmt):
    """--stream-rows: the same rows, summary and scenario as the run keeping rows in memory
    (occupancy in row-group order, the same samples)."""
    args = ["run", "--set", "workload.duration_s=120", "--set", "workload.concurrency=16",
            "--set", "topology.instances=2", "--format", fmt]
    kept, streamed = tmp_path / "kept", tmp_path / "streamed"
    for out, extra in ((kept, []), (streamed, ["--stream-rows"])):
        done = CliRunner().invoke(cli, [*args, *extra, "--out", str(out)])
        assert done.exit_code == 0, done.output
    for name in ("summary.json", "scenario.resolved.yaml"):
        assert (kept / name).read_text() == (streamed / name).read_text(), name
    read = pd.read_parquet if fmt == "parquet" else pd.read_csv
    a, b = read(kept / f"requests.{fmt}"), read(streamed / f"requests.{fmt}")
    assert len(a) > 50
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    by = ["instance", "time_s"]
    oa, ob = (pd.read_csv(out / "occupancy.csv").sort_values(by, kind="stable")
              .reset_index(drop=True) for out in (kept, streamed))
    pd.testing.assert_frame_equal(oa, ob, check_exact=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept", "streamed"]  # no staging


def test_run_stream_rows_needs_out_and_a_failed_run_writes_nothing(tmp_path):
    asked = CliRunner().invoke(cli, ["run", "--stream-rows"])
    assert asked.exit_code == 2 and "give --out too" in asked.output
    out = tmp_path / "never"
    failed = CliRunner().invoke(cli, ["run", "--stream-rows", "--out", str(out),
                                      "--set", "workload.format=random",
                                      "--set", "workload.isl=2000", "--set", "workload.osl=10",
                                      "--set", "workload.rate=1",
                                      "--set", "workload.duration_s=10",
                                      "--kv-pool-tokens", "1000"])
    assert failed.exit_code == 2 and "no request completed" in failed.output, failed.output
    assert list(tmp_path.iterdir()) == []
