"""A model named by its checkpoint's config.json (arch.hf_config) or by a catalog-form file
outside the catalog.

Each config below carries the fields of its checkpoint's published config.json (trimmed to
what the families read, as aiconfigurator's model_configs copies are); read through the
importer it must give the catalog's own entry for that model, field by field, so the
weights, KV bytes and step prices agree too."""

from __future__ import annotations

import json

import attrs
import pytest

from inferasim.arch.memory import memory_plan
from inferasim.config.errors import ConfigError
from inferasim.config.loader import load_scenario


def _dense(kind, layers, hidden, heads, kv, inter, vocab, context, **extra):
    """A dense model's config.json fields, as its checkpoint publishes them."""
    return {"model_type": kind, "num_hidden_layers": layers, "hidden_size": hidden,
            "num_attention_heads": heads, "num_key_value_heads": kv,
            "intermediate_size": inter, "vocab_size": vocab,
            "max_position_embeddings": context, "torch_dtype": "bfloat16",
            "tie_word_embeddings": False, **extra}


MLA_V3 = {"num_hidden_layers": 61, "hidden_size": 7168, "num_attention_heads": 128,
          "num_key_value_heads": 128, "intermediate_size": 18432, "vocab_size": 129280,
          "max_position_embeddings": 163840, "n_routed_experts": 256, "n_shared_experts": 1,
          "num_experts_per_tok": 8, "moe_intermediate_size": 2048, "moe_layer_freq": 1,
          "first_k_dense_replace": 3, "kv_lora_rank": 512, "q_lora_rank": 1536,
          "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
          "num_nextn_predict_layers": 1, "torch_dtype": "bfloat16",
          "tie_word_embeddings": False,
          "quantization_config": {"quant_method": "fp8", "fmt": "e4m3",
                                  "weight_block_size": [128, 128]}}

CONFIGS = {
    "deepseek-r1": {"model_type": "deepseek_v3", **MLA_V3},
    "deepseek-v3.2": {"model_type": "deepseek_v32", **MLA_V3, "index_n_heads": 64,
                      "index_head_dim": 128, "index_topk": 2048},
    "kimi-k2": {"model_type": "kimi_k2", **MLA_V3, "num_attention_heads": 64,
                "num_key_value_heads": 64, "vocab_size": 163840,
                "max_position_embeddings": 131072, "n_routed_experts": 384,
                "first_k_dense_replace": 1, "num_nextn_predict_layers": 0},
    "glm-4.5": {"model_type": "glm4_moe", "num_hidden_layers": 92, "hidden_size": 5120,
                "num_attention_heads": 96, "num_key_value_heads": 8, "head_dim": 128,
                "intermediate_size": 12288, "vocab_size": 151552,
                "max_position_embeddings": 131072, "n_routed_experts": 160,
                "n_shared_experts": 1, "num_experts_per_tok": 8, "moe_intermediate_size": 1536,
                "first_k_dense_replace": 3, "num_nextn_predict_layers": 1,
                "torch_dtype": "bfloat16", "quantization_config": {"quant_method": "fp8"}},
    "gpt-oss-120b": {"model_type": "gpt_oss", "num_hidden_layers": 36, "hidden_size": 2880,
                     "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
                     "intermediate_size": 2880, "num_local_experts": 128,
                     "num_experts_per_tok": 4, "experts_per_token": 4, "vocab_size": 201088,
                     "max_position_embeddings": 131072, "sliding_window": 128,
                     "layer_types": ["sliding_attention", "full_attention"] * 18,
                     "torch_dtype": "bfloat16", "tie_word_embeddings": False,
                     "quantization_config": {"quant_method": "mxfp4"}},
    "minimax-m2.5": {"model_type": "minimax_m2", "num_hidden_layers": 62, "hidden_size": 3072,
                     "num_attention_heads": 48, "num_key_value_heads": 8, "head_dim": 128,
                     "intermediate_size": 1536, "num_local_experts": 256,
                     "num_experts_per_tok": 8, "vocab_size": 200064,
                     "max_position_embeddings": 196608, "num_mtp_modules": 3,
                     "torch_dtype": "bfloat16", "quantization_config": {"quant_method": "fp8"}},
    "qwen3-235b-a22b": {"model_type": "qwen3_moe", "num_hidden_layers": 94, "hidden_size": 4096,
                        "num_attention_heads": 64, "num_key_value_heads": 4, "head_dim": 128,
                        "intermediate_size": 12288, "num_experts": 128,
                        "num_experts_per_tok": 8, "moe_intermediate_size": 1536,
                        "mlp_only_layers": [], "decoder_sparse_step": 1,
                        "vocab_size": 151936, "max_position_embeddings": 40960,
                        "torch_dtype": "bfloat16", "tie_word_embeddings": False},
    "llama-3.1-8b": _dense("llama", 32, 4096, 32, 8, 14336, 128256, 131072),
    "qwen3-8b": _dense("qwen3", 36, 4096, 32, 8, 12288, 151936, 40960, head_dim=128,
                       use_sliding_window=False, sliding_window=None),
    "llama-3.3-70b": _dense("llama", 80, 8192, 64, 8, 28672, 128256, 131072),
    "qwq-32b": _dense("qwen2", 64, 5120, 40, 8, 27648, 152064, 131072,
                      use_sliding_window=False, sliding_window=131072, max_window_layers=64),
    "qwen3.5-397b-a17b": {
        "model_type": "qwen3_5_moe", "tie_word_embeddings": False,
        "text_config": {
            "model_type": "qwen3_5_moe_text", "attn_output_gate": True, "dtype": "bfloat16",
            "full_attention_interval": 4, "head_dim": 256, "hidden_size": 4096,
            "layer_types": ["linear_attention"] * 3 + ["full_attention"],
            "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
            "linear_num_key_heads": 16, "linear_num_value_heads": 64,
            "linear_value_head_dim": 128, "max_position_embeddings": 262144,
            "mlp_only_layers": [], "moe_intermediate_size": 1024, "mtp_num_hidden_layers": 1,
            "num_attention_heads": 32, "num_experts": 512, "num_experts_per_tok": 10,
            "num_hidden_layers": 60, "num_key_value_heads": 2,
            "shared_expert_intermediate_size": 1024, "vocab_size": 248320},
        "vision_config": {"depth": 27, "hidden_size": 1152}},
}
CONFIGS["qwen3.5-397b-a17b"]["text_config"]["layer_types"] *= 15

# what a config.json does not hold: the catalog's provenance and the published labels
NOT_IN_CONFIG = {"name", "source", "hf_id", "published_total_params_b",
                 "published_active_params_b"}
LAYOUT = {"deepseek-r1": 8, "deepseek-v3.2": 8, "kimi-k2": 8, "glm-4.5": 8,
          "gpt-oss-120b": 1, "minimax-m2.5": 2, "qwen3-235b-a22b": 4, "llama-3.1-8b": 1,
          "qwen3.5-397b-a17b": 8, "qwen3-8b": 1, "llama-3.3-70b": 2, "qwq-32b": 1}


def _write(tmp_path, name, cfg, file="config.json"):
    folder = tmp_path / name
    folder.mkdir()
    path = folder / file
    path.write_text(json.dumps(cfg))
    return path


@pytest.mark.parametrize("catalog", sorted(CONFIGS))
def test_a_config_json_reads_as_the_catalog_entry_of_its_model(catalog, tmp_path):
    path = _write(tmp_path, catalog.upper(), CONFIGS[catalog])
    tp = f"parallel.tp={LAYOUT[catalog]}"
    imported = load_scenario(None, [f"model.name={path}", "gpu.name=b200", tp])
    listed = load_scenario(None, [f"model.name={catalog}", "gpu.name=b200", tp])
    a, b = attrs.asdict(imported.model), attrs.asdict(listed.model)
    assert {k for k in a if a[k] != b[k]} <= NOT_IN_CONFIG, \
        {k: (a[k], b[k]) for k in a if a[k] != b[k] and k not in NOT_IN_CONFIG}
    assert imported.model.name == catalog  # the checkpoint's folder, lower-cased
    assert imported.model.hf_id == str(path.parent)  # what harvest plan serves
    assert str(path) in imported.model.source
    plan_a, plan_b = memory_plan(imported), memory_plan(listed)
    assert plan_a.kv_pool_tokens == plan_b.kv_pool_tokens > 0
    assert plan_a.weight_bytes_per_gpu == plan_b.weight_bytes_per_gpu


def test_a_checkpoint_folder_is_read_from_its_config_json(tmp_path):
    path = _write(tmp_path, "Llama-3.1-8B", CONFIGS["llama-3.1-8b"])
    sc = load_scenario(None, [f"model.name={path.parent}/"])
    assert sc.model.name == "llama-3.1-8b" and sc.model.num_layers == 32
    with pytest.raises(ConfigError, match="a folder without a config.json"):
        load_scenario(None, [f"model.name={tmp_path}/"])


def test_the_name_comes_from_name_or_path_first(tmp_path):
    cfg = {**CONFIGS["llama-3.1-8b"], "_name_or_path": "meta-llama/Llama-3.1-8B-Instruct"}
    path = _write(tmp_path, "snapshot", cfg, "llama.json")
    sc = load_scenario(None, [f"model.name={path}"])
    assert sc.model.name == "llama-3.1-8b-instruct"
    assert sc.model.hf_id == "meta-llama/Llama-3.1-8B-Instruct"


def test_a_config_beside_the_scenario_is_found_from_its_folder(tmp_path):
    _write(tmp_path, "m", CONFIGS["llama-3.1-8b"])
    (tmp_path / "s.yaml").write_text("extends: " + str(_quickstart()) +
                                     "\nmodel: {name: m/config.json}\n")
    assert load_scenario(str(tmp_path / "s.yaml"), []).model.num_layers == 32


def _quickstart():
    from inferasim.config.catalog import DEFAULT_SCENARIO

    return DEFAULT_SCENARIO


def test_a_catalog_form_yaml_outside_the_catalog_names_a_model_or_a_gpu(tmp_path):
    from inferasim.config.catalog import CATALOG_DIR

    model = (CATALOG_DIR / "models" / "llama-3.1-8b.yaml").read_text()
    (tmp_path / "My-Llama.yaml").write_text(model.replace("name: llama-3.1-8b\n", ""))
    gpu = (CATALOG_DIR / "gpus" / "h100.yaml").read_text().replace("name: h100", "name: h100x")
    (tmp_path / "part.yaml").write_text(gpu)
    sc = load_scenario(None, [f"model.name={tmp_path / 'My-Llama.yaml'}",
                              f"gpu.name={tmp_path / 'part.yaml'}"])
    assert sc.model.name == "my-llama" and sc.model.num_layers == 32
    assert sc.gpu.name == "h100x"


@pytest.mark.parametrize("quant, dtypes", [
    ({"quant_method": "compressed-tensors", "config_groups": {
        "g": {"weights": {"num_bits": 8, "type": "int"}}}}, ("int8", None)),
    ({"quant_method": "compressed-tensors", "config_groups": {
        "g": {"weights": {"num_bits": 8, "type": "float"}}}}, ("fp8", None)),
    ({"quant_method": "compressed-tensors", "config_groups": {
        "g": {"weights": {"num_bits": 4, "type": "float"}}}}, ("nvfp4", None)),
    ({"quant_method": "compressed-tensors", "config_groups": {
        "g": {"weights": {"num_bits": 4, "type": "int"}}}}, ("bf16", "int4")),
    ({"quant_method": "awq", "bits": 4}, ("int4", None)),
    ({"quant_method": "gptq", "bits": 8}, ("int8", None)),
    ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, ("nvfp4", None)),
    (None, ("bf16", None)),
])
def test_the_quantization_config_names_the_weights(quant, dtypes, tmp_path):
    cfg = {**CONFIGS["qwen3-235b-a22b"], "quantization_config": quant}
    sc = load_scenario(None, [f"model.name={_write(tmp_path, 'q', cfg)}", "gpu.name=b200",
                              "parallel.tp=8"])
    assert (sc.model.weight_dtype, sc.model.expert_weight_dtype) == dtypes
    fp32 = {**CONFIGS["llama-3.1-8b"], "torch_dtype": "float32"}
    assert load_scenario(None, [f"model.name={_write(tmp_path, 'f', fp32)}"]).model \
        .weight_dtype == "fp16"  # vLLM's dtype auto for a float32 checkpoint


@pytest.mark.parametrize("cfg, key, words", [
    ({"model_type": "mamba", "num_hidden_layers": 2}, "model_type", "not a family"),
    ({**CONFIGS["llama-3.1-8b"], "num_hidden_layers": None}, "num_hidden_layers", "needs"),
    ({**CONFIGS["llama-3.1-8b"], "hidden_size": "4k"}, "hidden_size", "whole number"),
    ({**CONFIGS["llama-3.1-8b"], "num_attention_heads": 0}, "num_attention_heads", ">= 1"),
    ({**CONFIGS["glm-4.5"], "quantization_config": {"quant_method": "gptq"}},
     "quantization_config.quant_method", "gptq"),
    ({**CONFIGS["deepseek-r1"], "moe_layer_freq": 2}, "moe_layer_freq", "every layer"),
    ({**CONFIGS["qwen3-235b-a22b"], "mlp_only_layers": [5]}, "mlp_only_layers", "leading"),
    ({**CONFIGS["deepseek-v3.2"], "index_topk": None}, "index_topk", "needs"),
])
def test_a_config_the_importer_cannot_read_is_refused_naming_file_and_key(
        cfg, key, words, tmp_path):
    path = _write(tmp_path, "bad", cfg)
    with pytest.raises(ConfigError) as err:
        load_scenario(None, [f"model.name={path}"])
    assert err.value.file == str(path) and err.value.key.endswith(key)
    assert words in str(err.value)


@pytest.mark.parametrize("text, words", [
    ("{not json", "not JSON"), ("[1, 2]", "JSON object")])
def test_a_file_that_is_no_config_is_refused(text, words, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=words):
        load_scenario(None, [f"model.name={path}"])


def test_a_missing_model_file_and_a_json_gpu_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="model file .* not found: nowhere/config.json"):
        load_scenario(None, ["model.name=nowhere/config.json"])
    path = _write(tmp_path, "g", {"name": "x"}, "gpu.json")
    with pytest.raises(ConfigError, match="catalog YAML file, not JSON"):
        load_scenario(None, [f"gpu.name={path}"])


def test_price_reads_a_config_json_as_the_model_it_describes(tmp_path):
    from click.testing import CliRunner

    from inferasim.cli.price_cmd import price

    path = _write(tmp_path, "DeepSeek-V3.2", CONFIGS["deepseek-v3.2"])
    args = ["--context", "8192,65536", "--gpu", "h200", "--json"]
    imported = CliRunner().invoke(price, [str(path), *args])
    listed = CliRunner().invoke(price, ["deepseek-v3.2", *args])
    assert imported.exit_code == 0, imported.output
    a, b = json.loads(imported.output), json.loads(listed.output)
    assert a["attention_kind"] == "mla_dsa" and len(a["contexts"]) == 2
    assert a["contexts"] == b["contexts"] and a["kv_dtype"] == b["kv_dtype"] == "fp8"


def test_a_quantization_it_does_not_read_is_refused_unless_the_scenario_names_the_weights(
        tmp_path):
    cfg = {**CONFIGS["llama-3.1-8b"], "quantization_config": {"quant_method": "bitsandbytes"}}
    path = _write(tmp_path, "bnb", cfg)
    with pytest.raises(ConfigError, match="quant_method 'bitsandbytes' is not read"):
        load_scenario(None, [f"model.name={path}"])
    sc = load_scenario(None, [f"model.name={path}", "model.weight_dtype=int4"])
    assert sc.model.weight_dtype == "int4" and sc.model.num_layers == 32


def test_the_published_config_of_a_catalog_model_replays_as_the_catalog_model(tmp_path):
    """Its checkpoint's folder (DeepSeek-R1-0528) names the model the anchors measured, so the
    import is calibrated by the same anchors and replays the same requests."""
    from inferasim.report.run_report import replay_summary
    from inferasim.serve.simulation import simulate

    path = _write(tmp_path, "DeepSeek-R1-0528", CONFIGS["deepseek-r1"])
    base = "scenarios/inferencemax/dsr1-mi355x-sglang-fp8-tp8.yaml"
    short = ["workload.duration_s=60"]
    imported = replay_summary(simulate(load_scenario(base, [f"model.name={path.parent}",
                                                            *short])))[1]
    listed = replay_summary(simulate(load_scenario(base, short)))[1]
    assert imported["calibration"]["mode"] == listed["calibration"]["mode"] == "anchored"
    for key in ("requests_completed", "output_tok_s", "ttft_mean_s", "tpot_mean_ms"):
        assert imported[key] == listed[key], key
