"""Where a sweep's rungs run: in this process, on a local process pool, or as Ray tasks.

One small interface::

    with make_executor(jobs=4, ray_address=None) as ex:
        for index, result in ex.run(fn, tasks):   # completion order
            ...

``run`` yields ``(index, fn(tasks[index]))`` as each task finishes; callers put results back
in task order, so what a sweep writes never depends on which executor ran it or how many
workers it had. ``fn`` must be a module-level function and each task picklable.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any, Protocol

from inferasim.config.errors import ConfigError, ConfigWarning, show_warning

RAY_CONNECT_TIMEOUT_S = 5.0      # TCP connect to the head
RAY_CHECK_TIMEOUT_S = 15.0       # a whole ray.init in a child process (Ray's import included)
# What a pool worker needs to replay a rung, imported once in the fork server.
PRELOAD = ("inferasim.sweep.ladder", "inferasim.sweep.warm")


class Executor(Protocol):
    name: str
    workers: int

    def run(self, fn: Callable[[Any], Any], tasks: Sequence[Any]) -> Iterator[tuple[int, Any]]:
        """Yield ``(index, fn(tasks[index]))`` for every task, in completion order."""
        ...

    def close(self) -> None: ...


class _Closing:
    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        pass


class InProcessExecutor(_Closing):
    """``--jobs 1``: every task in this process, one after another."""

    name = "in-process"
    workers = 1

    def run(self, fn, tasks):
        for index, task in enumerate(tasks):
            yield index, fn(task)


def _worker_init() -> None:
    """A pool worker leaves Ctrl-C to the parent, which ends it (a terminal sends SIGINT to
    the whole process group; a worker that raised it too would print its own traceback)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # a warning a replay raises reads as the parent's do: one line, not a source excerpt
    warnings.simplefilter("default", ConfigWarning)
    warnings.showwarning = show_warning


#: How long a stopped worker is given to exit on SIGTERM before it is killed.
STOP_GRACE_S = 1.0


class LocalPoolExecutor(_Closing):
    """A pool of worker processes on this machine (``--jobs N``).

    Workers come from a fork server that has already imported ``preload``, so a worker
    starts in milliseconds and never inherits threads from the parent. A run that does not
    finish (an error, Ctrl-C, SIGTERM) ends its workers at once rather than waiting for
    the rungs they are running: ``close`` does too, for a run abandoned mid-way.
    """

    name = "process-pool"

    def __init__(self, workers: int, preload: Sequence[str] = PRELOAD):
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = None
        methods = multiprocessing.get_all_start_methods()
        if "forkserver" in methods:
            self._context = multiprocessing.get_context("forkserver")
            self._context.set_forkserver_preload(list(preload))
        else:
            self._context = multiprocessing.get_context("spawn")

    def run(self, fn, tasks):
        if not tasks:
            return
        pool = self._pool = ProcessPoolExecutor(max_workers=min(self.workers, len(tasks)),
                                                mp_context=self._context,
                                                initializer=_worker_init)
        finished = False
        try:
            pending = {pool.submit(fn, task): index for index, task in enumerate(tasks)}
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in sorted(done, key=pending.get):
                    index = pending.pop(future)
                    yield index, future.result()
            finished = True
        finally:
            if finished:
                pool.shutdown(wait=True)
                self._pool = None
            else:
                self.close()

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            stop_pool(pool)


def stop_pool(pool: ProcessPoolExecutor, grace_s: float = STOP_GRACE_S) -> None:
    """End a pool's workers now: SIGTERM, then SIGKILL for any still alive after
    ``grace_s``; queued tasks are dropped. The pool's own shutdown would wait for every
    running task to finish, which for a long rung is minutes."""
    # the executor keeps no public handle on its processes; _processes is that handle
    processes = list((getattr(pool, "_processes", None) or {}).values())
    for proc in processes:
        if proc.is_alive():
            proc.terminate()
    deadline = time.monotonic() + grace_s
    for proc in processes:
        proc.join(max(0.0, deadline - time.monotonic()))
        if proc.is_alive():
            proc.kill()
            proc.join(grace_s)
    pool.shutdown(wait=False, cancel_futures=True)


def _split_address(address: str) -> tuple[str, int] | None:
    """``host:port`` (or ``ray://host:port``) -> (host, port); None for ``local`` / ``auto``."""
    text = address.strip()
    if text in ("local", "auto"):
        return None
    text = text.removeprefix("ray://")
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ConfigError(f"expected HOST:PORT, ray://HOST:PORT, 'auto' or 'local', got {address!r}",
                          key="--ray")
    return host.strip("[]"), int(port)


def probe(address: str, timeout_s: float = RAY_CONNECT_TIMEOUT_S) -> None:
    """Fail fast (a ConfigError) when nothing listens at a Ray head's address."""
    where = _split_address(address)
    if where is None:
        return
    try:
        with socket.create_connection(where, timeout=timeout_s):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ConfigError(f"cannot reach a Ray cluster at {address} ({reason}, "
                          f"waited at most {timeout_s:g} s)", key="--ray") from None


_RAY_CHECK = ("import sys, ray; ray.init(address=sys.argv[1], log_to_driver=False, "
              "configure_logging=False); ray.shutdown()")


# What Ray prints when the cluster wants a token this process does not have (Ray 2.60 turns
# token authentication on by default for the clusters it starts).
AUTH_FAILURE_MARKS = ("InvalidAuthToken", "AuthenticationError", "Unauthenticated")
AUTH_HELP = ("the cluster requires token authentication (Ray 2.60 enables it by default): "
             "pass --ray-token FILE with the cluster's token (on the head: ~/.ray/auth_token, "
             "or `ray get-auth-token`), or set RAY_AUTH_MODE=token with RAY_AUTH_TOKEN or "
             "RAY_AUTH_TOKEN_PATH")


def use_ray_token(path: str | None) -> None:
    """Authenticate to a token-protected cluster with the token in ``path``: Ray reads the
    mode and the token's file from the environment, in this process and in the check's child."""
    if path is None:
        return
    token = Path(path)
    if not token.is_file() or not token.read_text(encoding="utf-8", errors="replace").strip():
        raise ConfigError(f"no Ray token in {path} (expected a file holding the cluster's "
                          "token)", key="--ray-token")
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN_PATH"] = str(token.resolve())


def check_ray(address: str, timeout_s: float = RAY_CHECK_TIMEOUT_S) -> None:
    """Connect to the cluster once from a child process that is killed after ``timeout_s``.

    Ray's own connect retries for tens of seconds and can end the process that tried (it
    exits when the head vanishes), so the first contact is made in a throw-away process;
    only a cluster that answered is joined from this one. A refused token ends the check at
    the first refusal, with what to do about it (Ray itself retries it for its whole budget
    and then reports a connection failure).
    """
    # Ray's own retry budget for a head that does not answer (one try a second), in the
    # child's environment only.
    env = {"RAY_gcs_server_port_wait_time_s": str(max(1, int(timeout_s / 3))), **os.environ}
    child = subprocess.Popen([sys.executable, "-c", _RAY_CHECK, address], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, env=env)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(child.stderr.readline, "")),
                              daemon=True)
    reader.start()
    deadline = time.monotonic() + timeout_s
    while child.poll() is None and time.monotonic() < deadline:
        if any(mark in ln for ln in list(lines) for mark in AUTH_FAILURE_MARKS):
            break
        time.sleep(0.05)
    refused = any(mark in ln for ln in list(lines) for mark in AUTH_FAILURE_MARKS)
    if child.poll() is None:
        child.kill()
        child.wait()
        if not refused:
            raise ConfigError(f"no Ray cluster answered at {address} within {timeout_s:g} s",
                              key="--ray")
    reader.join(1.0)
    if refused:
        raise ConfigError(f"cannot connect to a Ray cluster at {address}: {AUTH_HELP}",
                          key="--ray")
    if child.returncode != 0:
        text = [ln.strip() for ln in lines if ln.strip()]
        errors = [ln for ln in text if "Error" in ln or " E " in ln] or text
        reason = errors[-1].split("] ", 1)[-1] if errors else f"exit status {child.returncode}"
        raise ConfigError(f"cannot connect to a Ray cluster at {address}: {reason}",
                          key="--ray")


class RayExecutor(_Closing):
    """Each task a Ray task (one CPU) on an existing cluster (``--ray ADDRESS``).

    ``address`` is what ``ray.init`` takes: ``HOST:PORT`` of a head node, ``ray://HOST:PORT``
    for Ray Client, ``auto`` for the cluster this machine belongs to, or ``local`` to start a
    throw-away one-machine cluster. The workers must be able to import ``inferasim``. If Ray
    is already initialised in this process, that connection is used and left open.
    """

    name = "ray"

    def __init__(self, address: str, timeout_s: float = RAY_CHECK_TIMEOUT_S,
                 local_cpus: int | None = None):
        _split_address(address)  # a malformed address is refused whether or not Ray is here
        try:
            import ray
        except ImportError:
            raise ConfigError("--ray needs Ray installed (pip install 'inferasim[ray]')",
                              key="--ray") from None
        self._ray = ray
        self._owned = False
        self._pending: dict = {}
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"address": address, "log_to_driver": False,
                                      "configure_logging": False}
            if address.strip() == "local":
                kwargs.update(include_dashboard=False, num_cpus=local_cpus or os.cpu_count())
            else:
                probe(address, min(timeout_s, RAY_CONNECT_TIMEOUT_S))
                check_ray(address, timeout_s)
            try:
                ray.init(**kwargs)
            except (ConnectionError, TimeoutError, RuntimeError, ValueError) as exc:
                text = str(exc).strip()
                reason = text.splitlines()[0] if text else type(exc).__name__
                if any(mark in text or mark in type(exc).__name__ for mark in AUTH_FAILURE_MARKS):
                    reason = AUTH_HELP
                raise ConfigError(f"cannot connect to a Ray cluster at {address}: {reason}",
                                  key="--ray") from None
            self._owned = True
        self.workers = max(1, int(ray.cluster_resources().get("CPU", 1)))

    def run(self, fn, tasks):
        ray = self._ray
        remote = ray.remote(num_cpus=1, max_retries=0)(fn)
        pending = self._pending = {remote.remote(task): index for index, task in enumerate(tasks)}
        try:
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    index = pending.pop(ref)
                    try:
                        result = ray.get(ref)
                    except ray.exceptions.RayTaskError as exc:
                        raise exc.as_instanceof_cause() from None
                    yield index, result
        finally:
            for ref in pending:
                ray.cancel(ref, force=True)
            pending.clear()

    def close(self) -> None:
        for ref in self._pending:  # a run abandoned mid-way (Ctrl-C): its tasks stop too
            self._ray.cancel(ref, force=True)
        self._pending = {}
        if self._owned and self._ray.is_initialized():
            self._ray.shutdown()


def default_jobs() -> int:
    return os.cpu_count() or 1


def make_executor(jobs: int | None = None, ray_address: str | None = None,
                  tasks: int | None = None) -> Executor:
    """The executor a command asked for: Ray when given an address, else a pool of ``jobs``."""
    if ray_address:
        return RayExecutor(ray_address, local_cpus=jobs)
    jobs = default_jobs() if jobs is None else jobs
    if jobs < 1:
        raise ConfigError(f"expected at least 1 job, got {jobs}", key="--jobs")
    if tasks is not None:
        jobs = min(jobs, max(tasks, 1))
    return InProcessExecutor() if jobs == 1 else LocalPoolExecutor(jobs)
