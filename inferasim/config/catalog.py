"""The catalog of models, GPUs and engines under ``scenarios/bases/``, looked up by lower-case name."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from inferasim.config.errors import ConfigError
from inferasim.config.yaml_tree import Origins, load_tree

REPO_ROOT = Path(__file__).resolve().parents[2]
SCENARIO_DIR = REPO_ROOT / "scenarios"
CATALOG_DIR = SCENARIO_DIR / "bases"
DEFAULT_SCENARIO = SCENARIO_DIR / "quickstart.yaml"

KINDS = ("models", "gpus", "engines")


def catalog_names(kind: str, root: Path = CATALOG_DIR) -> list[str]:
    folder = root / kind
    if not folder.is_dir():
        return []
    return sorted(p.stem for p in folder.glob("*.yaml") if not p.stem.startswith("_"))


def load_entry(kind: str, name: str, *, key: str, origin_file: str,
               root: Path = CATALOG_DIR) -> tuple[dict[str, Any], Origins, Path]:
    """Read one catalog entry; an unknown name is an error naming the scenario key that asked."""
    if kind not in KINDS:
        raise ValueError(kind)
    if not root.is_dir():
        # A wheel built without the checkout's top-level folders has no catalog: say so,
        # rather than calling every model unknown.
        raise ConfigError(f"the catalog folder {root} is missing: inferasim reads its catalog "
                          "(scenarios/bases), anchors and bundled traces from its source "
                          "checkout; install it with `pip install -e <checkout>`",
                          file=origin_file, key=key)
    path = root / kind / f"{name}.yaml"
    if not path.is_file():
        names = catalog_names(kind, root)
        near = difflib.get_close_matches(name, names, n=1, cutoff=0.5)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise ConfigError(f"unknown {kind[:-1]} {name!r}{hint}; the catalog has: {', '.join(names)}",
                          file=origin_file, key=key)
    data, origins = load_tree(path)
    # An entry that extends another must not inherit its parent's name.
    data["name"] = name
    return data, origins, path


def native_four_bit(model: str, root: Path = CATALOG_DIR) -> str | None:
    """The 4-bit format a catalog model's own checkpoint ships (gpt-oss: MXFP4 experts), or
    None: what a measurement's bare "fp4" means for that model on any vendor's part."""
    path = root / "models" / f"{model}.yaml"
    if not path.is_file():
        return None
    data, _ = load_tree(path)
    for key in ("expert_weight_dtype", "weight_dtype"):
        if data.get(key) in ("mxfp4", "nvfp4"):
            return data[key]
    return None
