"""Engine versions as numbers, for the rules that changed between releases."""

from __future__ import annotations

import re

_DOTTED = re.compile(r"(\d+(?:\.\d+)+)")


def version_tuple(version: str | None) -> tuple[int, ...] | None:
    """The first dotted number in ``version``: ``v0.22.0`` -> (0, 22, 0), ``0.5.12.post1``
    -> (0, 5, 12), ``v0.21.0-rocm`` -> (0, 21, 0); None without one (a git id)."""
    found = _DOTTED.search(version or "")
    return tuple(int(p) for p in found.group(1).split(".")) if found else None
