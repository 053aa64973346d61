"""``harvest run``: execute a plan on the GPU host it was written for.

1. Capture the GPU part (``amd-smi``/``rocm-smi``/``nvidia-smi``: ``gpu.txt``) and the engine
   build (``engine_version.txt``).
2. Start the server in its own process group (its own session), its output in ``server.log``.
3. Wait for ``/health`` with a timeout; a server that exits or never answers fails the run.
4. Run each probe (its own process group too, with a timeout); a probe whose command fails or
   whose result records no completed request is recorded as failed, never as a measurement.
5. Always stop the server: SIGTERM to the whole group, SIGKILL after a grace period, also on a
   failure, SIGINT/SIGTERM/SIGHUP (a signal handler turns them into an exception so ``finally``
   runs) or Ctrl-C.

``run.json`` records every step; it is rewritten after each probe, so an interrupted run still
says what was measured.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from inferasim.harvest import gpu_detect
from inferasim.harvest.plan import read_plan
from inferasim.report.atomic import write_text_atomic

RUN_FILE = "run.json"
SERVER_LOG = "server.log"
GPU_FILE = "gpu.txt"
VERSION_FILE = "engine_version.txt"
PROBE_LOG_DIR = "logs"


class HarvestInterrupted(Exception):
    """A signal asked the run to stop; ``finally`` blocks tear the processes down."""


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------- process groups


def group_alive(pgid: int) -> bool:
    """Whether any live (non-zombie) process is still in the process group."""
    proc = Path("/proc")
    if proc.is_dir():
        for entry in proc.iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2:].split()
            if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != "Z":
                return True
        return False
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_group(proc: subprocess.Popen, grace_s: float = 15.0) -> dict[str, Any]:
    """SIGTERM the process group, SIGKILL whatever is left after ``grace_s``; reap the leader."""
    pgid = proc.pid
    sent: list[str] = []
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        if proc.poll() is not None and not group_alive(pgid):
            break
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        sent.append(sig.name)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if proc.poll() is not None and not group_alive(pgid):
                break
            time.sleep(0.05)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    return {"signals": sent, "rc": proc.returncode, "left_running": group_alive(pgid)}


class _Signals:
    """Turn SIGINT/SIGTERM/SIGHUP into ``HarvestInterrupted`` while a run is live (main thread
    only; elsewhere the caller's own handling applies)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __enter__(self):
        self.saved: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                self.saved[sig] = signal.signal(sig, self._raise)
        return self

    @staticmethod
    def _raise(signum, frame):
        raise HarvestInterrupted(signal.Signals(signum).name)

    def __exit__(self, *exc):
        for sig, handler in self.saved.items():
            signal.signal(sig, handler)
        return False


# ---------------------------------------------------------------- steps


def wait_healthy(url: str, proc: subprocess.Popen, timeout_s: float,
                 poll_s: float = 0.5) -> tuple[bool, str, float]:
    """(healthy, why, seconds waited). Fails early when the server process exits."""
    start = time.monotonic()
    deadline = start + timeout_s
    last = "no answer"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False, f"server exited with status {proc.returncode} before it was healthy", \
                time.monotonic() - start
        try:
            with urllib.request.urlopen(url, timeout=min(2.0, max(0.1, poll_s * 4))) as resp:
                if resp.status == 200:
                    return True, "healthy", time.monotonic() - start
                last = f"HTTP {resp.status}"
        except urllib.error.HTTPError as exc:
            last = f"HTTP {exc.code}"
        except (urllib.error.URLError, OSError) as exc:
            last = str(getattr(exc, "reason", exc))
        time.sleep(poll_s)
    return False, f"not healthy after {timeout_s:g} s (last: {last})", time.monotonic() - start


def _capture_version(argv: list[str], folder: Path) -> dict[str, Any]:
    if not argv or shutil.which(argv[0]) is None:
        return {"argv": argv, "missing": True}
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=folder)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"argv": argv, "error": str(exc)}
    text = (proc.stdout.strip() or proc.stderr.strip()).splitlines()
    version = text[-1].strip() if proc.returncode == 0 and text else None
    (folder / VERSION_FILE).write_text(proc.stdout + proc.stderr)
    return {"argv": argv, "rc": proc.returncode, "version": version}


def _run_probe(probe: dict[str, Any], folder: Path, env: dict[str, str], timeout_s: float,
               grace_s: float) -> dict[str, Any]:
    from inferasim.harvest.parse import result_completed

    argv = probe.get("launch") or probe["argv"]
    result = folder / probe["result"]
    result.parent.mkdir(parents=True, exist_ok=True)
    if result.exists():
        result.unlink()  # a stale file must not pass for this run's result
    logs = folder / PROBE_LOG_DIR
    logs.mkdir(exist_ok=True)
    status: dict[str, Any] = {"id": probe["id"], "seed": probe.get("seed"), "started": _now(),
                              "log": f"{PROBE_LOG_DIR}/{probe['id']}.log",
                              "result": probe["result"]}
    start = time.monotonic()
    with open(logs / f"{probe['id']}.log", "wb") as log:
        try:
            proc = subprocess.Popen(argv, cwd=folder, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        except OSError as exc:
            status.update(status="failed", reason=f"could not start the client: {exc}")
            return status
        try:
            rc = proc.wait(timeout=timeout_s)
            status["rc"] = rc
        except subprocess.TimeoutExpired:
            stop_group(proc, grace_s)
            status.update(status="failed", rc=proc.returncode,
                          reason=f"timed out after {timeout_s:g} s")
            return status
        finally:
            if proc.poll() is None or group_alive(proc.pid):
                stop_group(proc, grace_s)
    status["seconds"] = round(time.monotonic() - start, 3)
    if rc != 0:
        status.update(status="failed", reason=f"client exited with status {rc}")
        return status
    completed, why = result_completed(result)
    if not completed:
        status.update(status="failed", reason=why)
        return status
    status.update(status="ok", completed=completed)
    return status


def run_plan(folder: str | Path, *, health_timeout_s: float | None = None,
             probe_timeout_s: float | None = None, stop_grace_s: float = 15.0,
             poll_s: float = 0.5, echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Run the plan in ``folder``; return (and write) the run record."""
    folder = Path(folder).resolve()
    plan = read_plan(folder)
    server = plan["server"]
    record: dict[str, Any] = {"started": _now(), "status": "running", "plan": "plan.json",
                              "probes": []}

    def save() -> None:
        # rewritten after every probe: a reader (or a crash) never sees half a record
        write_text_atomic(folder / RUN_FILE, json.dumps(record, indent=1) + "\n")

    gpu = gpu_detect.capture(plan.get("capture", {}).get("gpu", []))
    (folder / GPU_FILE).write_text(gpu.pop("text"))
    record["gpu"] = gpu
    echo(f"gpu: {gpu['part'] or 'unknown'} ({gpu['how']})")
    record["engine_version"] = _capture_version(plan.get("capture", {}).get("version", []), folder)
    argv = server.get("launch") or server["argv"]
    for name, text in server.get("files", {}).items():
        # what the server reads at start (TensorRT-LLM's options), beside the plan
        write_text_atomic(folder / name, text)
    env = {**os.environ, **server.get("env", {})}
    client_env = {**os.environ, **plan.get("client", {}).get("env", {})}
    timeout = health_timeout_s if health_timeout_s is not None else server.get("health_timeout_s", 1800)
    proc: subprocess.Popen | None = None
    pending = list(plan["probes"])
    with _Signals():
        try:
            # A fresh log per run: parse reads the engine's facts from the first lines.
            with open(folder / SERVER_LOG, "wb") as log:
                try:
                    proc = subprocess.Popen(argv, cwd=folder, stdout=log,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            env=env, start_new_session=True)
                except OSError as exc:
                    record["status"] = "server-not-started"
                    record["server"] = {"argv": argv, "error": f"{type(exc).__name__}: {exc}"}
                    echo(f"server: could not start ({exc})")
                    return record
            record["server"] = {"argv": argv, "pid": proc.pid, "pgid": proc.pid,
                                "started": _now()}
            save()
            echo(f"server: started (pid {proc.pid}, own process group); waiting for "
                 f"{server['health_url']} up to {timeout:g} s")
            healthy, why, waited = wait_healthy(server["health_url"], proc, timeout, poll_s)
            record["server"].update(healthy=healthy, health=why, health_wait_s=round(waited, 3))
            if not healthy:
                record["status"] = "server-unhealthy"
                echo(f"server: {why}")
            else:
                echo(f"server: healthy after {waited:.1f} s")
                while pending:
                    probe = pending.pop(0)
                    if proc.poll() is not None:
                        record["probes"].append({"id": probe["id"], "status": "failed",
                                                 "reason": f"server exited with status "
                                                           f"{proc.returncode}"})
                        continue
                    status = _run_probe(probe, folder, client_env,
                                        probe_timeout_s or probe.get("timeout_s", 3600),
                                        stop_grace_s)
                    record["probes"].append(status)
                    echo(f"probe {probe['id']}: {status['status']}"
                         + (f" ({status['reason']})" if status.get("reason") else ""))
                    save()
                failed = [p for p in record["probes"] if p["status"] != "ok"]
                record["status"] = "ok" if not failed else (
                    "failed" if len(failed) == len(record["probes"]) else "partial")
        except HarvestInterrupted as exc:
            record["status"] = "interrupted"
            record["interrupted_by"] = str(exc)
            echo(f"interrupted by {exc}: stopping the server")
        except BaseException as exc:  # noqa: BLE001 - recorded, then re-raised after teardown
            record["status"] = "error"
            record["error"] = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            done = {p["id"] for p in record["probes"]}
            for probe in plan["probes"]:
                if probe["id"] not in done:
                    record["probes"].append({"id": probe["id"], "status": "not-run"})
            if proc is not None:
                record["server"]["stop"] = stop_group(proc, stop_grace_s)
                echo(f"server: stopped ({', '.join(record['server']['stop']['signals']) or 'already exited'})")
            record["ended"] = _now()
            save()
    return record
