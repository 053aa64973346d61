"""Load generators on the simulation clock: closed-loop clients with think time, and open-loop arrivals."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import simpy

from inferasim.serve.live import LiveRequest
from inferasim.workload.request import Arrival, RequestSpec, Session


class RequestLog:
    """Every request the clients sent, in send order, and a counter for ids. With ``rows``
    (``report.row_stream.RowStream``) each request goes there instead of into ``requests``,
    and is let go once its row is written."""

    def __init__(self, env: simpy.Environment, max_requests: int | None = None, rows=None):
        self.env = env
        self.requests: list[LiveRequest] = []
        self.max_requests = max_requests
        self.rows = rows
        self.count = 0

    @property
    def full(self) -> bool:
        """The workload's request budget (``workload.max_requests``) is spent."""
        return self.max_requests is not None and self.count >= self.max_requests

    def new(self, spec: RequestSpec) -> LiveRequest:
        req = LiveRequest(self.count, spec, self.env.now, self.env.event())
        self.count += 1
        if self.rows is None:
            self.requests.append(req)
        else:
            self.rows.sent(req)
        return req


def closed_loop_client(env: simpy.Environment, next_session: Callable[[], Session],
                       submit: Callable[[LiveRequest], None], log: RequestLog, horizon: float):
    """One client: a session at a time, each turn after its think time, until the horizon."""
    while env.now < horizon:
        session = next_session()
        for turn in session.turns:
            if turn.think_s > 0:
                yield env.timeout(turn.think_s)
            if env.now >= horizon or log.full:
                return
            req = log.new(turn.request)
            submit(req)
            yield req.done


def open_loop_arrivals(env: simpy.Environment, arrivals: Iterable[Arrival],
                       submit: Callable[[LiveRequest], None], log: RequestLog, horizon: float):
    """Requests at their stamped times (already scaled), until the horizon."""
    for arrival in arrivals:
        if arrival.time_s >= horizon or log.full:
            return
        if arrival.time_s > env.now:
            yield env.timeout(arrival.time_s - env.now)
        submit(log.new(arrival.request))
