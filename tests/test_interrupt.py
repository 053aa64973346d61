"""Issue 32: Ctrl-C or SIGTERM during a run or a sweep stops it within seconds, leaves a
whole result folder or none, ends every process it started, exits 128 + the signal, and a
sweep run again resumes from the rungs it finished."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir() or sys.platform != "linux",
                                reason="reads the process tree from /proc (Linux)")

ROOT = Path(__file__).resolve().parents[1]
INFERASIM = [sys.executable, "-c", "from inferasim.cli.main import main; main()"]
# a rung long enough (tens of seconds) that the signal always lands mid-replay
SLOW = ["--set", "workload.duration_s=20000"]


def children(pid: int) -> set[int]:
    found: set[int] = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found


def descendants(pid: int) -> set[int]:
    out, todo = set(), [pid]
    while todo:
        for child in children(todo.pop()):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def start(args, tmp_path) -> subprocess.Popen:
    return subprocess.Popen([*INFERASIM, *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})


def wait_for(condition, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def stop(proc: subprocess.Popen, signum: int) -> tuple[int, float, str]:
    sent = time.monotonic()
    proc.send_signal(signum)
    try:
        # generous: on a loaded two-core machine (the full suite beside other work) the
        # child's Python can take tens of seconds to reach its handler; the exit code and the
        # files left are what is checked
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    return proc.returncode, time.monotonic() - sent, err


@pytest.mark.parametrize("signum, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_pool_sweep_stops_ends_its_workers_and_writes_nothing(tmp_path, signum, status):
    out = tmp_path / "sweep"
    proc = start(["sweep", "--concurrency", "512,1024", *SLOW, "--jobs", "2", "--no-plots",
                  "--out", str(out)], tmp_path)
    # the fork server, the resource tracker and two workers: the rungs are running
    assert wait_for(lambda: len(descendants(proc.pid)) >= 4, 60), proc.communicate()
    time.sleep(1.0)
    started = descendants(proc.pid)
    status_got, took, err = stop(proc, signum)
    assert status_got == status, err
    assert took < 5, f"took {took:.1f} s to stop"
    assert "Traceback" not in err and f"interrupted ({signal.Signals(signum).name})" in err
    assert wait_for(lambda: not any(alive(p) for p in started), 5), \
        [p for p in started if alive(p)]
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".sweep")]


def test_a_run_stops_on_sigint_and_writes_nothing(tmp_path):
    out = tmp_path / "run"
    proc = start(["run", *SLOW, "--set", "workload.concurrency=512", "--out", str(out)],
                 tmp_path)
    time.sleep(4.0)  # past the imports and into the replay
    status, took, err = stop(proc, signal.SIGINT)
    assert status == 130, err
    assert took < 5 and "Traceback" not in err
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_an_interrupted_sweep_resumes_from_the_rungs_it_finished(tmp_path):
    out = tmp_path / "sweep"
    partial = tmp_path / "sweep.partial"
    # the pool takes the long rung first; the two short ones finish on the other worker
    proc = start(["sweep", "--concurrency", "1,2,1024", *SLOW, "--jobs", "2", "--no-plots",
                  "--out", str(out)], tmp_path)
    assert wait_for(lambda: len(list(partial.glob("*.json"))) >= 2, 90), proc.communicate()
    status, _, err = stop(proc, signal.SIGINT)
    assert status == 130, err
    assert "2 finished rung(s) kept" in err
    assert not out.exists() and len(list(partial.glob("*.json"))) == 2
    # the same rungs again: both come from the partial folder, none is replayed
    again = subprocess.run([*INFERASIM, "sweep", "--concurrency", "1,2", *SLOW, "--jobs", "1",
                            "--no-plots", "--out", str(out)], cwd=ROOT, capture_output=True,
                           text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert "2 resumed from" in again.stdout
    assert (out / "results.csv").is_file() and not partial.exists()


def test_resumed_rungs_give_the_rows_a_fresh_sweep_gives(tmp_path):
    from inferasim.sweep.executors import InProcessExecutor
    from inferasim.sweep.resume import ResumingExecutor

    calls = []

    def fn(task):
        calls.append(task)
        return {"x": task[0].workload.concurrency * 0.1, "nan": float("nan"), "list": [1, 2]}, 1.5

    tasks = [(_scenario(c), _knobs()) for c in (1, 2, 3)]
    first = ResumingExecutor(InProcessExecutor(), tmp_path / "p")
    got = first.run(fn, tasks)
    fresh = [next(got), next(got)]  # then "interrupted"
    got.close()
    again = ResumingExecutor(InProcessExecutor(), tmp_path / "p")
    resumed = sorted(again.run(fn, tasks), key=lambda r: r[0])
    assert again.resumed == 2 and len(calls) == 3
    assert [r[1][0]["x"] for r in resumed] == [0.1 * c for c in (1, 2, 3)]
    assert repr(resumed[:2]) == repr(sorted(fresh, key=lambda r: r[0]))


def _scenario(concurrency: int):
    import attrs

    from inferasim.config.loader import load_scenario

    sc = load_scenario(None)
    return sc.evolve(workload=attrs.evolve(sc.workload, concurrency=concurrency))


def _knobs():
    from inferasim.config.knobs import Knobs

    return Knobs()
