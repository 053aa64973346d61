"""JSON that strict parsers read: a metric with no value (a percentile of no requests, NaN) is
written as null, not as the bare ``NaN`` Python's encoder emits and ``jq`` rejects."""

from __future__ import annotations

import json
import math
from typing import Any


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` with every NaN or infinity (numpy floats included) as null."""
    kwargs.setdefault("default", str)
    return json.dumps(_finite(value), allow_nan=False, **kwargs)
