"""Which anchors a scenario is calibrated from, and the store loaded once per change of its
files (the shipped ``anchors/`` by default)."""

from __future__ import annotations

import functools
from pathlib import Path

from inferasim.anchors.store import DEFAULT_ANCHOR_DIR, AnchorStore
from inferasim.config.fingerprint import files_signature
from inferasim.config.paths import resolve_scenario_path

ANCHOR_SUFFIXES = (".json", ".yaml", ".yml")


def default_store(path: str | Path | None = None) -> AnchorStore | None:
    """The shipped ``anchors/`` store (or ``path``), loaded once per change of its files;
    ``None`` when the folder does not exist."""
    root = Path(path) if path is not None else DEFAULT_ANCHOR_DIR
    if not root.exists():
        return None
    return _load_store(str(root), files_signature(root, ANCHOR_SUFFIXES))


@functools.lru_cache(maxsize=4)
def _load_store(root: str, signature: tuple) -> AnchorStore:
    """Memoised by the files' names, sizes and mtimes: a changed file is read again."""
    return AnchorStore.load(Path(root))


def anchor_store_path(scenario) -> Path | None:
    """Where ``scenario`` takes its anchors from (``sim.anchors``): the shipped ``anchors/``
    when unset, ``None`` for "none", else the folder or file named, taken against the
    scenario's folder first, then the working directory (as ``workload.trace`` is)."""
    named = scenario.sim.anchors.strip()
    if not named:
        return DEFAULT_ANCHOR_DIR
    if named.lower() == "none":
        return None
    return resolve_scenario_path(named, scenario.path or None, key="sim.anchors",
                                 what="anchors (a folder or an anchor file, or none)",
                                 origin=scenario.origin_of("sim.anchors"))


def scenario_store(scenario) -> AnchorStore | None:
    """The store ``scenario`` calibrates from (``anchor_store_path``), or None: no anchors."""
    path = anchor_store_path(scenario)
    return None if path is None else default_store(path)
