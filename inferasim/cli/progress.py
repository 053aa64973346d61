"""A progress bar on stderr for long work: a replay (its simulated clock against the horizon)
and a sweep (rungs done against rungs in all), with an estimate of the time left.

Drawn only when stderr is a terminal and the command's output is not JSON, and only once
the work has run for ``DELAY_S`` (a short replay prints nothing extra). Closing it clears
the line, so what the command prints after is the same with or without a bar.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

DELAY_S = 2.0            # a job shorter than this shows no bar at all
REDRAW_S = 0.2           # at most five redraws a second
WIDTH = 24


def wanted(as_json: bool, stream: TextIO | None = None) -> bool:
    """A bar helps a person watching a terminal; never a pipe, a log or a JSON reader."""
    stream = stream or sys.stderr
    return not as_json and bool(getattr(stream, "isatty", lambda: False)())


def _clock(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class ProgressBar:
    """``[#####.......]  42%  what  ~1:23 left`` redrawn in place on ``stream``."""

    def __init__(self, label: str, *, enabled: bool = True, stream: TextIO | None = None,
                 delay_s: float = DELAY_S, clock: Callable[[], float] = time.monotonic):
        self.label = label
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.delay_s = delay_s
        self.clock = clock
        self.started = clock()
        self._drawn_at: float | None = None
        self._width = 0

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def update(self, fraction: float, detail: str = "") -> None:
        """Show ``fraction`` (0..1) done; ``detail`` says of what."""
        if not self.enabled:
            return
        now = self.clock()
        elapsed = now - self.started
        if elapsed < self.delay_s:
            return
        if self._drawn_at is not None and now - self._drawn_at < REDRAW_S and fraction < 1:
            return
        self._drawn_at = now
        fraction = min(max(fraction, 0.0), 1.0)
        filled = int(round(fraction * WIDTH))
        left = ""
        if 0 < fraction < 1:
            left = f"  ~{_clock(elapsed / fraction * (1 - fraction))} left"
        line = (f"{self.label} [{'#' * filled}{'.' * (WIDTH - filled)}] {fraction:4.0%}"
                f"  {detail}{left}  ({_clock(elapsed)} so far)")
        pad = max(0, self._width - len(line))
        self._width = len(line)
        self.stream.write("\r" + line + " " * pad)
        self.stream.flush()

    def close(self) -> None:
        if self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0


def replay_bar(enabled: bool, **kwargs) -> tuple[ProgressBar, Callable[[float, float], None]]:
    """A bar and the ``on_clock(now_s, horizon_s)`` callback ``simulate`` drives it with.
    Past the horizon the replay drains the requests still in flight: shown as such."""
    bar = ProgressBar("replay", enabled=enabled, **kwargs)

    def on_clock(now_s: float, horizon_s: float) -> None:
        if horizon_s <= 0 or now_s >= horizon_s:
            bar.update(0.99, f"draining in-flight requests, {now_s:,.0f} s simulated")
        else:
            bar.update(now_s / horizon_s, f"{now_s:,.0f} of {horizon_s:,.0f} s simulated")

    return bar, on_clock


def rungs_bar(total: int, enabled: bool, **kwargs) -> tuple[ProgressBar, Callable[..., None]]:
    """A bar over a sweep's rungs and the ``on_done(rung)`` callback that counts them."""
    bar = ProgressBar("sweep", enabled=enabled, **kwargs)
    done = 0

    def on_done(rung=None) -> None:
        nonlocal done
        done += 1
        what = f", last {rung.label} c={rung.concurrency}" if rung is not None else ""
        bar.update(done / max(total, 1), f"{done}/{total} rungs done, {total - done} left{what}")

    return bar, on_done
