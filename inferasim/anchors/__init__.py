"""Anchors: real measurements, the regime each measured, and the store that hands the oracle
only the anchors of the target's regime (refusing the rest with the axis that differed).

Modules: ``record`` (the schema), ``normalise`` (spelling tables), ``regime`` (target regime,
distance, settling), ``store`` (files, ``AnchorStore``, coverage), ``importers`` (one per tool).
"""

from __future__ import annotations

from inferasim.anchors.record import (
    SCHEMA_VERSION,
    AnchorRecord,
    Measurements,
    Provenance,
    Regime,
    Workload,
    derive_decode_step,
)
from inferasim.anchors.regime import REGIME_AXES, AxisMismatch, Target, compare, settle
from inferasim.anchors.store import (
    DEFAULT_ANCHOR_DIR,
    AnchorStore,
    Refusal,
    TargetAnchors,
    anchor_frame,
    read_anchor_file,
    write_anchor_file,
)

__all__ = [
    "DEFAULT_ANCHOR_DIR", "REGIME_AXES", "SCHEMA_VERSION", "AnchorRecord", "AnchorStore",
    "AxisMismatch", "Measurements", "Provenance", "Refusal", "Regime", "Target",
    "TargetAnchors", "Workload", "anchor_frame", "compare", "derive_decode_step",
    "read_anchor_file", "settle", "write_anchor_file",
]
