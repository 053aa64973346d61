"""The AgentX loader: on small slices of the real corpus (skipped when ../shared/data is absent)
and on a constructed trace; the parsed-corpus cache; context filtering; the source."""

from __future__ import annotations

import gzip
import json
import re

import numpy as np
import pytest

from inferasim.workload import agentx
from inferasim.workload.agentx import fit_context, load_agentx, parse_agentx
from inferasim.workload.lanes import TreeCorpus
from inferasim.workload.trace_stats import corpus_stats
from tests.conftest import shared_data

CORPUS = ("agentx-traces", "traces_v8_present.jsonl.gz")
# trace_0001: plain; trace_0277: a fan-out of three Explore agents and a Plan agent, all
# joined; trace_0010: fan-outs joined at different distances.
SLICE = ("trace_0001", "trace_0277", "trace_0010")


@pytest.fixture(scope="module")
def corpus_slice(tmp_path_factory):
    src = shared_data(*CORPUS)
    found: dict[str, str] = {}
    with gzip.open(src, "rt") as fh:
        for line in fh:
            m = re.match(r'\{\s*"id"\s*:\s*"([^"]+)"', line)
            tid = m.group(1) if m else None
            if tid in SLICE:
                found[tid] = line
            if len(found) == len(SLICE):
                break
    path = tmp_path_factory.mktemp("agentx") / "slice.jsonl"
    path.write_text("".join(found[t] for t in SLICE))
    return path, [json.loads(found[t]) for t in SLICE]


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def test_real_slice_keys_and_lengths_as_recorded(corpus_slice):
    path, traces = corpus_slice
    c = load_agentx(path, use_cache=False)
    assert c.ids == list(SLICE)
    assert c.tree_block.tolist() == [64, 64, 64]
    for tree, trace in enumerate(traces):
        normals = [r for r in trace["requests"] if r["type"] != "subagent"]
        inner = [q for r in trace["requests"] if r["type"] == "subagent" for q in r["requests"]]
        turns = list(c.tree_turns(tree))
        assert len(turns) == len(normals) + len(inner)
        for j, r in zip(turns, normals + inner, strict=True):
            assert c.prompt[j] == r["in"] and c.output[j] == r["out"]
            assert np.array_equal(c.turn_keys(j), np.asarray(r["hash_ids"]))
            assert c.nkeys[j] == r["in"] // 64
    # Prefix-plus-tail storage: far fewer ids stored than the requests hold.
    assert c.keys.size < 0.25 * c.nkeys.sum()


def test_subagent_start_is_completion_minus_duration_and_joins_the_next_parent_turn(corpus_slice):
    path, traces = corpus_slice
    c = load_agentx(path, use_cache=False)
    tree = SLICE.index("trace_0277")
    trace = traces[tree]
    reqs = trace["requests"]
    streams = list(c.tree_streams(tree))
    assert len(streams) == 1 + 4
    normals = [i for i, r in enumerate(reqs) if r["type"] != "subagent"]
    t0 = int(c.tree_turn[tree])
    for s, (i, entry) in zip(streams[1:], [(i, r) for i, r in enumerate(reqs)
                                           if r["type"] == "subagent"], strict=True):
        first = int(c.stream_first[s])
        start = entry["t"] - entry["duration_ms"] / 1000
        assert c.t[first] == pytest.approx(start)
        parent = int(c.parent[s]) - t0
        parent_req = reqs[normals[parent]]
        assert normals[parent] < i < normals[parent + 1]
        parent_end = parent_req["t"] + parent_req["api_time"]
        # The recorded spawn gap: the start lands 0.1-1 s after the parent request ends.
        assert c.gap[first] == pytest.approx(start - parent_end)
        assert 0.0 < c.gap[first] < 1.0
        assert int(c.join[s]) - t0 == parent + 1
    # The first fan-out (three Explore agents) shares one start and the joining turn's
    # end-to-start gap runs from the last completion, not from the parent's own end.
    starts = [c.t[int(c.stream_first[s])] for s in streams[1:4]]
    assert max(starts) - min(starts) < 0.05
    join_turn = int(c.join[streams[1]])
    last_done = max(reqs[i]["t"] for i in (1, 2, 3))
    assert c.gap[join_turn] == pytest.approx(reqs[4]["t"] - last_done)
    assert c.think[join_turn] == reqs[4]["think_time"]


def test_orphans_background_and_async_on_a_constructed_trace(tmp_path):
    def req(t, n, api=1.0):
        return {"type": "n", "t": t, "in": 64 * n, "out": 5, "hash_ids": list(range(1, n + 1)),
                "api_time": api, "think_time": 1.0}

    def sub(t, dur, status="completed", n=3):
        inner = [dict(req(0.0, n), hash_ids=list(range(500, 500 + n))),
                 dict(req(2.0, n + 1), hash_ids=list(range(500, 501 + n)))]
        return {"type": "subagent", "t": t, "agent_id": "a", "duration_ms": dur,
                "status": status, "requests": inner}

    trace = {"id": "trace_x", "block_size": 64, "requests": [
        sub(5.0, 4000),                        # orphan: no parent request before it
        req(0.0, 4), sub(6.0, 4500),           # joined by the next parent request
        req(10.0, 5),
        dict(sub(11.5, None, "async_launched"), duration_ms=None),   # async: background
        req(12.0, 6), sub(20.0, 3000),         # no parent request after it: background
    ]}
    path = tmp_path / "trace_x.json"
    path.write_text(json.dumps(trace))
    c = parse_agentx(path)
    assert c.meta["orphans"] == 1 and c.meta["background"] == 2
    assert c.n_streams == 4 and c.n_turns == 3 + 3 * 2
    joins = c.join[1:].tolist()
    assert joins == [1, -1, -1]
    assert c.parent[1:].tolist() == [0, 1, 2]
    # Async: t is the launch time; completed: t - duration.
    assert c.t[int(c.stream_first[2])] == pytest.approx(11.5)
    assert c.t[int(c.stream_first[1])] == pytest.approx(1.5)
    # The joining request's gap runs from the subagent's completion (t = 6.0).
    assert c.gap[1] == pytest.approx(4.0)
    # A folder of trace_*.json loads the same.
    assert parse_agentx(tmp_path).n_turns == c.n_turns

    # Stripped of its subagents, as the no-subagents corpora were published: the root stream
    # as recorded, and the joining request's gap from its own previous request's end
    # (t = 0 + api 1.0), no longer from the subagent's completion
    bare = c.without_subagents()
    assert bare.n_streams == bare.n_trees == 1 and bare.n_turns == 3
    assert bare.meta["subagents_stripped"] == 3
    assert bare.prompt.tolist() == c.prompt[:3].tolist()
    assert bare.think.tolist() == c.think[:3].tolist()
    for j in range(3):
        assert bare.turn_keys(j).tolist() == c.turn_keys(j).tolist()
    assert bare.gap[1] == pytest.approx(9.0) and bare.gap[2] == pytest.approx(c.gap[2])
    assert bare.without_subagents() is bare


def test_parsed_corpus_is_cached_by_path_size_and_mtime(corpus_slice, tmp_path, monkeypatch):
    path, _ = corpus_slice
    calls = []
    real = agentx.parse_agentx

    def counting(p):
        calls.append(p)
        return real(p)

    monkeypatch.setattr(agentx, "parse_agentx", counting)
    a = load_agentx(path)
    b = load_agentx(path)
    assert len(calls) == 1
    for name, arr in a.arrays().items():
        assert np.array_equal(arr, b.arrays()[name]), name
    assert a.ids == b.ids and a.meta == b.meta
    cached = list((tmp_path / "cache" / "inferasim").glob("agentx-*.npz"))
    assert len(cached) == 1 and isinstance(TreeCorpus.load(cached[0]), TreeCorpus)
    # the file changes: parsed again, and the stale parse of the same source is removed
    # while another source's parse stays
    mine, other = tmp_path / "mine.jsonl", tmp_path / "other.jsonl"
    for p in (mine, other):
        p.write_text(path.read_text())
        load_agentx(p)
    assert len(calls) == 3
    before = set((tmp_path / "cache" / "inferasim").glob("agentx-*.npz"))
    mine.write_text(path.read_text() + "\n")
    load_agentx(mine)
    assert len(calls) == 4
    after = set((tmp_path / "cache" / "inferasim").glob("agentx-*.npz"))
    assert len(before) == len(after) == 3 and len(after - before) == 1


def test_context_filter_drops_whole_trees(corpus_slice):
    path, _ = corpus_slice
    c = load_agentx(path, use_cache=False)
    peak = c.peak_context()
    cut = int(np.sort(peak)[1])
    fitted = fit_context(c, cut)
    assert fitted.n_trees == 2 and fitted.meta["dropped_overlong_trees"] == 1
    kept = [c.ids.index(i) for i in fitted.ids]
    assert fitted.n_turns == sum(int(c.tree_nturns[t]) for t in kept)
    for t_new, t_old in enumerate(kept):
        for j_new, j_old in zip(fitted.tree_turns(t_new), c.tree_turns(t_old), strict=True):
            assert np.array_equal(fitted.turn_keys(j_new), c.turn_keys(j_old))


def test_stats_on_the_slice_match_a_direct_count(corpus_slice):
    path, traces = corpus_slice
    stats = corpus_stats(load_agentx(path, use_cache=False))
    hit = total = 0
    for trace in traces:
        seen: set[int] = set()
        streams = [[r for r in trace["requests"] if r["type"] != "subagent"]]
        streams += [r["requests"] for r in trace["requests"] if r["type"] == "subagent"]
        for r in (r for reqs in streams for r in reqs):   # the tree's turn order
            h = r["hash_ids"]
            k = 0
            while k < len(h) and h[k] in seen:
                k += 1
            hit += k
            total += len(h)
            seen.update(h)
    assert stats["ideal_prefix_reuse"] == pytest.approx(hit / total)
    assert stats["requests"] == sum(len(streams) for streams in
                                    ([r for r in t["requests"] if r["type"] != "subagent"]
                                     + [q for r in t["requests"] if r["type"] == "subagent"
                                        for q in r["requests"]] for t in traces))
    assert stats["sessions"] == 3
    assert stats["subagents"] == sum(r["type"] == "subagent" for t in traces
                                     for r in t["requests"])


def test_source_from_a_scenario_resolves_the_trace_and_filters(corpus_slice, write_yaml):
    from inferasim.config.loader import load_scenario
    from inferasim.workload.agentx import agentx_source

    path, _ = corpus_slice
    scen = write_yaml("s/agentx.yaml", f"""
model: {{name: minimax-m2.5, weight_dtype: mxfp4}}
gpu: {{name: mi355x}}
engine: {{name: vllm}}
workload: {{format: agentx, trace: {path}, concurrency: 2, idle_cap_ms: 5000}}
""")
    sc = load_scenario(scen)
    src = agentx_source(sc, np.random.default_rng(0))
    assert src.driver and src.duration_s == 1800.0 and src.block_tokens == 64
    assert src.idle_cap == 5.0
    assert src.corpus.n_trees <= 3


def test_output_scale_multiplies_each_recorded_output_and_keeps_the_prompts(corpus_slice,
                                                                            write_yaml):
    from inferasim.config.loader import load_scenario
    from inferasim.workload.agentx import agentx_source

    path, _ = corpus_slice
    c = load_agentx(path, use_cache=False)
    assert c.with_output_scale(1.0) is c
    scaled = c.with_output_scale(2.5)
    assert np.array_equal(scaled.output, np.maximum(1, np.rint(c.output * 2.5)))
    assert np.array_equal(scaled.prompt, c.prompt) and scaled.keys is c.keys
    assert scaled.output_per_prompt_token() == pytest.approx(
        scaled.output.sum() / c.prompt.sum())
    assert np.all(c.with_output_scale(1e-6).output == 1)   # never a request with no output
    scen = write_yaml("s/agentx.yaml", f"""
model: {{name: minimax-m2.5, weight_dtype: mxfp4}}
gpu: {{name: mi355x}}
engine: {{name: vllm}}
workload: {{format: agentx, trace: {path}, concurrency: 2, output_scale: 2.5}}
""")
    src = agentx_source(load_scenario(scen), np.random.default_rng(0))
    assert np.array_equal(src.corpus.output, fit_context(scaled, 196608).output)


def test_a_bad_output_scale_names_the_key(write_yaml):
    from inferasim.config.errors import ConfigError
    from inferasim.config.loader import load_scenario

    scen = write_yaml("s/bad.yaml", "workload: {format: agentx, output_scale: 0}\n")
    with pytest.raises(ConfigError, match="output_scale"):
        load_scenario(scen)


@pytest.mark.parametrize("name, content, words", [
    ("count.jsonl", '{"requests": 5}\n', "line 1: not an AgentX trace"),
    ("list.jsonl", '{"id": "a", "requests": []}\n[1, 2]\n', "line 2: not an AgentX trace"),
    ("entry.jsonl", '{"requests": [5]}\n', "line 1: not an AgentX trace"),
    ("length.jsonl", '{"requests": [{"t": 0, "in": "x", "out": 5}]}\n', "invalid literal"),
    ("cut.jsonl", '{"requests": [{"t": 0,\n', "line 1: not JSON"),
    ("empty.jsonl", "\n", "no AgentX trace with requests"),
    ("fake.jsonl.gz", "not gzip", "not a whole gzip file"),
])
def test_malformed_traces_are_errors_naming_the_file_and_line(tmp_path, name, content, words):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(ValueError, match=words) as err:
        parse_agentx(path)
    assert str(path) in str(err.value)


def test_a_truncated_gzip_trace_is_an_error_not_an_abort(tmp_path):
    whole = gzip.compress(("\n".join(json.dumps({"requests": [{"t": i, "in": 10, "out": 1}]})
                                     for i in range(2000)) + "\n").encode())
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ValueError, match="not a whole gzip file"):
        parse_agentx(path)
