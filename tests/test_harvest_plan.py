"""harvest plan: golden plans per engine x speculative method x attention-DP, flags that reach the
engine and survive into the parsed regime, fresh seeds, trust-remote-code, dummy weights."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from inferasim.anchors import normalise as nz
from inferasim.cli.harvest_cmd import harvest
from inferasim.config.errors import ConfigError
from inferasim.config.loader import load_scenario
from inferasim.harvest.plan import build_plan, concurrency_ladder, prefill_isls, read_plan

GOLDEN = Path(__file__).parent / "golden" / "harvest"
SCENARIO = GOLDEN / "dsr1-mi355x.yaml"
SCENARIO_REF = "tests/golden/harvest/dsr1-mi355x.yaml"
DRAFT = "org/DeepSeek-R1-Eagle3"
REGEN = os.environ.get("REGEN_GOLDEN") == "1"  # a test-suite switch, not a simulator knob

#: (engine, speculative method, attention-DP size): a small matrix covering every engine, every
#: method each engine offers, and attention-DP on and off.
MATRIX = [
    ("vllm", "none", 1), ("vllm", "mtp", 1), ("vllm", "mtp", 8), ("vllm", "eagle3", 1),
    ("sglang", "none", 1), ("sglang", "mtp", 8), ("sglang", "eagle3", 1),
    ("mori-sglang", "mtp", 8),
    ("atom", "none", 1), ("atom", "mtp", 8), ("atom", "eagle3", 1), ("atom", "dspark", 8),
]


def overrides(engine: str, method: str, dpa: int) -> list[str]:
    out = [f"engine.name={engine}", f"parallel.dp_attention={dpa}",
           f"parallel.ep={8 if dpa > 1 else 1}"]
    if method != "none":
        out += [f"speculative.method={method}", "speculative.draft_tokens=3"]
    return out


def make_plan(engine: str, method: str, dpa: int, **kw):
    sets = overrides(engine, method, dpa)
    scenario = load_scenario(SCENARIO, sets, check_fit=False)
    if method == "eagle3":
        kw.setdefault("draft_model", DRAFT)
    return build_plan(scenario, scenario_ref=SCENARIO_REF, overrides=sets, **kw)


@pytest.mark.parametrize("engine,method,dpa", MATRIX)
def test_plan_matches_golden(engine, method, dpa):
    plan = make_plan(engine, method, dpa)
    path = GOLDEN / f"{engine}-{method}-dpa{dpa}.json"
    text = json.dumps(plan, indent=1) + "\n"
    if REGEN or not path.exists():
        if not REGEN:
            pytest.fail(f"golden file missing: {path} (REGEN_GOLDEN=1 writes it)")
        path.write_text(text)
    assert json.loads(path.read_text()) == plan


@pytest.mark.parametrize("engine,method,dpa", [m for m in MATRIX if m[1] != "none"])
def test_speculative_flags_reach_the_server_and_survive_into_the_regime(engine, method, dpa):
    plan = make_plan(engine, method, dpa)
    argv = plan["server"]["argv"]
    if engine == "vllm":
        config = json.loads(argv[argv.index("--speculative-config") + 1])
        assert config["method"] == method and config["num_speculative_tokens"] == 3
        assert (config.get("model") == DRAFT) == (method == "eagle3")
    elif engine in ("sglang", "mori-sglang"):
        algo = argv[argv.index("--speculative-algorithm") + 1]
        assert algo == {"mtp": "NEXTN", "eagle3": "EAGLE3"}[method]
        assert argv[argv.index("--speculative-num-steps") + 1] == "3"
        assert argv[argv.index("--speculative-num-draft-tokens") + 1] == "4"
        assert ("--speculative-draft-model-path" in argv) == (method == "eagle3")
    else:
        assert argv[argv.index("--method") + 1] == method
        assert argv[argv.index("--num-speculative-tokens") + 1] == "3"
    # The command, as harvest parse reads it back, states the same regime.
    regime = nz.regime_from_server_args(nz.parse_server_command(plan["server"]["command"]), engine)
    assert regime["spec_method"] == method
    assert regime["draft_tokens"] == 3
    assert regime["tp"] == 8
    if engine != "vllm" or dpa == 1 or "--enable-expert-parallel" in argv:
        assert regime["dp_attention"] == dpa
    assert regime["model"] == "deepseek-r1"


def test_no_speculative_flag_without_a_method():
    for engine in ("vllm", "sglang", "atom"):
        plan = make_plan(engine, "none", 1)
        regime = nz.regime_from_server_args(nz.parse_server_command(plan["server"]["argv"]), engine)
        assert regime["spec_method"] == "none"


def test_sglang_plan_passes_the_receive_interval_and_records_it():
    sets = [*overrides("sglang", "none", 1), "engine.scheduler_recv_interval=30"]
    scenario = load_scenario(SCENARIO, sets, check_fit=False)
    plan = build_plan(scenario, scenario_ref=SCENARIO_REF, overrides=sets)
    argv = plan["server"]["argv"]
    assert argv[argv.index("--scheduler-recv-interval") + 1] == "30"
    assert plan["regime"]["scheduler_recv_interval"] == 30
    assert "--scheduler-recv-interval" not in make_plan("sglang", "none", 1)["server"]["argv"]


def test_each_engine_spells_its_own_flags():
    vllm = make_plan("vllm", "none", 8)["server"]["argv"]
    assert vllm[:3] == ["vllm", "serve", "deepseek-ai/DeepSeek-R1-0528"]
    for flag in ("--tensor-parallel-size", "--data-parallel-size", "--enable-expert-parallel",
                 "--kv-cache-dtype", "--block-size", "--max-num-seqs", "--attention-backend"):
        assert flag in vllm
    assert vllm[vllm.index("--attention-backend") + 1] == "ROCM_AITER_MLA"
    sgl = make_plan("sglang", "none", 8)["server"]["argv"]
    assert sgl[:3] == ["python", "-m", "sglang.launch_server"]
    for flag in ("--tp-size", "--enable-dp-attention", "--dp-size", "--ep-size", "--page-size",
                 "--max-running-requests", "--attention-backend"):
        assert flag in sgl
    assert sgl[sgl.index("--kv-cache-dtype") + 1] == "fp8_e4m3"
    atom = make_plan("atom", "none", 8)["server"]["argv"]
    assert atom[:3] == ["python", "-m", "atom.entrypoints.openai_server"]
    for flag in ("--server-port", "--kv_cache_dtype", "--block-size", "--enable-dp-attention",
                 "--data-parallel-size", "--enable-expert-parallel"):
        assert flag in atom
    assert "--attention-backend" not in atom  # ATOM always runs AITER


def test_clients_per_engine_and_atom_uses_its_vendored_client():
    assert make_plan("vllm", "none", 1)["probes"][0]["argv"][:3] == ["vllm", "bench", "serve"]
    assert make_plan("sglang", "none", 1)["probes"][0]["argv"][:3] == [
        "python", "-m", "sglang.bench_serving"]
    assert make_plan("atom", "none", 1)["probes"][0]["argv"][:3] == [
        "python", "-m", "atom.benchmarks.benchmark_serving"]
    assert make_plan("vllm", "none", 1, client="aiperf")["probes"][0]["argv"][:2] == [
        "aiperf", "profile"]
    with pytest.raises(ConfigError, match="neither vLLM nor SGLang"):
        make_plan("atom", "none", 1, client="vllm-bench")


def test_every_client_run_draws_a_fresh_seed():
    plan = make_plan("vllm", "mtp", 1, repeats=3)
    seeds = [p["seed"] for p in plan["probes"]]
    assert len(seeds) == len(set(seeds))
    by_probe: dict[str, set[int]] = {}
    for p in plan["probes"][1:]:  # after the warm-up
        by_probe.setdefault(p["id"].rsplit("-r", 1)[0], set()).add(p["seed"])
        assert p["argv"][p["argv"].index("--seed") + 1] == str(p["seed"])
    assert all(len(s) == 3 for s in by_probe.values())
    assert make_plan("vllm", "mtp", 1, seed_base=1000)["probes"][0]["seed"] == 1001


@pytest.mark.parametrize("engine,client,flag", [
    ("vllm", None, "--trust-remote-code"), ("atom", None, "--trust-remote-code"),
    ("vllm", "aiperf", "--tokenizer-trust-remote-code")])
def test_trust_remote_code_reaches_the_client(engine, client, flag):
    plan = make_plan(engine, "none", 1, client=client)
    assert "--trust-remote-code" in plan["server"]["argv"]
    assert all(flag in p["argv"] for p in plan["probes"])
    plan = make_plan(engine, "none", 1, client=client, trust_remote_code=False)
    assert "--trust-remote-code" not in plan["server"]["argv"]
    assert not any(flag in p["argv"] for p in plan["probes"])


def test_probes_cover_the_context_curve_and_the_target_batch():
    plan = make_plan("vllm", "none", 8)
    isls = [p["isl"] for p in plan["probes"] if p["kind"] == "prefill"]
    assert len(set(isls)) >= 4 and max(isls) == 2048
    concs = [p["concurrency"] for p in plan["probes"] if p["kind"] == "decode"]
    assert concs == [1, 2, 4, 8, 16, 32, 64]
    assert prefill_isls(100) == [25, 50, 75, 100]
    assert concurrency_ladder(48) == [1, 2, 4, 8, 16, 32, 48]


@pytest.mark.parametrize("engine", ["vllm", "sglang", "atom"])
def test_dummy_weights_need_pinned_acceptance(engine):
    with pytest.raises(ConfigError, match="pin the acceptance"):
        make_plan(engine, "mtp", 1, dummy_weights=True)
    plan = make_plan(engine, "mtp", 1, dummy_weights=True, acceptance_length=2.5)
    argv, env = plan["server"]["argv"], plan["server"]["env"]
    if engine == "vllm":
        config = json.loads(argv[argv.index("--speculative-config") + 1])
        assert config["synthetic_acceptance_length"] == 2.5
        assert argv[argv.index("--load-format") + 1] == "dummy"
    elif engine == "sglang":
        assert env["SGLANG_SIMULATE_ACC_LEN"] == "2.5"
        assert argv[argv.index("--load-format") + 1] == "dummy"
    else:
        assert argv[argv.index("--spec-decode-acceptance-length") + 1] == "2.5"
        assert "--load_dummy" in argv
    assert plan["speculative"]["acceptance_pinned"] == 2.5
    # Without speculation dummy weights need nothing pinned.
    assert "--load_dummy" in make_plan("atom", "none", 1, dummy_weights=True)["server"]["argv"]


def test_acceptance_from_the_scenario_and_its_bounds():
    sets = overrides("atom", "mtp", 1) + ["speculative.acceptance=0.5"]
    scenario = load_scenario(SCENARIO, sets, check_fit=False)
    plan = build_plan(scenario, scenario_ref=SCENARIO_REF, dummy_weights=True)
    assert plan["speculative"]["acceptance_pinned"] == 1.875  # 1 + .5 + .25 + .125
    with pytest.raises(ConfigError, match="draft_tokens"):
        make_plan("atom", "mtp", 1, acceptance_length=5.0)


def test_methods_an_engine_lacks_are_refused():
    with pytest.raises(ConfigError, match="sglang has no speculative method 'dspark'"):
        make_plan("sglang", "dspark", 1)
    # vLLM has no DSpark either (engines.md 7): a plan naming it would fail at launch
    with pytest.raises(ConfigError, match="vllm has no speculative method 'dspark'"):
        make_plan("vllm", "dspark", 8)
    with pytest.raises(ConfigError, match="--draft-model"):
        make_plan("vllm", "eagle3", 1, draft_model=None)
    # a draft model given without speculation would be dropped from the plan unsaid
    with pytest.raises(ConfigError, match="--draft-model: a draft model is for speculative"):
        make_plan("vllm", "none", 1, draft_model=DRAFT)
    with pytest.raises(ConfigError, match="--target-isl: must be at least 1"):
        make_plan("vllm", "none", 1, target_isl=0)


def test_cli_plan_writes_and_prints(tmp_path):
    out = tmp_path / "plan"
    sets = [a for s in overrides("atom", "mtp", 8) for a in ("--set", s)]
    result = CliRunner().invoke(harvest, ["plan", str(SCENARIO), *sets, "--out", str(out),
                                          "--repeats", "2"])
    assert result.exit_code == 0, result.output
    plan = read_plan(out)
    assert len(plan["probes"]) == 1 + 2 * (5 + 7)  # warm-up, ISLs 128..2048, ladder 1..64
    assert "python -m atom.entrypoints.openai_server" in result.output
    assert "--method mtp --num-speculative-tokens 3" in result.output


def test_cli_config_error_is_one_line_and_exit_2(tmp_path):
    result = CliRunner().invoke(harvest, ["plan", str(SCENARIO), "--set", "engine.name=sglang",
                                          "--set", "speculative.method=dspark", "--set",
                                          "speculative.draft_tokens=2", "--out", str(tmp_path)])
    assert result.exit_code == 2
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("inferasim: error:")


@pytest.mark.parametrize("value", ["nan", "-5", "inf"])
def test_cli_run_timeouts_are_finite_seconds_above_0(tmp_path, value):
    result = CliRunner().invoke(harvest, ["run", str(tmp_path), "--health-timeout", value])
    assert result.exit_code == 2
    assert "expected a finite number of seconds above 0" in result.output


def test_atom_client_pins_fixed_lengths_with_its_legacy_range_ratio():
    """ATOM's vendored client draws lengths in [ratio x L, L]: ratio 0 would send prompts of
    any length down to zero, so a prefill probe would measure nothing it is labelled with."""
    from inferasim.harvest.plan import client_command

    argv, _ = client_command("atom-bench", model_path="m", host="127.0.0.1", port=8000,
                             isl=1024, osl=16, concurrency=1, num_prompts=8, seed=1,
                             result="results/x.json", trust_remote_code=False)
    assert argv[argv.index("--random-range-ratio") + 1] == "1.0"
    argv, _ = client_command("vllm-bench", model_path="m", host="127.0.0.1", port=8000,
                             isl=1024, osl=16, concurrency=1, num_prompts=8, seed=1,
                             result="results/x.json", trust_remote_code=False)
    assert argv[argv.index("--random-range-ratio") + 1] == "0"


@pytest.mark.parametrize("edit, key", [
    (lambda p: p["server"].pop("argv"), "server.argv"),
    (lambda p: p["server"].update(argv="vllm serve"), "server.argv"),
    (lambda p: p["server"].pop("health_url"), "server.health_url"),
    (lambda p: p["probes"][0].pop("id"), "probes[0].id"),
    (lambda p: p["probes"][1].update(argv=[]), "probes[1].argv"),
    (lambda p: p["probes"][0].update(result=3), "probes[0].result"),
    (lambda p: p["server"].update(env=["A=1"]), "server.env"),
    (lambda p: p.update(client={"env": "A=1"}), "client.env"),
    (lambda p: p.update(capture=["nvidia-smi"]), "capture"),
    (lambda p: p["capture"].update(gpu=["rocm-smi"]), "capture.gpu"),
    (lambda p: p["server"].update(health_timeout_s="soon"), "server.health_timeout_s"),
    (lambda p: p["server"].update(health_timeout_s=-5), "server.health_timeout_s"),
])
def test_a_hand_edited_plan_is_refused_at_the_key_it_breaks(tmp_path, edit, key):
    # harvest run reads these nested keys; a plan missing one fails on reading, naming it,
    # not with a KeyError part-way through a run
    plan = make_plan("vllm", "none", 1)
    edit(plan)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    with pytest.raises(ConfigError) as err:
        read_plan(tmp_path)
    assert err.value.key == key and err.value.file == str(path)


# ---- TensorRT-LLM -------------------------------------------------------------------------------

TRT = ["engine.name=trt", "gpu.name=b200", "parallel.tp=8", "parallel.ep=8",
       "parallel.dp_attention=8", "speculative.method=mtp", "speculative.draft_tokens=3",
       "engine.kv_dtype=fp8"]


def test_trt_is_launched_by_trtllm_serve_with_its_options_file():
    import yaml

    from inferasim.harvest.plan import render
    from inferasim.harvest.trt_launch import OPTIONS_FILE

    plan = build_plan(load_scenario(SCENARIO, TRT, check_fit=False), scenario_ref="s.yaml")
    argv = plan["server"]["argv"]
    assert argv[:2] == ["trtllm-serve", "deepseek-ai/DeepSeek-R1-0528"]
    args = nz.parse_server_command(argv)
    assert (args["model"], args["tp_size"], args["ep_size"]) == (
        "deepseek-ai/DeepSeek-R1-0528", "8", "8")
    assert args["extra_llm_api_options"] == OPTIONS_FILE and args["trust_remote_code"] is True
    options = yaml.safe_load(plan["server"]["files"][OPTIONS_FILE])
    assert options["enable_attention_dp"] is True
    assert options["kv_cache_config"] == {"enable_block_reuse": True, "tokens_per_block": 32,
                                          "dtype": "fp8"}
    assert options["scheduler_config"] == {"capacity_scheduler_policy": "GUARANTEED_NO_EVICT"}
    assert options["speculative_config"] == {"decoding_type": "MTP",
                                             "num_nextn_predict_layers": 3}
    assert plan["client"]["tool"] == "trt-bench"
    assert plan["probes"][0]["argv"][:3] == ["python", "-m",
                                             "tensorrt_llm.serve.scripts.benchmark_serving"]
    assert "tensorrt_llm" in " ".join(plan["capture"]["version"])
    text = render(plan)
    assert f"cat > {OPTIONS_FILE} <<'EOF'" in text
    assert text.index(OPTIONS_FILE) < text.index("trtllm-serve")  # written before the launch


def test_trt_layouts_and_methods_it_cannot_launch_are_refused():
    # attention DP over some of the ranks: TensorRT-LLM has no such layout (the loader says)
    with pytest.raises(ConfigError) as err:
        load_scenario(SCENARIO, TRT + ["parallel.dp_attention=2"], check_fit=False)
    assert err.value.key == "parallel.dp_attention"
    with pytest.raises(ConfigError) as err:
        build_plan(load_scenario(SCENARIO, TRT + ["speculative.method=eagle3"], check_fit=False),
                   scenario_ref="s.yaml", draft_model=DRAFT)
    assert err.value.key == "speculative.method"


def test_a_hand_edited_plan_may_not_write_outside_its_folder(tmp_path):
    from inferasim.harvest.plan import write_plan

    plan = build_plan(load_scenario(SCENARIO, TRT, check_fit=False), scenario_ref="s.yaml")
    plan["server"]["files"] = {"../escape.yaml": "x"}
    write_plan(plan, tmp_path)
    with pytest.raises(ConfigError) as err:
        read_plan(tmp_path)
    assert err.value.key == "server.files"


def test_the_cli_offers_every_client_the_plan_knows_and_defaults_the_scenario(tmp_path):
    from inferasim.harvest.plan import CLIENTS

    option = next(p for p in harvest.commands["plan"].params if p.name == "client")
    assert tuple(option.type.choices) == CLIENTS
    res = CliRunner().invoke(harvest, ["plan", "--out", str(tmp_path / "p"), "--set",
                                       "engine.name=trt"])
    assert res.exit_code == 0, res.output
    assert read_plan(tmp_path / "p")["scenario"]["name"] == "quickstart"


def test_a_disaggregated_deployment_is_refused_with_each_pools_layout_to_plan():
    from inferasim.config.catalog import REPO_ROOT

    path = REPO_ROOT / "scenarios" / "inferencemax" / "dsr1-b200-dynamo-trt-fp8-disagg.yaml"
    with pytest.raises(ConfigError) as err:
        build_plan(load_scenario(path, check_fit=False), scenario_ref=str(path))
    assert err.value.key == "topology.kind"
    assert "prefill: --set parallel.tp=8 --set parallel.ep=8 --set parallel.dp_attention=8" \
        in str(err.value)
