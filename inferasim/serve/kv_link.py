"""A KV link: one sender's NIC bandwidth shared by the transfers in flight on it.

Processor sharing: N transfers in flight each drain at ``bytes_per_s / N``, the share
recomputed whenever one starts or drains. A transfer is done ``latency_s`` after its last
byte leaves (the completion notice: NIXL's read-done, Mooncake's transfer status), the
latency paid once per transfer and not occupying the link.

Bookkeeping is by virtual work, as a fair-queueing scheduler keeps it: ``_work`` is the
bytes any one transfer in flight has drained since the link was built (all drain alike), so a
transfer's finish tag is ``work at start + its bytes`` and an event costs O(log N) heap work
plus an O(1) advance; no per-transfer remainders are updated, and transfers with equal tags
drain at the same event exactly. Time is the SimPy clock's: a drain is a timeout to the
head tag's time, snapped to that tag when it fires (no drift accumulates).
"""

from __future__ import annotations

import heapq
import itertools

import simpy


class KVLink:
    def __init__(self, env: simpy.Environment, bytes_per_s: float, latency_s: float,
                 name: str = ""):
        if bytes_per_s <= 0:
            raise ValueError("a KV link needs a positive bandwidth")
        self.env = env
        self.bytes_per_s = bytes_per_s
        self.latency_s = latency_s
        self.name = name
        self._work = 0.0           # bytes one transfer in flight has drained so far
        self._at = env.now         # when _work was last brought up to date
        # (finish tag, arrival order, bytes, done) of the transfers draining, a heap
        self._tags: list[tuple[float, int, float, simpy.Event]] = []
        self._seq = itertools.count()
        self._epoch = 0            # the drain timer scheduled for the current head
        self.bytes_sent = 0.0      # bytes of transfers that have drained
        self.busy_s = 0.0          # time with at least one transfer draining

    @property
    def in_flight(self) -> int:
        """Transfers whose bytes are still crossing (not those only awaiting their latency)."""
        return len(self._tags)

    def seconds_alone(self, nbytes: float) -> float:
        """A transfer's time on an otherwise idle link."""
        return self.latency_s + nbytes / self.bytes_per_s

    def transfer(self, nbytes: float) -> simpy.Event:
        """Start sending ``nbytes`` now; the event fires when they are on the other side."""
        done = self.env.event()
        if nbytes <= 0:
            self._after_latency(done)
            return done
        self._advance()
        heapq.heappush(self._tags, (self._work + nbytes, next(self._seq), nbytes, done))
        self._reschedule()
        return done

    def _advance(self) -> None:
        now = self.env.now
        if self._tags and now > self._at:
            self._work += (now - self._at) * self.bytes_per_s / len(self._tags)
            self.busy_s += now - self._at
        self._at = now

    def _reschedule(self) -> None:
        """A timer for the head's drain at the share that holds from now to then."""
        self._epoch += 1
        if not self._tags:
            return
        epoch = self._epoch
        delay = max(0.0, (self._tags[0][0] - self._work) * len(self._tags) / self.bytes_per_s)
        timer = self.env.timeout(delay)
        timer.callbacks.append(lambda _ev: self._drain(epoch))

    def _drain(self, epoch: int) -> None:
        if epoch != self._epoch:
            return  # a start or drain since re-timed the head
        self._advance()
        # the head drains now by construction: snap to its tag, then take every transfer
        # that tag also reaches (equal transfers started together drain together)
        head = self._tags[0][0]
        self._work = max(self._work, head)
        while self._tags and self._tags[0][0] <= self._work:
            _, _, nbytes, done = heapq.heappop(self._tags)
            self.bytes_sent += nbytes
            self._after_latency(done)
        self._reschedule()

    def _after_latency(self, done: simpy.Event) -> None:
        if self.latency_s <= 0:
            done.succeed()
            return
        self.env.timeout(self.latency_s).callbacks.append(lambda _ev: done.succeed())


class ChunkStream:
    """One prompt's KV sent chunk by chunk as its prefill computes it (SGLang's
    send_kv_chunk, engines.md 6 step 4): each completed chunk sends the page-aligned tokens
    computed since the last send (the first chunk also carries the prefix the prefill
    instance's cache served: the decode side holds none of it), the last the rest."""

    def __init__(self, bytes_per_token: float, page_tokens: int):
        self.bytes_per_token = bytes_per_token
        self.page = max(1, page_tokens)
        self.sent = 0              # prompt tokens whose KV has been handed to the link
        self.transfers: list[simpy.Event] = []

    def send_upto(self, link: KVLink, tokens: int, last: bool = False) -> None:
        """Hand the link the KV of the prompt's first ``tokens`` tokens not yet sent (whole
        pages only, but for the last chunk)."""
        if not last:
            tokens = tokens // self.page * self.page
        if tokens > self.sent:
            self.transfers.append(link.transfer((tokens - self.sent) * self.bytes_per_token))
            self.sent = tokens
