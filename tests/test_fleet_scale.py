"""Fleet scale: routers over indexes pick what their scans pick, rows streamed to disk equal
the rows kept in memory, and the streamed summary equals the one from the written rows."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from inferasim.config.loader import load_scenario
from inferasim.report.row_stream import RowStream
from inferasim.report.run_report import occupancy_frame, replay_summary, streamed_summary
from inferasim.serve import fleet_routing
from inferasim.serve.kv_pool import KVPool
from inferasim.serve.load_index import LoadIndex
from inferasim.serve.prefix_index import PrefixIndex, indexed_names
from inferasim.serve.radix_cache import RadixCache
from inferasim.serve.simulation import simulate
from tests.conftest import shared_data

FLEET = ["workload.duration_s=150", "workload.concurrency=24", "engine.kv_pool_tokens=12000",
         "topology.instances=4"]


def _replay(overrides, indexed=True, monkeypatch=None, rows=None):
    if not indexed:
        monkeypatch.setattr(fleet_routing.FleetRouting, "supports",
                            staticmethod(lambda targets: False))
    result = simulate(load_scenario(None, overrides), rows=rows)
    if not indexed:
        monkeypatch.undo()
    return result


@pytest.mark.parametrize("case", [
    ["engine.name=vllm", "topology.router=prefix-affinity",
     "engine.max_num_batched_tokens=512"],
    ["engine.name=sglang", "topology.router=prefix-affinity",
     "engine.chunked_prefill_size=512", "engine.scheduler_recv_interval=3"],
    ["engine.name=sglang", "topology.router=prefix-affinity", "engine.eviction_policy=recency"],
    ["engine.name=vllm", "topology.router=least-loaded"],
    ["engine.name=atom", "gpu.name=mi300x", "topology.router=least-requests"],
    ["topology.router=prefix-affinity", "topology.kind=disaggregated",
     "topology.prefill.instances=3", "topology.decode.instances=2"],
])
def test_indexed_router_replays_as_the_scan(case, monkeypatch):
    """Every request routed, and so every row, as the policy's scan over every instance."""
    overrides = [*FLEET, *case]
    scan = _replay(overrides, indexed=False, monkeypatch=monkeypatch)
    fast = _replay(overrides)
    a, _ = replay_summary(scan)
    b, _ = replay_summary(fast)
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert b.instance.nunique() > 1


def test_prefix_affinity_decisions_peek_fewer_instances_than_the_scan():
    """The scan peeks every instance per decision; the index only its candidates (all those
    sharing a deep prefix here, where the workload's shared prefix sits between two
    indexed depths: docs/fleet.md)."""
    result = _replay([*FLEET, "topology.router=prefix-affinity", "topology.instances=8"])
    fleet = result.engines[0].router_index
    assert fleet.decisions > 100
    assert fleet.verified < 8 * fleet.decisions


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_streamed_rows_equal_rows_in_memory(fmt, tmp_path):
    """A replay with its rows in memory and one streamed in small row groups: the same rows,
    the same summary, the same occupancy samples (streamed in group order)."""
    overrides = [*FLEET, "topology.router=prefix-affinity"]
    kept = _replay(overrides)
    stream = RowStream(tmp_path, fmt, group_rows=37)
    streamed = _replay(overrides, rows=stream)
    a, sa = replay_summary(kept)
    b, sb = replay_summary(streamed)
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert streamed.requests == [] and stream.totals.groups > 3
    assert stream.max_pending < len(a)
    assert json.dumps(sa, sort_keys=True) == json.dumps(sb, sort_keys=True)
    assert json.dumps(streamed_summary(streamed), sort_keys=True) == json.dumps(sb, sort_keys=True)
    oa, ob = occupancy_frame(kept), occupancy_frame(streamed)
    by = ["instance", "time_s"]
    pd.testing.assert_frame_equal(oa.sort_values(by, kind="stable").reset_index(drop=True),
                                  ob.sort_values(by, kind="stable").reset_index(drop=True))


def test_streamed_rows_keep_unfinished_and_single_instance(tmp_path):
    overrides = ["workload.format=random", "workload.isl=2048", "workload.osl=256",
                 "workload.rate=3", "workload.duration_s=60"]
    kept = _replay(overrides)
    streamed = _replay(overrides, rows=RowStream(tmp_path, "parquet", group_rows=10))
    a, _ = replay_summary(kept)
    b, _ = replay_summary(streamed)
    pd.testing.assert_frame_equal(a, b, check_exact=True)


def test_row_stream_rejects_an_unknown_format(tmp_path):
    with pytest.raises(ValueError, match="rows format 'xlsx'"):
        RowStream(tmp_path, "xlsx")


def test_load_index_least_matches_a_scan():
    class T:
        def __init__(self, s):
            self.s = s

    rng = np.random.default_rng(3)
    targets = [T(int(rng.integers(0, 6))) for _ in range(20)]
    index = LoadIndex(targets, lambda t: t.s)
    for _ in range(500):
        i = int(rng.integers(0, 20))
        targets[i].s = int(rng.integers(0, 6))
        index.changed(i)
        subset = int(rng.integers(1, 1 << 20))
        members = [j for j in range(20) if subset >> j & 1]
        assert index.least(subset) == min(members, key=lambda j: (targets[j].s, j))
        assert index.least() == min(range(20), key=lambda j: (targets[j].s, j))


def test_load_index_read_late_picks_as_updated_at_once():
    """Instances marked stale (as engines mark their moves) and re-read at the next pick
    give the picks of an index told of every move as it happens."""
    class T:
        def __init__(self, s):
            self.s = s

    rng = np.random.default_rng(4)
    targets = [T(int(rng.integers(0, 9))) for _ in range(24)]
    eager, late = LoadIndex(targets, lambda t: t.s), LoadIndex(targets, lambda t: t.s)
    for _ in range(300):
        for _ in range(int(rng.integers(0, 5))):  # several moves between two picks
            i = int(rng.integers(0, 24))
            targets[i].s = int(rng.integers(0, 9))
            eager.changed(i)
            late.stale |= 1 << i
        subset = int(rng.integers(1, 1 << 24))
        assert late.least(subset) == eager.least(subset)
        assert late.least() == eager.least()
        assert late.scores == eager.scores and late.stale == 0


def test_prefix_index_bounds_every_cache_match():
    """Indexed from a cache's inserts and evictions, each level's bound is at least what the
    cache matches, for every instance in that level's mask and no other."""
    rng = np.random.default_rng(5)
    index = PrefixIndex()
    caches = []
    for i in range(3):
        cache = RadixCache(KVPool(64 * 40), 64, "leaf-lru")
        cache.listener = index.listener(i)
        caches.append(cache)
    prompts = [np.concatenate(([0], rng.integers(1, 4, size=int(rng.integers(1, 12)))))
               .astype(np.int64) for _ in range(60)]
    for t, keys in enumerate(prompts):
        cache = caches[t % 3]
        need = len(keys) * 64
        if cache.make_room(need):
            cache.pool.alloc_private(need)
            cache.insert(keys, float(t))
        for probe in prompts[:20]:
            levels = index.levels(probe)
            for i, c in enumerate(caches):
                true = c.peek_prefix(probe)
                bound = max([b for b, m in levels if m >> i & 1], default=0)
                assert true <= bound
    assert indexed_names(0, np.arange(9, dtype=np.int64)) == \
        [(k << 6) | p.bit_length() for k, p in ((0, 1), (1, 2), (3, 4), (7, 8))]


def test_a_streamed_request_is_freed_once_written(tmp_path):
    """A written request is freed by its reference count alone: with the cyclic collector
    off for the replay, no finished request is left alive (its done event carried it as its
    value once, a cycle only a full collection frees, so a fleet kept every request)."""
    import gc

    from inferasim.serve.live import LiveRequest

    stream = RowStream(tmp_path, "csv", group_rows=16)
    gc.collect()
    gc.disable()
    try:
        result = _replay([*FLEET, "topology.router=prefix-affinity"], rows=stream)
        alive = sum(isinstance(o, LiveRequest) for o in gc.get_objects())
    finally:
        gc.enable()
    assert stream.totals.rows > 100 and result.requests == []
    assert alive == 0


def _mooncake_fleet(tmp_path, copies: int, rows: int) -> Path:
    """The Mooncake trace's first ``rows`` records ``copies`` times over, each copy in its
    own block-id namespace and at the same times: a fleet of ``copies`` equally loaded
    instances (run_benchmarks.py's fleet cases, shortened)."""
    records = [json.loads(line) for line in
               shared_data("mooncake", "conversation_trace.jsonl").read_text().splitlines()[:rows]]
    out = tmp_path / f"mooncake-x{copies}.jsonl"
    with out.open("w") as fh:
        for c in range(copies):
            for rec in records:
                fh.write(json.dumps(dict(rec, hash_ids=[h + c * 10**9 for h in rec["hash_ids"]]))
                         + "\n")
    return out


def test_a_routing_decision_peeks_as_many_instances_at_32_as_at_4(tmp_path):
    """Prefix affinity over the index verifies about one candidate per decision however many
    instances there are (a scan peeks every one): the decision's cost is the fleet's size
    independent (docs/fleet.md)."""
    per_decision = {}
    for copies in (4, 32):
        trace = _mooncake_fleet(tmp_path, copies, 600)
        result = simulate(load_scenario(None, [
            "workload.format=mooncake", f"workload.trace={trace}", "model.name=llama-3.1-70b",
            "gpu.name=b200", "parallel.tp=8", f"topology.instances={copies}",
            "topology.router=prefix-affinity"]))
        fleet = result.engines[0].router_index
        assert fleet.decisions == 600 * copies
        per_decision[copies] = fleet.verified / fleet.decisions
    assert per_decision[32] <= 1.1 and per_decision[32] <= per_decision[4] * 1.05, per_decision
