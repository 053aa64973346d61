"""A search on Ray gives the frontier local processes give, byte for byte apart from timing:
on a throw-away local cluster, and on a head started on 127.0.0.1 that requires a token (as
Ray 2.60 does by default), stopped after. Without the token the error says why."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'inferasim[ray]')")

from inferasim.cli.main import cli  # noqa: E402

ARGS = ["search", "--gpus", "2", "--sla", "interactivity_tok_s=15", "--set",
        "workload.duration_s=40", "--space", "workload.concurrency=4,16", "--space",
        "engine.name=vllm", "--space", "topology.kind=colocated", "--audit", "1", "--no-plots"]
COMPARED = ("candidates.csv", "frontier.csv", "search.json", "best-throughput_per_gpu.yaml")
HEAD_START_S = 60


def _search(tmp: Path, name: str, *extra: str):
    out = tmp / name
    res = CliRunner().invoke(cli, [*ARGS, "--cache", str(tmp / f"cache-{name}"), "--out",
                                   str(out), *extra])
    return res, out


def _search_process(tmp: Path, name: str, env: dict, *extra: str):
    exe = str(Path(sys.executable).with_name("inferasim"))
    return subprocess.run([exe, *ARGS, "--cache", str(tmp / f"cache-{name}"), "--out",
                           str(tmp / name), *extra], env=env, capture_output=True, text=True,
                          timeout=HEAD_START_S * 3)


def _same(a: Path, b: Path) -> None:
    for name in COMPARED:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ray_cli() -> str:
    found = Path(sys.executable).with_name("ray")
    return str(found) if found.exists() else (shutil.which("ray") or "ray")


def test_ray_local_gives_the_local_frontier(tmp_path):
    res, local = _search(tmp_path, "local", "--jobs", "2")
    assert res.exit_code == 0, res.output
    res, on_ray = _search(tmp_path, "ray", "--ray", "local", "--jobs", "1")
    assert res.exit_code == 0, res.output
    _same(local, on_ray)


def test_token_protected_head_on_loopback(tmp_path):
    token = tmp_path / "auth_token"
    token.write_text(secrets.token_hex(32))
    port = _free_port()
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token)}
    ray_cli = _ray_cli()
    started = subprocess.run([ray_cli, "start", "--head", "--node-ip-address=127.0.0.1",
                              f"--port={port}", "--num-cpus=1", "--include-dashboard=false",
                              "--disable-usage-stats"], env=env, capture_output=True, text=True,
                             timeout=HEAD_START_S)
    try:
        assert started.returncode == 0, started.stderr[-2000:]
        res, local = _search(tmp_path, "local", "--jobs", "1")
        assert res.exit_code == 0, res.output
        address = f"127.0.0.1:{port}"
        # each client a fresh process, as a user's is: Ray keeps the token it first read
        client_env = {k: v for k, v in env.items()
                      if k not in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH")}
        client_env["HOME"] = str(tmp_path)  # no ~/.ray/auth_token to fall back on
        refused = _search_process(tmp_path, "no-token", client_env, "--ray", address)
        assert refused.returncode != 0
        assert "token authentication" in refused.stderr and "--ray-token" in refused.stderr
        assert "Traceback" not in refused.stderr
        done = _search_process(tmp_path, "head", client_env, "--ray", address,
                               "--ray-token", str(token))
        assert done.returncode == 0, done.stderr[-2000:]
        _same(local, tmp_path / "head")
    finally:
        subprocess.run([ray_cli, "stop", "--force"], env=env, capture_output=True,
                       timeout=HEAD_START_S)
