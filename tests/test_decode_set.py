"""The decode arrays against a plain per-request model: random streams of joins, leaves and
steps (the whole batch or some rows), checked after every event. The remembered views
(context, next finish) must equal what the arrays give freshly, and finishes must come at the
step the float token formula says."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from inferasim.serve.decode_set import DecodeSet, finish_step
from inferasim.serve.live import LiveRequest
from inferasim.workload.request import RequestSpec

EVENT = st.tuples(st.sampled_from(("add", "add", "step_all", "step_rows", "remove")),
                  st.integers(1, 40), st.integers(1, 600), st.integers(0, 2**16))


def _request(rid: int, prompt: int, output: int) -> LiveRequest:
    spec = RequestSpec(prompt, output, np.arange(prompt // 16, dtype=np.int64), 16)
    req = LiveRequest(rid, spec, 0.0, None)
    req.gen_base = req.generated = 1.0  # the prompt's step sampled one token
    return req


@settings(max_examples=60, deadline=None)
@given(st.lists(EVENT, min_size=1, max_size=80), st.sampled_from((1.0, 2.6)),
       st.sampled_from((0, 3, 10**6)))
def test_views_and_finishes_follow_the_per_request_model(events, advance, few_rows):
    dec = DecodeSet(advance, capacity=2)  # small, so rows outgrow it
    dec.few_rows = few_rows  # the numpy path, both by size, the Python-float path
    steps_done: dict[int, int] = {}  # rid -> decode steps, the model
    rid = 0
    for kind, small, big, pick in events:
        if kind == "add":
            req = _request(rid, 100 + big, 1 + small * 3)
            dec.add(req)
            steps_done[rid] = 0
            rid += 1
        elif not dec.reqs:
            continue
        elif kind == "remove":
            req = dec.reqs[pick % len(dec.reqs)]
            dec.remove(req)
            assert req.decode_steps == steps_done.pop(req.rid) and req.row == -1
        else:
            # the engine never steps a row past its finish: at most up to the next finish
            steps = max(1, min(small, int(dec.next_finish())))
            rows = None if kind == "step_all" else np.array(
                sorted({pick % len(dec.reqs), (pick // 7) % len(dec.reqs)}), dtype=np.int64)
            moved = [r.rid for r in dec.reqs] if rows is None else [dec.reqs[i].rid for i in rows]
            done = dec.add_steps(rows, steps)
            for r in moved:
                steps_done[r] += steps
            finished = {dec.reqs[i].rid for i in done}
            for req in list(dec.reqs):
                gen = req.gen_base + steps_done[req.rid] * advance
                assert (req.rid in finished) == (gen >= req.spec.output_tokens)
            for r in finished:
                dec.remove(next(q for q in dec.reqs if q.rid == r))
                steps_done.pop(r)
        if dec.reqs:
            fresh = dec.fin[: len(dec)] - dec.steps[: len(dec)]
            assert dec.next_finish() == fresh.min()
            expect = [q.spec.prompt_tokens + (q.gen_base + steps_done[q.rid] * advance)
                      for q in dec.reqs]
            np.testing.assert_array_equal(dec.context(), expect)
            # three steps ahead by the same formula (not context + 3 x advance, which rounds
            # differently): a step priced ahead must match the one taken singly
            ahead = [q.spec.prompt_tokens + (q.gen_base + (steps_done[q.rid] + 3) * advance)
                     for q in dec.reqs]
            np.testing.assert_array_equal(dec.context_after(3), ahead)


def test_finish_step_is_the_first_step_reaching_the_output():
    for base, output, advance in ((1.0, 512, 1.0), (1.0, 7, 2.6), (3.6, 100, 2.6), (1.0, 1, 1.0)):
        s = finish_step(base, output, advance)
        assert base + s * advance >= output
        assert s == 1 or base + (s - 1) * advance < output
        assert s == max(1, math.ceil((output - base) / advance)) or advance != 1.0
