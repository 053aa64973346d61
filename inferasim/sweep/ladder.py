"""Concurrency ladders: every rung a full replay of the scenario.

The rungs are the cartesian product of the ``--grid`` values (each combination a
*configuration*) and the concurrency ladder, in that order: configuration-major, then
concurrency as given. A grid key is a scenario key (``engine.max_num_seqs``) or a knob
(``INFERASIM_DPA_DECODE_DENSE``). Every rung replays with the scenario's own seed, so a
rung's result depends only on its configuration and concurrency — never on the executor,
the number of jobs or the order rungs finish in.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import pandas as pd
import yaml

from inferasim.config.errors import ConfigError, warn
from inferasim.config.knobs import KNOBS, Knobs
from inferasim.config.loader import load_scenario, scenario_to_dict
from inferasim.config.overrides import OVERRIDE_ORIGIN
from inferasim.config.scenario import RECORDED_FORMATS, Scenario
from inferasim.report import strict_json
from inferasim.report.atomic import atomic_dir
from inferasim.workload.sources import GENERATED_DURATION_S

KNOB_PREFIX = "INFERASIM_"
# Columns that describe how a rung ran rather than what it measured.
RUN_COLUMNS = ("wall_s",)


@attrs.frozen
class Rung:
    index: int
    config: tuple[tuple[str, str], ...]     # (grid key, value as given), in --grid order
    concurrency: int
    scenario: Scenario
    knobs: Knobs

    @property
    def label(self) -> str:
        return config_label(self.config)


def config_label(config: Sequence[tuple[str, str]]) -> str:
    return ", ".join(f"{k}={v}" for k, v in config) if config else "base"


def parse_concurrency(text: str | None) -> list[int] | None:
    """``"1,2,4"`` -> [1, 2, 4]; None when not given; ConfigError for anything else."""
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",")]
    if not any(parts):
        raise ConfigError("empty ladder: give at least one concurrency, e.g. 1,2,4,8",
                          key="--concurrency")
    ladder: list[int] = []
    for part in parts:
        if not part:
            raise ConfigError(f"empty rung in {text!r}", key="--concurrency")
        try:
            value = int(part)
        except ValueError:
            raise ConfigError(f"expected integers, got {part!r}", key="--concurrency") from None
        if value < 1:
            raise ConfigError(f"a rung must be at least 1 client, got {value}",
                              key="--concurrency")
        if value not in ladder:
            ladder.append(value)
    return ladder


def parse_grid(items: Sequence[str]) -> list[tuple[str, list[str]]]:
    """``("engine.max_num_seqs=64,256", ...)`` -> [("engine.max_num_seqs", ["64", "256"]), ...]."""
    grid: list[tuple[str, list[str]]] = []
    seen: set[str] = set()
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"expected KEY=V1,V2,..., got {item!r}", key="--grid")
        values = [v.strip() for v in raw.split(",")]
        if not raw.strip() or not all(values):
            raise ConfigError(f"expected comma-separated values, got {raw!r}", key=f"--grid {key}")
        if key == "workload.concurrency":
            raise ConfigError("the ladder sets workload.concurrency: use --concurrency",
                              key="--grid")
        if key in seen:
            raise ConfigError("given twice", key=f"--grid {key}")
        seen.add(key)
        grid.append((key, list(dict.fromkeys(values))))
    return grid


def build_ladder(scenario_path: str | None, overrides: Sequence[str], concurrency: list[int] | None,
                 grid: Sequence[tuple[str, list[str]]], base_knobs: Knobs | None = None,
                 resolve: Callable[..., Scenario] | None = None) -> list[Rung]:
    """Resolve every configuration up front, so a bad value fails before any replay runs.

    A combination of grid values that are each valid somewhere but cannot run together
    (TensorRT-LLM on an AMD part, a TP degree too small for one of the models) is skipped with
    a warning naming it; a grid value that runs in no combination is refused, as is a grid
    none of whose combinations runs."""
    resolve = resolve or (lambda path, ovr: load_scenario(path, ovr))
    base_knobs = base_knobs or Knobs()
    keys = [k for k, _ in grid]
    rungs: list[Rung] = []
    refused: list[tuple[tuple[tuple[str, str], ...], ConfigError]] = []
    for values in itertools.product(*(v for _, v in grid)):
        config = tuple(zip(keys, values, strict=True))
        knobs = base_knobs
        extra = []
        for key, value in config:
            if key.startswith(KNOB_PREFIX):
                knobs = knobs.with_setting(f"{key}={value}", origin="--grid")
            else:
                extra.append(f"{key}={value}")
        try:
            scenario = resolve(scenario_path, list(overrides) + extra)
        except ConfigError as exc:
            # the grid's values reach the loader as overrides; a bad one is the grid's
            if exc.file == OVERRIDE_ORIGIN and exc.key in dict(config):
                exc = ConfigError(exc.message, file="--grid", key=exc.key)
            if len(config) < 2:
                raise exc from None
            refused.append((config, exc))
            continue
        if concurrency is not None and scenario.workload.rate is not None:
            raise ConfigError("the scenario is open loop (workload.rate is set): a concurrency "
                              "ladder does not apply; sweep --grid workload.rate=... instead",
                              key="--concurrency")
        if concurrency is not None and scenario.workload.format in RECORDED_FORMATS:
            # every rung would replay the same recorded arrivals under another label
            raise ConfigError(f"a recorded trace ({scenario.workload.format}) replays its own "
                              "arrivals (or sessions): a concurrency ladder does not apply; "
                              "sweep --grid workload.rate_scale=... instead",
                              key="--concurrency")
        knobs.check(scenario)  # a knob that cannot apply fails before any rung runs
        for conc in concurrency or [scenario.workload.concurrency]:
            # Same as --set workload.concurrency=conc: the value is already checked (>= 1).
            rung_scenario = scenario.evolve(workload=attrs.evolve(scenario.workload,
                                                                  concurrency=conc))
            rungs.append(Rung(len(rungs), config, conc, rung_scenario, knobs))
    _skip_refused_combinations(refused, rungs)
    return rungs


def _skip_refused_combinations(refused: list[tuple[tuple[tuple[str, str], ...], ConfigError]],
                               rungs: list[Rung]) -> None:
    """Warn of each grid combination that cannot run, or raise where the fault is a value's
    (it runs in no combination) or the whole grid's (nothing runs)."""
    if not refused:
        return
    ran = {pair for rung in rungs for pair in rung.config}
    for config, exc in refused:
        if not rungs or any(pair not in ran for pair in config):
            raise exc from None
    for config, exc in refused:
        combination = ", ".join(f"{k}={v}" for k, v in config)
        why = f"{exc.key}: {exc.message}" if exc.key else exc.message
        warn(f"the combination {combination} cannot run, skipped: {why}", key="--grid")


def run_replay(task: tuple) -> tuple[dict[str, Any], float]:
    """One replay and its summary; the unit of work every executor runs. ``task``: (scenario,
    knobs) or (scenario, knobs, percentiles, slo) for the summary's extra percentiles and
    goodput SLOs (``summarize``)."""
    from inferasim.report.run_report import replay_summary
    from inferasim.serve.simulation import simulate

    scenario, knobs, *metrics = task
    percentiles, slo = metrics if metrics else (None, None)
    started = time.perf_counter()
    _, summary = replay_summary(simulate(scenario, knobs), percentiles=percentiles, slo=slo)
    return summary, time.perf_counter() - started


def knob_values(knobs: Knobs) -> dict[str, Any]:
    return {d.name: getattr(knobs, d.name.removeprefix(KNOB_PREFIX).lower()) for d in KNOBS}


def flat_summary(summary: dict[str, Any]) -> dict[str, Any]:
    """Scalars as they are; a nested dict one level flat (``calibration.mode``); lists as JSON."""
    out: dict[str, Any] = {}
    for key, value in summary.items():
        if isinstance(value, dict):
            for sub, inner in value.items():
                out[f"{key}.{sub}"] = inner if _scalar(inner) else json.dumps(inner, default=str)
        else:
            out[key] = value if _scalar(value) else json.dumps(value, default=str)
    return out


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def rung_row(rung: Rung, summary: dict[str, Any], wall_s: float) -> dict[str, Any]:
    row: dict[str, Any] = {"rung": rung.index, "config": rung.label}
    for key, value in rung.config:
        row[key] = value
    row["concurrency"] = rung.concurrency
    row.update(knob_values(rung.knobs))
    row.update(flat_summary(summary))
    row["wall_s"] = wall_s
    return row


def run_ladder(rungs: Sequence[Rung], executor,
               on_done: Callable[[Rung], None] | None = None,
               percentiles: Sequence[float] | None = None,
               slo: dict[str, float] | None = None) -> pd.DataFrame:
    """Run every rung on ``executor``; one row per rung, in rung order.

    Rungs are handed out largest first (more clients, longer replay): a pool that takes the
    long ones early finishes with its workers evenly loaded. The rows go back in rung order.
    """
    order = sorted(range(len(rungs)), key=lambda i: -_expected_cost(rungs[i]))
    extra = () if percentiles is None and slo is None else (
        None if percentiles is None else list(percentiles), slo)
    tasks = [(rungs[i].scenario, rungs[i].knobs, *extra) for i in order]
    rows: list[dict[str, Any] | None] = [None] * len(rungs)
    for position, (summary, wall_s) in executor.run(run_replay, tasks):
        rung = rungs[order[position]]
        rows[order[position]] = rung_row(rung, summary, wall_s)
        if on_done is not None:
            on_done(rung)
    return pd.DataFrame(rows)


def _expected_cost(rung: Rung) -> float:
    # a rung without a duration runs the generated workloads' default horizon
    duration = rung.scenario.workload.duration_s or GENERATED_DURATION_S
    return rung.concurrency * duration


# sweep.json keys that say how this machine ran the sweep, not what it swept: timing.json.
RUN_SPEC_KEYS = ("wall_s", "executor", "workers")


def split_timing(frame: pd.DataFrame, sweep_spec: dict[str, Any] | None
                 ) -> tuple[pd.DataFrame, dict[str, Any] | None, dict[str, Any]]:
    """(the rows without RUN_COLUMNS, the spec without RUN_SPEC_KEYS, what was taken out):
    a sweep's results are a pure function of its rungs; its wall times and workers are not."""
    run_cols = [c for c in RUN_COLUMNS if c in frame.columns]
    rows = frame.drop(columns=run_cols)
    spec = None if sweep_spec is None else \
        {k: v for k, v in sweep_spec.items() if k not in RUN_SPEC_KEYS}
    timing = {k: sweep_spec[k] for k in RUN_SPEC_KEYS if sweep_spec and k in sweep_spec}
    if "rung" in frame.columns and run_cols:
        timing["rungs"] = [{"rung": int(rung), **dict(zip(run_cols, map(float, values),
                                                          strict=True))}
                           for rung, *values in frame[["rung", *run_cols]].itertuples(index=False)]
    return rows, spec, timing


def write_table(frame: pd.DataFrame, folder: Path, stem: str) -> None:
    """``stem.csv``, and ``stem.parquet`` where pyarrow is installed."""
    frame.to_csv(folder / f"{stem}.csv", index=False)
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return
    frame.to_parquet(folder / f"{stem}.parquet", index=False)


def write_results(out_dir: str | Path, frame: pd.DataFrame, base: Scenario, *,
                  plots: bool = True, sweep_spec: dict[str, Any] | None = None) -> list[str]:
    """Write results.csv (+ .parquet, plots) into a temporary folder, then move it into place.

    Returns the names written. An existing ``out_dir`` is replaced only once everything is
    written, so a failed or interrupted sweep never leaves half a result behind. Wall times
    and the executor go to ``timing.json``; every other file is byte-identical between two
    sweeps of one ladder.
    """
    rows, spec, timing = split_timing(frame, sweep_spec)
    with atomic_dir(out_dir) as tmp:
        write_table(rows, tmp, "results")
        resolved = scenario_to_dict(base)
        (tmp / "scenario.resolved.yaml").write_text(yaml.safe_dump(resolved, sort_keys=False))
        if spec is not None:
            (tmp / "sweep.json").write_text(json.dumps(spec, indent=2) + "\n")
        (tmp / "timing.json").write_text(strict_json.dumps(timing, indent=2) + "\n")
        if plots:
            from inferasim.sweep.plots import plot_title, write_plots

            write_plots(rows, tmp, title=plot_title(base))
        written = sorted(p.name for p in tmp.iterdir())
    return written
