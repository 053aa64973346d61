"""Regime distance, the store and coverage (behaviour.md section 1)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import attrs
import pytest

from inferasim.anchors import (
    AnchorRecord,
    AnchorStore,
    Measurements,
    Provenance,
    Regime,
    Target,
    Workload,
    read_anchor_file,
    settle,
    write_anchor_file,
)
from inferasim.anchors.record import derive_accept_length, derive_decode_step
from inferasim.config.errors import ConfigError
from inferasim.config.scenario import SpeculativeSpec

REPO = Path(__file__).resolve().parents[1]


def make(anchor_id: str = "a", *, isl: int = 1024, osl: int = 1024, conc: int | None = 8,
         image: str | None = None, engine_version: str | None = None, server_args=None,
         ttft: float | None = 0.1, **regime) -> AnchorRecord:
    base = {"model": "deepseek-r1", "engine": "sglang", "gpu": "mi355x", "weight_dtype": "fp8",
            "spec_method": "none", "tp": 8, "ep": 1, "dp_attention": 1}
    base.update(regime)
    return AnchorRecord(
        id=anchor_id,
        provenance=Provenance(source="test", image=image, engine_version=engine_version),
        regime=Regime(**base),
        workload=Workload(isl=isl, osl=osl, concurrency=conc),
        measurements=Measurements(ttft_median_s=ttft, tpot_mean_s=0.01, itl_median_s=0.0101),
        server_args=server_args or {})


def target(**kw) -> Target:
    base = {"model": "deepseek-r1", "engine": "sglang", "gpu": "mi355x", "gpu_isa": "gfx950",
            "weight_dtypes": ("fp8",), "kv_dtype": "bf16", "spec_method": "none", "tp": 8,
            "ep": 1, "dp_attention": 1, "dcp": 1, "isl": 1024, "batch": 8}
    base.update(kw)
    return Target(**base)


def refused_axes(result) -> dict[str, tuple[str, ...]]:
    return {r.anchor.id: r.axes for r in result.refused}


# ---------------------------------------------------------------- GPU part


def test_mxfp4_mi355x_anchor_refused_for_mi325x_target():
    store = AnchorStore([make("mxfp4-mi355x", weight_dtype="mxfp4")])
    result = store.for_target(target(gpu="mi325x", gpu_isa="gfx942", weight_dtypes=("mxfp4",)))
    assert not result.usable
    (refusal,) = result.refused
    assert refusal.axes == ("gpu",)
    assert refusal.reason == "gpu: anchor mi355x != target mi325x"
    assert "no usable anchor" in result.notes[0]


def test_mxfp4_on_amd_with_no_part_is_stamped_gfx950_and_refused_for_gfx942():
    anchor = settle(make("mxfp4-amd", gpu=None, weight_dtype="mxfp4",
                         image="lmsysorg/sglang:v0.5.12-rocm700"))
    assert anchor.regime.gpu is None and anchor.regime.gpu_isa == "gfx950"
    assert any("gfx950" in n for n in anchor.provenance.notes)
    result = AnchorStore([anchor]).for_target(
        target(gpu="mi325x", gpu_isa="gfx942", weight_dtypes=("mxfp4",)))
    assert refused_axes(result) == {"mxfp4-amd": ("gpu_isa",)}
    ok = AnchorStore([anchor]).for_target(target(weight_dtypes=("mxfp4",)))
    assert [r.id for r in ok.usable] == ["mxfp4-amd"]


def test_unknown_part_without_an_argument_stays_unknown():
    anchor = settle(make("fp8-unknown", gpu=None, weight_dtype="fp8"))
    assert anchor.regime.gpu is None and anchor.regime.gpu_isa is None
    result = AnchorStore([anchor]).for_target(target(gpu="mi325x", gpu_isa="gfx942"))
    assert [r.id for r in result.usable] == ["fp8-unknown"]
    assert {"gpu", "gpu_isa"} <= set(result.skipped_axes["fp8-unknown"])


def test_shipped_mxfp4_anchors_refused_for_mi325x_scenario():
    from inferasim.config.loader import load_scenario

    scenario = load_scenario(REPO / "scenarios/inferencemax/dsr1-mi355x-sglang-mxfp4-tp8.yaml",
                             ["gpu.name=mi325x"])
    result = AnchorStore.load(REPO / "anchors").for_target(scenario)
    mxfp4_mi355x = [r for r in result.refused if r.anchor.regime.weight_dtype == "mxfp4"
                    and r.anchor.regime.gpu == "mi355x" and r.anchor.regime.engine == "sglang"]
    assert mxfp4_mi355x and all("gpu" in r.axes for r in mxfp4_mi355x)
    assert not any(r.regime.gpu == "mi355x" for r in result.usable)


# ---------------------------------------------------------------- engine, kernels, dtypes


def test_sglang_and_mori_sglang_anchors_are_not_shared():
    store = AnchorStore([make("sgl", engine="sglang"), make("mori", engine="mori-sglang")])
    for_sglang = store.for_target(target(engine="sglang"))
    assert [r.id for r in for_sglang.usable] == ["sgl"]
    assert refused_axes(for_sglang) == {"mori": ("engine",)}
    for_mori = store.for_target(target(engine="mori-sglang"))
    assert [r.id for r in for_mori.usable] == ["mori"]
    assert str(for_mori.refused[0].mismatches[0]) == "engine: anchor sglang != target mori-sglang"


def test_other_engines_and_orchestrated_frameworks_are_refused():
    store = AnchorStore([make("trt", engine="trt"), make("dyn", engine="dynamo-sglang")])
    result = store.for_target(target())
    assert set(refused_axes(result).values()) == {("engine",)}


@pytest.mark.parametrize("anchor_flag", ["ROCM_AITER_MLA", "ROCM_AITER_UNIFIED_ATTN", "aiter",
                                         "ROCM_AITER_DSV4"])
@pytest.mark.parametrize("target_flag", ["aiter", "ROCM_AITER_MLA", "rocm_aiter_unified_attn"])
def test_aiter_spellings_match_each_other(anchor_flag, target_flag):
    from inferasim.anchors.normalise import kernel_family

    store = AnchorStore([make("x", attention_backend=anchor_flag)])
    result = store.for_target(target(kernel_family=kernel_family(target_flag)))
    assert [r.id for r in result.usable] == ["x"]


def test_other_kernel_families_refuse_aiter():
    store = AnchorStore([make("x", attention_backend="TRITON_MLA")])
    result = store.for_target(target(kernel_family="aiter"))
    assert refused_axes(result) == {"x": ("kernel_family",)}
    assert "triton-mla" in result.refused[0].reason


def test_quark_anchor_not_refused_for_the_checkpoints_own_fp4_target():
    quark_args = make("quark-args", weight_dtype=None, server_args={"quantization": "quark"})
    quark_field = make("quark-field", weight_dtype="quark")
    store = AnchorStore([quark_args, quark_field])
    assert all(r.regime.weight_dtype is None for r in store)
    result = store.for_target(target(weight_dtypes=("mxfp4",)))
    assert sorted(r.id for r in result.usable) == ["quark-args", "quark-field"]
    assert "weight_dtype" in result.skipped_axes["quark-field"]


def test_fp4_family_matches_checkpoint_fp4_target_but_not_fp8():
    store = AnchorStore([make("fp4", gpu=None, weight_dtype="fp4")])
    assert store.for_target(target(gpu="b200", gpu_isa="sm100",
                                   weight_dtypes=("nvfp4",))).usable
    assert refused_axes(store.for_target(target(weight_dtypes=("fp8",)))) == {
        "fp4": ("weight_dtype",)}


def test_expert_dtype_counts_as_the_checkpoints_dtype():
    store = AnchorStore([make("int4", weight_dtype="int4")])
    assert store.for_target(target(weight_dtypes=("bf16", "int4"))).usable


def test_unknown_axes_are_skipped_never_matched_as_wrong():
    bare = AnchorRecord(id="bare", provenance=Provenance(source="test"), regime=Regime(),
                        workload=Workload(isl=1024, osl=128, concurrency=4),
                        measurements=Measurements(itl_median_s=0.01))
    result = AnchorStore([bare]).for_target(target(kernel_family="aiter", dcp=2))
    assert [r.id for r in result.usable] == ["bare"]
    assert set(result.skipped_axes["bare"]) >= {"model", "engine", "gpu", "gpu_isa",
                                                 "kernel_family", "weight_dtype", "kv_dtype",
                                                 "speculative", "tp", "ep", "dp_attention", "dcp"}


def test_speculative_method_and_width_are_regime_axes():
    store = AnchorStore([make("mtp3", spec_method="mtp", draft_tokens=3),
                         make("mtp?", spec_method="mtp"), make("plain")])
    result = store.for_target(target(spec_method="mtp", draft_tokens=1))
    assert [r.id for r in result.usable] == ["mtp?"]
    assert refused_axes(result) == {"mtp3": ("speculative",), "plain": ("speculative",)}
    assert "anchor mtp+3 != target mtp+1" in dict(
        (r.anchor.id, r.reason) for r in result.refused)["mtp3"]


def test_parallel_axes_and_dpa_from_server_args():
    anchor = make("dpa-args", dp_attention=None,
                  server_args={"tp_size": 8, "dp_size": 8, "enable_dp_attention": True})
    store = AnchorStore([anchor])
    assert store.get("dpa-args").regime.dp_attention == 8
    assert refused_axes(store.for_target(target())) == {"dpa-args": ("dp_attention",)}
    assert store.for_target(target(dp_attention=8)).usable


# ---------------------------------------------------------------- build


def test_build_preference_and_crossing():
    new = "lmsysorg/sglang:v0.5.12-rocm700-mi35x"
    old = "lmsysorg/sglang:v0.5.9-rocm700-mi35x"
    store = AnchorStore([make("new", image=new, conc=4), make("old", image=old, conc=64),
                         make("unrecorded", conc=32)])
    same = store.for_target(target(build="v0.5.12-rocm700-mi35x"))
    assert [r.id for r in same.usable] == ["new"]
    assert sorted(r.id for r in same.set_aside) == ["old", "unrecorded"]
    assert not same.crossed_build
    crossed = store.for_target(target(build="0.5.10"))
    assert crossed.crossed_build
    assert sorted(r.id for r in crossed.usable) == ["new", "old", "unrecorded"]
    assert "no anchor of build 0.5.10" in crossed.build_note
    assert crossed.build_note in crossed.notes
    # no build named: the newest build the anchors hold, the others set aside and said
    newest = store.for_target(target(build=""))
    assert not newest.crossed_build and [r.id for r in newest.usable] == ["new"]
    assert sorted(r.id for r in newest.set_aside) == ["old", "unrecorded"]
    assert "newest build" in newest.build_note and "v0.5.12" in newest.build_note


def test_the_newest_build_is_the_latest_run_date_and_none_named_pools_all():
    def dated(anchor_id, image, date):
        r = make(anchor_id, image=image)
        return attrs.evolve(r, provenance=attrs.evolve(r.provenance, date=date))

    store = AnchorStore([dated("a", "img:v2", "2026-01-05"), dated("b", "img:v1", "2026-03-01"),
                         dated("c", "img:v1", "2025-12-01")])
    usable = store.for_target(target(build="")).usable
    assert sorted(r.id for r in usable) == ["b", "c"]  # v1 ran last
    # nothing names a build: nothing tells the records apart, all are kept
    plain = AnchorStore([make(f"c{c}", conc=c) for c in (4, 8)]).for_target(target(build=""))
    assert len(plain.usable) == 2 and plain.build_note is None


# ---------------------------------------------------------------- coverage


def test_prefill_probe_too_short_is_refused_for_prefill_only():
    store = AnchorStore([make(f"c{c}", conc=c) for c in (1, 4, 8)])
    result = store.for_target(target(isl=8192))
    assert len(result.usable) == 3  # decode stays calibrated
    assert not result.prefill_calibrated
    assert "1 distinct ISL" in result.prefill_note and "analytic" in result.prefill_note
    assert "8192" in result.prefill_note
    # a target whose ISL is unknown (a trace) is refused too
    assert not store.for_target(target(isl=None)).prefill_calibrated


def test_prefill_probe_calibrates_a_target_at_its_own_isl_without_a_curve():
    store = AnchorStore([make(f"c{c}", conc=c) for c in (1, 4, 8)])
    for isl in (1024, 900, 1200):  # within PREFILL_POINT_BAND of the probe
        result = store.for_target(target(isl=isl))
        assert result.prefill_calibrated and result.prefill_note is None, isl
    assert not store.for_target(target(isl=1400)).prefill_calibrated


def test_prefill_curve_is_carried_past_the_probe_and_says_so():
    store = AnchorStore([make(f"isl{i}", isl=i, conc=1) for i in (128, 512, 1024)])
    near = store.for_target(target(isl=1024))
    assert near.prefill_calibrated and near.prefill_note is None
    far = store.for_target(target(isl=32768))
    assert far.prefill_calibrated and len(far.usable) == 3
    assert far.prefill_note.startswith("prefill transported") and "32768" in far.prefill_note
    # two ISLs fit no curve: a target far from both is refused
    two = AnchorStore([make(f"isl{i}", isl=i, conc=1) for i in (512, 1024)])
    assert not two.for_target(target(isl=32768)).prefill_calibrated


def test_decode_sweep_short_of_the_batch_is_warned_without_direction():
    store = AnchorStore([make(f"c{c}", conc=c) for c in (4, 8, 16)])
    assert not store.for_target(target(batch=16)).warnings
    result = store.for_target(target(batch=256))
    (warning,) = result.warnings
    assert "16" in warning and "256" in warning
    # below the sweep too: a batch of 1 from a sweep that starts at 4
    (below,) = store.for_target(target(batch=1)).warnings
    assert "starts at concurrency 4" in below and "batch of 1" in below
    direction = re.compile(r"\b(under|over|optimistic|pessimistic|faster|slower|cheaper|"
                           r"higher|lower|more expensive|less|too)\w*", re.I)
    for said in (warning, below):
        assert not direction.search(said), said


# ---------------------------------------------------------------- decode step, files, frame


def test_decode_step_reads_tpot_when_the_stream_coalesces():
    plain = Measurements(tpot_mean_s=0.010, itl_median_s=0.0101)
    assert derive_decode_step(plain) == (0.0101, "median_itl")
    coalesced = Measurements(tpot_mean_s=0.010, itl_median_s=0.016)
    step, basis = derive_decode_step(coalesced)
    assert step == 0.010 and basis.startswith("mean_tpot") and "1.5x" in basis
    at_threshold = Measurements(tpot_mean_s=0.010, itl_median_s=0.015)
    assert derive_decode_step(at_threshold)[1] == "median_itl"
    spec = Measurements(tpot_mean_s=0.010, itl_median_s=0.012)
    assert derive_decode_step(spec, "mtp")[0] == 0.010
    assert derive_decode_step(Measurements(tpot_median_s=0.02))[0] == 0.02
    assert derive_decode_step(Measurements()) == (None, None)


def test_accept_length_read_from_a_stream_of_one_chunk_per_step():
    mtp = Regime(engine="sglang", spec_method="mtp")
    # MI355X SGLang MTP c16: mean ITL 27.5 ms over mean TPOT 11.4 ms
    one_chunk = Measurements(tpot_mean_s=0.0114, itl_mean_s=0.0275, itl_median_s=0.0221)
    accept, source = derive_accept_length(one_chunk, mtp)
    assert accept == pytest.approx(2.41, abs=0.01) and source.startswith("mean_itl / mean_tpot")
    # a stream that also groups steps (B200: 30 steps a chunk) says nothing of the acceptance
    grouped = Measurements(tpot_mean_s=0.0091, itl_mean_s=0.470)
    assert derive_accept_length(grouped, mtp) == (None, None)
    deeper = attrs.evolve(mtp, draft_tokens=7)
    assert derive_accept_length(Measurements(tpot_mean_s=0.01, itl_mean_s=0.05), deeper)[0] \
        == pytest.approx(5.0)
    # the client's own figure wins; a plain row has none; a ratio below 1 reads as 1
    told = attrs.evolve(one_chunk, accept_length=3.1)
    assert derive_accept_length(told, mtp) == (3.1, "accept_length")
    assert derive_accept_length(one_chunk, Regime(engine="sglang")) == (None, None)
    assert derive_accept_length(Measurements(tpot_mean_s=0.01, itl_mean_s=0.0098), mtp)[0] == 1.0
    assert derive_accept_length(Measurements(tpot_mean_s=0.01), mtp) == (None, None)


def test_a_speculative_row_that_accepted_nothing_measured_plain_decoding():
    """MI325X SGLang "MTP" rows: one token per chunk where every MI355X MTP row shows 1.8-2.5.
    With no draft ever accepted they are plain decode steps, and settle says so."""
    def labelled(itl_mean: float | None, accept: float | None = None) -> AnchorRecord:
        rec = make(spec_method="mtp")
        return attrs.evolve(rec, measurements=attrs.evolve(
            rec.measurements, itl_mean_s=itl_mean, accept_length=accept))

    plain = settle(labelled(0.0100))
    assert plain.regime.spec_method == "none"
    assert any("labelled mtp by its source" in n and "1.00 tokens" in n
               for n in plain.provenance.notes)
    assert settle(labelled(None, accept=1.0)).regime.spec_method == "none"
    assert settle(plain) == plain  # idempotent
    for kept in (labelled(0.024), labelled(0.47), labelled(None)):  # 2.4, a grouped stream, unknown
        assert settle(kept).regime.spec_method == "mtp"


def test_acceptance_for_a_mean_tokens_per_step():
    spec = SpeculativeSpec(method="mtp", draft_tokens=3)
    for tokens in (1.0, 1.82, 2.4, 3.9):
        assert spec.with_tokens_per_step(tokens).tokens_per_step == pytest.approx(tokens,
                                                                                  abs=1e-4)
    assert spec.with_tokens_per_step(9.0).acceptance == pytest.approx(1.0, abs=1e-5)


def test_file_round_trip_and_atomic_write(tmp_path):
    records = [settle(make("a", image="lmsysorg/sglang:v0.5.12-rocm700-mi35x")), make("b")]
    path = write_anchor_file(tmp_path / "x.json", records, generated_by="test")
    data = json.loads(path.read_text())
    assert data["schema_version"] == 1 and data["anchors"][0]["derived"]["decode_step_s"]
    back = read_anchor_file(path)
    assert [r.id for r in back] == ["a", "b"] and back[0] == records[0]
    yaml_path = write_anchor_file(tmp_path / "x.yaml", records)
    assert read_anchor_file(yaml_path) == back
    before = path.read_text()
    with pytest.raises(ConfigError, match="duplicate anchor id"):
        write_anchor_file(path, [records[0], records[0]])
    assert path.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.json", "x.yaml"]


def test_bad_anchor_files_name_file_and_key(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema_version": 1, "anchors": [
        {"id": "x", "provenance": {"source": "t"}, "regime": {"tp": "eight"},
         "workload": {"isl": 1, "osl": 1}, "measurements": {}}]}))
    with pytest.raises(ConfigError, match=r"bad.json: anchors\[0\].regime.tp: expected an integer"):
        read_anchor_file(bad)
    for section, key, value, words in (("regime", "tp", -4, "at least 1"),
                                       ("workload", "concurrency", 0, "at least 1"),
                                       ("measurements", "itl_median_s", math.inf, "finite"),
                                       ("measurements", "ttft_median_s", math.nan, "finite")):
        item = {"id": "x", "provenance": {"source": "t"}, "regime": {},
                "workload": {"isl": 1, "osl": 1}, "measurements": {}}
        item[section][key] = value
        bad.write_text(json.dumps({"schema_version": 1, "anchors": [item]}))
        with pytest.raises(ConfigError, match=rf"anchors\[0\].{section}.{key}: .*{words}"):
            read_anchor_file(bad)
    # what loading would refuse is refused before a file is written
    with pytest.raises(ConfigError, match="regime.tp: expected a value of at least 1"):
        write_anchor_file(tmp_path / "neg.json", [attrs.evolve(
            make("n"), regime=attrs.evolve(make("n").regime, tp=-3))])
    assert not (tmp_path / "neg.json").exists()
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"schema_version": 99, "anchors": []}))
    with pytest.raises(ConfigError, match="schema_version 99"):
        AnchorStore.load(old)
    dup = tmp_path / "dup"
    dup.mkdir()
    write_anchor_file(dup / "one.json", [make("a")])
    write_anchor_file(dup / "two.json", [make("a")])
    with pytest.raises(ConfigError, match="duplicate anchor id 'a'"):
        AnchorStore.load(dup)
    with pytest.raises(ConfigError, match="did you mean 'imax-c8'"):
        AnchorStore([make("imax-c8")]).get("imax-c9")


def test_frame_for_the_oracle():
    store = AnchorStore([make("c8", conc=8), make("c4", conc=4, server_args={})])
    result = store.for_target(target())
    frame = store.frame(result)
    assert list(frame["id"]) == ["c4", "c8"]
    for column in ("isl", "osl", "concurrency", "decode_step_s", "ttft_s", "tput_per_gpu_total"):
        assert column in frame.columns
    assert frame["decode_step_s"].tolist() == [0.0101, 0.0101]
    assert result.frame().equals(frame)
    assert store.frame([]).empty


def test_shipped_anchor_files_are_small_and_load():
    files = [p for p in (REPO / "anchors").rglob("*") if p.suffix in (".json", ".yaml", ".yml")]
    assert files and sum(p.stat().st_size for p in files) < 2_000_000
    store = AnchorStore.load(REPO / "anchors")
    assert len(store) >= 100
    for record in store:
        # every record names the run it came from: InferenceMAX's Actions run, the grid's file,
        # an AIPerf export's; the AgentX ladder CSV records neither URL nor date, so its
        # records name the file and the image the server ran
        prov = record.provenance
        if prov.source == "agentx-ladder":
            assert prov.file.endswith("agentx_dev_ladders.csv") and prov.image
        else:
            assert (prov.run_url or prov.url) and prov.date
        assert record.regime.model and record.regime.gpu
    imaged = [r for r in store if r.provenance.image and r.provenance.source == "inferencemax"]
    assert imaged and all(r.provenance.engine_version for r in imaged)
    assert attrs.asdict(store.records[0].regime)["engine"]


def test_settle_is_idempotent_and_hand_written_spellings_normalise(tmp_path):
    path = tmp_path / "hand.yaml"
    path.write_text(
        "schema_version: 1\n"
        "anchors:\n"
        "  - id: hand\n"
        "    provenance: {source: manual, image: 'rocm/atom:rocm7.2.3_ubuntu24.04_atom20260511'}\n"
        "    regime: {model: deepseek-ai/DeepSeek-R1-0528, engine: ATOM, gpu: MI355X,\n"
        "             weight_dtype: quark, kv_dtype: fp8_e4m3, spec_method: NEXTN, tp: 8}\n"
        "    workload: {isl: 1024, osl: 1024, concurrency: 4}\n"
        "    measurements: {tpot_mean_s: 0.01, itl_median_s: 0.0102}\n")
    (record,) = read_anchor_file(path)
    reg = record.regime
    assert (reg.model, reg.engine, reg.gpu, reg.gpu_isa) == ("deepseek-r1", "atom", "mi355x",
                                                             "gfx950")
    assert (reg.weight_dtype, reg.kv_dtype, reg.spec_method, reg.kernel_family) == (
        None, "fp8", "mtp", "aiter")
    assert record.provenance.engine_version == "20260511"
    assert settle(record) is record


def test_littles_law_reads_the_median_e2e_where_no_mean_is_recorded():
    """A throughput far from concurrency x tokens / e2e / GPUs contradicts the record; the mean
    e2e is preferred, the median read where only it is recorded, and with neither nothing is
    claimed."""
    base = dict(id="x", provenance=Provenance(source="test"),
                regime=Regime(engine="sglang", gpu="h200", tp=8),
                workload=Workload(isl=1024, osl=1024, concurrency=32))
    little = 32 * 2048 / 20.0 / 8  # 409.6 tok/s/GPU at a 20 s request
    agrees = AnchorRecord(**base, measurements=Measurements(tput_per_gpu_total=0.9 * little,
                                                            e2e_median_s=20.0))
    assert agrees.little_mismatch() is None
    low = AnchorRecord(**base, measurements=Measurements(tput_per_gpu_total=0.55 * little,
                                                         e2e_median_s=20.0))
    assert "median e2e" in low.little_mismatch()
    both = AnchorRecord(**base, measurements=Measurements(
        tput_per_gpu_total=0.55 * little, e2e_mean_s=36.0, e2e_median_s=20.0))
    assert both.little_mismatch() is None  # a long tail: the mean (36 s) explains it
    neither = AnchorRecord(**base, measurements=Measurements(tput_per_gpu_total=1.0))
    assert neither.little_mismatch() is None


def test_an_anchor_contradicting_itself_is_named_and_covers_no_batch():
    # The shipped ATOM fp8 MTP sweep measured c8, c32 and c512, but c512's throughput
    # contradicts its own latency and calibrates nothing: anchors check and the run both say
    # so once, and both warn that the sweep stops at c32 (c512 used to count as covered).
    from click.testing import CliRunner

    from inferasim.cli.main import cli

    scenario = REPO / "scenarios" / "inferencemax" / "dsr1-mi355x-atom-fp8-mtp-tp8.yaml"
    checked = json.loads(CliRunner().invoke(cli, ["anchors", "check", str(scenario),
                                                  "--json"]).output)
    run = CliRunner().invoke(cli, ["run", str(scenario), "--json",
                                   "--set", "workload.max_requests=32"])
    cal = json.loads(run.output)["calibration"]
    for notes in (checked["notes"], cal["notes"]):
        assert sum("c512-2026-06-02 does not calibrate" in n for n in notes) == 1
        assert any("sweep stops at concurrency 32" in n for n in notes)
    assert len(cal["anchors_used"]) == 2


def test_an_analytic_fallback_states_its_reason_once():
    from click.testing import CliRunner

    from inferasim.cli.main import cli

    run = CliRunner().invoke(cli, ["run", "--json", "--set", "workload.duration_s=10"])
    notes = json.loads(run.output)["calibration"]["notes"]
    assert sum(n.startswith("no usable anchor") for n in notes) == 1


def test_a_store_answers_a_target_once_and_a_subset_from_its_own_records():
    # for_target is remembered per store (a search asks for one target thousands of times);
    # a hold-out subset shares the store's memo of derived readings but not these answers.
    from inferasim.anchors.loading import default_store
    from inferasim.config.catalog import REPO_ROOT
    from inferasim.config.loader import load_scenario

    store = default_store()
    sc = load_scenario(REPO_ROOT / "scenarios/inferencemax/dsr1-mi355x-sglang-fp8-tp8.yaml")
    found = store.for_target(sc)
    assert found.usable and store.for_target(sc) is found
    assert store.for_target(sc, batch=7) is not found
    assert store.for_target(sc, batch=7).target.batch == 7
    kept = [r.id for r in store.records if r.id != found.usable[0].id]
    held_out = store.subset(kept).for_target(sc)
    assert found.usable[0].id not in {r.id for r in held_out.usable}
    assert len(held_out.usable) == len(found.usable) - 1
