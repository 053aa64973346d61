"""The serving recipes of the AgentX deployments (``scenarios/agentic/_recipe-*.yaml``): each
names a deployment the catalog knows, loads, and says where its arguments come from; a
ladder's rung finds the recipe of its own weights first; a ladder's bare "fp4" means the
model's own 4-bit format where its checkpoint ships one; and the memory a part's serving stack
holds unseen comes off the pool under every profiled rule."""

from __future__ import annotations

import attrs
import pytest

from inferasim.anchors.importers.agentx_ladder import ladder_engine, weight_dtype
from inferasim.arch.memory import GIB, memory_plan
from inferasim.arch.spec import WEIGHT_DTYPES
from inferasim.config.catalog import catalog_names, native_four_bit
from inferasim.config.loader import load_scenario
from inferasim.config.recipes import AGENTIC_DIR, recipe_path

RECIPES = sorted(AGENTIC_DIR.glob("_recipe-*.yaml"))


def _deployment(stem: str) -> tuple[str, str, str, str | None]:
    """(engine, gpu, model, weights or None) a recipe's file name names."""
    engine, gpu, rest = stem.removeprefix("_recipe-").split("-", 2)
    if rest in catalog_names("models"):
        return engine, gpu, rest, None
    model, weights = rest.rsplit("-", 1)
    return engine, gpu, model, weights


def test_there_are_recipes_for_every_engine_the_launch_scripts_ran():
    engines = {_deployment(p.stem)[0] for p in RECIPES}
    assert {"vllm", "sglang"} <= engines and len(RECIPES) >= 20


@pytest.mark.parametrize("path", RECIPES, ids=[p.stem for p in RECIPES])
def test_each_recipe_names_a_catalog_deployment_loads_and_cites_its_source(path):
    engine, gpu, model, weights = _deployment(path.stem)
    assert engine in catalog_names("engines") and gpu in catalog_names("gpus")
    assert model in catalog_names("models"), path.name
    assert weights is None or weights in WEIGHT_DTYPES, path.name
    keys = [f"engine.name={engine}", f"gpu.name={gpu}", f"model.name={model}",
            "parallel.tp=8", "workload.concurrency=8", "engine.max_num_seqs=8"]
    if weights:
        keys.append(f"model.weight_dtype={weights}")
    scenario = load_scenario(path, keys, check_fit=False)
    assert scenario.engine.name == engine and scenario.workload.format == "agentx"
    text = path.read_text()
    assert "InferenceX" in text and "Source" in text, f"{path.name} names no source"


def test_a_rung_takes_the_recipe_of_its_own_weights_first():
    int4 = recipe_path("vllm", "b200", "kimi-k2.5", "int4")
    nvfp4 = recipe_path("vllm", "b200", "kimi-k2.5", "nvfp4")
    assert int4.name == "_recipe-vllm-b200-kimi-k2.5-int4.yaml"
    assert nvfp4.name == "_recipe-vllm-b200-kimi-k2.5-nvfp4.yaml"
    # no recipe for these weights and none for the deployment as a whole
    assert recipe_path("vllm", "b200", "kimi-k2.5", "fp8") is None
    # one recipe for every precision of a deployment whose scripts pass the same arguments
    generic = recipe_path("vllm", "mi355x", "minimax-m2.5", "mxfp4")
    assert generic == recipe_path("vllm", "mi355x", "minimax-m2.5", "fp8")
    assert generic.name == "_recipe-vllm-mi355x-minimax-m2.5.yaml"


def test_a_bare_fp4_is_the_checkpoints_own_format_where_it_ships_one():
    assert native_four_bit("gpt-oss-120b") == "mxfp4"
    assert native_four_bit("minimax-m2.5") is None
    assert weight_dtype("fp4", "h100", "x.csv", native_four_bit("gpt-oss-120b")) == "mxfp4"
    assert weight_dtype("fp4", "b200", "x.csv", native_four_bit("minimax-m2.5")) == "nvfp4"
    assert weight_dtype("fp4", "mi355x", "x.csv", native_four_bit("minimax-m2.5")) == "mxfp4"


@pytest.mark.parametrize("engine, model, weights, tp", [
    ("vllm", "minimax-m2.5", "fp8", 2), ("sglang", "glm-5.1", "mxfp4", 2)])
def test_the_memory_a_stack_holds_unseen_comes_off_the_pool(engine, model, weights, tp):
    keys = [f"engine.name={engine}", "gpu.name=mi355x", f"model.name={model}",
            f"model.weight_dtype={weights}", f"parallel.tp={tp}", "engine.kv_dtype=fp8",
            "engine.mem_fraction=0.9"]
    held = load_scenario(None, keys, check_fit=False)
    bare = attrs.evolve(held, gpu=attrs.evolve(held.gpu, unaccounted_memory_gib=0.0))
    assert held.gpu.unaccounted_memory_gib == pytest.approx(5.1)
    with_it, without = memory_plan(held), memory_plan(bare)
    lost = (without.kv_pool_tokens - with_it.kv_pool_tokens) * with_it.kv_bytes_per_token
    # one page's rounding either way
    assert lost == pytest.approx(5.1 * GIB, abs=held.engine.page_size
                                 * with_it.kv_bytes_per_token)


@pytest.mark.parametrize("row, engine", [
    ({"framework": "trtllm", "image": "nvcr.io/nvidia/tensorrt-llm/release:1.2.0"}, "trt"),
    ({"framework": "vLLM", "image": "vllm/vllm-openai-rocm:v0.22.0"}, "vllm"),
    ({"framework": "", "image": "lmsysorg/sglang:v0.5.12-cu130"}, "sglang"),
    ({"framework": float("nan"), "image": "rocm/atom:rocm7.2.3_atom20260511"}, "atom"),
])
def test_a_ladder_row_names_its_engine_as_the_anchors_spell_it(row, engine):
    assert ladder_engine(row) == engine
