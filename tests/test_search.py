"""inferasim search: the space, the pruning, the choice, the output, the cache and resuming."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from inferasim.cli.main import cli
from inferasim.config.errors import ConfigError
from inferasim.config.knobs import Knobs
from inferasim.config.loader import load_scenario
from inferasim.search.run import Verdict, pareto, pick_best, prune, search
from inferasim.search.sla import Sla
from inferasim.search.space import (
    DeploymentResolver,
    build_space,
    parse_space,
    parse_split,
)
from inferasim.sweep.executors import InProcessExecutor
from inferasim.sweep.resume import ResumingExecutor

DSR1 = "scenarios/inferencemax/dsr1-b200-sglang-fp8-tp8.yaml"
SMALL = ["--set", "workload.duration_s=60", "--space", "workload.concurrency=8,24",
         "--space", "engine.name=vllm,sglang", "--space", "topology.kind=colocated"]


def test_sla_parses_bounds_and_refuses_bad_ones():
    sla = Sla.parse(["ttft_p90_s=2,tpot_p90_ms=40", "interactivity_tok_s=20"])
    assert dict(sla.bounds) == {"ttft_p90_s": 2.0, "tpot_p90_ms": 40.0, "interactivity_tok_s": 20.0}
    assert sla.met({"ttft_p90_s": 1.0, "tpot_p90_ms": 40.0, "interactivity_tok_s": 25.0})
    assert not sla.met({"ttft_p90_s": 2.5, "tpot_p90_ms": 10.0, "interactivity_tok_s": 25.0})
    assert not sla.met({"ttft_p90_s": math.nan, "tpot_p90_ms": 10.0, "interactivity_tok_s": 25.0})
    # the slack is the worst bound's ratio of room
    assert Sla.parse(["ttft_p90_s=2"]).slack({"ttft_p90_s": 4.0}) == pytest.approx(0.5)
    for bad in ("ttft_p99_s=1", "ttft_p90_s=-1", "ttft_p90_s=x", "ttft_p90_s=1,ttft_p90_s=2"):
        with pytest.raises(ConfigError, match="--sla"):
            Sla.parse([bad])


def test_space_options_are_checked():
    assert parse_split("2p1d") == (2, 1)
    for bad in ("2p", "p1d", "0p1d", "2x1"):
        with pytest.raises(ConfigError, match="topology.split"):
            parse_split(bad)
    with pytest.raises(ConfigError, match="--space"):
        parse_space(["engine.name"])
    with pytest.raises(ConfigError, match="knobs"):
        parse_space(["INFERASIM_DPA_DECODE_DENSE=0,1"])


def test_default_space_of_deepseek_r1_on_16_gpus():
    resolver = DeploymentResolver(DSR1, ["engine.scheduler_recv_interval=1"])
    space = build_space(resolver, 16, [])
    assert len(space.candidates) >= 200
    assert all(c.scenario.total_gpus <= 16 for c in space.candidates)
    engines = {c.scenario.engine.name for c in space.candidates}
    assert engines == {"vllm", "sglang", "trt"}           # NVIDIA part: no ATOM
    kinds = {c.scenario.topology.kind for c in space.candidates}
    assert kinds == {"colocated", "disaggregated"}
    # an NVIDIA part's disaggregated pools run natively or under Dynamo; colocated, natively
    runs = {(c.scenario.topology.kind, c.scenario.topology.orchestrator)
            for c in space.candidates}
    assert runs == {("colocated", "native"), ("disaggregated", "native"),
                    ("disaggregated", "dynamo")}
    # the report names candidates by label: two must never read alike (native and Dynamo
    # 1p1d pools once did)
    labels = [c.label for c in space.candidates]
    assert len(set(labels)) == len(labels)
    assert {c.scenario.speculative.method for c in space.candidates} == {"none", "mtp"}
    # TP1/TP2 cannot hold R1's weights on a B200: refused with the loader's reason
    assert any("weights need" in reason for _, reason in space.refused)
    # another engine starts from its own catalog entry, not the SGLang recipe's keys
    vllm = next(c for c in space.candidates if c.scenario.engine.name == "vllm")
    assert vllm.scenario.engine.scheduler_recv_interval == 1


def test_a_kv_offload_connector_is_searched_only_under_the_engines_that_run_it():
    resolver = DeploymentResolver(DSR1, ["gpu.name=mi355x", "engine.scheduler_recv_interval=1"])
    space = build_space(resolver, 8, parse_space([
        "engine.name=atom,sglang,vllm", "parallel.tp=8", "workload.concurrency=16",
        "topology.kind=colocated", "speculative.method=none",
        "engine.kv_offload=none,lmcache,hicache"]))
    pairs = {(c.scenario.engine.name, c.scenario.engine.kv_offload) for c in space.candidates}
    assert pairs == {("atom", "none"), ("sglang", "none"), ("sglang", "lmcache"),
                     ("sglang", "hicache"), ("vllm", "none"), ("vllm", "lmcache")}
    assert any("hicache runs under sglang, mori-sglang, not vllm" in reason
               for _, reason in space.refused)


def test_an_agentic_workloads_space_searches_each_engines_own_offload_connectors():
    """Agentic lanes past the GPU pool's cliff either buy GPUs or spill to host memory: the
    default space of a lane-driven workload crosses each colocated layout with the offload
    connectors its engine runs; a chat workload's has no such axis."""
    agentic = DeploymentResolver("scenarios/agentic-quickstart.yaml", [])
    space = build_space(agentic, 1, parse_space(["workload.concurrency=8",
                                                 "speculative.method=none"]))
    pairs = {(c.scenario.engine.name, c.scenario.engine.kv_offload)
             for c in space.candidates}
    assert pairs == {("vllm", "none"), ("vllm", "lmcache"), ("vllm", "vllm-native"),
                     ("sglang", "none"), ("sglang", "lmcache"), ("sglang", "hicache"),
                     ("atom", "none")}
    assert not space.refused
    labels = {c.deployment.label for c in space.candidates}
    assert "sglang tp1 1x +hicache" in labels and "sglang tp1 1x" in labels
    chat = build_space(DeploymentResolver(None, []), 1, parse_space([
        "workload.concurrency=8", "speculative.method=none"]))
    assert {c.scenario.engine.kv_offload for c in chat.candidates} == {"none"}


def test_space_on_an_amd_part_and_narrowed():
    resolver = DeploymentResolver(DSR1, ["gpu.name=mi355x", "engine.scheduler_recv_interval=1"])
    space = build_space(resolver, 8, parse_space(["engine.name=atom,sglang", "parallel.tp=8",
                                                  "workload.concurrency=16"]))
    assert {c.scenario.engine.name for c in space.candidates} == {"atom", "sglang"}
    assert {c.concurrency for c in space.candidates} == {16}
    assert {c.scenario.parallel.tp for c in space.candidates} == {8}
    assert {c.scenario.topology.orchestrator for c in space.candidates} == {"native"}  # AMD
    # an engine named for a part it does not run on is refused with the loader's reason
    named = build_space(resolver, 8, parse_space(["engine.name=trt,sglang", "parallel.tp=8",
                                                  "workload.concurrency=16"]))
    assert {c.scenario.engine.name for c in named.candidates} == {"sglang"}
    assert any("trt runs on nvidia parts only" in reason for _, reason in named.refused)
    with pytest.raises(ConfigError, match="budget"):
        build_space(resolver, 0, [])
    with pytest.raises(ConfigError, match="native or dynamo"):
        build_space(resolver, 8, parse_space(["topology.orchestrator=ray"]))


def test_a_template_whose_own_layout_does_not_fit_is_still_searched():
    # the quickstart is TP1: DeepSeek-R1's weights fit four MI355X, not one or two
    resolver = DeploymentResolver(None, ["model.name=deepseek-r1", "gpu.name=mi355x"])
    space = build_space(resolver, 8, parse_space(["engine.name=sglang",
                                                  "topology.kind=colocated",
                                                  "workload.concurrency=16"]))
    assert {c.scenario.parallel.tp for c in space.candidates} == {4, 8}
    assert any("weights need" in reason for _, reason in space.refused)


def _proj(tput, intvty):
    return {"total_tok_s_per_gpu": tput, "interactivity_tok_s": intvty}


def test_prune_drops_sla_misses_and_the_dominated_with_a_margin():
    sla = Sla.parse(["interactivity_tok_s=20"])
    projections = [_proj(1000, 60),          # sure: meets with more than the margin
                   _proj(1500, 10),          # misses the floor by 2x: pruned
                   _proj(1400, 17),          # misses by less than the margin: replayed
                   _proj(500, 50),           # trails the sure best by 2x: pruned
                   _proj(900, 40),           # within the margin of the best: replayed
                   Verdict("replay", "no closed form")]
    verdicts = prune([None] * 6, projections, sla, "throughput_per_gpu", 0.3)
    assert [v.stage for v in verdicts] == ["replay", "pruned", "replay", "pruned", "replay",
                                           "replay"]
    assert "SLA" in verdicts[1].reason and "trails" in verdicts[3].reason




def test_without_an_sla_the_dominated_are_still_pruned():
    # No bound: every candidate meets the SLA with room to spare, so the best projected one
    # sets the bar (the slack read 1 before, no candidate was sure, and all 1,554 of the
    # quickstart's candidates on 8 GPUs went to the replay).
    sla = Sla.parse([])
    assert sla.slack({"ttft_p90_s": 9.0}) == math.inf and sla.met({})
    assert Sla.parse(["ttft_p90_s=2"]).slack({"ttft_p90_s": 0.0}) == math.inf
    projections = [_proj(1000, 60), _proj(500, 50), _proj(800, 40)]
    verdicts = prune([None] * 3, projections, sla, "throughput_per_gpu", 0.3)
    assert [v.stage for v in verdicts] == ["replay", "pruned", "replay"]
def test_pareto_and_pick_best():
    pts = [(0, 100, 10), (1, 80, 20), (2, 70, 15), (3, 50, 30), (4, math.nan, 5)]
    assert pareto(pts) == {0, 1, 3}
    records = {i: {"total_tok_s_per_gpu": x, "interactivity_tok_s": y, "cost_per_mtok_usd": 1 / x,
                   "joules_per_token": 2.0} for i, x, y in pts[:4]}
    best = pick_best(list(records), records, Sla.parse(["interactivity_tok_s=15"]))
    assert best["throughput_per_gpu"] == 1 and best["cost_per_mtok"] == 1
    assert pick_best(list(records), records, Sla.parse(["interactivity_tok_s=99"])) == {
        "throughput_per_gpu": None, "cost_per_mtok": None, "energy_per_token": None}


class _Counting(InProcessExecutor):
    """Runs tasks in this process and counts them; stops after ``stop_after`` (a kill)."""

    def __init__(self, stop_after=None):
        self.ran = 0
        self.stop_after = stop_after

    def run(self, fn, tasks):
        for index, task in enumerate(tasks):
            if self.stop_after is not None and self.ran >= self.stop_after:
                raise KeyboardInterrupt
            self.ran += 1
            yield index, fn(task)


def _small_space():
    resolver = DeploymentResolver(None, ["workload.duration_s=40"])
    return build_space(resolver, 2, parse_space(["engine.name=vllm", "topology.kind=colocated",
                                                 "workload.concurrency=4,16"]))


class _FirstRoundMisses(_Counting):
    """Replays for real, but every candidate of the first round misses the SLA in its replay:
    the projection was wrong about the ones it thought best."""

    def __init__(self):
        super().__init__()
        self.rounds = 0

    def run(self, fn, tasks):
        self.rounds += 1
        for index, (record, wall) in super().run(fn, tasks):
            if self.rounds == 1:
                record = {**record, "interactivity_tok_s": 0.0}
            yield index, (record, wall)


def test_pruned_candidates_are_reprieved_when_the_best_projected_misses_in_its_replay():
    from inferasim.search.run import reprieved

    space = _small_space()
    sla = Sla.parse(["interactivity_tok_s=10"])
    executor = _FirstRoundMisses()
    result = search(space.candidates, sla=sla, objective="throughput_per_gpu", knobs=Knobs(),
                    executor=executor, margin=0.1, audit=0)
    back = [i for i, v in enumerate(result.verdicts) if v.reason.startswith("reprieved")]
    assert back and executor.rounds >= 2
    assert all(i in result.records for i in back)
    assert result.best["throughput_per_gpu"] in back  # the first round's all missed
    # none left pruned for trailing that the confirmed best does not beat by the margin
    assert reprieved(result.verdicts, result.records, sla, "throughput_per_gpu", 0.1) == []


def test_reprieved_are_the_pruned_the_confirmed_best_does_not_beat():
    from inferasim.search.run import TRAILS, reprieved

    def pruned(value):
        return Verdict("pruned", f"projected throughput_per_gpu {value} {TRAILS} 100",
                       {"total_tok_s_per_gpu": value}, bar=100.0)

    verdicts = [Verdict("replay", "projected within the margin", {"total_tok_s_per_gpu": 100}),
                pruned(50), pruned(70), Verdict("pruned", "projected to miss the SLA by 2x",
                                                {"total_tok_s_per_gpu": 200})]
    sla = Sla.parse(["interactivity_tok_s=10"])
    # the bar missed the SLA in its replay: nothing confirmed, every one trailing it is back
    miss = {0: {"total_tok_s_per_gpu": 95, "interactivity_tok_s": 5}}
    assert reprieved(verdicts, miss, sla, "throughput_per_gpu", 0.3) == [2, 1]
    # confirmed at 80, within the margin of the bar (80 x 1.3 >= 100): the premise holds
    near = {0: {"total_tok_s_per_gpu": 80, "interactivity_tok_s": 20}}
    assert reprieved(verdicts, near, sla, "throughput_per_gpu", 0.3) == []
    # confirmed at 60, far below the bar: those it does not beat by the margin come back
    far = {0: {"total_tok_s_per_gpu": 60, "interactivity_tok_s": 20}}
    assert reprieved(verdicts, far, sla, "throughput_per_gpu", 0.3) == [2, 1]  # 65 >= 60
    farther = {**far, 2: {"total_tok_s_per_gpu": 75, "interactivity_tok_s": 20}}
    assert reprieved(verdicts, farther, sla, "throughput_per_gpu", 0.3) == []  # 65 < 75


def test_killed_search_resumes_without_replaying_what_it_finished(tmp_path):
    space = _small_space()
    sla = Sla.parse(["interactivity_tok_s=10"])
    args = dict(sla=sla, objective="throughput_per_gpu", knobs=Knobs(), margin=0.3, audit=1)
    first = _Counting(stop_after=2)
    with pytest.raises(KeyboardInterrupt):
        search(space.candidates, executor=ResumingExecutor(first, tmp_path), **args)
    assert first.ran == 2
    second = _Counting()
    result = search(space.candidates, executor=ResumingExecutor(second, tmp_path), **args)
    assert result.resumed == 2
    assert second.ran == len(result.records) - 2 > 0
    third = _Counting()
    again = search(space.candidates, executor=ResumingExecutor(third, tmp_path), **args)
    assert third.ran == 0 and again.best == result.best


def test_search_cli_end_to_end(tmp_path):
    out, cache = tmp_path / "out", tmp_path / "cache"
    argv = ["search", "--gpus", "2", "--sla", "interactivity_tok_s=15", *SMALL,
            "--cache", str(cache), "--out", str(out), "--jobs", "1", "--no-plots"]
    res = CliRunner().invoke(cli, argv)
    assert res.exit_code == 0, res.output
    assert "best for throughput_per_gpu" in res.output
    info = json.loads((out / "search.json").read_text())
    assert info["candidates"] == info["pruned"] + info["survivors"]
    assert info["replayed"] == info["survivors"] + info["audited"]
    best = info["best"]["throughput_per_gpu"]
    assert best is not None
    # the winner is a scenario ready to run
    sc = load_scenario(out / best["scenario"])
    assert sc.total_gpus <= 2 and sc.name == "search-best-throughput_per_gpu"
    timing = json.loads((out / "timing.json").read_text())
    assert timing["replays_run"] == info["replayed"]
    # a second search on the same cache replays nothing and writes the same files
    res2 = CliRunner().invoke(cli, [*argv[:-5], "--cache", str(cache), "--out",
                                    str(tmp_path / "again"), "--jobs", "1", "--no-plots"])
    assert res2.exit_code == 0, res2.output
    assert json.loads((tmp_path / "again" / "timing.json").read_text())["replays_run"] == 0
    for name in ("candidates.csv", "frontier.csv", "search.json"):
        assert (out / name).read_bytes() == (tmp_path / "again" / name).read_bytes()


def test_the_winners_file_names_the_scenarios_files_wherever_it_is_written(
        tmp_path, monkeypatch):
    """A relative trace (beside the scenario) and a relative model file (typed on the
    command line) are written as absolute paths: the winner is run from its own folder."""
    import shutil

    from inferasim.config.catalog import CATALOG_DIR, SCENARIO_DIR

    monkeypatch.chdir(tmp_path)
    shutil.copy(CATALOG_DIR / "models" / "llama-3.1-8b.yaml", tmp_path / "mine.yaml")
    resolver = DeploymentResolver(SCENARIO_DIR / "agentic-quickstart.yaml",
                                  ["model.name=mine.yaml", "gpu.name=h100"])
    tree = resolver.tree([("parallel.tp", "1")])
    assert tree["workload"]["trace"] == str((SCENARIO_DIR.parent / "traces" /
                                             "agentic-small.jsonl").resolve())
    assert tree["model"]["name"] == str(tmp_path / "mine.yaml")
    elsewhere = tmp_path / "out" / "best.yaml"
    elsewhere.parent.mkdir()
    elsewhere.write_text(yaml.safe_dump(tree))
    monkeypatch.chdir(elsewhere.parent)
    sc = load_scenario(str(elsewhere))
    assert sc.model.name == "llama-3.1-8b"  # the file's own name: key
    assert sc.workload.trace == tree["workload"]["trace"]


def test_a_recorded_trace_is_searched_by_deployment_not_by_clients(tmp_path):
    """The trace's stamps drive an Azure or Mooncake replay: no concurrency ladder, no
    'c16' in a label or the table."""
    trace = tmp_path / "t.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(
        f"2023-11-16 18:15:{10 + i:02d}.0,2048,16\n" for i in range(12)))
    out = tmp_path / "out"
    argv = ["search", "--set", "workload.format=azure", "--set", f"workload.trace={trace}",
            "--gpus", "2", "--space", "engine.name=vllm", "--space", "topology.kind=colocated",
            "--cache", str(tmp_path / "cache"), "--out", str(out), "--jobs", "1",
            "--no-plots"]
    res = CliRunner().invoke(cli, argv)
    assert res.exit_code == 0, res.output
    table = pd.read_csv(out / "candidates.csv")
    assert table.concurrency.isna().all()
    assert table.deployment.is_unique  # one candidate per deployment
    assert " c16" not in res.output and "best for throughput_per_gpu: #" in res.output
    best = yaml.safe_load((out / "best-throughput_per_gpu.yaml").read_text())
    assert best["workload"]["format"] == "azure"


def test_search_cli_refuses_bad_input_clearly(tmp_path):
    runner = CliRunner()
    res = runner.invoke(cli, ["search", "--gpus", "2", "--sla", "ttft=1", "--out",
                              str(tmp_path / "o")])
    assert res.exit_code != 0 and "--sla" in res.output and "Traceback" not in res.output
    res = runner.invoke(cli, ["search", "--gpus", "2", "--objective", "cost_per_mtok",
                              "--set", "gpu.name=mi355x", "--set", "model.name=llama-3.1-8b",
                              "--out", str(tmp_path / "o")])
    assert res.exit_code != 0 and "--price mi355x=USD" in res.output
    assert not (tmp_path / "o").exists()
    # a --space key no scenario has is named in the refusal, not only the loader's list
    res = runner.invoke(cli, ["search", "--gpus", "2", "--space", "engine.bogus=1",
                              "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "engine.bogus: unknown key" in res.output
    assert "Traceback" not in res.output and not (tmp_path / "o").exists()


IMAX = __import__("pathlib").Path(__file__).resolve().parents[2] / "shared" / "data" / \
    "inferencemax" / "benchmarks_flat.csv"


@pytest.mark.skipif(not IMAX.is_file(), reason=f"{IMAX} is absent (the shared data)")
def test_search_picks_against_inferencemax_measurement():
    """The search's rule on held-out predictions against InferenceMAX's best measured
    configuration per GPU, shape and SLA (docs/search.md). 24 of 33 picks are within 10%
    today; the check fails on a regression below 21."""
    from inferasim.validate.search import left_out, load_records, picks, points, report

    records = load_records(IMAX)
    groups = points(records)
    info = report(picks(groups), left_out(records))
    assert info["picks"] == 33 and info["no_pick"] == 0
    # ATOM FP8 MTP at 512 clients records 50.5 tok/s/GPU against the 2,358 its own latency
    # gives: no candidate, and said so
    contradicted = "imax-mi355x-atom-fp8-mtp-tp8-ep1-1024-1024-c512-2026-06-02"
    assert [row["anchor"] for row in info["left_out"]] == [contradicted]
    assert contradicted not in {p.anchor for group in groups.values() for p in group}
    assert info["within_tolerance"] >= 21
    assert info["median_ratio"] == pytest.approx(1.0, abs=0.02)
    # with the disaggregated deployments as candidates (GB200, GB300 and H100 join): 41 of 51
    every = report(picks(points(load_records(IMAX, include_disaggregated=True))))
    assert every["picks"] == 51 and every["no_pick"] == 0
    assert every["within_tolerance"] >= 31


def test_a_winner_the_real_server_would_refuse_to_start_says_so(tmp_path):
    """Llama-3.3-70B on one MI300X each: a KV pool of 121k tokens, less than the model's
    131k context, which vLLM's start-up check refuses unless --max-model-len says less."""
    out = tmp_path / "out"
    res = CliRunner().invoke(cli, [
        "search", "--set", "model.name=llama-3.3-70b", "--set", "gpu.name=mi300x",
        # prompts the pool holds (a request past it would be refused: no SLA met)
        "--set", "workload.synthetic.max_prompt_tokens=65536",
        "--set", "workload.duration_s=60", "--gpus", "2", "--space", "engine.name=vllm",
        "--space", "parallel.tp=1", "--space", "topology.kind=colocated", "--space",
        "workload.concurrency=8", "--cache", str(tmp_path / "cache"), "--out", str(out),
        "--jobs", "1", "--no-plots"])
    assert res.exit_code == 0, res.output
    best = json.loads((out / "search.json").read_text())["best"]["throughput_per_gpu"]
    assert "vLLM would refuse to start" in best["caveat"]
    assert "note: as deployed, vLLM would refuse to start" in res.output
    head = (out / "best-throughput_per_gpu.yaml").read_text().split("\nname:")[0]
    assert "--max-model-len at most the pool" in head.replace("\n# ", " ")


def _refusing_search(tmp_path, tps):
    """Llama-3.3-70B on H100s with 8k prompts: at TP2 its KV pool holds 2,400 tokens."""
    return CliRunner().invoke(cli, [
        "search", "--set", "model.name=llama-3.3-70b", "--set", "gpu.name=h100",
        "--set", "workload.format=random", "--set", "workload.isl=8000", "--set",
        "workload.osl=64", "--set", "workload.duration_s=60", "--gpus", "4", "--space",
        "engine.name=vllm", "--space", f"parallel.tp={tps}", "--space",
        "topology.kind=colocated", "--space", "workload.concurrency=4", "--cache",
        str(tmp_path / "cache"), "--out", str(tmp_path / "out"), "--jobs", "1", "--no-plots"])


def test_a_candidate_that_serves_nothing_fails_and_the_search_goes_on(tmp_path):
    res = _refusing_search(tmp_path, "2,4")
    assert res.exit_code == 0, res.output
    info = json.loads((tmp_path / "out" / "search.json").read_text())
    assert [f["deployment"] for f in info["failed"]] == ["vllm tp2 2x c4"]
    assert "the pool holds 2400" in info["failed"][0]["reason"]
    assert info["best"]["throughput_per_gpu"]["deployment"] == "vllm tp4 1x c4"
    assert "1 served nothing" in res.output
    table = pd.read_csv(tmp_path / "out" / "candidates.csv")
    failed = table[table.deployment == "vllm tp2 2x"].iloc[0]
    assert failed.reason.startswith("served nothing") and not failed.meets_sla


def test_a_search_whose_every_replay_serves_nothing_says_why(tmp_path):
    res = _refusing_search(tmp_path, "2")
    assert res.exit_code != 0
    assert "no deployment replayed could serve the workload" in res.output
    assert "the pool holds 2400" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "out").exists()  # nothing half-written


def test_the_search_says_why_trt_candidates_ran_fewer_requests_than_their_clients():
    from types import SimpleNamespace

    from inferasim.search.report import reservation_note

    def note(*sets):
        resolver = DeploymentResolver(None, ["model.name=llama-3.3-70b", "gpu.name=h100",
                                             *sets])
        space = build_space(resolver, 8, parse_space(["engine.name=trt,vllm",
                                                      "topology.kind=colocated",
                                                      "workload.concurrency=32"]))
        return reservation_note(SimpleNamespace(candidates=space.candidates))

    said = note()
    assert said and "workload.synthetic.max_tokens" in said
    assert note("workload.synthetic.max_tokens=2048") is None


def test_a_replay_that_refused_part_of_its_workload_meets_no_sla():
    """It served a lighter load than it was given: its throughput and latencies are not the
    workload's."""
    sla = Sla.parse([])
    assert sla.met({"total_tok_s_per_gpu": 100.0, "requests_failed": 0})
    assert not sla.met({"total_tok_s_per_gpu": 100.0, "requests_failed": 3})
    assert not Sla.parse(["ttft_p90_s=5"]).met({"ttft_p90_s": 1.0, "requests_failed": 1})


def test_the_search_says_which_parts_have_no_price():
    # A part without a sourced GPU-hour price shows "-" for $/Mtok: the note says why and
    # how to give one; a --price for it silences the note.
    from types import SimpleNamespace

    from inferasim.search.report import price_note

    resolver = DeploymentResolver(None, ["model.name=llama-3.3-70b", "gpu.name=gb300"])
    space = build_space(resolver, 8, parse_space(["engine.name=vllm",
                                                  "topology.kind=colocated",
                                                  "workload.concurrency=32"]))
    result = SimpleNamespace(candidates=space.candidates)
    said = price_note(result, {})
    assert said and "gb300" in said and "--price gb300=USD" in said
    assert price_note(result, {"gb300": 6.0}) is None
    priced = DeploymentResolver(None, ["model.name=llama-3.3-70b", "gpu.name=h100"])
    space = build_space(priced, 8, parse_space(["engine.name=vllm", "topology.kind=colocated",
                                                "workload.concurrency=32"]))
    assert price_note(SimpleNamespace(candidates=space.candidates), {}) is None
