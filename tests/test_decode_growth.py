"""Decode page growth (``grow_decoders``): the Python-float path a few rows take and the numpy
path of many rows give the same pages, the same pool and the same answer, and both equal
growing each request on its own (``KVManager.grow``), all or none."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from inferasim.serve.decode_set import DecodeSet
from inferasim.serve.kv_manager import KVManager
from inferasim.serve.live import LiveRequest
from inferasim.serve.scheduler import grow_decoders
from inferasim.workload.request import RequestSpec

# (prompt tokens, of which cached blocks, decode steps taken, spare pages held)
ROW = st.tuples(st.integers(1, 3000), st.integers(0, 200), st.integers(0, 400),
                st.integers(0, 2))


def _engine(rows, page: int, advance: float, width: int, spare_tokens: int, few_rows: int):
    probe = KVManager(10**9, page, 16, "leaf-lru", True)
    held = []
    for prompt, cached_blocks, steps_done, spare in rows:
        tree = min(cached_blocks * 16, prompt - prompt % 16)
        context = prompt + (1.0 + steps_done * advance)
        held.append((tree, probe.pages(context - tree) + spare * page))
    kv = KVManager(sum(p for _, p in held) + spare_tokens, page, 16, "leaf-lru", True)
    dec = DecodeSet(advance)
    dec.few_rows = few_rows
    for rid, ((prompt, _, steps_done, _), (tree, private)) in enumerate(zip(rows, held,
                                                                            strict=True)):
        spec = RequestSpec(prompt, 10**6, np.arange(prompt // 16, dtype=np.int64), 16)
        req = LiveRequest(rid, spec, 0.0, None)
        req.gen_base = req.generated = 1.0
        req.decode_steps = steps_done
        req.tree_tokens, req.private = tree, private
        assert kv.pool.alloc_private(private)
        dec.add(req)
    return SimpleNamespace(decoding=dec, width=width, kv=kv)


@settings(max_examples=150, deadline=None)
@given(st.lists(ROW, min_size=1, max_size=40), st.sampled_from((1, 16, 64)),
       st.sampled_from((1.0, 2.6)), st.sampled_from((1, 4)), st.integers(1, 200),
       st.integers(0, 3000))
def test_few_and_many_rows_grow_alike_and_as_each_request_would(rows, page, advance, width,
                                                                 steps, spare_tokens):
    outcomes = []
    for few_rows in (0, 10**6):
        eng = _engine(rows, page, advance, width, spare_tokens, few_rows)
        dec = eng.decoding
        before = dec.cap[: len(dec)].copy()
        # each request alone: KVManager.grow's pages for the context after the steps
        need = [eng.kv.pages(c + width - t) - (cap - t)
                for c, cap, t in zip(dec.context_after(steps - 1).tolist(), before.tolist(),
                                     dec.tree[: len(dec)].tolist(), strict=True)]
        free = eng.kv.pool.free
        ok = grow_decoders(eng, steps)
        after = dec.cap[: len(dec)].tolist()
        total = sum(max(0, d) for d in need)
        assert ok == (total <= free)
        if ok:
            assert after == [c + max(0, d) for c, d in zip(before.tolist(), need, strict=True)]
            assert eng.kv.pool.free == free - total
        else:
            assert after == before.tolist() and eng.kv.pool.free == free
        outcomes.append((ok, after, eng.kv.pool.free))
    assert outcomes[0] == outcomes[1]
