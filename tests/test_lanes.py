"""Lane rules on small constructed session trees (behaviour.md section 5, docs/agentic.md).

A fake server finishes every request a fixed time after it is submitted, so each rule shows
as exact arrival times."""

from __future__ import annotations

import numpy as np
import pytest
import simpy

from inferasim.serve.clients import RequestLog
from inferasim.workload.lanes import (
    CorpusBuilder,
    LaneDriver,
    TreeInstance,
    TreeSampler,
    start_turn_at,
)
from inferasim.workload.sessions_format import SessionFormatError, add_session

SERVICE = 1.0


def corpus_of(*sessions):
    b = CorpusBuilder()
    counts = {"sessions": 0, "empty_sessions": 0, "orphans": 0}
    for i, s in enumerate(sessions):
        add_session(b, s, f"s{i}", counts)
    corpus = b.build()
    corpus.meta = {k: float(v) for k, v in counts.items()}
    return corpus


def replay(corpus, *, concurrency=1, duration=1000.0, service=SERVICE, cap=None,
           timing="end-to-start", start=(0.0, 0.0), sampler="sequential", seed=0,
           max_requests=None):
    env = simpy.Environment()
    log = RequestLog(env)

    def serve(req):
        yield env.timeout(service(req) if callable(service) else service)
        req.first_token = req.finish = env.now
        req.done.succeed(req)

    def submit(req):
        env.process(serve(req))

    drv = LaneDriver(corpus, concurrency=concurrency, duration_s=duration,
                     rng=np.random.default_rng(seed), sampler=sampler,
                     start_min_ratio=start[0], start_max_ratio=start[1], timing=timing,
                     idle_cap_s=cap, max_requests=max_requests)
    drv.drive(env, submit, log, duration)
    env.run()
    return drv, log.requests


def by_turn(reqs, session=0):
    return {r.spec.turn: r for r in reqs if r.spec.session == session}


def turn(**kw):
    kw.setdefault("in", 640)
    kw.setdefault("out", 10)
    return kw


FANOUT = {"session": "fanout", "prefixes": {"sub": 640}, "turns": [
    turn(id="r0"),
    turn(id="a0", stream="A", parent="r0", prefix="sub", gap=0.5),
    turn(id="a1", stream="A", gap=2.0, **{"in": 1280}),
    turn(id="b0", stream="B", parent="r0", hash_ids=list(range(100, 110)), gap=0.5),
    turn(id="r1", joins=["A", "B"], gap=3.0, think=50.0, **{"in": 1280}),
]}


def test_fanout_runs_concurrently_and_the_join_waits_for_every_subagent():
    drv, reqs = replay(corpus_of(FANOUT))
    # Layout: main stream first, then A, then B: tree turns r0, r1, a0, a1, b0.
    t = {name: by_turn(reqs)[i] for i, name in enumerate(["r0", "r1", "a0", "a1", "b0"])}
    assert t["r0"].arrival == 0.0
    # Both subagents start 0.5 s after the parent request ends, side by side in one lane.
    assert t["a0"].arrival == pytest.approx(1.5) and t["b0"].arrival == pytest.approx(1.5)
    assert t["a1"].arrival == pytest.approx(t["a0"].finish + 2.0)
    # The parent's next turn waits for both, then its recorded end-to-start gap.
    last = max(t["a1"].finish, t["b0"].finish)
    assert t["r1"].arrival == pytest.approx(last + 3.0)
    assert drv.instances >= 1


def test_think_time_mode_uses_think_after_the_joins():
    drv, reqs = replay(corpus_of(FANOUT), timing="think-time")
    t = {name: by_turn(reqs)[i] for i, name in enumerate(["r0", "r1", "a0", "a1", "b0"])}
    assert t["a0"].arrival == pytest.approx(1.0)        # think 0 for a spawn
    last = max(t["a1"].finish, t["b0"].finish)
    assert t["r1"].arrival == pytest.approx(last + 50.0)


BACKGROUND = {"session": "bg", "turns": [
    turn(id="r0"),
    turn(id="c0", stream="C", parent="r0", gap=0.0),
    turn(id="c1", stream="C", gap=30.0),
    turn(id="r1", gap=1.0),
]}


def test_background_subagent_does_not_gate_and_the_tree_drains_before_the_next():
    drv, reqs = replay(corpus_of(BACKGROUND), duration=200.0)
    first = by_turn(reqs, 0)
    r0, r1, c0, c1 = (first[i] for i in range(4))
    assert r1.arrival == pytest.approx(r0.finish + 1.0)  # not waiting for C
    assert c1.finish > r1.finish
    # The lane holds the tree until the background subagent drained too.
    second = by_turn(reqs, 1)
    assert min(r.arrival for r in second.values()) == pytest.approx(c1.finish)


def test_orphan_stream_is_dropped():
    session = {"turns": [turn(id="r0"), turn(stream="X", gap=0.0), turn(stream="X"),
                         turn(id="r1", gap=1.0)]}
    corpus = corpus_of(session)
    assert corpus.meta["orphans"] == 1
    assert corpus.n_turns == 2
    _, reqs = replay(corpus, duration=3.0)
    assert [r.spec.turn for r in reqs] == [0, 1]


def test_a_join_on_an_orphan_is_ignored_and_bad_references_are_errors():
    ok = {"turns": [turn(id="r0"), turn(stream="X"), turn(id="r1", joins=["X"])]}
    assert corpus_of(ok).n_turns == 2
    with pytest.raises(SessionFormatError, match="parent"):
        corpus_of({"turns": [turn(id="r0"), turn(stream="X", parent="zz")]})
    with pytest.raises(SessionFormatError, match="unknown stream"):
        corpus_of({"turns": [turn(id="r0"), turn(joins=["nope"])]})


def test_turn_extending_a_pending_request_is_held_until_it_resolves():
    # B's first prompt extends A's first prompt block for block (siblings sharing a prefix).
    session = {"prefixes": {"sub": 640}, "turns": [
        turn(id="r0"),
        turn(stream="A", parent="r0", hash_ids=list(range(10)), gap=0.0),
        turn(stream="B", parent="r0", hash_ids=list(range(12)), gap=0.0, **{"in": 800}),
        turn(stream="C", parent="r0", hash_ids=list(range(50, 60)), gap=0.0),
    ]}
    _, reqs = replay(corpus_of(session), service=lambda r: 5.0)
    t = by_turn(reqs)
    a, b, c = t[1], t[2], t[3]
    assert a.arrival == pytest.approx(5.0) and c.arrival == pytest.approx(5.0)
    assert b.arrival == pytest.approx(a.finish)       # held, then routed
    assert np.array_equal(b.spec.keys[:10], a.spec.keys)


def linear(n=10, step=10.0, **kw):
    return {"session": kw.pop("name", "lin"), "turns": [
        turn(id=f"r{k}", t=k * step, gap=(0.0 if k == 0 else step - SERVICE), **kw)
        for k in range(n)]}


def test_first_tree_starts_at_the_ratio_with_one_warmup_turn_and_recycled_lanes_at_zero():
    corpus = corpus_of(linear())
    assert start_turn_at(corpus, 0, 0.45) == 4        # t* = 40.5 -> resume at 5, warm up 4
    assert start_turn_at(corpus, 0, 0.0) == 0
    assert start_turn_at(corpus, 0, 1.0) == 8
    drv, reqs = replay(corpus, start=(0.45, 0.45), duration=200.0)
    first = [r for r in reqs if r.spec.session == 0]
    assert first[0].spec.turn == 4 and first[0].arrival == 0.0
    assert [r.spec.turn for r in first] == list(range(4, 10))
    second = [r for r in reqs if r.spec.session == 1]
    assert second[0].spec.turn == 0
    assert drv.trees_started[0][3] == 4 and drv.trees_started[1][3] == 0


def test_start_ratio_draws_lie_in_the_span():
    corpus = corpus_of(linear(n=101, step=1.0 + SERVICE))
    drv, _ = replay(corpus, concurrency=40, start=(0.25, 0.75), duration=0.5)
    starts = [s for (_, _, _, s) in drv.trees_started]
    assert min(starts) >= 24 and max(starts) <= 75
    assert len(set(starts)) > 10


def test_each_tree_instance_has_its_own_namespace():
    drv, reqs = replay(corpus_of(FANOUT), concurrency=3, duration=30.0)
    sessions = {}
    for r in reqs:
        sessions.setdefault(r.spec.session, []).append(r.spec.keys)
    assert len(sessions) >= 3
    key_sets = [set(np.concatenate(k).tolist()) for k in sessions.values()]
    for i in range(len(key_sets)):
        for j in range(i + 1, len(key_sets)):
            assert not key_sets[i] & key_sets[j]
    # Within an instance the recorded structure holds: r1 extends r0, a1 extends a0.
    t = by_turn(reqs, 0)
    assert np.array_equal(t[1].spec.keys[:10], t[0].spec.keys)
    assert np.array_equal(t[3].spec.keys[:10], t[2].spec.keys)


def test_idle_cap_pulls_timers_forward_only_while_nothing_is_in_flight():
    gaps = {"turns": [turn(id="r0"), turn(id="r1", gap=100.0)]}
    _, reqs = replay(corpus_of(gaps), cap=None, duration=150.0)
    assert by_turn(reqs)[1].arrival == pytest.approx(101.0)
    _, reqs = replay(corpus_of(gaps), cap=10.0, duration=150.0)
    assert by_turn(reqs)[1].arrival == pytest.approx(11.0)
    # A background subagent in flight until t=31 keeps the timer running at full length
    # until the lane goes idle; then it fires at most 10 s later.
    busy = {"turns": [turn(id="r0"), turn(stream="C", parent="r0", gap=0.0),
                      turn(id="r1", gap=100.0)]}
    _, reqs = replay(corpus_of(busy), cap=10.0, duration=150.0,
                     service=lambda r: 30.0 if r.spec.turn == 2 else 1.0)
    t = by_turn(reqs)
    assert t[2].finish == pytest.approx(31.0)
    assert t[1].arrival == pytest.approx(41.0)


def test_nothing_is_issued_at_or_after_the_horizon_and_in_flight_requests_drain():
    _, reqs = replay(corpus_of(linear(n=50, step=3.0)), concurrency=2, duration=20.0,
                     service=2.5)
    assert reqs and max(r.arrival for r in reqs) < 20.0
    assert all(np.isfinite(r.finish) for r in reqs)
    assert max(r.finish for r in reqs) > 20.0


def test_max_requests_stops_issuing():
    _, reqs = replay(corpus_of(linear(n=50)), concurrency=3, max_requests=7)
    assert len(reqs) == 7


def test_samplers():
    rng = np.random.default_rng(3)
    seq = TreeSampler(4, "sequential", rng)
    assert [seq.next() for _ in range(6)] == [0, 1, 2, 3, 0, 1]
    shuf = TreeSampler(5, "shuffle", np.random.default_rng(3))
    draws = [shuf.next() for _ in range(10)]
    assert sorted(draws[:5]) == list(range(5)) and sorted(draws[5:]) == list(range(5))
    a = [TreeSampler(9, "random", np.random.default_rng(7)).next() for _ in range(1)]
    b = [TreeSampler(9, "random", np.random.default_rng(7)).next() for _ in range(1)]
    assert a == b
    with pytest.raises(ValueError):
        TreeSampler(3, "lifo", rng)


def test_lanes_draw_trees_in_sampler_order():
    corpus = corpus_of(*(linear(n=2, name=f"s{i}") for i in range(3)))
    drv, _ = replay(corpus, concurrency=2, duration=40.0)
    trees = [tree for (_, tree, _, _) in drv.trees_started]
    assert trees[:5] == [0, 1, 2, 0, 1]


def test_token_count_sessions_extend_the_previous_prompt_and_share_named_prefixes():
    session = {"block_tokens": 64, "prefixes": {"sys": 640}, "turns": [
        {"in": 1000, "out": 5, "prefix": "sys"},
        {"in": 2000, "out": 5},
        {"in": 900, "out": 5, "keep": 640},          # a compaction keeping the prefix
        {"stream": "S", "parent": 0, "in": 700, "out": 5, "prefix": "sys"},
    ]}
    c = corpus_of(session)
    k = [c.turn_keys(j) for j in range(4)]
    assert [x.size for x in k] == [15, 31, 14, 10]
    assert np.array_equal(k[1][:15], k[0])
    assert np.array_equal(k[2][:10], k[0][:10]) and not np.isin(k[2][10:], k[1]).any()
    assert np.array_equal(k[3], k[0][:10])           # only the named prefix is shared


def test_the_measured_phase_opens_when_every_lanes_warmup_is_done():
    # AIPerf runs the cache warm-up turns as a phase of their own: every lane resumes at its
    # t* turn together, when the slowest warm-up has finished, and the window moves with it.
    corpus = corpus_of(linear())
    slow = {0: 3.0, 1: 7.0, 2: 5.0}  # warm-up service time per tree instance

    def service(req):
        first = req.arrival == 0.0
        return slow[req.spec.session] if first else SERVICE

    drv, reqs = replay(corpus, concurrency=3, start=(0.45, 0.45), duration=100.0,
                       service=service)
    warmups = [r for r in reqs if r.arrival == 0.0]
    assert sorted(r.spec.turn for r in warmups) == [4, 4, 4]
    resumed = {r.spec.session: r for r in reqs if r.spec.turn == 5 and r.spec.session < 3}
    assert {s: r.arrival for s, r in resumed.items()} == {0: 7.0, 1: 7.0, 2: 7.0}
    assert drv.measured_window == (7.0, 107.0)
    assert max(r.arrival for r in reqs) < 107.0


def test_lanes_without_warmup_start_at_once_and_a_warmups_subagents_are_history():
    drv, reqs = replay(corpus_of(linear()), concurrency=2, duration=50.0)
    assert drv.measured_window == (0.0, 50.0)
    assert sorted(r.arrival for r in reqs if r.spec.turn == 0)[:2] == [0.0, 0.0]
    # A subagent spawned by the warm-up turn ran before t*: it is not replayed.
    tree = {"turns": [turn(id="r0", t=0.0), turn(id="r1", t=10.0),
                      turn(stream="A", parent="r1", t=11.0, gap=0.0),
                      turn(id="r2", t=20.0), turn(id="r3", t=30.0)]}
    _, reqs = replay(corpus_of(tree), start=(0.5, 0.5), duration=60.0)
    first = sorted((r.arrival, r.spec.turn) for r in reqs if r.spec.session == 0)
    # warm-up r1 (turn 1), then r2 and r3 (turns 2, 3) once it is done; A (turn 4) dropped
    assert first == [(0.0, 1), (1.0, 2), (2.0, 3)]


def test_live_responses_let_the_next_turn_reuse_the_response_blocks():
    # AIPerf's live-assistant mode: the next prompt carries the server's own response, so the
    # blocks over this turn's prompt and output are the next turn's leading keys
    corpus = corpus_of({"session": "live", "turns": [
        turn(**{"in": 640, "out": 200}), turn(**{"in": 1280, "out": 10}),
        turn(**{"in": 1920, "out": 10}, hash_ids=list(range(900, 930)))]})
    plain = TreeInstance(corpus, 0, 0)
    assert all(spec.finish_keys is None for spec in plain.specs)
    live = TreeInstance(corpus, 0, 0, live_responses=True)
    first, second, third = live.specs
    # (640 + 200) // 64 = 13 blocks, the next prompt's first 13
    assert first.finish_keys.tolist() == second.keys[:13].tolist()
    # the third prompt does not extend the second (other keys): nothing to reuse
    assert second.finish_keys is None
    assert third.finish_keys is None     # the stream ends there
