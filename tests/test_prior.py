"""A prior for a regime no anchor measured: the other models and layouts on the same part and
engine, then on the same part, each calibrated against its own model's analytic step, their
levels pooled by the median (store.PRIOR_LEVELS, cost/prior.py)."""

from __future__ import annotations

import math

import attrs
import numpy as np
import pytest
from click.testing import CliRunner

from inferasim.anchors.record import AnchorRecord
from inferasim.anchors.store import AnchorStore
from inferasim.cli.main import cli
from inferasim.config.catalog import REPO_ROOT
from inferasim.config.loader import catalog_gpu, load_scenario
from inferasim.cost.calibrated import CalibratedOracle
from inferasim.cost.oracle import AnalyticOracle, StepBatch
from inferasim.validate.anchors import validate_store

SCENARIO = REPO_ROOT / "scenarios" / "inferencemax" / "dsr1-mi355x-sglang-fp8-tp8.yaml"
ISL, OSL = 1024, 1024


def record(model: str, conc: int, step: float, *, engine: str = "sglang", spec: str = "none",
           build: str = "lmsysorg/sglang:v0.5.9-rocm700-mi35x", tp: int = 8,
           gpu: str = "mi355x") -> AnchorRecord:
    regime = {"model": model, "engine": engine, "gpu": gpu, "weight_dtype": "fp8",
              "spec_method": spec, "tp": tp, "ep": 1, "dp_attention": 1, "num_gpus": tp}
    if spec != "none":
        regime["draft_tokens"] = 1
    return AnchorRecord.from_dict({
        "id": f"t-{model}-{engine}-{spec}-tp{tp}-{gpu}-{build.rsplit(':', 1)[-1]}-c{conc}",
        "provenance": {"source": "test", "image": build},
        "regime": regime,
        "workload": {"isl": ISL, "osl": OSL, "concurrency": conc},
        "measurements": {"itl_median_s": step, "tpot_mean_s": step, "ttft_median_s": 0.2},
    })


def sweep(model: str, factor: float, **kw) -> list[AnchorRecord]:
    return [record(model, c, factor * s, **kw) for c, s in ((4, 0.010), (16, 0.013), (64, 0.02))]


@pytest.fixture(scope="module")
def target():
    return load_scenario(SCENARIO, ["engine.version=", "workload.isl=1024",
                                    "workload.osl=1024"])


def test_a_target_without_anchors_of_its_regime_takes_the_same_part_and_engine(target):
    store = AnchorStore(sweep("glm-5", 1.0) + sweep("glm-5", 1.0, engine="atom",
                                                    build="rocm/atom:v0.1"))
    found = store.for_target(target)
    assert found.prior_level == "part and engine"
    assert {r.regime.engine for r in found.usable} == {"sglang"}
    assert any("prior" in n for n in found.notes)
    # every anchor was refused for the target's own regime (by model), and stays listed
    assert found.refused_by_axis()["model"] == 6
    assert not store.for_target(target, prior=False).usable


def test_another_engine_on_the_part_is_no_prior(target):
    """Held out by model, the part's other engines priced worse than the analytic model."""
    store = AnchorStore(sweep("glm-5", 1.0, engine="atom", build="rocm/atom:v0.1"))
    found = store.for_target(target)
    assert found.prior_level is None and not found.usable


def test_a_plain_target_never_reads_speculative_regimes(target):
    store = AnchorStore(sweep("glm-5", 1.0, spec="mtp"))
    found = store.for_target(target)
    assert found.prior_level is None and not found.usable


def test_a_speculative_target_reads_the_plain_regimes_of_its_part_and_engine(target):
    """Without a speculative regime on its part and engine, an MTP target takes the plain
    ones, their steps read plain (not scaled by the target's tokens a step) and its verify
    step priced at their level: before, it fell to the analytic step while its plain
    neighbour took the prior."""
    store = AnchorStore(sweep("glm-5", 1.5) + sweep("minimax-m2.5", 2.0))
    mtp = attrs.evolve(target, speculative=attrs.evolve(
        target.speculative, method="mtp", draft_tokens=1, acceptance=0.6))
    found = store.for_target(mtp)
    assert found.prior_level == "part and engine, plain decoding"
    assert {r.regime.spec_method for r in found.usable} == {"none"}
    plain, spec = CalibratedOracle(target, store), CalibratedOracle(mtp, store)
    assert spec.calibration["mode"] == "prior"
    assert spec.prior.ratio == pytest.approx(plain.prior.ratio, rel=1e-9)
    analytic = AnalyticOracle(mtp)
    batch = StepBatch(decode_context=np.full(16, 1500.0))
    assert spec.step(batch).seconds == pytest.approx(
        spec.prior.ratio * analytic.step(batch).seconds)
    # a speculative regime of the part and engine is still the nearer prior
    own = AnchorStore(sweep("glm-5", 1.5) + sweep("minimax-m2.5", 2.0, spec="mtp")
                      ).for_target(mtp)
    assert own.prior_level == "part and engine"
    assert {r.regime.model for r in own.usable} == {"minimax-m2.5"}


def test_a_prior_takes_each_regimes_newest_build(target):
    old = sweep("glm-5", 3.0, build="lmsysorg/sglang:v0.5.2-rocm700-mi35x")
    new = sweep("glm-5", 1.0, build="lmsysorg/sglang:v0.5.9-rocm700-mi35x")
    old = [attrs.evolve(r, provenance=attrs.evolve(r.provenance, date="2025-10-01")) for r in old]
    new = [attrs.evolve(r, provenance=attrs.evolve(r.provenance, date="2026-03-01")) for r in new]
    found = AnchorStore(old + new).for_target(target)
    assert {r.id for r in found.usable} == {r.id for r in new}


def test_the_prior_is_the_median_of_the_regimes_levels_against_their_own_models(target):
    regimes = {"glm-5": 1.2, "minimax-m2.5": 2.0, "kimi-k2.5": 3.5}
    store = AnchorStore([r for m, f in regimes.items() for r in sweep(m, f)])
    oracle = CalibratedOracle(target, store)
    assert oracle.calibration["mode"] == "prior"
    assert oracle.calibration["prior_models"] == sorted(regimes)
    levels = {r.model: r.level for r in oracle.prior.readings}
    assert oracle.prior.ratio == pytest.approx(sorted(levels.values())[1])
    # each level is that regime's measured step over its own model's analytic step: the
    # same steps read against another model would give another level
    doubled = CalibratedOracle(target, AnchorStore(sweep("glm-5", 2.4)))
    assert doubled.prior.ratio == pytest.approx(2 * levels["glm-5"], rel=1e-6)
    # the target's step is the analytic one at the pooled ratio, flat in the batch
    analytic = AnalyticOracle(target)
    for n in (1, 8, 200):
        batch = StepBatch(decode_context=np.full(n, 1500.0))
        assert oracle.step(batch).seconds == pytest.approx(
            oracle.prior.ratio * analytic.step(batch).seconds)
    # the time the anchors' requests spent outside their engine is their harness's: not
    # carried to another model
    assert all(r.oracle.frontend_modelled for r in oracle.prior.readings)
    assert oracle.frontend_latency(4) == 0.0


def test_sim_prior_none_keeps_the_analytic_model(target):
    store = AnchorStore(sweep("glm-5", 1.5))
    off = attrs.evolve(target, sim=attrs.evolve(target.sim, prior="none"))
    assert CalibratedOracle(off, store).calibration["mode"] == "analytic"
    assert CalibratedOracle(target, store).calibration["mode"] == "prior"


def test_a_prior_of_a_model_the_catalog_lacks_is_left_out_with_a_note(target):
    store = AnchorStore(sweep("glm-5", 1.5) + sweep("no-such-model", 1.0))
    oracle = CalibratedOracle(target, store)
    assert oracle.calibration["prior_models"] == ["glm-5"]
    assert any("no-such-model" in n for n in oracle.calibration["notes"])


def test_hold_out_model_predicts_each_model_from_the_others_alone(tmp_path):
    short = [record(m, c, f * s) for m, f in (("deepseek-r1", 1.0), ("glm-5", 1.4))
             for c, s in ((2, 0.010), (4, 0.011))]
    store = AnchorStore(short)
    results = validate_store(store, hold_out="model", target_requests=8)
    preds = [p for g in results for p in g.predictions]
    assert {p.model for p in preds} == {"deepseek-r1", "glm-5"}
    assert {p.calibration for p in preds} == {"prior: part and engine"}
    assert all(math.isfinite(p.predicted["tput_per_gpu"]) for p in preds)


def test_validate_cli_hold_out_model_rows_per_model_and_calibration(tmp_path):
    import json

    path = tmp_path / "two.json"
    recs = [record(m, c, f * s) for m, f in (("deepseek-r1", 1.0), ("glm-5", 1.4))
            for c, s in ((2, 0.010), (4, 0.011))]
    path.write_text(json.dumps({"schema_version": 1, "anchors": [r.to_dict() for r in recs]}))
    out = CliRunner().invoke(cli, ["anchors", "validate", "--anchors", str(path),
                                   "--hold-out", "model", "--markdown"])
    assert out.exit_code == 0, out.output
    assert "| model deepseek-r1 |" in out.output and "| model glm-5 |" in out.output
    data = json.loads(CliRunner().invoke(cli, ["anchors", "validate", "--anchors", str(path),
                                               "--hold-out", "model", "--json"]).output)
    assert set(data["overall_by_model"]) == {"deepseek-r1", "glm-5"}
    assert set(data["overall_by_calibration"]) == {"prior: part and engine"}


def test_anchors_check_says_the_usable_anchors_are_a_prior(tmp_path):
    import json

    path = tmp_path / "glm.json"
    path.write_text(json.dumps({"schema_version": 1,
                                "anchors": [r.to_dict() for r in sweep("glm-5", 1.2)]}))
    out = CliRunner().invoke(cli, ["anchors", "check", str(SCENARIO), "--anchors", str(path),
                                   "--set", "engine.version="])
    assert out.exit_code == 0, out.output
    assert "3 usable as a prior (same part and engine" in out.output
    assert "usable as a prior:" in out.output


def _with_ttft(records: list[AnchorRecord], ttft: float) -> list[AnchorRecord]:
    return [attrs.evolve(r, measurements=attrs.evolve(r.measurements, ttft_median_s=ttft))
            for r in records]


def test_the_same_models_other_layouts_carry_their_time_outside_the_engine(target):
    """Another layout of the target's own model, measured by the same harness, spent the same
    time outside the engine: a colocated target of that model carries it (the median of
    those regimes' readings), and only at loads those regimes measured; another model's is
    never carried."""
    own = _with_ttft(sweep("deepseek-r1", 1.0, tp=4), 0.25)
    other = _with_ttft(sweep("glm-5", 1.3), 0.9)
    oracle = CalibratedOracle(target, AnchorStore(own + other))
    assert oracle.calibration["mode"] == "prior"
    assert oracle.frontend_modelled
    carried = [r for r in oracle.prior.readings if r.model == "deepseek-r1"]
    assert [r.label for r in oracle._frontend_from] == [r.label for r in carried]
    latency = carried[0].oracle.frontend_latency_s
    assert 0.05 < latency < 0.25   # the TTFT beyond its own analytic prefill
    assert oracle.frontend_latency(4) == pytest.approx(latency)
    assert oracle.frontend_latency(64) == pytest.approx(latency)
    # below the lowest load it measured (4 clients), its reading holds that load's queueing
    assert oracle.frontend_latency(2) == 0.0
    assert "time outside the engine" in oracle.calibration["note"]
    assert oracle.calibration["frontend_from"] == [carried[0].label]
    # a target of another model carries none (the GLM-5 regime alone is no layout of it)
    alone = CalibratedOracle(target, AnchorStore(other))
    assert alone.calibration["mode"] == "prior" and not alone.frontend_modelled


def test_the_time_outside_the_engine_is_not_carried_across_attention_dp(target):
    """Attention-DP ranks read a different time before the first token than one instance (held
    out by layout, TRT-LLM's DPA8 rows' TTFT against the DPA1 rows'), so a DPA target carries
    nothing from a layout without it."""
    own = _with_ttft(sweep("deepseek-r1", 1.0, tp=4), 0.25)
    dpa = attrs.evolve(target, parallel=attrs.evolve(target.parallel, dp_attention=8))
    oracle = CalibratedOracle(dpa, AnchorStore(own))
    assert oracle.calibration["mode"] == "prior" and not oracle.frontend_modelled
    assert oracle.frontend_latency(8) == 0.0


def test_the_carried_time_comes_from_one_harness():
    from types import SimpleNamespace

    from inferasim.cost.prior import PooledPrior, RegimeReading

    def regime(label, harness, model="deepseek-r1", **kw):
        return RegimeReading(label, model, 3, 1.0, (4, 64), None, 0.0,
                             SimpleNamespace(frontend_modelled=True), harness, **kw)

    readings = [regime("a", ("inferencemax", "bench")), regime("b", ("inferencemax", "bench")),
                regime("c", ("grid", "vllm-bench")), regime("d", ("inferencemax", "bench"),
                                                         model="glm-5"),
                regime("e", ("inferencemax", "bench"), speculative="mtp"),
                regime("f", ("inferencemax", "bench"), disaggregated=True),
                regime("g", ("inferencemax", "bench"), ranks_apart=True)]
    prior = PooledPrior("part and engine", readings)
    assert [r.label for r in prior.frontend_from("deepseek-r1", "none", False)] == ["a", "b"]
    assert [r.label for r in prior.frontend_from("deepseek-r1", "mtp", False)] == ["e"]
    assert [r.label for r in prior.frontend_from("deepseek-r1", "none", True)] == ["g"]
    assert prior.frontend_from("kimi-k2.5", "none", False) == []


def test_past_the_part_the_prior_is_the_same_engine_on_another_part_of_its_isa(target):
    """No anchor on the target's part and engine: its own model on another part of the same
    ISA under the same engine stands in (MI325X for MI300X, both gfx942), each regime read
    against the analytic step of its own part; another model there, or a part of another ISA,
    never does."""
    mi300x = attrs.evolve(target, gpu=catalog_gpu("mi300x"))
    mi325x = sweep("deepseek-r1", 1.4, gpu="mi325x", build="lmsysorg/sglang:v0.5.9-rocm630-mi30x")
    found = AnchorStore(mi325x).for_target(mi300x)
    assert found.prior_level == "model, ISA and engine"
    assert found.refused_by_axis()["gpu"] == 3
    oracle = CalibratedOracle(mi300x, AnchorStore(mi325x))
    assert oracle.calibration["mode"] == "prior"
    (read,) = oracle.prior.readings
    assert "mi325x" in read.label
    # its level is its steps over the MI325X's analytic step, not the MI300X's
    mi325x_scenario = attrs.evolve(target, gpu=catalog_gpu("mi325x"))
    own = AnalyticOracle(mi325x_scenario).step(
        StepBatch(decode_context=np.full(4, ISL + OSL / 2.0))).seconds
    assert read.level == pytest.approx(1.4 * 0.010 / own, rel=0.05)
    # the same part's anchors come first; another ISA (gfx950) is no prior for gfx942
    assert AnchorStore(mi325x + sweep("glm-5", 1.0, gpu="mi300x")).for_target(
        mi300x).prior_level == "part and engine"
    assert AnchorStore(sweep("deepseek-r1", 1.0)).for_target(mi300x).prior_level is None
    assert AnchorStore(sweep("glm-5", 1.0, gpu="mi325x")).for_target(mi300x).prior_level is None
    # a prior from another part carries no time outside the engine
    timed = _with_ttft(mi325x, 0.25)
    assert not CalibratedOracle(mi300x, AnchorStore(timed)).frontend_modelled


def test_a_dense_model_takes_no_prior_from_mixtures_of_experts(target):
    """Every anchored model is a mixture of experts: a dense target is left to the analytic
    model (the vLLM H200 grids' MoE regimes read a Llama-3.1-8B's decode 4-5x slow), and the
    report says why."""
    from inferasim.config.loader import catalog_model

    dense = attrs.evolve(target, model=catalog_model("llama-3.1-70b"))
    store = AnchorStore(sweep("glm-5", 1.5) + sweep("kimi-k2.5", 2.0))
    assert store.for_target(dense).prior_level == "part and engine"
    oracle = CalibratedOracle(dense, store)
    assert oracle.calibration["mode"] == "analytic" and not oracle.calibrated
    notes = oracle.calibration["notes"]
    assert notes[0].startswith("no regime of the part and engine prices this model")
    assert any("glm-5, kimi-k2.5 are left out" in n for n in notes)
    batch = StepBatch(decode_context=np.full(8, 1500.0))
    assert oracle.step(batch).seconds == pytest.approx(AnalyticOracle(dense).step(batch).seconds)
    # the same anchors price a mixture-of-experts target
    assert CalibratedOracle(target, store).calibration["mode"] == "prior"


def _agentic_rung(hit: float | None) -> AnchorRecord:
    """One agentic rung of another model on the part and engine (GLM-5.1's c4 shape)."""
    workload = {"isl": 80_000, "osl": 800, "concurrency": 4, "dataset": "agentx",
                "decode_batch": 1.9}
    if hit is not None:
        workload.update(prefix_hit_rate=hit, prefill_per_step=15.0)
    return AnchorRecord.from_dict({
        "id": f"t-agentic-glm-5.1-hit{hit}",
        "provenance": {"source": "agentx-ladder", "image": "lmsysorg/sglang:v0.5.9"},
        "regime": {"model": "glm-5.1", "engine": "sglang", "gpu": "mi355x",
                   "weight_dtype": "mxfp4", "spec_method": "none", "tp": 2, "ep": 1,
                   "dp_attention": 1, "num_gpus": 2},
        "workload": workload,
        "measurements": {"itl_mean_s": 0.028, "tput_per_gpu_output": 35.0},
    })


def test_an_agentic_rung_without_its_hit_rate_is_no_prior(target):
    """Its mean ITL holds an unknown number of uncached prompt tokens beside the decodes: read
    as a decode level it priced DeepSeek-R1 on SGLang MI355X (held out by model) at 2.5x the
    analytic step, TPOT +195%; analytic, +17%."""
    unknown = _agentic_rung(None)
    assert unknown.prompt_share_unknown
    found = AnchorStore([unknown]).for_target(target)
    assert found.prior_level is None and not found.usable
    # its own regime still reads it: the same lanes mix alike there
    # (the SGLang default fraction: the MI355X R1 script's 0.68 leaves GLM-5.1 at TP2 no KV)
    own = load_scenario(SCENARIO, ["model.name=glm-5.1", "model.weight_dtype=mxfp4",
                                   "parallel.tp=2", "engine.version=", "engine.mem_fraction=0.77"])
    assert [r.id for r in AnchorStore([unknown]).for_target(own).usable] == [unknown.id]
    # with the hit rate recorded, the prompt share is priced and the rung is a prior
    known = _agentic_rung(0.95)
    assert not known.prompt_share_unknown
    found = AnchorStore([known]).for_target(target)
    assert found.prior_level == "part and engine"
    assert [r.id for r in found.usable] == [known.id]


def test_one_agentic_lane_without_its_hit_rate_is_a_prior(target):
    """One lane's prompt is computed before its first token: its inter-token steps hold
    none, whatever its hit rate."""
    lone = attrs.evolve(_agentic_rung(None), id="t-agentic-one-lane",
                        workload=attrs.evolve(_agentic_rung(None).workload, concurrency=1,
                                              decode_batch=0.8))
    assert not lone.prompt_share_unknown
    assert AnchorStore([lone]).for_target(target).prior_level == "part and engine"


def test_a_prefill_fit_held_at_its_bound_is_no_reading_of_the_prior():
    """A regime whose prefill slope the fit pinned at PREFILL_SLOPE_LIMITS did not describe its
    TTFT (the vLLM H200 Qwen3.5 grid: 8.0, its 1k prompts 4.5 s at four clients); pooled, it
    had put half its bound into every other model's prefill on that part."""
    from types import SimpleNamespace

    from inferasim.cost.prior import PooledPrior, reading
    from inferasim.cost.ttft_model import PREFILL_SLOPE_LIMITS

    anchor = record("glm-5", 4, 0.01)

    def read(slope: float):
        oracle = SimpleNamespace(calibrated=True, decode_table=lambda: {4: 2.0},
                                 prefill_slope=slope, calibration={"prefill": "calibrated"},
                                 prefill_step_overhead_s=0.0, points=[anchor],
                                 decode_splits=lambda: [])
        return reading("r", anchor, oracle)

    lo, hi = PREFILL_SLOPE_LIMITS
    assert read(hi).prefill_slope is None and read(lo).prefill_slope is None
    assert read(2.5).prefill_slope == 2.5
    pooled = PooledPrior("part and engine", [read(2.5), read(hi)])
    assert pooled.prefill_slope == 2.5 and pooled.prefill_calibrated
    assert not PooledPrior("part and engine", [read(hi)]).prefill_calibrated


def test_the_shipped_vllm_h200_prior_says_which_regime_gave_no_prefill_slope():
    """Kimi-K2.5 on 8 x H200 under vLLM has no anchor: its prior is the vLLM H200 grids'. The
    Qwen3.5 grid's fit is held at its bound, so the prior's prefill is MiniMax-M2.5's, and the
    report says why."""
    from inferasim.anchors.loading import default_store

    sc = load_scenario(None, ["model.name=kimi-k2.5", "model.weight_dtype=int4",
                              "gpu.name=h200", "engine.name=vllm", "parallel.tp=8"])
    oracle = CalibratedOracle(sc, default_store())
    assert oracle.calibration["prior_level"] == "part and engine"
    slopes = [(r.model, r.prefill_slope) for r in oracle.prior.readings]
    assert ("qwen3.5-397b-a17b", None) in slopes
    minimax = [s for m, s in slopes if m == "minimax-m2.5" and s is not None]
    assert len(minimax) == 1 and oracle.prefill_slope == pytest.approx(minimax[0])
    assert any("qwen3.5-397b-a17b" in n and "stopped at its bound" in n
               for n in oracle.calibration["notes"])


def _split_reading(label: str, steps):
    from inferasim.cost.prior import RegimeReading

    return RegimeReading(label, label, len(steps), 1.0, (1, 8), None, 0.0, None,
                         steps=tuple(steps))


def test_the_split_recovers_the_attention_and_the_rest_of_the_step():
    """Steps priced at 2.6x the analytic attention and 1.4x the rest, over attention shares
    from 0.1 to 0.6, in two regimes: the fit returns the two factors."""
    from inferasim.cost.prior import fit_split

    def steps(shares):
        return [(a, 1.0 - a, 2.6 * a + 1.4 * (1.0 - a)) for a in shares]

    fit = fit_split([_split_reading("a", steps((0.1, 0.3, 0.6))),
                     _split_reading("b", steps((0.2, 0.4)))])
    assert fit is not None and fit.steps == 5
    assert fit.attention == pytest.approx(2.6, rel=1e-6)
    assert fit.rest == pytest.approx(1.4, rel=1e-6)
    assert fit.ratio(0.5, 0.5) == pytest.approx(2.0)


def test_no_split_where_the_steps_do_not_tell_the_attention_apart():
    """Shares within SPLIT_MIN_SPAN of each other (a hybrid model's steps: a few percent
    attention at every context), or a fit held at a bound: the flat level serves."""
    from inferasim.cost.prior import SPLIT_LIMITS, SPLIT_MIN_SPAN, PooledPrior, fit_split

    narrow = [(a, 1.0 - a, 2.0) for a in (0.01, 0.01 + SPLIT_MIN_SPAN / 2)]
    assert fit_split([_split_reading("q", narrow)]) is None
    # measured steps that fall as the attention grows ask for an attention factor below the
    # lower bound
    falling = [(a, 1.0 - a, 2.0 - 1.9 * a) for a in (0.0, 0.3, 0.6)]
    assert fit_split([_split_reading("m", falling)]) is None
    assert SPLIT_LIMITS[0] > 0.0
    pooled = PooledPrior("part and engine", [_split_reading("q", narrow)])
    assert pooled.split is None and pooled.to_dict()["decode_split"] is None


def test_the_split_prices_a_long_context_step_no_anchor_of_its_layout_measured():
    """MiniMax-M2.5 MXFP4 on one MI355X under vLLM, its own AgentX ladder held out: priced by
    the FP8 TP2 ladder and the Kimi-K2.7 TP4 runs on the same part and engine. Its c8 rung's
    decode step (five lanes decoding at 81k tokens each, mostly attention on one GPU: 32.7
    ms, 1.95x the analytic) was read 27% fast at the regimes' batch-one level (1.43); the
    split (attention x2.53, the rest x1.30) reads it 1% fast."""
    from inferasim.anchors.loading import default_store
    from inferasim.config.recipes import recipe_path

    keys = ["model.name=minimax-m2.5", "model.weight_dtype=mxfp4", "gpu.name=mi355x",
            "engine.name=vllm", "engine.version=0.22.0", "parallel.tp=1",
            "workload.concurrency=8", "engine.max_num_seqs=8"]
    sc = load_scenario(recipe_path("vllm", "mi355x", "minimax-m2.5", "mxfp4"), keys)
    store = default_store()
    own = CalibratedOracle(sc, store)
    rung = next(p for p in own.points if p.id.endswith("tp1-c8"))
    held = AnchorStore([r for r in store.records
                        if not (r.regime.model == "minimax-m2.5" and r.regime.tp == 1)])
    prior = CalibratedOracle(sc, held)
    assert prior.calibration["mode"] == "prior" and prior.prior.split is not None
    assert "decode attention x" in prior.calibration["note"]
    batch = StepBatch(decode_context=np.full(rung.batch, rung.context))
    assert prior.step(batch).seconds == pytest.approx(rung.measured_s, rel=0.10)
    flat = prior.prior.ratio * AnalyticOracle(sc).step(batch).seconds
    assert flat < 0.8 * rung.measured_s


def _ranks_apart(records: list[AnchorRecord], dpa: int = 8) -> list[AnchorRecord]:
    return [attrs.evolve(r, id=f"{r.id}-dpa{dpa}",
                         regime=attrs.evolve(r.regime, dp_attention=dpa, ep=dpa))
            for r in records]


def test_a_prior_reads_the_regimes_whose_ranks_stand_as_the_targets(target):
    """Attention-DP steps run further from their analytic price than one rank's (held out by
    layout, docs/anchors.md, "Attention-DP regimes read apart"): where the part and engine
    hold both kinds, a target takes the median of its own kind only; where they hold one
    kind, that kind serves."""
    one_rank, ranks = sweep("glm-5", 1.0), _ranks_apart(sweep("minimax-m2.5", 2.5))
    store = AnchorStore(one_rank + ranks)
    plain = CalibratedOracle(target, store)
    assert [r.ranks_apart for r in plain.prior.readings] == [False]
    assert plain.prior.ratio == pytest.approx(plain.prior.readings[0].level)
    assert any("1 of the other kind left out" in n for n in plain.calibration["notes"])
    dpa = attrs.evolve(target, parallel=attrs.evolve(target.parallel, dp_attention=8, ep=8))
    apart = CalibratedOracle(dpa, store)
    assert [r.ranks_apart for r in apart.prior.readings] == [True]
    assert apart.prior.ratio > 1.5 * plain.prior.ratio
    # a pool of one kind serves either kind of target
    alone = CalibratedOracle(dpa, AnchorStore(one_rank))
    assert [r.ranks_apart for r in alone.prior.readings] == [False]
    assert not any("other kind" in n for n in alone.calibration["notes"])


def test_an_attention_dp_target_priced_without_such_a_regime_says_it_is_likely_fast(target):
    from inferasim.cost.calibration_report import RANKS_UNREAD

    dpa = attrs.evolve(target, parallel=attrs.evolve(target.parallel, dp_attention=8, ep=8))
    one_rank = AnchorStore(sweep("glm-5", 1.0))
    assert RANKS_UNREAD in CalibratedOracle(dpa, one_rank).calibration["notes"]
    assert RANKS_UNREAD in CalibratedOracle(dpa, AnchorStore([])).calibration["notes"]
    # a prior that read an attention-DP regime, or a one-rank target, says nothing of it
    ranks = AnchorStore(_ranks_apart(sweep("minimax-m2.5", 2.5)))
    assert RANKS_UNREAD not in CalibratedOracle(dpa, ranks).calibration["notes"]
    assert RANKS_UNREAD not in CalibratedOracle(target, one_rank).calibration["notes"]
