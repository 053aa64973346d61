"""Routers: which instance (or attention-DP rank) a request goes to, chosen by name."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from inferasim.serve.fleet_routing import FleetRouting
from inferasim.serve.live import LiveRequest


def _least_loaded(targets: Sequence, req: LiveRequest) -> int:
    # vLLM's DP balancer (0.24): waiting x 4 + running; ties to the lowest index.
    return min(range(len(targets)), key=lambda i: (targets[i].load_score, i))


def _least_requests(targets: Sequence, req: LiveRequest) -> int:
    # ATOM's DP balancer: the fewest requests waiting or running; ties to the lowest index.
    return min(range(len(targets)), key=lambda i: (targets[i].request_count, i))


def _prefix_affinity(targets: Sequence, req: LiveRequest) -> int:
    """Where the longest prefix of this prompt is cached; ties to the least loaded."""
    return min(range(len(targets)),
               key=lambda i: (-targets[i].peek(req), targets[i].load_score, i))


#: Dynamo's ``--kv-overlap-score-weight`` default.
KV_OVERLAP_WEIGHT = 1.0


def kv_router_cost(target, req: LiveRequest) -> float:
    """NVIDIA Dynamo's KV router cost of sending ``req`` to ``target`` (its router docs,
    "Cost Calculation", read with the search tool [3P]): the prefill blocks it would have
    (the prompts it is yet to compute plus this one's uncached part) times the overlap
    weight (1.0 by default), plus its decode blocks (the KV its running requests hold, the
    prompts routed to it whose KV is yet to land, and this prompt's; not its cache's idle
    blocks). Blocks of the target's own size."""
    bt = target.kv.bt
    cached = target.peek(req) * bt
    pending = sum(max(0, r.spec.prompt_tokens - r.computed) for r in target.prefilling) \
        + sum(r.spec.prompt_tokens for r in target.waiting) \
        + sum(r.spec.prompt_tokens for r in target.inbox)
    prefill = (pending + max(0, req.spec.prompt_tokens - cached)) / bt
    # a request routed here whose KV is yet to land counts from the decision, as the
    # router adds a request's blocks to its worker's when it routes it
    decode = (sum(r.computed for r in target.running)
              + sum(r.spec.prompt_tokens for r in target.incoming.values())
              + req.spec.prompt_tokens) / bt
    return KV_OVERLAP_WEIGHT * prefill + decode


def _kv_aware(targets: Sequence, req: LiveRequest) -> int:
    # temperature 0 (Dynamo's default): the cheapest, ties to the lowest index
    return min(range(len(targets)), key=lambda i: (_cost(targets[i], req), i))


def _cost(target, req: LiveRequest) -> float:
    if isinstance(target, Router):   # an instance of attention-DP ranks: its cheapest rank
        return min(_cost(t, req) for t in target.targets)
    return kv_router_cost(target, req)


#: The scans every policy is defined by; over engine instances the router keeps indexes
#: instead (``FleetRouting``), which pick the same target.
SCANS: dict[str, Callable[[Sequence, LiveRequest], int]] = {
    "least-loaded": _least_loaded,
    "least-requests": _least_requests,
    "prefix-affinity": _prefix_affinity,
    "kv-aware": _kv_aware,
}
#: Policies the fleet's indexes answer (the others scan).
INDEXED = ("least-loaded", "least-requests", "prefix-affinity")


class Router:
    def __init__(self, targets: Sequence, policy: str, frontends: int = 1):
        """``frontends``: routers of this policy that requests are dealt to in turn, each
        keeping its own state (Dynamo frontends behind nginx's round robin, each with its
        own round-robin turn over the same workers); only a stateful policy (round robin)
        tells them apart, the others read the targets' live state alike."""
        if not targets:
            raise ValueError("a router needs at least one target")
        if frontends < 1:
            raise ValueError("a router needs at least one frontend")
        self.targets = list(targets)
        self.policy = policy
        # each frontend's next turn, and the frontend the next request is dealt to
        self._turns = [0] * frontends
        self._dealt = 0
        self.fleet: FleetRouting | None = None
        if policy == "round-robin":
            self._pick: Callable[[Sequence, LiveRequest], int] = self._round_robin
        elif (len(self.targets) > 1 and policy in INDEXED
              and FleetRouting.supports(self.targets)):
            self.fleet = FleetRouting(self.targets, policy)
            self._pick = self.fleet.pick
        else:
            self._pick = SCANS[policy]

    def _round_robin(self, targets: Sequence, req: LiveRequest) -> int:
        f = self._dealt
        self._dealt = (f + 1) % len(self._turns)
        i = self._turns[f]
        self._turns[f] = (i + 1) % len(targets)
        return i

    def submit(self, req: LiveRequest) -> None:
        self.choose(req).submit(req)

    def choose(self, req: LiveRequest):
        """The engine instance (or attention-DP rank) this request would be sent to now."""
        target = self.targets[0] if len(self.targets) == 1 else \
            self.targets[self._pick(self.targets, req)]
        return target.choose(req) if isinstance(target, Router) else target

    @property
    def load_score(self) -> int:
        return sum(t.load_score for t in self.targets)

    @property
    def request_count(self) -> int:
        return sum(t.request_count for t in self.targets)

    def peek(self, req: LiveRequest) -> int:
        return max(t.peek(req) for t in self.targets)
