"""Resuming a sweep from the rungs it finished: each rung's result is kept in a
``<out>.partial`` folder beside ``--out`` as it arrives, named by a hash of what decides it
(the resolved scenario, the knobs, the inferasim version, and the code, anchors and trace
it replays with). Run the same sweep with the same ``--out`` again and the rungs found there
are not replayed; once the result folder is written whole, the partial folder is removed.

It wraps any executor, so the ladder code and the executors know nothing of it::

    with ResumingExecutor(make_executor(...), partial_dir(out)) as ex:
        frame = run_ladder(rungs, ex)
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable, Iterator, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import attrs

from inferasim.config.fingerprint import inputs_digest
from inferasim.config.loader import scenario_to_dict
from inferasim.report.atomic import write_text_atomic

PARTIAL_SUFFIX = ".partial"


def partial_dir(out_dir: str | Path) -> Path:
    out = Path(out_dir)
    return out.with_name(out.name + PARTIAL_SUFFIX)


def _version() -> str:
    try:
        return metadata.version("inferasim")
    except metadata.PackageNotFoundError:
        return "unknown"


def task_key(task: tuple[Any, ...]) -> str:
    """The hash of what decides a rung's result: its resolved scenario and knobs (and the
    summary's percentiles and SLOs, when the task carries them), and the code, anchors and
    trace it replays with (``config.fingerprint``)."""
    scenario, knobs, *metrics = task
    text = json.dumps({"scenario": scenario_to_dict(scenario), "knobs": attrs.asdict(knobs),
                       "metrics": metrics, "version": _version(),
                       "inputs": inputs_digest(scenario)}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class RungStore:
    """Finished rungs' results, one JSON file each, in one folder."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)

    def get(self, key: str) -> Any | None:
        path = self.folder / f"{key}.json"
        try:
            return json.loads(path.read_text(encoding="utf-8"))["result"]
        except (OSError, ValueError, KeyError):
            return None  # absent, or cut short by a crash: the rung runs again

    def put(self, key: str, result: Any) -> None:
        # Python's own JSON keeps NaN and every float as it was (repr), so a resumed rung's
        # row is the row a fresh replay would give
        write_text_atomic(self.folder / f"{key}.json", json.dumps({"result": result}))

    def __len__(self) -> int:
        return len(list(self.folder.glob("*.json"))) if self.folder.is_dir() else 0

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def _as_json(result: Any) -> Any:
    """``(summary, wall_s)`` as JSON keeps it: tuples as lists (read back as lists)."""
    return json.loads(json.dumps(result, default=_plain))


def _plain(value: Any) -> Any:
    item = getattr(value, "item", None)  # a numpy scalar
    if callable(item):
        return item()
    raise TypeError(f"cannot keep {type(value).__name__} in a partial result")


class ResumingExecutor:
    """An executor that takes finished tasks from ``store`` and keeps each new result there."""

    def __init__(self, inner, folder: Path):
        self.inner = inner
        self.store = RungStore(folder)
        self.name = inner.name
        self.workers = inner.workers
        self.resumed = 0

    def __enter__(self) -> ResumingExecutor:
        return self

    def __exit__(self, *exc) -> None:
        self.inner.close()

    def close(self) -> None:
        self.inner.close()

    def run(self, fn: Callable[[Any], Any], tasks: Sequence[Any]) -> Iterator[tuple[int, Any]]:
        keys = [task_key(task) for task in tasks]
        todo = []
        for index, key in enumerate(keys):
            kept = self.store.get(key)
            if kept is None:
                todo.append(index)
            else:
                self.resumed += 1
                yield index, tuple(kept)
        for position, result in self.inner.run(fn, [tasks[i] for i in todo]):
            index = todo[position]
            self.store.put(keys[index], _as_json(result))
            yield index, tuple(_as_json(result))
