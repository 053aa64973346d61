"""Where a scenario's ``workload.trace`` points: one rule for every trace format."""

from __future__ import annotations

from pathlib import Path

from inferasim.config.errors import ConfigError
from inferasim.config.paths import resolve_scenario_path


def resolve_trace_path(scenario) -> Path:
    """The scenario's ``workload.trace``, found by ``resolve_scenario_path``'s rule; an error
    names where workload.trace was given."""
    wl, origin = scenario.workload, scenario.origin_of("workload.trace")
    trace = wl.trace
    if not trace:
        raise ConfigError(f"the {wl.format} format needs a trace file (workload.trace)",
                          key="workload.trace", file=origin)
    return resolve_scenario_path(trace, scenario.path, key="workload.trace", what="trace",
                                 origin=origin)
