"""Where a scenario's ``workload.trace`` points: one rule for every trace format."""

from __future__ import annotations

from pathlib import Path

from inferasim.config.errors import ConfigError


def resolve_trace_path(trace: str | None, scenario_path: str | None, *, fmt: str) -> Path:
    """A relative ``workload.trace`` is taken against the scenario file's folder first, then
    the working directory (where a ``--set workload.trace=...`` override was typed)."""
    if not trace:
        raise ConfigError(f"the {fmt} format needs a trace file (workload.trace)",
                          key="workload.trace", file=scenario_path)
    p = Path(trace).expanduser()
    if p.is_absolute():
        candidates = [p]
    else:
        candidates = []
        if scenario_path:
            candidates.append(Path(scenario_path).resolve().parent / p)
        candidates.append(Path.cwd() / p)
    for cand in candidates:
        if cand.exists():
            return cand
    raise ConfigError(f"trace not found: {trace} (looked in "
                      f"{', '.join(str(c.parent) for c in candidates)})",
                      key="workload.trace", file=scenario_path)
