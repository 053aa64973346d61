"""A disaggregated decode instance's preallocation (SGLang PD): pages taken ahead of the KV,
then the transferred request admitted into them, then released. Property: whatever the order,
the pool's private count is what the requests hold, nothing more is taken than the pool has
less what is kept free, and everything comes back."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from inferasim.serve.kv_manager import KVManager
from inferasim.serve.live import LiveRequest
from inferasim.workload.request import RequestSpec

CAPACITY, PAGE = 4096, 16

ops = st.lists(st.tuples(st.sampled_from(["prealloc", "admit", "release"]),
                         st.integers(1, 1500), st.integers(0, 600), st.integers(0, 30)),
               max_size=60)


def _req(i: int, prompt: int) -> LiveRequest:
    spec = RequestSpec(prompt, 8, np.zeros(0, dtype=np.int64), 16)
    req = LiveRequest(i, spec, 0.0, None)
    req.target = prompt
    return req


@settings(max_examples=150, deadline=None)
@given(ops)
def test_preallocation_keeps_the_pool_accounted(seq):
    kv = KVManager(CAPACITY, PAGE, 16, "leaf-lru", prefix_caching=False)
    held: list[LiveRequest] = []     # preallocated, KV not yet arrived
    admitted: list[LiveRequest] = []
    for n, (op, prompt, keep, pick) in enumerate(seq):
        if op == "prealloc":
            req = _req(n, prompt)
            free_before = kv.available
            if kv.preallocate(req, keep):
                assert kv.pages(prompt) + keep <= free_before
                assert req.private == kv.pages(prompt) and req.computed == 0
                held.append(req)
            else:
                assert kv.pages(prompt) + keep > free_before and not req.private
        elif op == "admit" and held:
            req = held.pop(pick % len(held))
            req.prefilled = True
            before = kv.pool.free
            assert kv.try_admit(req, 0.0)
            assert kv.pool.free == before and req.computed == req.target  # no second allocation
            admitted.append(req)
        elif op == "release" and (held or admitted):
            group = held if held and (pick % 2 or not admitted) else admitted
            kv.release(group.pop(pick % len(group)))
        kv.pool.check()
        assert kv.pool.private == sum(r.private for r in held + admitted)
    for req in held + admitted:
        kv.release(req)
    assert kv.pool.free == kv.pool.capacity and kv.pool.private == 0
