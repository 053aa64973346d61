"""Issue 32: one option name per concept; the old spellings still work, with one line."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from inferasim.cli.main import cli

DEPRECATED = "is deprecated and will be removed; use"


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.mark.parametrize("new, old", [
    (["anchors", "list", "--anchors", "anchors", "--json"],
     ["anchors", "list", "anchors", "--json"]),
    (["anchors", "check", "scenarios/quickstart.yaml", "--anchors", "anchors", "--json"],
     ["anchors", "check", "scenarios/quickstart.yaml", "--dir", "anchors", "--json"]),
])
def test_the_anchor_folder_is_anchors_everywhere_and_old_spellings_warn(new, old):
    got_new, got_old = invoke(*new), invoke(*old)
    assert got_new.exit_code == 0 and got_old.exit_code == 0, got_old.output
    assert DEPRECATED not in got_new.output
    warned = [ln for ln in got_old.output.splitlines() if DEPRECATED in ln]
    assert len(warned) == 1 and "--anchors" in warned[0]
    body = [ln for ln in got_old.output.splitlines() if DEPRECATED not in ln]
    assert json.loads("\n".join(body)) == json.loads(got_new.output)


def test_the_anchor_folder_given_twice_is_an_error():
    result = invoke("anchors", "list", "anchors", "--anchors", "anchors")
    assert result.exit_code == 2 and "give the anchor folder once" in result.output


def test_idle_cap_has_a_domain_name_and_the_old_one_warns():
    base = ["run", "--json", "--set", "workload.duration_s=5"]
    new, old = invoke(*base, "--idle-cap-ms", "-1"), invoke(*base, "--des-client-idle-cap-ms", "-1")
    assert new.exit_code == 0 and old.exit_code == 0, old.output
    assert any(DEPRECATED in ln and "--idle-cap-ms" in ln for ln in old.output.splitlines())
    assert DEPRECATED not in new.output


def test_describe_refuses_replay_flags_with_one_line():
    result = invoke("describe", "--exact-steps")
    assert result.exit_code == 2 and "No such option '--exact-steps'" in result.output


def test_sweep_prints_json(tmp_path):
    result = invoke("sweep", "--concurrency", "1,2", "--set", "workload.duration_s=5",
                    "--jobs", "1", "--no-plots", "--json", "--out", tmp_path / "s")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [r["concurrency"] for r in rows] == [1, 2]


def test_compare_takes_the_shared_scenario_options():
    result = invoke("compare", "scenarios/quickstart.yaml", "scenarios/quickstart.yaml",
                    "--set", "workload.duration_s=5", "--anchors", "none", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["rows"]


def test_describe_derives_the_description_when_the_deployment_is_overridden():
    result = invoke("describe", "--set", "model.name=deepseek-r1", "--set", "gpu.name=mi355x",
                    "--set", "parallel.tp=8", "--json")
    assert result.exit_code == 0, result.output
    text = json.loads(result.output)["scenario"]["description"]
    assert "Llama" not in text and "H100" not in text
    assert "deepseek-r1" in text and "mi355x" in text and "tp 8" in text
    plain = json.loads(invoke("describe", "--json").output)["scenario"]["description"]
    assert plain.startswith("Llama-3.1-8B on one H100")


def test_price_defaults_a_dense_model_to_decode_and_names_the_gpu_it_assumed():
    result = CliRunner().invoke(cli, ["price", "llama-3.1-8b", "--json"])
    assert result.exit_code == 0, result.output
    head = json.loads(result.stdout)
    assert head["phase"] == "decode" and head["gpu_assumed"] is True
    table = CliRunner().invoke(cli, ["price", "llama-3.1-8b"]).output
    assert f"no --gpu given; priced on {head['gpu']}" in table
    moe = json.loads(CliRunner().invoke(cli, ["price", "glm-5.2", "--json"]).stdout)
    assert moe["phase"] == "dpa-decode"


def test_the_progress_bar_shows_only_on_a_terminal_after_a_delay_and_clears_itself():
    import io

    from inferasim.cli.progress import replay_bar, rungs_bar, wanted

    class Tty(io.StringIO):
        def isatty(self):
            return True

    assert wanted(False, Tty()) and not wanted(True, Tty()) and not wanted(False, io.StringIO())
    now = [0.0]
    stream = Tty()
    bar, on_clock = replay_bar(True, stream=stream, clock=lambda: now[0])
    on_clock(10.0, 100.0)
    assert stream.getvalue() == ""  # a short replay shows nothing
    now[0] = 5.0
    on_clock(50.0, 100.0)
    assert "50%" in stream.getvalue() and "50 of 100 s simulated" in stream.getvalue()
    assert "~0:05 left" in stream.getvalue()
    bar.close()
    assert stream.getvalue().endswith("\r")
    stream = Tty()
    bar, on_done = rungs_bar(4, True, stream=stream, clock=lambda: now[0], delay_s=0)
    on_done()
    assert "1/4 rungs done, 3 left" in stream.getvalue()
