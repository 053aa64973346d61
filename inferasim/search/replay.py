"""One candidate's replay: the unit of work a search hands its executor (module level, so a
process pool or Ray can pickle it). The result is what the search keeps of a replay — the
summary's scalars, its calibration mode and the engines' busy share — and is cached by the
hash of the resolved scenario (``sweep.resume.task_key``). A replay that cannot serve the
workload is a record holding only why (``FAILED``)."""

from __future__ import annotations

import time
from typing import Any

from inferasim.config.errors import ConfigError

# Part of every task, so the cache never hands a sweep's result to a search or an older
# search's record layout to a newer one.
RECORD_VERSION = "search-record-2"
#: The key of a record whose replay could not serve the workload: why, in the replay's words.
FAILED = "failed"


def replay_task(task: tuple) -> tuple[dict[str, Any], float]:
    from inferasim.report.run_report import replay_summary
    from inferasim.search.economics import busy_share
    from inferasim.serve.simulation import simulate
    from inferasim.sweep.ladder import flat_summary

    scenario, knobs, percentiles, slo, _version = task
    started = time.perf_counter()
    try:
        result = simulate(scenario, knobs)
    except ConfigError as exc:
        # a deployment the search made that cannot serve the workload (it refused every
        # request it was sent): that candidate fails, the search goes on
        return {FAILED: exc.message}, time.perf_counter() - started
    _, summary = replay_summary(result, percentiles=percentiles, slo=slo)
    record = {k: v for k, v in flat_summary(summary).items() if k != "wall_s"}
    record["gpu_busy"] = busy_share([e.stats.busy_s for e in result.engines],
                                    float(summary.get("window_s") or 0.0))
    return record, time.perf_counter() - started
