"""The colocated closed loop in closed form (``validate.anchors.predict_closed_form``), used
for loads too wide to replay: its running slots are the engine's limit and what the KV pool
holds, and a client beyond them waits for one."""

from __future__ import annotations

import attrs
import pytest

from inferasim.anchors.record import AnchorRecord
from inferasim.anchors.store import AnchorStore
from inferasim.arch.memory import memory_plan
from inferasim.config.catalog import REPO_ROOT
from inferasim.config.knobs import Knobs
from inferasim.config.loader import load_scenario
from inferasim.validate.anchors import predict_closed_form

SCENARIO = REPO_ROOT / "scenarios" / "inferencemax" / "dsr1-mi355x-sglang-fp8-tp8.yaml"
ISL, OSL = 1024, 8192


def _record(conc: int, step: float, ttft: float) -> AnchorRecord:
    return AnchorRecord.from_dict({
        "id": f"t-cf-c{conc}", "provenance": {"source": "test"},
        "regime": {"model": "deepseek-r1", "engine": "sglang", "gpu": "mi355x",
                   "weight_dtype": "fp8", "spec_method": "none", "tp": 8, "ep": 1,
                   "dp_attention": 1, "num_gpus": 8},
        "workload": {"isl": ISL, "osl": OSL, "concurrency": conc},
        "measurements": {"itl_median_s": step, "tpot_mean_s": step, "ttft_median_s": ttft},
    })


def _at(scenario, conc: int):
    wl = attrs.evolve(scenario.workload, format="random", isl=ISL, osl=OSL, concurrency=conc,
                      rate=None)
    return attrs.evolve(scenario, workload=wl, engine=attrs.evolve(scenario.engine, version=""))


def test_clients_past_what_the_pool_holds_wait_a_decode_for_a_slot():
    # a bf16 KV cache (the launch script's older version): its pool holds between 64 and 512
    scenario = load_scenario(SCENARIO, ["engine.version=", "engine.kv_dtype=bf16"])
    anchors = AnchorStore([_record(4, 0.011, 0.15), _record(64, 0.026, 0.6)])
    fits = memory_plan(scenario).kv_pool_tokens // (ISL + OSL / 2)
    assert 64 < fits < 512
    within, past = (predict_closed_form(_at(scenario, c), anchors, Knobs())[0]
                    for c in (64, 512))
    decode = within["tpot"] * (OSL - 1)
    assert within["ttft"] < 0.05 * decode
    # the step is priced at the batch the pool holds, and the rest of the clients wait
    wait = past["tpot"] * (OSL - 1) * (512 / fits - 1)
    assert past["ttft"] == pytest.approx(wait, rel=0.1)
    held = predict_closed_form(_at(scenario, int(fits)), anchors, Knobs())[0]
    assert past["tpot"] == pytest.approx(held["tpot"], rel=1e-6)
    assert past["tput_per_gpu"] == pytest.approx(held["tput_per_gpu"], rel=0.05)


def test_guaranteed_no_evict_caps_the_batch_at_whole_reserved_sequences():
    """TensorRT-LLM holds each running request's prompt and max_tokens from admission: the
    closed form's batch cap reads the clients' max_tokens, or the engine's longest request
    where they send none (the replay admits so, EngineCore.admission_reserve)."""
    from inferasim.sweep.projection import _batch_cap, workload_moments

    chat = load_scenario(None, ["engine.name=trt"])
    pool = memory_plan(chat).kv_pool_tokens
    m = workload_moments(chat)
    assert m.sent_sequence is None
    assert _batch_cap(chat, pool, m) == pytest.approx(pool / 131_072)
    loose = attrs.evolve(chat, engine=attrs.evolve(chat.engine,
                                                   capacity_policy="max-utilization"))
    assert _batch_cap(loose, pool, m) == pytest.approx(pool / m.decode_context)
    bench = load_scenario(None, ["engine.name=trt", "workload.format=random",
                                 "workload.isl=1024", "workload.osl=8192",
                                 "workload.random_range_ratio=1.0"])
    mb = workload_moments(bench)
    assert mb.sent_sequence == pytest.approx(1024 + 8192)
    assert _batch_cap(bench, pool, mb) == pytest.approx(pool / (1024 + 8192))
