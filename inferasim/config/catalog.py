"""The catalog of models, GPUs and engines under ``scenarios/bases/``, looked up by lower-case name."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from inferasim.config.errors import ConfigError
from inferasim.config.yaml_tree import Origins, load_tree, record_origins

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


ENTRY_FILES = (".yaml", ".yml", ".json")


def names_a_file(name: str) -> bool:
    """A model or GPU named by its file rather than its catalog name: a path or a file name
    (catalog names have neither a folder nor a suffix)."""
    return "/" in name or "\\" in name or name.lower().endswith(ENTRY_FILES)


def load_entry(kind: str, name: str, *, key: str, origin_file: str,
               root: Path = CATALOG_DIR, scenario_path: str | None = None,
               weight_dtype: str | None = None) -> tuple[dict[str, Any], Origins, Path]:
    """Read one catalog entry; an unknown name is an error naming the scenario key that asked.
    A model or GPU may also be named by a file of the catalog's form (YAML) outside the
    catalog, or a model by its checkpoint's Hugging Face ``config.json`` (``arch.hf_config``),
    looked for as ``resolve_scenario_path`` looks for a trace (``weight_dtype``: the one the
    scenario sets, which a config.json's quantization config then need not name)."""
    if kind not in KINDS:
        raise ValueError(kind)
    if kind != "engines" and names_a_file(name):
        return _entry_file(kind, name, key=key, origin_file=origin_file,
                           scenario_path=scenario_path, weight_dtype=weight_dtype)
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
        files = "" if kind == "engines" else (
            "; or name a file by its path: a catalog-form YAML"
            + (" or the checkpoint's config.json (docs/models.md)" if kind == "models" else ""))
        raise ConfigError(f"unknown {kind[:-1]} {name!r}{hint}; the catalog has: "
                          f"{', '.join(names)}{files}", file=origin_file, key=key)
    data, origins = load_tree(path)
    # An entry that extends another must not inherit its parent's name.
    data["name"] = name
    return data, origins, path


def _entry_file(kind: str, named: str, *, key: str, origin_file: str,
                scenario_path: str | None, weight_dtype: str | None = None,
                ) -> tuple[dict[str, Any], Origins, Path]:
    from inferasim.config.paths import resolve_scenario_path

    what = "a model file (catalog YAML or config.json)" if kind == "models" \
        else "a GPU file (catalog YAML)"
    path = resolve_scenario_path(named, scenario_path, key=key, what=what, origin=origin_file)
    if path.is_dir() and kind == "models" and (path / "config.json").is_file():
        path = path / "config.json"  # a checkpoint's folder
    if not path.is_file():
        raise ConfigError(f"expected {what}, found a folder without a config.json: {path}",
                          file=origin_file, key=key)
    if path.suffix.lower() == ".json":
        if kind != "models":
            raise ConfigError(f"a GPU is read from a catalog YAML file, not JSON: {path}",
                              file=origin_file, key=key)
        from inferasim.arch.hf_config import read_hf_config

        data, _ = read_hf_config(path, weight_dtype)
        origins: Origins = {}
        record_origins(data, "", str(path), origins)
        return data, origins, path
    data, origins = load_tree(path)
    data["name"] = str(data.get("name") or path.stem).lower()
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
