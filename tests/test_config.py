"""Scenario loading: inheritance, overrides, typed specs and every bad-input case (one line, exit 2)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from inferasim.cli.main import cli
from inferasim.config.errors import ConfigError
from inferasim.config.loader import load_scenario
from inferasim.config.overrides import parse_override

BASE = """
name: base
model: {name: llama-3.1-8b}
gpu: {name: h100}
engine: {name: vllm, max_num_seqs: 64}
workload: {format: synthetic, concurrency: 4, duration_s: 30, seed: 7}
"""


def test_extends_deep_merges_later_wins(write_yaml):
    write_yaml("base.yaml", BASE)
    child = write_yaml("child.yaml", "extends: base.yaml\nworkload: {concurrency: 9}\n"
                                     "engine: {page_size: 32}\n")
    sc = load_scenario(child)
    assert sc.workload.concurrency == 9
    assert sc.workload.seed == 7            # inherited, not defaulted
    assert sc.engine.max_num_seqs == 64     # sibling key of a merged mapping survives
    assert sc.engine.page_size == 32
    assert sc.engine.mem_fraction == pytest.approx(0.92)  # from the vllm catalog entry


def test_bases_is_a_synonym_and_lists_merge_in_order(write_yaml):
    write_yaml("a.yaml", BASE)
    write_yaml("b.yaml", "workload: {concurrency: 2, seed: 11}\n")
    child = write_yaml("c.yaml", "bases: [a.yaml, b.yaml]\n")
    sc = load_scenario(child)
    assert (sc.workload.concurrency, sc.workload.seed) == (2, 11)


def test_overrides_are_typed(write_yaml):
    path = write_yaml("s.yaml", BASE)
    sc = load_scenario(path, ["workload.concurrency=8", "engine.kv_dtype=fp8",
                              "workload.rate=0.5", "sim.exact_steps=true"])
    assert sc.workload.concurrency == 8 and isinstance(sc.workload.concurrency, int)
    assert sc.kv_dtype == "fp8"
    assert sc.workload.rate == 0.5
    assert sc.sim.exact_steps is True


def test_scientific_floats_read_as_numbers(write_yaml):
    path = write_yaml("s.yaml", BASE.replace("max_num_seqs: 64", "step_overhead_s: 1e-4"))
    assert load_scenario(path).engine.step_overhead_s == pytest.approx(1e-4)


def test_catalog_fields_arrive_through_inheritance():
    # mi325x extends mi300x: what the base supplies must arrive, not a default.
    sc = load_scenario(None, ["gpu.name=mi325x"])
    assert sc.gpu.name == "mi325x"
    assert sc.gpu.isa == "gfx942"
    assert sc.gpu.hbm_bytes == 256 * 2**30


@pytest.mark.parametrize("overrides, key, words", [
    (["workload.concurency=8"], "workload.concurency", "did you mean 'concurrency'"),
    (["workload.concurrency=many"], "workload.concurrency", "expected an integer"),
    (["model.name=deepseek-r2"], "model.name", "did you mean 'deepseek-r1'"),
    (["gpu.name=h300"], "gpu.name", "unknown gpu"),
    (["engine.name=tgi"], "engine.name", "unknown engine"),
    (["engine.kv_dtype=fp4"], "engine.kv_dtype", "expected one of"),
    (["parallel.tp=3"], "parallel.tp", "must divide"),
    (["model.name=deepseek-r1"], "parallel.tp", "weights need"),
    (["parallel.dp_attention=3", "parallel.tp=2"], "parallel.dp_attention", "must divide"),
    (["engine.name=5"], "engine.name", "got 5; expected an engine name"),
    (["engine.name=sglang", "engine.chunked_prefill_size=16000000"],
     "engine.chunked_prefill_size", "leaves mem_fraction_static at -"),
])
def test_bad_input_names_file_and_key(write_yaml, overrides, key, words):
    path = write_yaml("s.yaml", BASE)
    with pytest.raises(ConfigError) as err:
        load_scenario(path, overrides)
    assert err.value.key == key
    assert words in str(err.value)
    assert err.value.file  # a file (or --set) is always named


def test_missing_file():
    with pytest.raises(ConfigError, match="file not found"):
        load_scenario("/nonexistent/scenario.yaml")


def test_cyclic_extends_detected(write_yaml):
    write_yaml("a.yaml", "extends: b.yaml\n")
    b = write_yaml("b.yaml", "extends: a.yaml\n")
    with pytest.raises(ConfigError, match="cyclic extends"):
        load_scenario(b)


def test_unknown_top_level_key(write_yaml):
    path = write_yaml("s.yaml", BASE + "workloads: {}\n")
    with pytest.raises(ConfigError, match="did you mean 'workload'") as err:
        load_scenario(path)
    assert str(path) in str(err.value)


def test_a_key_given_twice_in_one_mapping_is_refused(write_yaml):
    # YAML keeps the last silently: the value a reader sees first would not be the one run
    path = write_yaml("s.yaml", BASE + "parallel:\n  tp: 1\n  tp: 2\n")
    with pytest.raises(ConfigError, match=r"key 'tp' given twice \(lines \d+ and \d+\)"):
        load_scenario(path)


def test_error_names_the_file_that_set_the_value(write_yaml):
    base = write_yaml("base.yaml", BASE + "parallel: {tp: 3}\n")
    child = write_yaml("child.yaml", "extends: base.yaml\n")
    with pytest.raises(ConfigError) as err:
        load_scenario(child)
    assert err.value.file == str(base)


def test_override_syntax():
    assert parse_override("a.b=1") == ("a.b", 1)
    with pytest.raises(ConfigError):
        parse_override("novalue")


@pytest.mark.parametrize("args", [
    ["run", "--set", "workload.concurency=8"],
    ["run", "/nonexistent.yaml"],
    ["describe", "--set", "model.name=nope"],
    ["run", "--set", "model.name=deepseek-r1"],
])
def test_cli_bad_input_one_line_exit_2(args, tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, [*args, "--out", str(out)] if args[0] == "run" else args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("inferasim: error:")
    assert not out.exists()  # nothing written


def test_scenario_key_reference_is_current():
    from pathlib import Path

    from inferasim.config.docgen import render

    doc = Path(__file__).resolve().parents[1] / "docs" / "scenarios.md"
    assert doc.read_text().strip() == render().strip(), \
        "docs/scenarios.md is stale: python -m inferasim.config.docgen > docs/scenarios.md"


@pytest.mark.parametrize("override, words", [
    ("engine.page_size=0", "at least 1"),
    ("workload.concurrency=-1", "at least 1"),
    ("workload.seed=-1", "at least 0"),
    ("workload.duration_s=-5", "above 0"),
    ("speculative.acceptance=1.5", "at most 1"),
    ("engine.mem_fraction=2", "at most 1"),
    ("workload.rate=0", "above 0"),
    # NaN passes every comparison; a typo'd size would build clients or instances without end
    ("workload.rate=.nan", "expected a finite number"),
    ("engine.step_overhead_s=.inf", "expected a finite number"),
    ("workload.duration_s=.nan", "expected a finite number"),
    ("workload.concurrency=1e30", "at most 1000000,"),
    ("engine.page_size=1e9", "at most 65536,"),
    ("topology.instances=0", "at least 1"),
])
def test_out_of_range_numbers_are_refused(write_yaml, override, words):
    path = write_yaml("s.yaml", BASE)
    key = override.split("=")[0]
    with pytest.raises(ConfigError, match=words) as err:
        load_scenario(path, [override])
    assert err.value.key == key


def test_a_missing_catalog_folder_is_named_not_read_as_an_unknown_model(tmp_path):
    from inferasim.config.catalog import load_entry

    missing = tmp_path / "bases"
    with pytest.raises(ConfigError, match="catalog folder .* is missing") as err:
        load_entry("models", "llama-3.1-8b", key="model.name", origin_file="s.yaml",
                   root=missing)
    assert str(missing) in str(err.value) and "model.name" in str(err.value)


def test_sglang_runs_48_sequences_under_speculative_decoding_unless_told():
    # engines.md 1.2: an EAGLE-family draft (MTP included) sets max_running_requests to 48
    # when the server is not given one; vLLM has no such rule.
    spec = ["speculative.method=mtp", "speculative.draft_tokens=1"]
    assert load_scenario(None, ["engine.name=sglang", *spec]).engine.max_num_seqs == 48
    assert load_scenario(None, ["engine.name=sglang"]).engine.max_num_seqs == 2048
    told = load_scenario(None, ["engine.name=sglang", "engine.max_num_seqs=200", *spec])
    assert told.engine.max_num_seqs == 200
    assert load_scenario(None, ["engine.name=vllm", *spec]).engine.max_num_seqs == 1024


def test_a_yaml_file_is_read_again_when_its_text_changes_and_never_shared(tmp_path):
    # Parsed files are remembered by their text (a search resolves the same catalog entries
    # thousands of times): an edit of the same size, at once, is still read, and what a
    # caller changes in a mapping it got is not what the next reader gets.
    from inferasim.config.yaml_tree import read_yaml_mapping

    path = tmp_path / "entry.yaml"
    path.write_text("a: 1\nextends: x.yaml\n")
    first = read_yaml_mapping(path)
    assert first == {"a": 1, "extends": "x.yaml"}
    first.pop("extends")
    assert read_yaml_mapping(path) == {"a": 1, "extends": "x.yaml"}
    path.write_text("a: 2\nextends: x.yaml\n")
    assert read_yaml_mapping(path) == {"a": 2, "extends": "x.yaml"}
    path.write_text("a: [2\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        read_yaml_mapping(path)


@pytest.mark.parametrize("sets, key, words", [
    # vLLM's --enable-expert-parallel makes one EP group of the whole instance
    (["engine.name=vllm", "parallel.tp=8", "parallel.ep=4"], "parallel.ep",
     "expected parallel.ep 1 or 8"),
    (["engine.name=vllm", "topology.kind=disaggregated", "topology.prefill.parallel.tp=8",
      "topology.prefill.parallel.ep=4"], "topology.prefill.parallel.ep",
     "expected parallel.ep 1 or 8"),
    # TensorRT-LLM's enable_attention_dp gives every rank its own attention
    (["engine.name=trt", "parallel.tp=8", "parallel.ep=8", "parallel.dp_attention=2"],
     "parallel.dp_attention", "expected parallel.dp_attention 1 or 8"),
    (["engine.name=trt", "topology.kind=disaggregated", "topology.decode.parallel.tp=8",
      "topology.decode.parallel.dp_attention=4"], "topology.decode.parallel.dp_attention",
     "expected parallel.dp_attention 1 or 8"),
])
def test_layouts_an_engine_cannot_launch_are_refused_for_a_deployment_and_a_pool(
        sets, key, words):
    base = ["model.name=deepseek-r1", "gpu.name=b200", "parallel.tp=8"]
    with pytest.raises(ConfigError) as err:
        load_scenario(None, base + sets)
    assert err.value.key == key and words in err.value.message
    # the layouts they do launch
    load_scenario(None, base + ["engine.name=vllm", "parallel.ep=8"])
    load_scenario(None, base + ["engine.name=trt", "parallel.ep=8", "parallel.dp_attention=8"])
