"""Normalisation tables: each decision, one assertion."""

from __future__ import annotations

import pytest

from inferasim.anchors import normalise as nz


@pytest.mark.parametrize("spelling, engine", [
    ("sglang", "sglang"), ("SGLang", "sglang"), ("mori-sglang", "mori-sglang"),
    ("mori_sglang", "mori-sglang"), ("atom", "atom"), ("vllm", "vllm"),
    ("trt", "trt"), ("TensorRT-LLM", "trt"),
    ("dynamo-sglang", "dynamo-sglang"), ("dynamo-trt", "dynamo-trt"),
    ("someengine", "someengine"), (None, None), ("", None),
])
def test_engine_spellings(spelling, engine):
    assert nz.normalise_engine(spelling) == engine


def test_mori_sglang_is_not_sglang_and_disagg_is_its_own_regime():
    assert nz.normalise_engine("mori-sglang") != nz.normalise_engine("sglang")
    # a Dynamo deployment keeps its framework's spelling (its own regime) and names the
    # engine its workers run
    assert nz.normalise_engine("dynamo-trt") == "dynamo-trt"
    assert nz.worker_engine("dynamo-trt") == ("dynamo", "trt")
    assert nz.worker_engine("TensorRT-LLM") == ("native", "trt")
    assert nz.orchestrated_engine("trt", "dynamo") == "dynamo-trt"
    assert nz.orchestrated_engine("sglang", "native") == "sglang"
    assert nz.modelled("dynamo-sglang") and nz.modelled("trt")
    assert not nz.modelled("sglang-disagg") and not nz.modelled("someengine")


def test_engine_from_image():
    assert nz.engine_from_image("lmsysorg/sglang:v0.5.12-rocm700-mi35x") == "sglang"
    assert nz.engine_from_image("rocm/atom:rocm7.2.3_ubuntu24.04_atom20260511") == "atom"
    assert nz.engine_from_image("vllm/vllm-openai-rocm:v0.21.0") == "vllm"
    assert nz.engine_from_image(None) is None


@pytest.mark.parametrize("spelling", [
    "aiter", "ROCM_AITER_MLA", "ROCM_AITER_UNIFIED_ATTN", "rocm_aiter_mla_sparse",
    "ROCM_AITER_DSV4", "aiter_unified",
])
def test_aiter_backends_are_one_family(spelling):
    assert nz.kernel_family(spelling) == "aiter"


@pytest.mark.parametrize("spelling, family", [
    ("ROCM_AITER_FA", "aiter-fa"), ("ROCM_AITER_TRITON_MLA", "triton-mla"),
    ("TRITON_MLA", "triton-mla"), ("FLASHINFER_MLA", "flashinfer-mla"),
    ("flashmla", "flashmla"), ("FLASHMLA_SPARSE", "flashmla-sparse"),
    ("nsa", "nsa"), ("dsa", "nsa"), ("fa3", "flash-attn"), ("FLASH_ATTN", "flash-attn"),
    ("triton", "triton"), ("cutlass_mla", "cutlass-mla"), ("brand_new", "brand-new"),
    ("auto", None), (None, None),
])
def test_other_kernel_families(spelling, family):
    assert nz.kernel_family(spelling) == family


def test_distinct_families_do_not_collapse():
    families = {nz.kernel_family(s) for s in ("aiter", "ROCM_AITER_FA", "TRITON_MLA",
                                              "FLASHINFER_MLA", "flashmla", "nsa")}
    assert len(families) == 6


@pytest.mark.parametrize("method, dtype", [
    ("quark", None), ("compressed-tensors", None), ("compressed_tensors", None),
    ("modelopt", None), ("fp8", "fp8"), ("mxfp4", "mxfp4"), ("fp4", "fp4"),
    ("nvfp4", "nvfp4"), ("modelopt_fp4", "nvfp4"), ("bfloat16", "bf16"), ("int4", "int4"),
    ("something-new", None), (None, None),
])
def test_quant_methods(method, dtype):
    assert nz.weight_dtype(method) == dtype


def test_inferencemax_fp4_precision_by_vendor():
    assert nz.weight_dtype_for_precision("fp4", "amd") == "mxfp4"
    assert nz.weight_dtype_for_precision("fp4", "nvidia") == "nvfp4"
    assert nz.weight_dtype_for_precision("fp4", None) == "fp4"
    assert nz.weight_dtype_for_precision("fp8", "amd") == "fp8"


def test_fp4_is_a_family():
    assert nz.weight_dtypes_match("fp4", "mxfp4")
    assert nz.weight_dtypes_match("nvfp4", "fp4")
    assert not nz.weight_dtypes_match("mxfp4", "nvfp4")
    assert not nz.weight_dtypes_match("fp4", "fp8")


@pytest.mark.parametrize("name, part", [
    ("mi355x", "mi355x"), ("MI355X", "mi355x"), ("AMD Instinct MI355 OAM", "mi355x"),
    ("mi300x", "mi300x"), ("MI325X", "mi325x"), ("NVIDIA H100 80GB HBM3", "h100"),
    ("h200", "h200"), ("b200", "b200"), ("gb200", "gb200"), ("tpu-v5", None), (None, None),
])
def test_gpu_parts(name, part):
    assert nz.normalise_gpu(name) == part


def test_gpu_from_image_only_where_it_can_be_argued():
    assert nz.gpu_from_image("lmsysorg/sglang:v0.5.12-rocm700-mi35x") == ("mi355x", "gfx950",
                                                                          "amd")
    # ATOM's MI350x images run on MI355X too: the ISA, not the part.
    assert nz.gpu_from_image("rocm/atom:rocm7.1.1-ubuntu24.04-pytorch2.9-atom0.1.1-MI350x") \
        == (None, "gfx950", "amd")
    assert nz.gpu_from_image("rocm/vllm:v0.9-rocm700-mi355x") == ("mi355x", "gfx950", "amd")
    # mi30x images serve MI300X and MI325X alike: the ISA, not the part.
    assert nz.gpu_from_image("lmsysorg/sglang:v0.5.12-rocm700-mi30x") == (None, "gfx942", "amd")
    assert nz.gpu_from_image("lmsysorg/sglang:v0.5.12-cu130") == (None, None, "nvidia")
    assert nz.gpu_from_image(None) == (None, None, None)


def test_isa_table():
    assert nz.gpu_isa("mi325x") == "gfx942" and nz.gpu_isa("mi355x") == "gfx950"


@pytest.mark.parametrize("image, version", [
    ("lmsysorg/sglang:v0.5.12-rocm700-mi35x", "0.5.12"),
    ("lmsysorg/sglang:v0.5.9-cu130", "0.5.9"),
    ("rocm/atom:rocm7.2.3_ubuntu24.04_py3.12_pytorch_release_2.10.0_atom20260511", "20260511"),
    ("rocm/atom:rocm7.1.1-ubuntu24.04-pytorch2.9-atom0.1.1-MI350x", "0.1.1"),
    ("nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6.post3", "1.2.0rc6.post3"),
    ("vllm/vllm-openai-rocm:v0.21.0", "0.21.0"),
    (None, None),
])
def test_engine_version_from_image(image, version):
    assert nz.engine_version_from_image(image) == version


def test_build_matching_at_the_precision_the_target_states():
    image = "lmsysorg/sglang:v0.5.12-rocm700-mi35x"
    assert nz.build_matches(image, image, "0.5.12")
    assert nz.build_matches("v0.5.12-rocm700-mi35x", image, "0.5.12")
    assert nz.build_matches("0.5.12", image, "0.5.12")
    assert not nz.build_matches("0.5.9", image, "0.5.12")
    assert not nz.build_matches("v0.5.12-cu130", image, "0.5.12")
    assert not nz.build_matches("0.5.12", None, None)


@pytest.mark.parametrize("model_id, name", [
    ("dsr1", "deepseek-r1"), ("deepseek-ai/DeepSeek-R1-0528", "deepseek-r1"),
    ("amd/DeepSeek-R1-0528-MXFP4", "deepseek-r1"), ("zai-org/GLM-5-FP8", "glm-5"),
    ("MiniMaxAI/MiniMax-M2.5", "minimax-m2.5"), ("moonshotai/Kimi-K2.5", "kimi-k2.5"),
    ("/models/models--openai--gpt-oss-120b/snapshots/b5c939de/", "gpt-oss-120b"),
    ("/workspace/gpt-oss-120b", "gpt-oss-120b"), ("amd/Kimi-K2.7-Code-MXFP4", "kimi-k2.7"),
])
def test_model_names(model_id, name):
    assert nz.model_name(model_id) == name


def test_weight_dtype_from_checkpoint_name():
    assert nz.weight_dtype_from_model_id("zai-org/GLM-5-FP8") == "fp8"
    assert nz.weight_dtype_from_model_id("amd/Kimi-K2.7-Code-MXFP4") == "mxfp4"
    assert nz.weight_dtype_from_model_id("nvidia/DeepSeek-R1-0528-FP4") == "nvfp4"
    assert nz.weight_dtype_from_model_id("MiniMaxAI/MiniMax-M2.5") is None


# ---------------------------------------------------------------- server args


def test_parse_server_command():
    args = nz.parse_server_command(
        "vllm serve amd/Kimi-K2.7-Code-MXFP4 --tensor-parallel-size=4 --block-size=1 "
        "--max-num-seqs 4 --enable-prefix-caching --gpu-memory-utilization 0.90")
    assert args["model"] == "amd/Kimi-K2.7-Code-MXFP4"
    assert args["tensor_parallel_size"] == "4" and args["enable_prefix_caching"] is True
    regime = nz.regime_from_server_args(args, "vllm")
    assert regime["tp"] == 4 and regime["dp_attention"] == 1 and regime["page_size"] == 1
    assert regime["max_num_seqs"] == 4 and regime["model"] == "kimi-k2.7"
    assert regime["spec_method"] == "none"


@pytest.mark.parametrize("command, engine, dpa", [
    ("python -m sglang.launch_server --tp 8 --dp 8 --enable-dp-attention", "sglang", 8),
    ("python -m sglang.launch_server --tp 8 --enable-dp-attention --dp-size 4", "sglang", 4),
    ("python -m sglang.launch_server --tp 4 --dp 2", "sglang", 1),
    ("vllm serve m --data-parallel-size 8 --enable-expert-parallel", "vllm", 8),
    ("vllm serve m --data-parallel-size 2", "vllm", None),
    ("atom --model m -tp 8 --attn-dp-size 8", "atom", 8),
    ("vllm serve m -tp 8", "vllm", 1),
])
def test_attention_dp_from_server_args(command, engine, dpa):
    assert nz.attention_dp_from_args(nz.parse_server_command(command), engine) == dpa


def test_parallel_layout_from_server_args():
    vllm = nz.regime_from_server_args(nz.parse_server_command(
        "vllm serve deepseek-ai/DeepSeek-V4-Pro --data-parallel-size 8 --enable-expert-parallel "
        "--speculative-config '{\"method\": \"mtp\", \"num_speculative_tokens\": 1}'"), "vllm")
    assert (vllm["tp"], vllm["ep"], vllm["dp_attention"]) == (8, 8, 8)
    assert vllm["spec_method"] == "mtp" and vllm["draft_tokens"] == 1
    sglang = nz.regime_from_server_args({"tp_size": 4, "dp_size": 2, "enable_dp_attention": False,
                                         "speculative_algorithm": None}, "sglang")
    assert (sglang["tp"], sglang["replicas"], sglang["num_gpus"]) == (4, 2, 8)
    assert sglang["spec_method"] == "none"
    assert "scheduler_recv_interval" not in sglang   # not given: unknown, not 1
    launched = nz.regime_from_server_args(nz.parse_server_command(
        "python3 -m sglang.launch_server --model-path deepseek-ai/DeepSeek-R1-0528 --tp 8 "
        "--scheduler-recv-interval 30 --max-running-requests 128"), "sglang")
    assert (launched["scheduler_recv_interval"], launched["max_num_seqs"]) == (30, 128)


def test_speculative_names_stay_apart():
    assert nz.spec_method("EAGLE", has_draft_model=False) == "mtp"
    assert nz.spec_method("EAGLE", has_draft_model=True) == "eagle"
    assert nz.spec_method("EAGLE3") == "eagle3"
    assert nz.spec_method("NEXTN") == "mtp"
    assert nz.spec_method("dspark") == "dspark"
    quark = nz.regime_from_server_args({"quantization": "quark"}, "vllm")
    assert "weight_dtype" not in quark
