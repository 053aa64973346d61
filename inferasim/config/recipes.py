"""The serving recipes shipped beside the agentic scenarios (``scenarios/agentic/_recipe-*``):
the server arguments InferenceX's launch scripts passed a deployment, each file citing its
script. ``validate agentx`` replays a measured ladder with its deployment's recipe, and the
AgentX ladder importer stamps the KV dtype the recipe's script set on the ladder's anchors."""

from __future__ import annotations

from pathlib import Path

from inferasim.config.catalog import SCENARIO_DIR
from inferasim.config.errors import ConfigError

AGENTIC_DIR = SCENARIO_DIR / "agentic"


def recipe_path(engine: str, gpu: str, model: str, weights: str) -> Path | None:
    """The deployment's serving recipe: the one for its weights where the launch scripts
    passed other arguments per precision (``_recipe-vllm-b200-kimi-k2.5-int4.yaml``), else
    the one for the engine, part and model; None where none is shipped."""
    stem = f"_recipe-{engine}-{gpu}-{model}"
    for name in (f"{stem}-{weights}.yaml", f"{stem}.yaml"):
        if (AGENTIC_DIR / name).is_file():
            return AGENTIC_DIR / name
    return None


def recipe_kv_dtype(engine: str, gpu: str, model: str, weights: str,
                    tp: int) -> tuple[str, Path] | None:
    """The KV dtype the deployment's recipe sets (``engine.kv_dtype``, not ``auto``) and the
    recipe, or None where no recipe is shipped or it leaves the engine's default."""
    from inferasim.config.loader import load_scenario

    path = recipe_path(engine, gpu, model, weights)
    if path is None:
        return None
    try:
        sc = load_scenario(path, [f"model.name={model}", f"model.weight_dtype={weights}",
                                  f"gpu.name={gpu}", f"engine.name={engine}",
                                  f"parallel.tp={tp}"])
    except ConfigError:
        return None
    kv = sc.engine.kv_dtype
    return (kv, path) if kv and kv != "auto" else None
