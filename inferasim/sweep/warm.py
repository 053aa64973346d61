"""Imported once by the local pool's fork server: everything a replay loads on first use.

Workers are forked from that server, so each starts with the simulator imported and the
shipped anchor store parsed, instead of paying for both on its first rung.
"""

from __future__ import annotations

import inferasim.report.run_report  # noqa: F401
import inferasim.serve.simulation  # noqa: F401

try:
    from inferasim.anchors.loading import default_store
except ImportError:  # an analytic-only build
    default_store = None

if default_store is not None:
    try:
        default_store()
    except Exception:  # noqa: BLE001 - a broken store is reported by the replay itself
        pass
