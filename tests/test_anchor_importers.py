"""Each importer on the real files in ../shared/data (skipped when that folder is absent)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inferasim.anchors.importers import (
    import_aiperf,
    import_grid,
    import_inferencemax,
    import_sglang_bench,
    import_vllm_bench,
)
from inferasim.anchors.normalise import parse_server_command
from inferasim.config.errors import ConfigError

# The repository sits at <work>/main; the shared data at <work>/shared/data.
DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
pytestmark = pytest.mark.skipif(not DATA.is_dir(),
                                reason=f"shared data folder {DATA} is absent (real-file fixtures)")
IMAX = DATA / "inferencemax"
OUTPUTS = DATA / "engine-outputs"


# ---------------------------------------------------------------- InferenceMAX


def test_inferencemax_csv_single_node_rows():
    records = import_inferencemax(IMAX / "benchmarks_flat.csv")
    assert len(records) == 130  # 265 rows, of which 135 disaggregated or multi-node
    assert len({r.id for r in records}) == len(records)
    first = records[0]
    assert first.id == "imax-mi355x-sglang-fp4-tp4-ep1-1024-1024-c4-2026-06-11"
    reg, prov = first.regime, first.provenance
    assert (reg.model, reg.engine, reg.gpu, reg.gpu_isa) == ("deepseek-r1", "sglang", "mi355x",
                                                             "gfx950")
    assert (reg.weight_dtype, reg.spec_method, reg.tp, reg.ep, reg.dp_attention) == (
        "mxfp4", "none", 4, 1, 1)
    assert reg.kernel_family is None and reg.kv_dtype is None and reg.draft_tokens is None
    assert prov.image == "lmsysorg/sglang:v0.5.12-rocm700-mi35x" and prov.engine_version == "0.5.12"
    assert prov.run_url.startswith("https://github.com/SemiAnalysisAI/InferenceX/actions/runs/")
    assert prov.date == "2026-06-11"
    m = first.measurements
    assert m.ttft_median_s == pytest.approx(0.10217383736744523)
    assert m.tput_per_gpu_total == pytest.approx(198.9447984579421)
    assert 0 < m.tpot_std_s < m.tpot_mean_s  # the spread of TPOT between requests
    assert first.decode_step == (m.itl_median_s, "median_itl")
    engines = {r.regime.engine for r in records}
    assert engines == {"sglang", "atom", "trt"}  # no dynamo-*, no mori-sglang (all disagg)


def test_inferencemax_nvidia_fp4_is_nvfp4_and_sglang_nvidia_reads_tpot():
    records = import_inferencemax(IMAX / "benchmarks_flat.csv")
    b200_fp4 = [r for r in records if r.regime.gpu == "b200" and r.regime.engine == "sglang"
                and r.regime.weight_dtype not in ("fp8",)]
    assert b200_fp4 and {r.regime.weight_dtype for r in b200_fp4} == {"nvfp4"}
    h200 = [r for r in records if r.regime.gpu == "h200" and r.regime.engine == "sglang"
            and r.regime.spec_method == "none"]
    assert h200 and all(r.decode_step[1].startswith("mean_tpot") for r in h200)
    atom = [r for r in records if r.regime.engine == "atom"]
    assert atom and {r.regime.kernel_family for r in atom} == {"aiter"}
    dpa = [r for r in records if r.regime.dp_attention and r.regime.dp_attention > 1]
    assert dpa and all(r.regime.dp_attention == r.regime.tp for r in dpa)


def test_inferencemax_b200_sglang_rows_carry_the_recipe_receive_interval():
    """The InferenceX B200 SGLang recipe (and B300's, the same script) reads new requests every
    10 decode steps below 16 clients and every 30 from 16 on; other engines and parts are left
    unknown."""
    records = import_inferencemax(IMAX / "benchmarks_flat.csv")
    b200 = [r for r in records if r.regime.gpu in ("b200", "b300")
            and r.regime.engine == "sglang"]
    assert {r.regime.gpu for r in b200} == {"b200", "b300"}
    assert {r.workload.concurrency < 16 for r in b200} == {True, False}
    for r in b200:
        assert r.regime.scheduler_recv_interval == (10 if r.workload.concurrency < 16 else 30)
    others = [r for r in records if r not in b200]
    assert others and all(r.regime.scheduler_recv_interval is None for r in others)


def test_inferencemax_json_and_history_and_disagg_option():
    from_json = import_inferencemax(IMAX / "inferencex_app_fixture_benchmarks.json")
    from_csv = import_inferencemax(IMAX / "benchmarks_flat.csv")
    assert [r.id for r in from_json] == [r.id for r in from_csv]
    everything = import_inferencemax(IMAX / "benchmarks_flat.csv", include_disaggregated=True)
    assert len(everything) == 265
    assert {"dynamo-sglang", "mori-sglang"} <= {r.regime.engine for r in everything}
    history = import_inferencemax(IMAX / "benchmarks_history_flat.csv")
    assert history and all(r.provenance.image is None for r in history)
    assert all(r.measurements.tpot_median_s for r in history)


def test_inferencemax_disaggregated_rows_keep_both_pools():
    everything = import_inferencemax(IMAX / "benchmarks_flat.csv", include_disaggregated=True)
    disagg = [r for r in everything if r.regime.disaggregated]
    assert len(disagg) == 135
    assert all(r.regime.topology == "colocated" for r in everything if r not in disagg)
    # B200 Dynamo TRT-LLM FP4 MTP at 10,860 clients: 3 prefill workers of TP4 attention-DP
    # (12 GPUs), 5 decode workers of TP4 attention-DP (20 GPUs)
    (row,) = [r for r in disagg if r.regime.gpu == "b200" and r.workload.concurrency == 10860]
    reg = row.regime
    assert (reg.engine, reg.tp, reg.ep, reg.dp_attention) == ("dynamo-trt", 4, 4, 4)
    assert (reg.prefill_tp, reg.prefill_ep, reg.prefill_dp_attention) == (4, 4, 4)
    assert (reg.prefill_workers, reg.decode_workers, reg.num_gpus) == (3, 5, 32)
    assert row.workload.decode_batch == pytest.approx(10860 / 5)
    # a row whose tp disagrees with its GPUs per worker takes the GPUs, and says so
    noted = [r for r in disagg if any("GPUs over" in n for n in r.provenance.notes)]
    assert noted and all(r.regime.tp * r.regime.decode_workers
                         + r.regime.prefill_tp * r.regime.prefill_workers == r.regime.num_gpus
                         for r in noted)
    # rows without worker counts (GB200 at 36 or 72 GPUs, workers 0) keep no pool layout
    unknown = [r for r in disagg if r.regime.decode_workers is None]
    assert unknown and all("not known" in " ".join(r.provenance.notes) for r in unknown)


def test_inferencemax_dynamo_trt_rows_carry_their_recipes_decode_running_limit():
    """The rows do not record the decode workers' max_batch_size; InferenceX's master config
    names the recipe each run launched, whose batch<B> is it (per attention-DP rank)."""
    everything = import_inferencemax(IMAX / "benchmarks_flat.csv", include_disaggregated=True)
    trt = [r for r in everything if r.regime.engine == "dynamo-trt"]
    by_conc = {r.workload.concurrency: r for r in trt
               if r.regime.gpu == "b300" and r.regime.weight_dtype == "fp8"}
    # 1,280 clients on 3 workers x 8 ranks x 48 slots; 16,384 on 1 x 8 x 1,024
    assert by_conc[1280].regime.max_num_seqs == 48
    assert by_conc[16384].regime.max_num_seqs == 1024
    assert any("launch recipe" in n for n in by_conc[16384].provenance.notes)
    # the per-client recipe file sets 1 under its template's name (batch64, ..._12.yaml)
    assert by_conc[10].regime.max_num_seqs == 1
    assert sum(r.regime.max_num_seqs is not None for r in trt) == 62
    # mori's rows take their launch config's limit by mode (next test)
    mori = [r for r in everything if r.regime.engine == "mori-sglang"]
    assert mori and all(r.regime.max_num_seqs for r in mori)


def test_inferencemax_dynamo_sglang_speculative_rows_carry_their_recipes_running_limit():
    """srt-slurm's Dynamo SGLang recipes set the decode workers' max-running-requests (SGLang's
    own default with a draft would be 48), divided among attention-DP ranks: the recipe a
    row's pools and clients match where read (H200 1p9d MTP 64, DEP8 MTP 128; H100 TP16 128,
    DEP16 64), else the speculative recipes' 512; plain-decoding rows only where a recipe read
    sets one."""
    everything = import_inferencemax(IMAX / "benchmarks_flat.csv", include_disaggregated=True)
    sgl = [r for r in everything if r.regime.engine == "dynamo-sglang"]
    mtp = [r for r in sgl if r.regime.spec_method == "mtp"]
    assert len(mtp) == 18
    whole = {r.id: r.regime.max_num_seqs * (r.regime.dp_attention or 1) for r in mtp}
    assert set(whole.values()) == {512, 128, 64}
    by = {(r.regime.gpu, r.regime.decode_workers, r.regime.dp_attention or 1,
           r.workload.isl, r.workload.osl): whole[r.id] for r in mtp}
    assert by[("h200", 9, 1, 1024, 1024)] == 64
    assert by[("h200", 6, 8, 1024, 1024)] == 128   # 16 a rank: 768 slots for 2,048 clients
    assert by[("h100", 1, 16, 1024, 1024)] == 64
    assert by[("h100", 2, 1, 1024, 8192)] == 64
    assert all("max-running-requests" in " ".join(r.provenance.notes) for r in mtp)
    plain = [r for r in sgl if r.regime.spec_method != "mtp"]
    assert {r.regime.max_num_seqs for r in plain} == {None, 256, 512, 64}
    assert all(r.regime.max_num_seqs is None for r in plain if r.regime.gpu.startswith("gb"))


def test_a_dynamo_sglang_row_past_its_recipes_slots_waits_for_one():
    """H200 MTP, 6 DEP8 decode workers at 16 a rank (bs256-1p6d-dep-mtp): 768 slots for 2,048
    clients. The measured TTFT (43.0 s) is the wait for a slot; with the 64 a rank SGLang's
    speculative default over 512 would give, the closed form reads 1.4 s."""
    import attrs

    from inferasim.anchors.store import AnchorStore
    from inferasim.config.knobs import Knobs
    from inferasim.validate.anchors import (
        anchor_workload,
        base_scenario,
        load_templates,
        measured_metrics,
        predict_closed_form,
    )

    rows = [r for r in import_inferencemax(IMAX / "benchmarks_flat.csv",
                                           include_disaggregated=True)
            if r.regime.engine == "dynamo-sglang" and r.regime.gpu == "h200"
            and r.regime.spec_method == "mtp" and r.workload.concurrency == 2048]
    assert len(rows) == 1 and rows[0].regime.max_num_seqs == 16
    row = rows[0]
    _, base = base_scenario(row, load_templates())
    store = AnchorStore([row])
    held = predict_closed_form(anchor_workload(base, row), store, Knobs())[0]
    loose = attrs.evolve(row, regime=attrs.evolve(row.regime, max_num_seqs=64))
    free = predict_closed_form(anchor_workload(base, loose), store, Knobs())[0]
    measured = measured_metrics(row)
    assert held["ttft"] == pytest.approx(measured["ttft"], rel=0.25)
    assert held["tput_per_gpu"] == pytest.approx(measured["tput_per_gpu"], rel=0.15)
    assert free["ttft"] < 0.1 * measured["ttft"]


def test_inferencemax_history_rows_check_their_throughput_against_the_median_e2e():
    """The history records no mean e2e latency: Little's law reads the median, which flags
    the rows whose throughput contradicts their own latencies (B200 nvfp4 EP8 c32 at 0.56x)
    and passes the rest."""
    history = import_inferencemax(IMAX / "benchmarks_history_flat.csv")
    assert all(r.measurements.e2e_mean_s is None and r.measurements.e2e_median_s
               for r in history)
    flagged = [r for r in history if r.little_mismatch()]
    assert 5 <= len(flagged) <= 0.05 * len(history)
    b200 = [r for r in flagged if r.regime.gpu == "b200" and r.regime.ep == 8
            and r.workload.concurrency == 32 and r.workload.osl == 1024]
    assert b200 and all("median e2e" in r.little_mismatch() for r in b200)


def test_inferencemax_processed_agg_file():
    (record,) = import_inferencemax(
        OUTPUTS / "inferencex-processed/inferencex_agg_kimik25-int4_mi355x_tp8_mtp_1k1k_conc4.json")
    reg = record.regime
    assert (reg.model, reg.engine, reg.gpu, reg.weight_dtype, reg.spec_method, reg.tp) == (
        "kimi-k2.5", "vllm", "mi355x", "int4", "mtp", 8)
    assert record.provenance.engine_version == "0.21.0"


# ---------------------------------------------------------------- grid


def test_grid_csv():
    records = import_grid(DATA / "isl-concurrency-grid/token_position_decode_slo_results.csv")
    assert len(records) == 169
    by_tag = {r.id.split("-1024-")[0] for r in records if "-1024-" in r.id}
    assert "grid-glm5-fp8-vllm-tp8" in by_tag
    glm = next(r for r in records if r.id == "grid-glm5-fp8-vllm-tp8-1024-128-c4")
    assert (glm.regime.model, glm.regime.engine, glm.regime.weight_dtype) == ("glm-5", "vllm", "fp8")
    assert (glm.regime.spec_method, glm.regime.draft_tokens) == ("mtp", 1)
    # the GPU is inferred (the README names a partition only), and the record says so
    assert glm.regime.gpu == "h200" and "inferred" in glm.provenance.notes[0]
    assert all(r.workload.range_ratio == 1.0 for r in records)  # fixed lengths
    assert glm.measurements.ttft_median_s == pytest.approx(0.26499967742711306)
    assert glm.measurements.tput_per_gpu_output == pytest.approx(164.72765441223032 / 8)
    assert glm.provenance.url.endswith("glm5_fp8_vllm_tp8_isl1024_osl128_conc4.json")
    dep = [r for r in records if "dep8" in r.id]
    assert dep and all((r.regime.gpu, r.regime.dp_attention, r.regime.ep) == ("h200", 8, 8)
                       for r in dep)
    isls = {r.workload.isl for r in records if "tep8" in r.id}
    assert len(isls) >= 3  # enough distinct prompt lengths to fit a context curve


def test_grid_rejects_other_csv():
    with pytest.raises(ConfigError, match="not an ISL x concurrency grid"):
        import_grid(IMAX / "benchmarks_flat.csv")


@pytest.mark.parametrize("importer, source", [
    (import_inferencemax, IMAX / "benchmarks_flat.csv"),
    (import_grid, DATA / "isl-concurrency-grid" / "token_position_decode_slo_results.csv"),
])
def test_a_csv_cut_short_mid_row_is_refused_not_imported_with_gaps(tmp_path, importer, source):
    text = source.read_text()
    cut = tmp_path / "cut.csv"
    cut.write_text(text[: text.index("\n", len(text) // 2) - 40])  # the last row loses fields
    with pytest.raises(ConfigError, match=r"cut.csv: line \d+: \d+ fields under a header of"):
        importer(cut)


# ---------------------------------------------------------------- vLLM bench serve

VLLM = OUTPUTS / "vllm-bench-serve"


def test_vllm_bench_serve_json():
    path = VLLM / "benchmaq_vllm-bench-serve_glm47-fp8_b200_tp8_in8192_out128_c100.json"
    (record,) = import_vllm_bench(path, hints={"gpu": "b200", "engine": "vllm", "tp": "8"})
    assert (record.workload.isl, record.workload.osl, record.workload.concurrency) == (8192, 128,
                                                                                       100)
    assert record.regime.weight_dtype == "fp8" and record.regime.gpu == "b200"
    assert record.measurements.ttft_mean_s == pytest.approx(8.304430055648554)
    assert record.measurements.tpot_std_s == pytest.approx(0.031644201779399506)
    assert record.measurements.tput_per_gpu_total == pytest.approx(39512.75064655779 / 8)
    assert record.provenance.date == "2026-01-29"
    assert record.decode_step[0] == pytest.approx(0.04234402300789952)


def test_vllm_bench_client_backend_is_not_the_server_engine():
    path = VLLM / "dstack_vllm-bench-serve_sglang-pd-2p2d_gptoss120b_h200_conc32_in2048_out2048.json"
    (record,) = import_vllm_bench(path)
    assert record.regime.engine is None and record.regime.model == "gpt-oss-120b"


def test_vllm_bench_seconds_dialect_and_server_command():
    path = VLLM / "inferencex_benchmark_serving_random_glm5-fp8_vllm_tp8_isl1024_osl128_conc4.json"
    args = parse_server_command("vllm serve zai-org/GLM-5-FP8 --tensor-parallel-size 8 "
                                "--speculative-config '{\"method\":\"mtp\","
                                "\"num_speculative_tokens\":1}'")
    (record,) = import_vllm_bench(path, hints={"engine": "vllm"}, server_args=args)
    assert record.measurements.ttft_median_s == pytest.approx(0.26499967742711306)
    assert (record.regime.tp, record.regime.spec_method, record.regime.draft_tokens) == (8, "mtp", 1)
    assert record.measurements.tput_per_gpu_output == pytest.approx(164.72765441223032 / 8)


def test_vllm_bench_failed_run_and_contradicting_hint():
    with pytest.raises(ConfigError, match="0 requests completed"):
        import_vllm_bench(VLLM / "benchmaq_vllm-bench-serve_glm47-fp8_b200_tp4dp2_in2048_FAILED-all-100.json")
    path = VLLM / "benchmaq_vllm-bench-serve_glm47-fp8_b200_tp8_in8192_out128_c100.json"
    with pytest.raises(ConfigError, match="contradicts the file"):
        import_vllm_bench(path, hints={"weight_dtype": "bf16"})
    with pytest.raises(ConfigError, match="did you mean 'gpu'"):
        import_vllm_bench(path, hints={"gpuu": "b200"})


# ---------------------------------------------------------------- SGLang bench_serving

SGL = OUTPUTS / "sglang-bench-serving"


def test_sglang_bench_serving_with_server_info():
    path = SGL / "benchmaq_sglang-0.5.9_bench_serving_qwen3-8b_h100_tp8_in1024_out128_c100.jsonl"
    (record,) = import_sglang_bench(path, hints={"gpu": "h100"})
    reg = record.regime
    assert (reg.engine, reg.gpu, reg.tp, reg.dp_attention, reg.ep) == ("sglang", "h100", 8, 1, 1)
    assert (reg.kernel_family, reg.attention_backend) == ("flash-attn", "fa3")
    assert reg.spec_method == "none" and reg.kv_dtype is None and reg.weight_dtype is None
    assert record.provenance.engine_version == "0.5.9"
    assert record.server_args["tp_size"] == 8 and len(record.server_args) < 60
    assert record.workload.concurrency == 100 and record.workload.dataset == "random"
    assert record.measurements.tput_per_gpu_total is not None
    assert record.measurements.tpot_std_s == pytest.approx(0.03946305254911925)


def test_sglang_dp_without_dp_attention_is_replicas():
    path = SGL / "benchmaq_sglang-0.5.8.post1_bench_serving_gptoss120b_a100_tp4dp2_in2048_out128_c100.jsonl"
    (record,) = import_sglang_bench(path)
    reg = record.regime
    assert (reg.tp, reg.dp_attention, reg.replicas, reg.num_gpus) == (4, 1, 2, 8)
    assert reg.kernel_family == "triton"


def test_sglang_bench_serving_old_dialect_open_loop():
    path = SGL / "datacrunch_sglang-2024-12_bench_serving_llama33-70b_h200_tp4_online.jsonl"
    records = import_sglang_bench(path)
    assert len(records) == 7 and len({r.id for r in records}) == 7
    first = records[0]
    assert first.workload.request_rate == 1.0 and first.workload.concurrency is None
    assert first.decode_step == (pytest.approx(0.013638956006616354), "median_itl")


# ---------------------------------------------------------------- AIPerf


def test_aiperf_new_schema():
    path = OUTPUTS / "aiperf/inferencex_aiperf-0.8.0_kimi-k2.7_vllm_mi355x_tp4_conc4_profile_export_aiperf.json"
    command = OUTPUTS / "engine-logs/vllm/inferencex_kimi-k2.7_mi355x_tp4_conc4_vllm_command.txt"
    (record,) = import_aiperf(path, hints={"engine": "vllm", "gpu": "mi355x"},
                              server_args=parse_server_command(command.read_text()))
    reg = record.regime
    assert (reg.model, reg.weight_dtype, reg.gpu, reg.gpu_isa, reg.tp) == (
        "kimi-k2.7", "mxfp4", "mi355x", "gfx950", 4)
    assert record.workload.concurrency == 4 and record.workload.isl == 81098
    # an AgentX run (the inferencex-agentx-mvp scenario): read as a ladder rung is, the
    # decode step at the batch that decoded at once, and no TTFT or TPOT
    assert record.workload.dataset == "agentx"
    assert record.workload.decode_batch == pytest.approx(3.701732000222964)
    m = record.measurements
    assert m.ttft_mean_s is None and m.ttft_median_s is None and m.tpot_mean_s is None
    assert m.itl_mean_s == pytest.approx(0.022915176722352413)
    assert record.decode_step == (pytest.approx(0.022915176722352413), "mean_itl")
    assert m.tput_per_gpu_output == pytest.approx(161.99612075969227 / 4)
    assert record.provenance.tool == "aiperf 0.8.0" and record.provenance.date == "2026-07-09"
    assert "agentic run" in record.provenance.notes[0]
    # the server-metrics scrape beside the export: 41.8M of 44.6M queried prompt tokens hit,
    # 767 computed a second, so 17.6 uncached tokens a step at its 22.9 ms mean ITL
    assert record.workload.prefix_hit_rate == pytest.approx(41833335 / 44626531)
    assert record.workload.prefill_per_step == pytest.approx(767.373 * m.itl_mean_s)
    assert "server_metrics_export.csv" in record.provenance.notes[1]


def test_aiperf_agentic_export_without_its_server_metrics_reads_no_tails():
    path = OUTPUTS / "aiperf/inferencex_aiperf-0.8.0_kimi-k2.7_vllm_mi355x_tp4_conc1_profile_export_aiperf.json"
    (record,) = import_aiperf(path, hints={"engine": "vllm", "gpu": "mi355x", "tp": 4})
    assert record.workload.prefill_per_step is None and record.workload.prefix_hit_rate is None


def test_a_server_metrics_export_whose_counters_do_not_add_up_is_refused(tmp_path):
    from inferasim.anchors.importers.aiperf_server_metrics import read_server_prefix

    source = OUTPUTS / "aiperf/inferencex_aiperf-0.8.0_kimi-k2.7_vllm_mi355x_tp4_conc4_server_metrics_export.csv"
    text = source.read_text()
    hits = next(ln for ln in text.splitlines() if ",vllm:prefix_cache_hits," in ln)
    bad = tmp_path / "server_metrics_export.csv"
    bad.write_text(text.replace(hits, hits.replace("41833335.0000", "99999999.0000", 1)))
    with pytest.raises(ConfigError, match="do not add up") as err:
        read_server_prefix(bad)
    assert "server_metrics_export.csv" in str(err.value)
    # a scrape without prefix counters (another engine, no prefix caching) reads none
    bare = tmp_path / "bare.csv"
    bare.write_text("\n".join(ln for ln in text.splitlines() if "prefix_cache" not in ln))
    assert read_server_prefix(bare) is None


def _kimi_export_without(tmp_path, metric: str) -> Path:
    """The Kimi c4 AgentX export with one of its metrics removed."""
    path = OUTPUTS / "aiperf/inferencex_aiperf-0.8.0_kimi-k2.7_vllm_mi355x_tp4_conc4_profile_export_aiperf.json"
    data = json.loads(path.read_text())
    del data[metric]
    copy = tmp_path / "export.json"
    copy.write_text(json.dumps(data))
    return copy


def test_aiperf_agentic_export_without_a_decode_concurrency_reads_littles_law(tmp_path):
    copy = _kimi_export_without(tmp_path, "effective_decode_concurrency")
    (record,) = import_aiperf(copy, hints={"engine": "vllm", "gpu": "mi355x", "tp": 4})
    # output tok/s x mean ITL: the share of the run a lane was decoding
    assert record.workload.decode_batch == pytest.approx(161.99612075969227 * 0.022915176722352413)


def test_aiperf_agentic_export_without_chunk_latency_is_refused(tmp_path):
    copy = _kimi_export_without(tmp_path, "inter_chunk_latency")
    with pytest.raises(ConfigError, match="inter_chunk_latency"):
        import_aiperf(copy, hints={"engine": "vllm", "gpu": "mi355x", "tp": 4})


def test_aiperf_old_schema():
    (record,) = import_aiperf(OUTPUTS / "aiperf/aiperf-repo_examples_run1_profile_export_aiperf.json")
    assert record.regime.model == "gpt-oss-20b"
    assert record.workload.concurrency == 100 and record.workload.isl == 550
    assert record.measurements.ttft_median_s == pytest.approx(2.369317693)


def test_aiperf_rejects_other_json():
    with pytest.raises(ConfigError, match="not an AIPerf profile export"):
        import_aiperf(VLLM / "benchmaq_vllm-bench-serve_glm47-fp8_b200_tp8_in8192_out128_c100.json")


def test_inferencemax_mori_rows_carry_their_launch_configs_running_limit():
    """AMD's launch config sets the decode workers' limit by mode: 4,096 over the ranks with
    attention DP, 256 with expert parallelism alone, 128 with neither."""
    everything = import_inferencemax(IMAX / "benchmarks_flat.csv", include_disaggregated=True)
    mori = [r for r in everything if r.regime.engine == "mori-sglang"]
    for r in mori:
        reg = r.regime
        whole = reg.max_num_seqs * (reg.dp_attention or 1)
        if (reg.dp_attention or 1) > 1:
            assert whole == 4096
        else:
            assert whole == (256 if (reg.ep or 1) > 1 else 128)
        assert "launch config" in " ".join(r.provenance.notes)
    assert {r.regime.max_num_seqs for r in mori} >= {128, 256}


def test_inferencemax_single_node_sglang_mtp_rows_carry_their_scripts_running_limit():
    """SGLang would run 48 sequences under speculative decoding; InferenceX's B200/B300
    scripts pass 512, the MI355X FP8 one the row's clients, the MI355X MXFP4 one nothing."""
    everything = import_inferencemax(IMAX / "benchmarks_flat.csv")
    mtp = [r for r in everything if r.regime.engine == "sglang" and r.regime.spec_method == "mtp"]
    by = {(r.regime.gpu, r.regime.weight_dtype, r.workload.concurrency): r.regime.max_num_seqs
          for r in mtp}
    assert by[("b300", "fp8", 512)] == 512
    assert all(v == c for (g, w, c), v in by.items() if (g, w) == ("mi355x", "fp8"))
    assert all(v is None for (g, w, _), v in by.items() if (g, w) == ("mi355x", "mxfp4"))
    plain = [r for r in everything if r.regime.engine == "sglang" and r.regime.spec_method != "mtp"]
    # without a draft model the NVIDIA scripts pass one too (H200: 512 at 1k/1k, 256 else),
    # the AMD ones none
    for r in plain:
        w, reg = r.workload, r.regime
        if reg.gpu == "h200":
            assert reg.max_num_seqs == (512 if (w.isl, w.osl) == (1024, 1024) else 256)
        elif reg.gpu in ("b200", "b300"):
            assert reg.max_num_seqs == (128 if reg.weight_dtype == "fp8" else 256)
        else:
            assert reg.max_num_seqs is None
