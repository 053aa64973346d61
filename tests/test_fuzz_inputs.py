"""Issue 32: whatever a user feeds in (a scenario with mutated keys, values and types,
``--set`` strings, the five workload formats' traces with corrupted lines and fields, anchor
files), inferasim exits 0 or 2, never with a traceback, and a failed command leaves nothing
in ``--out``. Derandomized and bounded so it is deterministic and runs in seconds."""

from __future__ import annotations

import copy
import gzip
import json
import tempfile
from pathlib import Path

import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inferasim.cli.main import cli

ROOT = Path(__file__).resolve().parents[1]
FUZZ = settings(max_examples=20, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow])
BASE = {"name": "fuzz", "model": {"name": "llama-3.1-8b"}, "gpu": {"name": "h100"},
        "engine": {"name": "vllm"}, "parallel": {"tp": 1},
        "workload": {"format": "synthetic", "concurrency": 2, "duration_s": 3, "seed": 1}}
# a replay kept short whatever was fuzzed: these come last, so they win
SHORT = ["--set", "workload.duration_s=2", "--set", "workload.max_requests=20",
         "--set", "workload.concurrency=2"]
# examples for the tests that replay (each a short run); the others take FUZZ's 20
REPLAYS = settings(FUZZ, max_examples=10)

junk = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                 st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
                 st.lists(st.integers(-5, 5), max_size=3),
                 st.dictionaries(st.text(max_size=5), st.integers(), max_size=2))


def check(result, out: Path | None = None) -> None:
    """Exit 0 or 2 with no traceback; a failure leaves ``out`` absent and no temp sibling."""
    text = result.output
    assert "Traceback" not in text, text
    assert result.exit_code in (0, 2), (result.exit_code, text, result.exception)
    if result.exception is not None:
        assert isinstance(result.exception, SystemExit), repr(result.exception)
    if out is not None and result.exit_code != 0:
        assert not out.exists(), text
        assert not [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}-")]


def fresh() -> tempfile.TemporaryDirectory:
    """A folder per example (pytest's tmp_path is one for all of a test's examples)."""
    return tempfile.TemporaryDirectory(prefix="inferasim-fuzz-")


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def _paths(tree, prefix=()):
    for key, value in tree.items():
        yield (*prefix, key)
        if isinstance(value, dict):
            yield from _paths(value, (*prefix, key))


@st.composite
def mutated_scenarios(draw):
    data = copy.deepcopy(BASE)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(list(_paths(data)) or [("name",)]))
        node = data
        for part in path[:-1]:
            node = node.get(part) if isinstance(node.get(part), dict) else {}
        action = draw(st.sampled_from(["value", "drop", "rename", "add"]))
        if action == "value":
            node[path[-1]] = draw(junk)
        elif action == "drop":
            node.pop(path[-1], None)
        elif action == "rename":
            node[path[-1] + draw(st.sampled_from(["x", "_s", "s"]))] = node.pop(path[-1], None)
        else:
            node[draw(st.text("abcdefghijklmnopqrstuvwxyz_.", min_size=1, max_size=10))] = \
                draw(junk)
    text = yaml.safe_dump(data, sort_keys=False)
    if draw(st.booleans()):  # a syntax error: a character dropped, doubled or a tab
        i = draw(st.integers(0, max(0, len(text) - 1)))
        text = text[:i] + draw(st.sampled_from(["", "\t", "{", "[", ":", "'", text[i:i + 1]]))\
            + text[i + 1:]
    return text


@REPLAYS
@given(text=mutated_scenarios())
def test_fuzzed_scenarios_exit_0_or_2_and_leave_no_partial_output(text):
    with fresh() as folder:
        tmp_path = Path(folder)
        path = tmp_path / "s.yaml"
        path.write_text(text)
        check(invoke("describe", path, "--json"))
        out = tmp_path / "out"
        check(invoke("run", path, *SHORT, "--out", out), out)


set_keys = st.sampled_from(["workload.concurrency", "workload.isl", "workload.rate",
                            "workload.duration_s", "engine.max_num_seqs", "parallel.tp",
                            "engine.name", "model.name", "workload.format", "nope.key",
                            "workload", "engine.kv_pool_tokens", "topology.kind", ""])
set_values = st.one_of(st.sampled_from(["", "0", "-1", "1e12", "nan", "[1, 2]", "{a: 1}",
                                        "true", "vllm", "sglang", "random", "4", "x=y"]),
                       st.text(max_size=8))


@FUZZ
@given(sets=st.lists(st.tuples(set_keys, set_values), min_size=1, max_size=3),
       raw=st.booleans())
def test_fuzzed_set_strings_exit_0_or_2(sets, raw):
    args = []
    for key, value in sets:
        args += ["--set", key if raw and not value else f"{key}={value}"]
    check(invoke("describe", *args))


def _mooncake(i):
    return {"timestamp": i * 100, "input_length": 600, "output_length": 4, "hash_ids": [i, i + 1]}


def _bailian(i):
    return {"chat_id": i, "parent_chat_id": i - 1 if i % 2 else -1, "timestamp": i * 0.1,
            "input_length": 100, "output_length": 4, "turn": 1, "hash_ids": [i]}


def _agentx(i):
    return {"id": f"t{i}", "requests": [{"t": 0, "in": 100, "out": 4},
                                        {"t": 1.0, "in": 150, "out": 4}]}


def _sessions(i):
    return {"session": f"s{i}", "turns": [{"id": "a", "in": 100, "out": 4, "t": 0.0},
                                          {"id": "b", "in": 160, "out": 4, "t": 2.0,
                                           "think": 1.0}]}


ROWS = {"mooncake": _mooncake, "bailian": _bailian, "agentx": _agentx, "sessions": _sessions}


@st.composite
def corrupted_traces(draw):
    fmt = draw(st.sampled_from(sorted(ROWS)))
    rows = [ROWS[fmt](i) for i in range(4)]
    for _ in range(draw(st.integers(0, 2))):
        row = rows[draw(st.integers(0, len(rows) - 1))]
        field = draw(st.sampled_from(sorted(row)))
        if draw(st.booleans()):
            row[field] = draw(junk)
        else:
            row.pop(field)
    lines = [json.dumps(r) for r in rows]
    damage = draw(st.sampled_from(["none", "cut-line", "garbage", "gzip", "cut-gzip"]))
    if damage == "cut-line":
        lines[-1] = lines[-1][: len(lines[-1]) // 2]
    elif damage == "garbage":
        lines.insert(draw(st.integers(0, len(lines))), draw(st.text(max_size=10)))
    data = ("\n".join(lines) + "\n").encode()
    if damage in ("gzip", "cut-gzip"):
        data = gzip.compress(data)
        if damage == "cut-gzip":
            data = data[: len(data) // 2]
    return fmt, damage, data


@REPLAYS
@given(trace=corrupted_traces())
def test_fuzzed_traces_of_every_format_exit_0_or_2(trace):
    with fresh() as folder:
        tmp_path = Path(folder)
        fmt, damage, data = trace
        path = tmp_path / ("t.jsonl.gz" if "gzip" in damage else "t.jsonl")
        path.write_bytes(data)
        out = tmp_path / "out"
        check(invoke("run", "--set", f"workload.format={fmt}", "--set", f"workload.trace={path}",
                     *SHORT, "--out", out), out)


@REPLAYS
@given(sets=st.lists(st.tuples(st.sampled_from(
    ["first_prompt_tokens_median", "turns_mean", "output_sigma", "max_prompt_tokens",
     "block_tokens", "think_time_median_s", "nope"]), junk.map(str)), min_size=1, max_size=2))
def test_fuzzed_synthetic_workloads_exit_0_or_2(sets):
    with fresh() as folder:
        tmp_path = Path(folder)
        args = []
        for key, value in sets:
            args += ["--set", f"workload.synthetic.{key}={value}"]
        out = tmp_path / "out"
        check(invoke("run", *args, *SHORT, "--out", out), out)


SHIPPED = json.loads((ROOT / "anchors" / "inferencemax-dsr1.json").read_text())


@st.composite
def mutated_anchor_files(draw):
    doc = copy.deepcopy(SHIPPED)
    doc["anchors"] = doc["anchors"][:2]
    for _ in range(draw(st.integers(1, 3))):
        target = draw(st.sampled_from(["top", "anchor", "nested"]))
        anchors = doc.get("anchors")
        first = anchors[0] if isinstance(anchors, list) and anchors else None
        node = doc if target == "top" or not isinstance(first, dict) else first
        if target == "nested":
            dicts = [k for k, v in node.items() if isinstance(v, dict)]
            node = node[draw(st.sampled_from(dicts))] if dicts else node
        if not isinstance(node, dict) or not node:
            continue
        key = draw(st.sampled_from(sorted(node)))
        if draw(st.booleans()):
            node[key] = draw(junk)
        else:
            node.pop(key)
    text = json.dumps(doc)
    if draw(st.booleans()):
        text = text[: draw(st.integers(0, len(text)))]
    return text


@FUZZ
@given(text=mutated_anchor_files(), tool=st.sampled_from(["vllm-bench", "aiperf",
                                                         "sglang-bench", "inferencemax"]))
def test_fuzzed_anchor_files_exit_0_or_2(text, tool):
    with fresh() as folder:
        tmp_path = Path(folder)
        path = tmp_path / "a.json"
        path.write_text(text)
        check(invoke("anchors", "list", "--anchors", path, "--json"))
        out = tmp_path / "imported.json"
        result = invoke("anchors", "import", path, "--from", tool, "--out", out)
        check(result)
        if result.exit_code != 0:
            assert not out.exists()
