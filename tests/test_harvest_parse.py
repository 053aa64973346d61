"""harvest parse over the real engine outputs in ../shared/data/engine-outputs: every result file
yields anchors (or is skipped with its reason: a failed run, a per-request export, context),
the anchors store accepts them for the matching target and refuses them, naming the axis, for a
mismatched one. Engine logs and GPU tool outputs give their facts."""

from __future__ import annotations

import json

import attrs
import pytest
from click.testing import CliRunner
from conftest import shared_data

from inferasim.anchors.regime import Target
from inferasim.anchors.store import AnchorStore, read_anchor_file
from inferasim.cli.harvest_cmd import harvest
from inferasim.config.loader import load_scenario
from inferasim.harvest.gpu_detect import detect_part
from inferasim.harvest.logs import parse_engine_log
from inferasim.harvest.parse import parse_path, result_kind

#: Result files with no completed request: skipped, never anchors.
FAILED_RUNS = ("FAILED-all-100", "FAILED-zero-completed")
#: Result-like files harvest does not read, each for a stated reason.
NOT_READ = ("profile_export_FIRST", "together-runner", "agentic-result")


@pytest.fixture(scope="module")
def outputs():
    return shared_data("engine-outputs")


@pytest.fixture(scope="module")
def parsed(outputs):
    return parse_path(outputs)


def target_of(record) -> Target:
    reg = record.regime
    return Target(model=reg.model, engine=reg.engine, gpu=reg.gpu, gpu_isa=reg.gpu_isa,
                  kernel_family=reg.kernel_family,
                  weight_dtypes=(reg.weight_dtype,) if reg.weight_dtype else (),
                  kv_dtype=reg.kv_dtype, spec_method=reg.spec_method,
                  draft_tokens=reg.draft_tokens, tp=reg.tp, ep=reg.ep,
                  dp_attention=reg.dp_attention, dcp=reg.dcp)


def test_every_result_sample_yields_anchors_or_a_reason(outputs, parsed):
    by_file: dict[str, int] = {}
    for r in parsed.records:
        by_file[r.provenance.file] = by_file.get(r.provenance.file, 0) + 1
    skipped = {s.file: s.reason for s in parsed.skipped}
    results = [p for p in sorted(outputs.rglob("*")) if p.suffix in (".json", ".jsonl")]
    assert results
    for path in results:
        if any(tag in path.name for tag in FAILED_RUNS):
            assert "0 requests completed" in skipped[str(path)] or \
                "no completed" in skipped[str(path)], path.name
        elif any(tag in path.name for tag in NOT_READ):
            assert skipped[str(path)], path.name
        else:
            named = by_file.get(path.name, 0) >= 1
            assert named or "names no model" in skipped.get(str(path), ""), path.name
    for path in sorted(outputs.rglob("*")):
        if path.is_file() and path.suffix not in (".json", ".jsonl"):
            assert str(path) in skipped  # context files are never anchors
    assert all(r.workload.isl > 0 and r.decode_step_s for r in parsed.records)
    assert all(r.regime.model for r in parsed.records)
    assert len(by_file) >= 15


def test_store_accepts_matching_and_refuses_mismatched_naming_the_axis(parsed):
    store = AnchorStore(parsed.records)
    assert len(store) == len(parsed.records)
    for record in store:
        target = target_of(record)
        result = AnchorStore([record]).for_target(target)
        assert [r.id for r in result.usable] == [record.id]
        for axis, other in (("gpu", "mi325x" if record.regime.gpu != "mi325x" else "h100"),
                            ("engine", "atom" if record.regime.engine != "atom" else "vllm"),
                            ("model", "not-this-model")):
            if getattr(record.regime, axis) is None:
                continue
            wrong = attrs.evolve(target, **{axis: other})
            if axis == "gpu":
                wrong = attrs.evolve(wrong, gpu_isa=None)
            refused = AnchorStore([record]).for_target(wrong).refused
            assert refused and refused[0].axes == (axis,), (record.id, axis)
            break
        else:
            pytest.fail(f"{record.id} records neither gpu, engine nor model")


def test_processed_kimi_row_matches_its_scenario_and_not_another_gpu(outputs, write_yaml):
    path = outputs / "inferencex-processed" / "inferencex_agg_kimik25-int4_mi355x_tp8_mtp_1k1k_conc4.json"
    records = parse_path(path).records
    assert len(records) == 1
    scenario = write_yaml("kimi.yaml", """
name: kimi-mi355x-vllm-mtp
model: {name: kimi-k2.5}
gpu: {name: mi355x}
engine: {name: vllm}
parallel: {tp: 8}
speculative: {method: mtp, draft_tokens: 3}
workload: {format: random, isl: 1024, osl: 1024, concurrency: 4}
""")
    store = AnchorStore(records)
    ok = store.for_target(load_scenario(scenario, check_fit=False))
    assert len(ok.usable) == 1, [r.reason for r in ok.refused]
    bad = store.for_target(load_scenario(scenario, ["gpu.name=mi325x"], check_fit=False))
    assert not bad.usable and bad.refused[0].axes == ("gpu",)
    bad = store.for_target(load_scenario(scenario, ["engine.name=sglang"], check_fit=False))
    assert bad.refused[0].axes == ("engine",)


def test_decode_step_reads_mean_tpot_when_the_stream_coalesces(parsed):
    kimi = [r for r in parsed.records if "kimik25" in r.id and r.provenance.source == "vllm-bench"]
    assert kimi
    step, basis = kimi[0].decode_step
    assert basis.startswith("mean_tpot") and "coalesced" in basis
    assert step == pytest.approx(kimi[0].measurements.tpot_mean_s)


def test_cli_parse_folder_writes_anchor_file(outputs, tmp_path):
    out = tmp_path / "a.json"
    result = CliRunner().invoke(harvest, ["parse", str(outputs / "sglang-bench-serving"),
                                          "--out", str(out)])
    assert result.exit_code == 0, result.output
    records = read_anchor_file(out)
    assert records and all(r.regime.engine in (None, "sglang") for r in records)
    with_info = [r for r in records if r.server_args]
    assert with_info and all(r.regime.tp for r in with_info)
    assert "skipped" in result.output  # the console transcripts


@pytest.mark.parametrize("name,facts", [
    ("inferencex_vllm-0.24.0-rocm_kimi-k2.7-mxfp4_mi355x_tp4_startup-excerpt.log",
     {"version": "0.24.0", "attention_backend": "ROCM_AITER_MLA", "kv_cache_tokens": 1854077}),
    ("inferencex_vllm-0.21.0-rocm_minimax-m2.5-eagle3_tp8_startup-excerpt.log",
     {"attention_backend": "ROCM_AITER_FA", "kv_cache_tokens": 12762144,
      "speculative": {"method": "eagle3", "num_speculative_tokens": 3,
                      "model": "thoughtworks/MiniMax-M2.5-Eagle3"}}),
    ("inferencex_vllm-0.19.1_deepseek-r1-fp4_b200_tp4-ep4_startup-excerpt.log",
     {"attention_backend": "FLASHINFER_MLA", "kv_cache_dtype": "fp8"}),
    ("inferencex_vllm-0.20.0_deepseek-v4-pro_dp8-ep_mtp_startup-excerpt.log",
     {"version": "0.20.0", "kv_cache_tokens": 1448}),
    ("inferencex_vllm-0.15.0_llama33-70b-fp4_tp1_startup-excerpt_ansi.log",
     {"attention_backend": "FLASHINFER", "kv_cache_tokens": 782160}),
    ("llms-in-clouds_sglang-0.4.3.post4_qwq-32b_4xL4_tp4_startup.log",
     {"engine": "sglang", "attention_backend": "flashinfer", "kv_cache_tokens": 46611}),
])
def test_engine_logs(outputs, name, facts):
    path = next((outputs / "engine-logs").rglob(name))
    got = parse_engine_log(path.read_text(errors="replace"))
    for key, value in facts.items():
        assert got[key] == value, key
    assert got["server_args"]


def test_dsv4_log_states_attention_dp_and_mtp(outputs):
    from inferasim.anchors import normalise as nz

    path = next((outputs / "engine-logs").rglob("*deepseek-v4-pro*"))
    got = parse_engine_log(path.read_text(errors="replace"))
    regime = nz.regime_from_server_args(got["server_args"], "vllm")
    assert (regime["dp_attention"], regime["tp"], regime["ep"]) == (8, 8, 8)
    assert (regime["spec_method"], regime["draft_tokens"]) == ("mtp", 1)


@pytest.mark.parametrize("name,part", [
    ("inferencex_rocm-smi_and_amd-smi_default_mi355x_4gpu.txt", "mi355x"),
    ("dstack_nvidia-smi_default_8xH100-80GB-HBM3_driver550.txt", "h100"),
    ("amdsmi-docs_amd-smi-static_MI300A_example.txt", "mi300a"),
    ("dstack_gpu-usage_nvidia-smi-H100_and_rocm-smi-concise-MI300X.md", None),  # two parts
])
def test_gpu_tool_outputs(outputs, name, part):
    got, how = detect_part((outputs / "gpu-smi" / name).read_text(errors="replace"))
    assert got == part, how


def test_rocm_smi_device_id_alone_names_the_part():
    assert detect_part("0       2     0x74a1,   60024  46.0°C")[0] == "mi300x"
    assert detect_part("no gpu here")[0] is None


def test_result_kind_detection():
    assert result_kind({"completed": 3, "total_input_tokens": 9}) == "vllm-bench"
    assert result_kind([{"completed": 3, "backend": "sglang"}]) == "sglang-bench"
    assert result_kind({"input_sequence_length": {"avg": 1}}) == "aiperf"
    assert result_kind(json.loads('{"hw": "mi355x", "tput_per_gpu": 1}')) == "inferencemax"
    assert result_kind({"metadata": {}}) is None


def test_a_trt_llm_startup_log_gives_its_build_pool_and_capped_length():
    text = "\n".join([
        "[TensorRT-LLM] TensorRT-LLM version: 1.2.0rc5",
        "[12/20/2025-04:21:10] [TRT-LLM] [W] Adjusted max_seq_len to 8224",
        "[TensorRT-LLM][INFO] Number of tokens per block: 32.",
        "[TensorRT-LLM][INFO] [MemUsageChange] Allocated 0.56 GiB for max tokens in paged "
        "KV cache (8224).",
        "[TensorRT-LLM][INFO] [MemUsageChange] Allocated 0.56 GiB for max tokens in paged "
        "KV cache (8192).",
    ])
    facts = parse_engine_log(text)
    assert (facts["engine"], facts["version"]) == ("trt", "1.2.0rc5")
    assert facts["kv_cache_tokens"] == 8224 and facts["kv_cache_tokens_per_rank"] == [8224, 8192]
    assert facts["max_seq_len_capped"] == 8224  # the pool held less than the context
