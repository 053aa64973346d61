"""A cached rung or search replay is keyed by what decides it: the resolved scenario and
knobs, and the code, anchors and trace it replays with (config.fingerprint)."""

from __future__ import annotations

import shutil

from inferasim.config import fingerprint
from inferasim.config.knobs import Knobs
from inferasim.config.loader import load_scenario
from inferasim.sweep.resume import task_key

TRACE = "traces/agentic-small.jsonl"


def _key(sc) -> str:
    return task_key((sc, Knobs()))


def test_the_same_inputs_give_the_same_key():
    a = load_scenario(None, [])
    b = load_scenario(None, [])
    assert _key(a) == _key(b)
    assert _key(a) != _key(load_scenario(None, ["workload.concurrency=17"]))


def test_an_edited_anchor_folder_changes_the_key(tmp_path):
    shutil.copy("anchors/inferencemax-dsr1.json", tmp_path / "a.json")
    sc = load_scenario(None, [f"sim.anchors={tmp_path}"])
    before = _key(sc)
    assert _key(sc) == before
    (tmp_path / "b.json").write_text((tmp_path / "a.json").read_text())
    assert _key(sc) != before  # a file added: the calibration may read it
    after_add = _key(sc)
    (tmp_path / "b.json").unlink()
    assert _key(sc) == before
    (tmp_path / "notes.txt").write_text("not an anchor")
    assert _key(sc) == before  # only anchor files count
    assert after_add != before


def test_an_edited_trace_changes_the_key(tmp_path):
    trace = tmp_path / "t.jsonl"
    shutil.copy(TRACE, trace)
    sc = load_scenario("scenarios/agentic-quickstart.yaml", [f"workload.trace={trace}"])
    before = _key(sc)
    lines = trace.read_text().splitlines(keepends=True)
    trace.write_text("".join(lines[:-1]))  # one session tree fewer
    assert _key(sc) != before


def test_changed_code_changes_the_key(tmp_path, monkeypatch):
    package = tmp_path / "inferasim"
    shutil.copytree(fingerprint.PACKAGE, package,
                    ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(fingerprint, "PACKAGE", package)
    fingerprint.code_digest.cache_clear()
    try:
        sc = load_scenario(None, [])
        before = _key(sc)
        fingerprint.code_digest.cache_clear()
        assert _key(sc) == before  # the same sources read again
        with (package / "serve" / "engine.py").open("a") as fh:
            fh.write("\n# an edit\n")
        fingerprint.code_digest.cache_clear()
        assert _key(sc) != before
    finally:
        fingerprint.code_digest.cache_clear()


def test_a_trace_removed_after_loading_is_keyed_by_its_name(tmp_path):
    trace = tmp_path / "t.jsonl"
    shutil.copy(TRACE, trace)
    sc = load_scenario("scenarios/agentic-quickstart.yaml", [f"workload.trace={trace}"])
    assert set(fingerprint.inputs_digest(sc)) == {"code", "anchors", "trace"}
    trace.unlink()
    assert fingerprint.inputs_digest(sc)["trace"] == f"unresolved {trace}"


def test_a_scenario_without_anchors_has_no_anchor_digest():
    sc = load_scenario(None, ["sim.anchors=none"])
    assert set(fingerprint.inputs_digest(sc)) == {"code"}
