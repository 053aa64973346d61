"""How many requests a deployment runs at once, and a ladder's rungs that offer it more
clients than that: their other clients queue for a running slot, which a sweep of the
concurrency should say rather than leave to be read off a flat throughput."""

from __future__ import annotations

from collections.abc import Sequence

from inferasim.config.loader import pool_scenario
from inferasim.config.scenario import Scenario


def running_slots(scenario: Scenario) -> int:
    """The requests the deployment's schedulers run at once by their limit alone
    (``engine.max_num_seqs`` is a scheduler's: one per attention-DP rank of each instance;
    a disaggregated deployment's are its decode pool's)."""
    topo = scenario.topology
    if topo.kind == "disaggregated":
        decode = pool_scenario(scenario, "decode", check_fit=False)
        return (topo.decode.instances * decode.parallel.dp_attention
                * decode.engine.max_num_seqs)
    return topo.instances * scenario.parallel.dp_attention * scenario.engine.max_num_seqs


def queued_rungs_note(rungs: Sequence) -> str | None:
    """A line naming the closed-loop rungs whose clients outnumber the running slots, or
    None. ``rungs``: the ladder's (``sweep.ladder.Rung``)."""
    over = [(r.concurrency, running_slots(r.scenario)) for r in rungs
            if r.scenario.workload.clients_drive_load
            and r.concurrency > running_slots(r.scenario)]
    if not over:
        return None
    slots = sorted({s for _, s in over})
    shown = ", ".join(f"c{c}" for c in sorted({c for c, _ in over}))
    limit = "/".join(str(s) for s in slots)
    return (f"note: {shown} offer more clients than the deployment runs at once ({limit} "
            "requests: engine.max_num_seqs per scheduler); the others queue for a running "
            "slot, in their TTFT (raise it with --set engine.max_num_seqs=N or --grid)")
