"""The KV pool a measured server ran at, read from its closed-loop anchors by Little's law
(inferasim.cost.kv_ceiling; docs/anchors.md "The KV pool the anchors ran at")."""

from __future__ import annotations

import json

import attrs
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from inferasim.anchors.record import AnchorRecord
from inferasim.anchors.store import AnchorStore, read_anchor_file
from inferasim.cli.main import cli
from inferasim.config.catalog import REPO_ROOT
from inferasim.config.loader import load_scenario
from inferasim.cost.calibrated import CalibratedOracle
from inferasim.cost.kv_ceiling import (
    CEILING_SPREAD,
    MODEL_AGREES,
    occupancy,
    read_ceiling,
)
from inferasim.serve.simulation import simulate

GRID = REPO_ROOT / "anchors" / "isl-grid-vllm-h200.json"
GLM5 = REPO_ROOT / "scenarios" / "isl-grid" / "glm5-h200-vllm-fp8-mtp-tp8.yaml"
OSL = 128
CHUNK = 8192
POOL = 200_000   # the synthetic server's real pool, in tokens


def record(isl: int, clients: int, ttft: float, e2e: float, *, idx: str = "",
           dataset: str | None = None, rate: float | None = None,
           tput: float | None = None) -> AnchorRecord:
    workload = {"isl": isl, "osl": OSL, "concurrency": clients}
    if dataset:
        workload["dataset"] = dataset
    if rate:
        workload["request_rate"] = rate
    measurements = {"ttft_median_s": ttft, "e2e_median_s": e2e, "tpot_mean_s": 0.05}
    if tput:
        measurements["tput_per_gpu_total"] = tput
    return AnchorRecord.from_dict({
        "id": f"t-{isl}-c{clients}{idx}", "provenance": {"source": "test", "image": "b1"},
        "regime": {"model": "glm-5", "engine": "vllm", "gpu": "h200", "weight_dtype": "fp8",
                   "spec_method": "none", "tp": 8, "num_gpus": 8},
        "workload": workload, "measurements": measurements})


def at_ceiling(isl: int, clients: int, e2e: float = 30.0, pool: float = POOL) -> AnchorRecord:
    """A closed loop whose running requests fill ``pool`` (less half a prompt): the rest wait."""
    resident = isl + OSL / 2
    running = (pool - isl / 2) / resident
    return record(isl, clients, ttft=e2e * (1 - running / clients), e2e=e2e)


def below(isl: int, clients: int, waiting: float = 0.3, e2e: float = 10.0) -> AnchorRecord:
    """A light loop: nearly every client runs."""
    return record(isl, clients, ttft=e2e * waiting / clients, e2e=e2e)


def grid(pool: float = POOL) -> list[AnchorRecord]:
    return [below(1024, 4), below(2048, 16), below(4096, 16),
            at_ceiling(8192, 32, pool=pool), at_ceiling(8192, 64, pool=pool),
            at_ceiling(16384, 32, pool=pool), at_ceiling(16384, 64, pool=pool)]


def test_occupancy_is_littles_law_on_ttft_and_e2e():
    occ = occupancy(record(8192, 32, ttft=8.0, e2e=32.0))
    assert occ.running == pytest.approx(24.0)
    assert occ.occupied == pytest.approx(24.0 * (8192 + OSL / 2))
    assert occ.offered == pytest.approx(32.0 * (8192 + OSL / 2))


@pytest.mark.parametrize("rec", [
    record(8192, 32, 8.0, 32.0, dataset="agentx"),            # lanes think between turns
    record(8192, 32, 8.0, 32.0, rate=2.0),                    # open loop
    record(8192, 1, 8.0, 32.0),                               # one client: nothing waits
    record(8192, 32, 8.0, 32.0, tput=10_000.0),               # contradicts its own latency
    record(8192, 32, 40.0, 32.0),                             # TTFT past the e2e latency
])
def test_occupancy_refuses_what_littles_law_cannot_read(rec):
    assert occupancy(rec) is None


def test_a_shared_ceiling_across_loads_and_lengths_is_the_pool():
    got = read_ceiling(grid(), model_pool_tokens=330_000, chunk_tokens=CHUNK,
                       tokens_per_step=2.0)
    assert got is not None
    assert got.pool_tokens == pytest.approx(POOL, rel=0.02)
    assert got.model_pool_tokens == 330_000
    assert len(got.anchors) == 4


def test_no_ceiling_where_the_model_pool_already_explains_it():
    model = int(POOL / (1 - MODEL_AGREES / 2))
    assert read_ceiling(grid(), model, CHUNK, 2.0) is None


def test_no_ceiling_from_one_load_or_one_length():
    one_load = [at_ceiling(8192, 32), at_ceiling(12288, 32), at_ceiling(16384, 32)]
    one_length = [at_ceiling(8192, 32), at_ceiling(8192, 48), at_ceiling(8192, 64)]
    for rows in (one_load, one_length):
        assert read_ceiling(rows, 330_000, CHUNK, 2.0) is None


def test_an_anchor_holding_more_than_the_ceiling_refutes_it():
    rows = grid() + [below(8192, 48, waiting=0.5, e2e=30.0)]   # 47.5 requests of 8k resident
    assert read_ceiling(rows, 10**7, CHUNK, 2.0) is None


def test_no_ceiling_where_the_engine_prefilling_every_step_explains_the_queue():
    # a chunk of 512 tokens a step keeps at most 512 x 127 tokens of prompts arriving over one
    # request's decode: the prompts wait for the engine, not for memory
    assert read_ceiling(grid(), 10**7, chunk_tokens=512, tokens_per_step=1.0) is None


@settings(max_examples=60, deadline=None)
@given(pool=st.floats(min_value=50_000, max_value=240_000),   # 8k x 32 clients still queue
       model=st.floats(min_value=50_000, max_value=4_000_000),
       jitter=st.lists(st.floats(min_value=-0.2, max_value=0.2), min_size=7, max_size=7))
def test_a_ceiling_read_bounds_every_anchor_and_undercuts_the_model(pool, model, jitter):
    rows = [attrs.evolve(r, measurements=attrs.evolve(
        r.measurements, ttft_median_s=min(r.measurements.e2e_median_s * 0.99,
                                          r.measurements.ttft_median_s * (1 + j))))
        for r, j in zip(grid(pool), jitter, strict=True)]
    got = read_ceiling(rows, int(model), CHUNK, 2.0)
    if got is None:
        return
    occupied = [o.occupied for o in map(occupancy, rows) if o is not None]
    assert max(occupied) <= (1 + CEILING_SPREAD) * got.occupancy_tokens
    assert got.pool_tokens > got.occupancy_tokens
    assert got.pool_tokens < (1 - MODEL_AGREES) * model


# -- the shipped grid ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def grid_store():
    return AnchorStore(read_anchor_file(GRID))


@pytest.fixture(scope="module")
def glm5():
    return load_scenario(GLM5, ["workload.duration_s=150"])


def test_the_glm5_grid_shows_its_pool_and_the_replay_runs_at_it(glm5, grid_store):
    oracle = CalibratedOracle(glm5, grid_store)
    ceiling = oracle.kv_ceiling
    assert ceiling is not None
    # 205-217k tokens resident from 6k prompts at 48 clients to 16k at 64 (docs/anchors.md),
    # against the memory model's 320k
    assert 205_000 <= ceiling.occupancy_tokens <= 217_000
    assert ceiling.pool_tokens < 0.7 * ceiling.model_pool_tokens
    assert oracle.calibration["kv_pool_measured"]["pool_tokens"] == ceiling.pool_tokens
    result = simulate(glm5, store=grid_store)
    assert result.kv_pool_tokens == pytest.approx(ceiling.pool_tokens, rel=0.001)
    # a pool the scenario states is the user's, not the anchors'
    stated = attrs.evolve(glm5, engine=attrs.evolve(glm5.engine, kv_pool_tokens=300_000))
    assert simulate(stated, store=grid_store).kv_pool_tokens == 300_000


def test_the_projection_sizes_its_batch_cap_at_the_measured_pool(glm5, grid_store):
    from inferasim.sweep.projection import project

    oracle = CalibratedOracle(glm5, grid_store)
    resident = glm5.workload.isl + glm5.workload.osl / 2
    got = project(glm5, oracle=oracle)
    assert got["batch_cap"] == pytest.approx(oracle.kv_ceiling.pool_tokens / resident, abs=1)
    assert got["batch_cap"] < 0.7 * oracle.kv_ceiling.model_pool_tokens / resident


def test_the_other_grid_models_show_no_ceiling(grid_store):
    # MiniMax TEP8 holds up to 258k tokens at 8k x 64 where its 32-client rows hold 72-80k,
    # and Qwen3.5 grows with every load: neither is a ceiling
    rows = list(grid_store)
    for model in ("minimax-m2.5", "qwen3.5-397b-a17b"):
        mine = [r for r in rows if r.regime.model == model]
        for tp_ep in {(r.regime.tp, r.regime.ep, r.regime.dp_attention) for r in mine}:
            group = [r for r in mine
                     if (r.regime.tp, r.regime.ep, r.regime.dp_attention) == tp_ep]
            assert read_ceiling(group, 10**8, CHUNK, 1.0) is None, (model, tp_ep)


def test_the_cli_reports_the_measured_pool():
    out = CliRunner().invoke(cli, ["run", str(GLM5), "--set", "workload.duration_s=150",
                                    "--json"])
    assert out.exit_code == 0, out.output
    summary = json.loads(out.output)
    measured = summary["calibration"]["kv_pool_measured"]
    assert summary["kv_pool_tokens"] == pytest.approx(measured["pool_tokens"], rel=0.001)
    assert measured["model_pool_tokens"] > measured["pool_tokens"]
    assert measured["reserve_gib"] > 5


def test_the_occupancy_table_shows_the_ceiling_and_where_it_is_read():
    out = CliRunner().invoke(cli, ["anchors", "occupancy", "--anchors", str(GRID)])
    assert out.exit_code == 0, out.output
    assert "4 deployment(s)" in out.output and "1 with a KV ceiling" in out.output
    glm5 = out.output.split("\n\n")[0]
    assert "the anchors ran at 215," in glm5
    assert "16384/128" in glm5 and glm5.count("*") == 16 + 1   # the marked cells, the legend
    rows = json.loads(CliRunner().invoke(
        cli, ["anchors", "occupancy", "--anchors", str(GRID), "--json"]).output)
    ceilings = [r for r in rows if r["ceiling"]]
    assert len(ceilings) == 1 and ceilings[0]["regime"].startswith("vllm h200 fp8 mtp+1")
    marked = set(ceilings[0]["ceiling"]["anchors"])
    held = [a for a in ceilings[0]["anchors"] if a["id"] in marked]
    assert min(a["occupied_tokens"] for a in held) >= 0.92 * max(
        a["occupied_tokens"] for a in ceilings[0]["anchors"])


def test_the_occupancy_table_names_a_missing_anchor_file(tmp_path):
    out = CliRunner().invoke(cli, ["anchors", "occupancy", "--anchors",
                                   str(tmp_path / "none.json")])
    assert out.exit_code == 2
    assert "none.json" in out.output and "Traceback" not in out.output
