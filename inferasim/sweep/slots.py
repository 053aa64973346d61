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


def queued_clients(scenario: Scenario) -> int | None:
    """The running slots where the scenario's clients outnumber them (None where they do
    not, or where the load is not the clients')."""
    if not scenario.workload.clients_drive_load:
        return None
    slots = running_slots(scenario)
    return slots if scenario.workload.concurrency > slots else None


_QUEUE = ("the others queue for a running slot, in their TTFT (raise it with --set "
          "engine.max_num_seqs=N")


def queued_note(scenario: Scenario) -> str | None:
    """A line saying the scenario's clients outnumber its running slots, or None."""
    slots = queued_clients(scenario)
    if slots is None:
        return None
    return (f"note: {scenario.workload.concurrency} clients, {slots} running at once "
            f"(engine.max_num_seqs per scheduler): {_QUEUE})")


def queued_rungs_note(rungs: Sequence) -> str | None:
    """A line naming the closed-loop rungs whose clients outnumber the running slots, or
    None. ``rungs``: the ladder's (``sweep.ladder.Rung``)."""
    over = [(r.concurrency, slots) for r in rungs
            if (slots := queued_clients(r.scenario)) is not None]
    if not over:
        return None
    shown = ", ".join(f"c{c}" for c in sorted({c for c, _ in over}))
    limit = "/".join(str(s) for s in sorted({s for _, s in over}))
    return (f"note: {shown} offer more clients than the deployment runs at once ({limit} "
            f"requests: engine.max_num_seqs per scheduler); {_QUEUE} or --grid)")
