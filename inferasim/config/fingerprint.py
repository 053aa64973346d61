"""What outside a resolved scenario decides its replay, as digests a cache can be keyed by:
the code that runs it, the anchors it calibrates from and the trace it reads.

A cached rung or search replay keyed by the scenario and the package version alone outlived
the code that computed it: a checkout updated in place keeps its version, and so does a
folder of anchors or a trace edited under the same name (docs/search.md, the cache)."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent


def files_signature(root: Path, suffixes: tuple[str, ...] | None = None) -> tuple:
    """(path, mtime, size) of ``root`` or of every file under it (those ending in one of
    ``suffixes`` when given; hidden files skipped): it changes when a file is edited, added
    or removed, without reading any."""
    root = Path(root)
    if root.is_file():
        st = root.stat()
        return ((str(root), st.st_mtime_ns, st.st_size),)
    return tuple(sorted((str(p), p.stat().st_mtime_ns, p.stat().st_size)
                        for p in root.rglob("*")
                        if p.is_file() and not p.name.startswith(".")
                        and (suffixes is None or p.suffix in suffixes)))


def _digest(parts) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:20]


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    """The package's Python sources by content (read once per process): an edit, a pull or
    another installed copy changes it; a fresh clone of the same commit does not."""
    h = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*.py")):
        h.update(str(path.relative_to(PACKAGE)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:20]


def inputs_digest(scenario) -> dict[str, str]:
    """The code, the anchors and the trace ``scenario`` replays with, each as a digest (a
    path that does not resolve is named as given: the replay itself will say why)."""
    from inferasim.anchors.loading import ANCHOR_SUFFIXES, anchor_store_path
    from inferasim.config.errors import ConfigError
    from inferasim.workload.trace_path import resolve_trace_path

    out = {"code": code_digest()}
    try:
        anchors = anchor_store_path(scenario)
    except ConfigError:
        anchors = None
        out["anchors"] = f"unresolved {scenario.sim.anchors}"
    if anchors is not None and anchors.exists():
        out["anchors"] = _digest(files_signature(anchors, ANCHOR_SUFFIXES))
    if scenario.workload.trace:
        try:
            trace = resolve_trace_path(scenario)
            out["trace"] = _digest(files_signature(trace))
        except (ConfigError, OSError):
            out["trace"] = f"unresolved {scenario.workload.trace}"
    return out
