"""The decode workers' running limit of InferenceMAX's disaggregated runs, read from their
launch recipes (anchors/importers/launch_recipes.py), and what it does to a disaggregated
deployment's TTFT."""

from __future__ import annotations

import math

import numpy as np
import pytest

from inferasim.anchors.importers.launch_recipes import (
    colocated_sglang_running,
    colocated_trt_flags,
    decode_batch,
    mori_decode_running,
    sglang_decode_running,
)
from inferasim.anchors.record import AnchorRecord
from inferasim.anchors.store import AnchorStore
from inferasim.config.knobs import Knobs
from inferasim.config.loader import pool_scenario
from inferasim.cost.calibrated import CalibratedOracle
from inferasim.validate.anchors import (
    TEMPLATE_DIR,
    anchor_workload,
    base_scenario,
    load_templates,
    predict_closed_form_disaggregated,
)
from tests.conftest import shared_data


def test_a_row_takes_the_batch_of_the_recipe_with_its_pools_and_clients():
    # ctx1_gen2_dp8_batch128_eplb0_mtp0_3072: B300 FP8, 1 prefill and 2 decode workers
    assert decode_batch("b300", "fp8", 1024, 1024, "none", 3072, 1, 2, 8, True) == 128
    assert decode_batch("b300", "FP8", 1024, 1024, None, 3072, 1, 2, 8, True) == 128
    # a concurrency of a list: ctx1_gen5_tep8_batch32 ran 10 to 180 clients
    assert decode_batch("b200", "fp4", 1024, 1024, "mtp", 90, 1, 5, 8, False) == 32
    # another pool, layout, method or client count: no recipe known
    assert decode_batch("b300", "fp8", 1024, 1024, "none", 3072, 2, 2, 8, True) is None
    assert decode_batch("b300", "fp8", 1024, 1024, "none", 3072, 1, 2, 8, False) is None
    assert decode_batch("b300", "fp8", 1024, 1024, "mtp", 1280, 1, 3, 8, True) is None
    assert decode_batch("b300", "fp8", 1024, 1024, "none", 3000, 1, 2, 8, True) is None
    assert decode_batch(None, "fp8", 1024, 1024, "none", 3072, 1, 2, 8, True) is None


def test_a_per_client_recipe_file_takes_the_limit_it_sets_not_its_name():
    # ctx1_gen3_tp8_batch1024_eplb0_mtp0_<clients>.yaml: 1 at 4 clients, 12 at 32, 1024 at 128
    assert decode_batch("b200", "fp8", 1024, 1024, "none", 4, 1, 3, 8, False) == 1
    assert decode_batch("b200", "fp8", 1024, 1024, "none", 32, 1, 3, 8, False) == 12
    assert decode_batch("b200", "fp8", 1024, 1024, "none", 128, 1, 3, 8, False) == 1024
    # ctx1_gen8_tp8_batch64_eplb0_mtp0_12.yaml runs 10 clients at 1 a worker
    assert decode_batch("b300", "fp8", 1024, 1024, "none", 10, 1, 8, 8, False) == 1
    assert decode_batch("b300", "fp8", 1024, 1024, "none", 128, 1, 8, 8, False) == 64


def test_an_8k1k_row_takes_its_own_shapes_recipe():
    # the same pools run other recipes at ISL 8192: ctx1_gen5_tep8_batch8 (B200 FP4) at 8k/1k,
    # ctx1_gen5_tep8_batch32 at 1k/1k
    assert decode_batch("b200", "fp4", 8192, 1024, "mtp", 30, 1, 5, 8, False) == 8
    assert decode_batch("b200", "fp4", 1024, 1024, "mtp", 90, 1, 5, 8, False) == 32
    # per-client files that set another limit than their names
    assert decode_batch("b200", "fp8", 8192, 1024, "mtp", 8, 1, 6, 8, False) == 1
    assert decode_batch("b200", "fp8", 8192, 1024, "none", 32, 1, 4, 8, False) == 8
    # ctx1_gen8_tp8_batch2_eplb0_mtp0_16.yaml sets 1 and runs 10 clients (the config lists 16)
    assert decode_batch("b300", "fp8", 8192, 1024, "none", 10, 1, 8, 8, False) == 1
    assert decode_batch("b300", "fp8", 8192, 1024, "none", 16, 1, 8, 8, False) == 1
    # a wide attention-DP decode worker: GB300 FP4, 14 prefill workers, one DEP16 decode
    assert decode_batch("gb300", "fp4", 8192, 1024, "none", 2253, 14, 1, 16, True) == 128
    # a shape the table does not hold
    assert decode_batch("b200", "fp4", 8192, 8192, "mtp", 30, 1, 5, 8, False) is None


def test_a_speculative_sglang_worker_runs_the_recipes_512_over_its_ranks():
    assert sglang_decode_running("mtp", 1) == 512
    assert sglang_decode_running("mtp", 8) == 64
    assert sglang_decode_running("mtp", None) == 512
    assert sglang_decode_running("none", 8) is None
    assert sglang_decode_running(None, 1) is None


def test_a_mori_decode_worker_runs_its_modes_limit():
    assert mori_decode_running(8, 8) == 512      # 4,096 over eight attention-DP ranks
    assert mori_decode_running(16, 16) == 256
    assert mori_decode_running(1, 8) == 256      # expert parallel alone
    assert mori_decode_running(None, 1) == 128   # neither
    assert mori_decode_running(1, None) == 128


def test_a_single_node_sglang_mtp_server_runs_its_scripts_limit():
    assert colocated_sglang_running("b200", "fp8", 1024, 1024, 512) == 512
    assert colocated_sglang_running("b300", "FP8", 1024, 8192, 4) == 512
    assert colocated_sglang_running("h200", "fp8", 1024, 1024, 64) == 512
    assert colocated_sglang_running("h200", "fp8", 8192, 1024, 64) == 256
    assert colocated_sglang_running("mi355x", "fp8", 1024, 1024, 32) == 32   # the clients
    # a script that passes none (MI355X MXFP4), or one not read (MI325X): SGLang's default
    assert colocated_sglang_running("mi355x", "fp4", 1024, 1024, 64) is None
    assert colocated_sglang_running("mi325x", "fp8", 1024, 1024, 64) is None



def test_a_single_node_nvidia_sglang_server_without_a_draft_runs_its_scripts_limit():
    assert colocated_sglang_running("h200", "fp8", 1024, 1024, 64, "none") == 512
    assert colocated_sglang_running("h200", "fp8", 8192, 1024, 64, "none") == 256
    # B200 FP8: 128 at TP8; the TP4 server it runs only at 8k/1k takes 32
    assert colocated_sglang_running("b200", "fp8", 1024, 1024, 64, "none", 8) == 128
    assert colocated_sglang_running("b300", "fp8", 8192, 1024, 16, "none", 4) == 32
    assert colocated_sglang_running("b200", "fp4", 1024, 8192, 64, None, 4) == 256
    # the AMD scripts pass none without a draft model
    assert colocated_sglang_running("mi355x", "fp8", 1024, 1024, 64, "none", 8) is None
    assert colocated_sglang_running("mi300x", "fp8", 1024, 1024, 64, "none", 8) is None

def _row(conc: int, ttft: float, tpot: float, running: int | None) -> AnchorRecord:
    regime = {"model": "deepseek-r1", "engine": "dynamo-trt", "gpu": "b300",
              "weight_dtype": "fp8", "spec_method": "none", "tp": 8, "ep": 1,
              "dp_attention": 8, "topology": "disaggregated", "prefill_tp": 4, "prefill_ep": 1,
              "prefill_dp_attention": 4, "prefill_workers": 1, "decode_workers": 2,
              "num_gpus": 20}
    if running:
        regime["max_num_seqs"] = running
    return AnchorRecord.from_dict({
        "id": f"t-b300-trt-c{conc}-{running}",
        "provenance": {"source": "test", "image": "nvcr.io/nvidia/ai-dynamo/"
                       "tensorrtllm-runtime:0.8.1.post1"},
        "regime": regime,
        "workload": {"isl": 1024, "osl": 1024, "concurrency": conc, "dataset": "random",
                     "decode_batch": conc / 2},
        "measurements": {"ttft_median_s": ttft, "tpot_median_s": tpot,
                         "tput_per_gpu_total": conc * 2048 / (ttft + 1023 * tpot) / 20},
    })


def test_past_the_running_limit_a_first_token_waits_for_a_decode_slot(monkeypatch):
    """3,072 clients over 2 x 8 x 128 = 2,048 slots: the closed form's TTFT holds half a
    decode of waiting for a slot (the measured row: 32.1 s of a 65.6 s round), and its decode
    runs 128 sequences a rank, not the 192 its clients would make. The prefill pool keeps the
    carried slope: the c16384 row's 136 s would otherwise read as its queue, and a saturated
    pool's queue shrinks by what the clients wait elsewhere (tests/test_prefill_queue.py)."""
    from inferasim.cost import ttft_model

    monkeypatch.setattr(ttft_model, "QUEUE_MIN_EXCESS_S", math.inf)
    free_row, held = _row(3072, 32.1, 0.0363, None), _row(3072, 32.1, 0.0363, 128)
    _, base = base_scenario(free_row, load_templates(TEMPLATE_DIR))
    capped = anchor_workload(base, held)
    # the limit is the decode pool's, not the prefill pool's
    assert capped.topology.decode.engine["max_num_seqs"] == 128
    assert "max_num_seqs" not in capped.topology.prefill.engine
    assert capped.engine.max_num_seqs == base.engine.max_num_seqs
    others = [_row(1280, 3.2, 0.0301, 48), _row(16384, 135.8, 0.1472, 1024)]
    pred, _, _ = predict_closed_form_disaggregated(capped, others, Knobs())
    free, _, _ = predict_closed_form_disaggregated(anchor_workload(base, free_row), others,
                                                   Knobs())
    assert pred["tpot"] < free["tpot"]
    assert pred["ttft"] - free["ttft"] == pytest.approx(0.5 * 1023 * pred["tpot"], rel=0.05)
    assert pred["tput_per_gpu"] < free["tput_per_gpu"]


def test_the_calibration_reads_a_recorded_slot_wait_out_of_the_ttft():
    """An anchor that records its decode workers' limit has the wait for a slot read as such,
    not as time outside the engine; one that records none has no such wait."""
    held = _row(3072, 32.1, 0.0363, 128)
    _, base = base_scenario(_row(3072, 32.1, 0.0363, None), load_templates(TEMPLATE_DIR))
    pre = pool_scenario(anchor_workload(base, held), "prefill", check_fit=False)
    oracle = CalibratedOracle(pre, AnchorStore([held]), Knobs())
    assert oracle._ttft_row(held).wait == pytest.approx(1023 * 0.0363 * (3072 / 2048 - 1))
    assert oracle._ttft_row(_row(3072, 32.1, 0.0363, None)).wait == 0.0
    assert oracle._ttft_row(_row(1024, 3.0, 0.03, 128)).wait == 0.0   # within the slots


def test_round_robin_sends_a_request_to_a_busy_one_slot_worker_the_kv_router_does_not():
    """GB200 FP8 at 3 clients on three one-slot decode workers (the shipped row): Dynamo's
    default round robin sends a client's next request to the worker in turn, which may still
    run another client's request, so some requests wait for it; the KV router, a chosen
    policy, always finds the free one. The measured row waited (median TTFT 6.3 s)."""
    import attrs

    from inferasim.report.run_report import replay_summary
    from inferasim.serve.simulation import simulate
    from inferasim.validate.anchors import scenario_from_regime

    store = AnchorStore.load()
    row = store.get("imax-gb200-dynamo-trt-fp8-p1xtp8ep8dpa-d3xtp8ep8-1024-1024-c3-2026-02-05")
    rr = anchor_workload(scenario_from_regime(row), row)
    assert rr.topology.router_policy == "round-robin"
    assert rr.topology.decode.engine["max_num_seqs"] == 1
    kv = attrs.evolve(rr, topology=attrs.evolve(rr.topology, router="kv-aware"))
    # srt-slurm's default launch: 7 frontends behind nginx, each with its own turn
    fronts = attrs.evolve(rr, topology=attrs.evolve(rr.topology, frontends=7))
    others = AnchorStore([r for r in store.records if r.id != row.id])
    waits, steps = {}, {}
    for name, sc in (("rr", rr), ("kv", kv), ("fronts", fronts)):
        frame, _ = replay_summary(simulate(sc, Knobs(), store=others))
        # beyond the prefill, each request pays the same time outside the engine; what
        # differs between requests is the wait for a decode slot (or for one other
        # client's prompt at the prefill worker)
        beyond = (frame.ttft_s - frame.prefill_s).to_numpy()
        waits[name] = beyond - beyond.min()
        steps[name] = float(frame.prefill_s.max())
    assert waits["kv"].max() < steps["kv"]       # never behind another client's request
    assert (waits["rr"] > 0.2).sum() >= 5         # some wait for their worker's request
    # dealt over 7 frontends whose turns all start at the first worker, most requests wait
    assert np.median(waits["fronts"]) > 2.0 > np.median(waits["rr"])


def test_a_dynamo_sglang_row_takes_its_recipes_decode_limit():
    from inferasim.anchors.importers.launch_recipes import dynamo_sglang_running

    # H200 8k/1k MTP bs64-2p3d: 16 a worker, 48 slots for 64 or 128 clients
    assert dynamo_sglang_running("h200", "fp8", 8192, 1024, "mtp", 64, 2, 3, 8, 1) == 16
    # bs128-1p1d-dep-mtp: 192 over eight attention-DP ranks
    assert dynamo_sglang_running("h200", "fp8", 8192, 1024, "mtp", 256, 1, 1, 8, 8) == 24
    # no recipe matches (another client count): the speculative recipes' 512, or none
    assert dynamo_sglang_running("h200", "fp8", 8192, 1024, "mtp", 100, 2, 3, 8, 1) == 512
    assert dynamo_sglang_running("h200", "fp8", 8192, 1024, "none", 100, 2, 3, 8, 1) is None


def test_a_single_node_trt_server_runs_its_scripts_budget_and_batch_waiting():
    """dsr1_fp8_b200_trt.sh: ISL + clients + 64 to 64, at least 8,192; batch waiting at 1k/1k
    from 64 clients only; the MTP scripts: (drafts + 1) x max_batch_size + ISL + 64, no floor,
    max_batch_size a rank's share under attention DP."""
    plain = colocated_trt_flags("b200", "fp8", 8192, 1024, 64, "none", 8, 1)
    assert plain.max_num_tokens == 8320 and plain.max_batch_size is None
    assert plain.batch_wait is None
    assert colocated_trt_flags("b200", "fp8", 1024, 1024, 4, "none", 8, 1).max_num_tokens == 8192
    assert colocated_trt_flags("b200", "fp8", 1024, 1024, 64, "none", 8, 1).batch_wait == (40, 0.8)
    assert colocated_trt_flags("b200", "fp4", 1024, 1024, 64, "none", 8, 1).batch_wait is None
    mtp = colocated_trt_flags("b200", "fp8", 1024, 1024, 8, "mtp", 8, 1)
    assert (mtp.max_num_tokens, mtp.max_batch_size) == (1152, 8)   # 4 x 8 + 1024 + 64 -> 1152
    dpa = colocated_trt_flags("b200", "fp4", 1024, 1024, 256, "mtp", 4, 4)
    assert (dpa.max_num_tokens, dpa.max_batch_size) == (1216, 64)  # 2 x 64 + 1088 -> 1216
    assert colocated_trt_flags("h200", "fp8", 1024, 1024, 256, "mtp", 8, 8).max_batch_size == 32
    assert colocated_trt_flags("b300", "fp8", 1024, 1024, 64, "none", 8, 1) is None


def test_a_trt_row_replays_with_its_stamped_budget():
    """The shipped store carries the script's flags, and the row's replay runs with them."""
    from inferasim.anchors.loading import default_store

    rec = next(r for r in default_store().records
               if r.id == "imax-b200-trt-fp8-mtp-tp8-ep8-1024-1024-c8-2026-01-14")
    assert (rec.regime.max_num_tokens, rec.regime.max_num_seqs) == (1152, 8)
    assert any("launch script" in n for n in rec.provenance.notes)
    sc = anchor_workload(base_scenario(rec, load_templates())[1], rec)
    assert sc.engine.max_num_batched_tokens == 1152 and not sc.engine.chunked_prefill
    assert sc.engine.max_num_seqs == 8


def test_a_single_node_mi355x_fp4_sglang_server_runs_its_scripts_8k1k_budget():
    """dsr1_fp4_mi355x{,_mtp}.sh: chunk and max prefill 196,608 (the template's), 32,768 at
    8k/1k past 32 clients; no other script read changes its budget with the row."""
    from inferasim.anchors.importers.launch_recipes import colocated_sglang_budget

    assert colocated_sglang_budget("mi355x", "fp4", 8192, 1024, 64) == 32768
    assert colocated_sglang_budget("mi355x", "fp4", 8192, 1024, 32) is None
    assert colocated_sglang_budget("mi355x", "fp4", 1024, 1024, 64) is None
    assert colocated_sglang_budget("mi355x", "fp8", 8192, 1024, 64) is None


def test_an_8k1k_mi355x_fp4_sglang_row_replays_with_the_scripts_budget(tmp_path):
    """A row of a shape this project holds none of (8k/1k) is imported with its script's
    budget, and its replay prefills in steps of it, not the template's 196,608."""
    import csv

    from inferasim.anchors.importers.inferencemax import import_inferencemax

    path = shared_data("inferencemax", "benchmarks_flat.csv")
    with path.open() as fh:
        reader = csv.DictReader(fh)
        row = next(r for r in reader if r["hardware"] == "mi355x" and r["framework"] == "sglang"
                   and r["precision"] == "fp4" and r["spec_method"] == "none")
    out = tmp_path / "rows.csv"
    with out.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(row))
        writer.writeheader()
        for conc in ("64", "32"):
            writer.writerow({**row, "isl": "8192", "osl": "1024", "conc": conc})
    high, low = import_inferencemax(out)
    assert high.regime.max_num_tokens == 32768 and low.regime.max_num_tokens is None
    assert any("max-prefill-tokens 32768" in n for n in high.provenance.notes)
    templates = load_templates()
    sc = anchor_workload(base_scenario(high, templates)[1], high)
    assert sc.engine.chunked_prefill_size == 32768 == sc.engine.max_num_batched_tokens
    assert anchor_workload(base_scenario(low, templates)[1], low
                           ).engine.chunked_prefill_size == 196608
