"""Sweeps on Ray: the same rows as the local executor; an unreachable cluster fails fast.

Ray runs on loopback in this process (``ray.init(address="local")``) and is shut down after.
"""

from __future__ import annotations

import socket
import threading
import time

import click
import pandas as pd
import pytest
from click.testing import CliRunner

ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'inferasim[ray]')")

from inferasim.cli.errors import ConfigErrorGroup as _Group  # noqa: E402
from inferasim.cli.sweep_cmd import sweep  # noqa: E402
from inferasim.config.errors import ConfigError  # noqa: E402
from inferasim.config.knobs import Knobs  # noqa: E402
from inferasim.config.loader import load_scenario  # noqa: E402
from inferasim.sweep.executors import InProcessExecutor, RayExecutor  # noqa: E402
from inferasim.sweep.ladder import RUN_COLUMNS, build_ladder, run_ladder  # noqa: E402


def _invoke(*args: str):
    @click.group(cls=_Group)
    def group() -> None:
        pass

    group.add_command(sweep)
    return CliRunner().invoke(group, ["sweep", *args])


@pytest.fixture
def silent_server():
    """A TCP port that accepts connections and never answers (a wrong or dead service)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"127.0.0.1:{srv.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    srv.close()


def test_unreachable_ray_fails_fast(silent_server):
    assert not ray.is_initialized()
    started = time.perf_counter()
    with pytest.raises(ConfigError, match=r"Ray cluster (answered )?at 127\.0\.0\.1"):
        RayExecutor(silent_server, timeout_s=4.0)
    assert time.perf_counter() - started < 10
    assert not ray.is_initialized()
    refused = _invoke("--set", "workload.duration_s=20", "--concurrency", "1",
                      "--ray", "127.0.0.1:9", "--out", "unused")
    assert refused.exit_code == 2
    assert len(refused.output.strip().splitlines()) == 1


@pytest.fixture(scope="module")
def local_ray():
    if ray.is_initialized():
        pytest.skip("Ray is already initialised in this process")
    ray.init(address="local", include_dashboard=False, num_cpus=2, log_to_driver=False,
             configure_logging=False)
    yield
    ray.shutdown()


def test_ray_sweep_matches_local(local_ray, tmp_path):
    rungs = build_ladder(None, ["workload.duration_s=20"], [1, 2, 4],
                         [("engine.max_num_seqs", ["2", "64"])], Knobs(),
                         resolve=lambda p, o: load_scenario(p, o))
    local = run_ladder(rungs, InProcessExecutor())
    with RayExecutor("auto") as executor:       # reuses this process's Ray connection
        assert executor.workers == 2
        remote = run_ladder(rungs, executor)
    assert ray.is_initialized()                 # not ours to close
    pd.testing.assert_frame_equal(local.drop(columns=list(RUN_COLUMNS)),
                                  remote.drop(columns=list(RUN_COLUMNS)))
    out = tmp_path / "ray"
    result = _invoke("--set", "workload.duration_s=20", "--concurrency", "1,2",
                     "--ray", "auto", "--no-plots", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "on ray x2" in result.output
    frame = pd.read_csv(out / "results.csv")
    assert list(frame["concurrency"]) == [1, 2]
