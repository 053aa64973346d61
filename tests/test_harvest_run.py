"""harvest run, end to end on loopback: the plan's server command is replaced by the stand-in
server (tests/harvest_standin_server.py, a TEST DOUBLE) and each client command by the loopback
client (inferasim.harvest.loopback_client). Covers start, health timeout, a failed probe,
teardown (also of a server that ignores SIGTERM and of its worker), Ctrl-C, and that no process
of the server's group is left behind; then parse and the anchors store."""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from inferasim.anchors.store import AnchorStore, read_anchor_file
from inferasim.cli.harvest_cmd import harvest
from inferasim.config.loader import load_scenario
from inferasim.harvest.loopback_client import probe_argv
from inferasim.harvest.parse import parse_path
from inferasim.harvest.plan import build_plan, write_plan
from inferasim.harvest.run import group_alive, run_plan

HERE = Path(__file__).parent
STANDIN = HERE / "harvest_standin_server.py"
SCENARIO = HERE / "golden" / "harvest" / "dsr1-mi355x.yaml"
LOAD = ["workload.isl=128", "workload.osl=8", "workload.concurrency=4"]
MTP = ["engine.name=vllm", "speculative.method=mtp", "speculative.draft_tokens=3"]

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def standin_plan(folder: Path, sets: list[str], *, server_args: list[str] = (),
                 health_timeout: float = 20.0) -> dict:
    """A real plan for the scenario, launched through the stand-in and the loopback client."""
    scenario = load_scenario(SCENARIO, sets, check_fit=False)
    port = free_port()
    plan = build_plan(scenario, scenario_ref=str(SCENARIO), overrides=sets, port=port,
                      prompts_per_client=2, prefill_prompts=2, health_timeout_s=health_timeout)
    base = f"http://127.0.0.1:{port}"
    plan["server"]["launch"] = [sys.executable, str(STANDIN), "--port", str(port),
                                "--lifetime", "60", "--pid-file", "standin.pid", *server_args]
    plan["capture"]["version"] = [sys.executable, "-c", "print('0.0.0+standin')"]
    # A stand-in "GPU tool": prints what amd-smi prints for the part.
    plan["capture"]["gpu"] = [[sys.executable, "-c", "print('| 0000:05:00.0 AMD Instinct MI355 OAM |')"]]
    for probe in plan["probes"]:
        probe["launch"] = probe_argv(probe, base_url=base, model=plan["regime"]["model_path"],
                                     python=sys.executable)
        probe["timeout_s"] = 60
    write_plan(plan, folder)
    return plan


def pids(folder: Path) -> list[int]:
    return [int(x) for x in (folder / "standin.pid").read_text().split()]


def assert_nothing_left(record: dict, folder: Path) -> None:
    pgid = record["server"]["pgid"]
    assert record["server"]["stop"]["left_running"] is False
    assert not group_alive(pgid)
    for pid in pids(folder):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        # Only a zombie (exited, awaiting its reaper) may remain visible.
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        assert state == "Z", f"process {pid} of the server's group is still running"


def test_run_end_to_end_then_parse_and_store(tmp_path):
    sets = MTP + LOAD
    # two tokens a chunk, as a speculating server that accepts a draft a step streams them
    # (one a chunk would read as nothing accepted: a plain decode row)
    plan = standin_plan(tmp_path, sets, server_args=["--spawn-child", "--tokens-per-chunk", "2"])
    record = run_plan(tmp_path, health_timeout_s=20, stop_grace_s=5, poll_s=0.1, echo=lambda s: None)
    assert record["status"] == "ok", json.dumps(record, indent=1)
    assert [p["status"] for p in record["probes"]] == ["ok"] * len(plan["probes"])
    assert record["server"]["healthy"] and record["gpu"]["part"] == "mi355x"
    assert record["engine_version"]["version"] == "0.0.0+standin"
    for name in ("run.json", "server.log", "gpu.txt", "engine_version.txt"):
        assert (tmp_path / name).is_file()
    assert "TEST DOUBLE" in (tmp_path / "server.log").read_text()
    assert_nothing_left(record, tmp_path)

    parsed = parse_path(tmp_path)
    measured = [p for p in plan["probes"] if p["kind"] != "warmup"]
    assert plan["probes"][0]["kind"] == "warmup"
    assert len(parsed.records) == len(measured) and not parsed.skipped
    for r in parsed.records:
        reg = r.regime
        assert (reg.engine, reg.gpu, reg.spec_method, reg.draft_tokens) == ("vllm", "mi355x", "mtp", 3)
        assert (reg.tp, reg.model, reg.kv_dtype, reg.attention_backend) == (8, "deepseek-r1", "fp8", "STANDIN")
        assert r.provenance.engine_version == "0.0.0+standin"
        assert r.server_args["kv_cache_tokens"] == 4096
        assert r.decode_step[1].startswith("mean_tpot (speculative")
    seeds = [n for r in parsed.records for n in r.provenance.notes if n.startswith("seed ")]
    assert len(set(seeds)) == len(seeds)

    # The store takes them for the scenario they measured ...
    result = CliRunner().invoke(harvest, ["parse", str(tmp_path)])
    assert result.exit_code == 0, result.output
    store = AnchorStore.load(tmp_path / "anchors.json")
    # (the stand-in's backend name is its own kernel family: compare without it)
    target = load_scenario(SCENARIO, sets + ["engine.attention_backend=STANDIN"], check_fit=False)
    ok = store.for_target(target)
    assert len(ok.usable) == len(measured) and not ok.refused
    assert ok.prefill_calibrated
    # The sweep covers the target batch. On a loaded machine the stand-in's few requests can
    # stretch a run's duration past its latencies (a tail), and such a row, contradicting
    # itself, calibrates nothing: the store then names it, and only then warns.
    broken = [r.id for r in store if r.little_mismatch()]
    if broken:
        assert all(any(b in w for w in ok.warnings) for b in broken), ok.warnings
    else:
        assert not ok.warnings
    # ... and refuse them, naming the axis, for another GPU part or speculative depth.
    other = store.for_target(load_scenario(SCENARIO, sets + ["engine.attention_backend=STANDIN",
                                                              "gpu.name=mi325x"], check_fit=False))
    assert not other.usable and {a for r in other.refused for a in r.axes} == {"gpu"}
    depth = store.for_target(load_scenario(SCENARIO, sets + ["engine.attention_backend=STANDIN",
                                                              "speculative.draft_tokens=1"],
                                           check_fit=False))
    assert {a for r in depth.refused for a in r.axes} == {"speculative"}


def test_coalesced_stream_reads_the_decode_step_from_mean_tpot(tmp_path):
    sets = ["engine.name=vllm"] + LOAD
    standin_plan(tmp_path, sets, server_args=["--tokens-per-chunk", "4", "--token-delay", "0.004"])
    record = run_plan(tmp_path, stop_grace_s=5, poll_s=0.1, echo=lambda s: None)
    assert record["status"] == "ok"
    decode = [r for r in parse_path(tmp_path).records if "decode" in r.id]
    assert decode and all("coalesced" in r.decode_step[1] for r in decode)
    assert_nothing_left(record, tmp_path)


def test_health_timeout_stops_the_server_and_runs_no_probe(tmp_path):
    standin_plan(tmp_path, ["engine.name=vllm"] + LOAD, server_args=["--startup-delay", "30"])
    result = CliRunner().invoke(harvest, ["run", str(tmp_path), "--health-timeout", "1.5",
                                          "--stop-grace", "5"])
    assert result.exit_code == 1
    record = json.loads((tmp_path / "run.json").read_text())
    assert record["status"] == "server-unhealthy"
    assert "not healthy after 1.5 s" in record["server"]["health"]
    assert {p["status"] for p in record["probes"]} == {"not-run"}
    assert_nothing_left(record, tmp_path)
    parse = CliRunner().invoke(harvest, ["parse", str(tmp_path)])
    assert parse.exit_code == 2 and "no anchors" in parse.output


def test_failed_probe_is_recorded_failed_never_as_a_measurement(tmp_path):
    # The stand-in refuses requests for 8 tokens: every decode probe (OSL 8) fails.
    plan = standin_plan(tmp_path, ["engine.name=vllm"] + LOAD,
                        server_args=["--fail-max-tokens", "8"])
    record = run_plan(tmp_path, stop_grace_s=5, poll_s=0.1, echo=lambda s: None)
    assert record["status"] == "partial"
    status = {p["id"]: p for p in record["probes"]}
    for probe in plan["probes"]:
        want = "failed" if probe["kind"] == "decode" else "ok"  # warm-up: OSL 16
        assert status[probe["id"]]["status"] == want
    assert "exited with status 1" in status["decode-c1-r1"]["reason"]
    parsed = parse_path(tmp_path)
    assert {r.id.rsplit("-", 2)[-2] for r in parsed.records} == {f"isl{i}" for i in (32, 64, 96, 128)}
    assert len(parsed.skipped) == 3 and all("failed" in s.reason for s in parsed.skipped)
    assert_nothing_left(record, tmp_path)


def test_teardown_escalates_to_sigkill_for_the_whole_group(tmp_path):
    standin_plan(tmp_path, ["engine.name=vllm"] + LOAD,
                 server_args=["--ignore-sigterm", "--spawn-child", "--startup-delay", "30"])
    record = run_plan(tmp_path, health_timeout_s=1.0, stop_grace_s=0.5, poll_s=0.1,
                      echo=lambda s: None)
    assert record["server"]["stop"]["signals"] == ["SIGTERM", "SIGKILL"]
    assert len(pids(tmp_path)) == 2  # the server and its worker
    assert_nothing_left(record, tmp_path)


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                    reason="signal handlers need the main thread")
def test_ctrl_c_stops_the_server(tmp_path):
    standin_plan(tmp_path, ["engine.name=vllm"] + LOAD, server_args=["--startup-delay", "30"])
    timer = threading.Timer(1.5, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        started = time.monotonic()
        record = run_plan(tmp_path, health_timeout_s=20, stop_grace_s=5, poll_s=0.1,
                          echo=lambda s: None)
    finally:
        timer.cancel()
    assert time.monotonic() - started < 15
    assert record["status"] == "interrupted" and record["interrupted_by"] == "SIGINT"
    assert_nothing_left(record, tmp_path)
    assert json.loads((tmp_path / "run.json").read_text())["status"] == "interrupted"


def test_parse_writes_an_anchor_file_the_store_reads(tmp_path):
    standin_plan(tmp_path, ["engine.name=sglang"] + LOAD)
    record = run_plan(tmp_path, stop_grace_s=5, poll_s=0.1, echo=lambda s: None)
    assert record["status"] == "ok"
    out = tmp_path / "x.yaml"
    result = CliRunner().invoke(harvest, ["parse", str(tmp_path), "--out", str(out)])
    assert result.exit_code == 0, result.output
    records = read_anchor_file(out)
    assert records and {r.regime.engine for r in records} == {"sglang"}
    assert {r.regime.dp_attention for r in records} == {1}


def test_a_server_that_cannot_start_is_a_failed_run(tmp_path):
    plan = standin_plan(tmp_path, ["engine.name=vllm"] + LOAD)
    plan["server"]["launch"] = [str(tmp_path / "no-such-engine")]
    write_plan(plan, tmp_path)
    result = CliRunner().invoke(harvest, ["run", str(tmp_path)])
    assert result.exit_code == 1
    record = json.loads((tmp_path / "run.json").read_text())
    assert record["status"] == "server-not-started"
    assert {p["status"] for p in record["probes"]} == {"not-run"}


def test_a_trt_plan_writes_its_options_file_and_parses_to_the_regime_it_launched(tmp_path):
    """TensorRT-LLM takes attention DP, the block size, the KV dtype and MTP from its options
    file, not its command line: run writes the file beside the plan, and parse reads it back."""
    from inferasim.harvest.trt_launch import OPTIONS_FILE

    sets = ["engine.name=trt", "gpu.name=b200", "parallel.tp=8", "parallel.ep=8",
            "parallel.dp_attention=8", "speculative.method=mtp", "speculative.draft_tokens=3",
            "engine.kv_dtype=fp8", *LOAD]
    plan = standin_plan(tmp_path, sets, server_args=["--tokens-per-chunk", "2"])
    plan["capture"]["gpu"] = [[sys.executable, "-c", "print('NVIDIA B200, 183359 MiB, 570.1')"]]
    write_plan(plan, tmp_path)
    record = run_plan(tmp_path, health_timeout_s=20, stop_grace_s=5, poll_s=0.1,
                      echo=lambda s: None)
    assert record["status"] == "ok", json.dumps(record, indent=1)
    assert (tmp_path / OPTIONS_FILE).read_text() == plan["server"]["files"][OPTIONS_FILE]
    parsed = parse_path(tmp_path)
    assert parsed.records and not parsed.skipped
    for r in parsed.records:
        reg = r.regime
        assert (reg.engine, reg.tp, reg.ep, reg.dp_attention) == ("trt", 8, 8, 8)
        assert (reg.spec_method, reg.draft_tokens, reg.page_size, reg.kv_dtype) == (
            "mtp", 3, 32, "fp8")
