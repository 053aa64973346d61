"""Where a scenario's ``workload.trace`` points: one rule for every trace format."""

from __future__ import annotations

from pathlib import Path

from inferasim.config.errors import ConfigError
from inferasim.config.paths import resolve_scenario_path


def resolve_trace_path(trace: str | None, scenario_path: str | None, *, fmt: str,
                       origin: str | None = None) -> Path:
    """The trace file, found by ``resolve_scenario_path``'s rule; an error names ``origin``,
    where workload.trace was given (default: the scenario file)."""
    if not trace:
        raise ConfigError(f"the {fmt} format needs a trace file (workload.trace)",
                          key="workload.trace", file=origin or scenario_path)
    return resolve_scenario_path(trace, scenario_path, key="workload.trace", what="trace",
                                 origin=origin)
