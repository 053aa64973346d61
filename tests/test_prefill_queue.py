"""A disaggregated prefill pool as a station of batching servers (``ttft_model.batched_sojourn``)
and the prefill slope its queue identifies (``ttft_model.fit_queue_slope``): a saturated
pool's TTFT is its clients over its throughput less their time away, so rows at one prompt
length fix the prefill's rate once one of them queued."""

from __future__ import annotations

import math

import pytest

from inferasim.anchors.store import AnchorStore
from inferasim.config.knobs import Knobs
from inferasim.cost.ttft_model import (
    QUEUE_MIN_EXCESS_S,
    BatchedPrefill,
    TtftRow,
    batched_response,
    batched_sojourn,
    fit_queue_slope,
)
from inferasim.validate import anchors as va

# 1..32 prompts a step: a weight-read floor of 20 ms and 6 ms a prompt (a 1k-token prompt)
SERVER = BatchedPrefill(sizes=(1.0, 2.0, 4.0, 8.0, 16.0, 32.0),
                        seconds=tuple(0.020 + 0.006 * m for m in (1, 2, 4, 8, 16, 32)))
CAPACITY = 32 / SERVER.seconds[-1]   # prompts a second, one server


def test_one_client_or_none_away_is_the_lone_step():
    assert batched_sojourn(SERVER, 1, 5.0) == pytest.approx(0.026)
    assert batched_sojourn(SERVER, 64, math.inf) == pytest.approx(0.026)


def test_below_capacity_the_batch_absorbs_the_load():
    # 200 clients away 20 s: 10 prompts a second, far below 148 a second; no queue builds
    assert batched_sojourn(SERVER, 200, 20.0) < 2 * SERVER.seconds[1]


def test_an_open_stream_batches_until_the_capacity():
    """An open stream's prompt (the projection's open loop): the lone step at a trickle, a
    growing batch as the rate rises, and no finite answer at the pool's capacity."""
    assert batched_response(SERVER, 0.01) == pytest.approx(0.026, rel=0.01)
    slow, busy = batched_response(SERVER, 50.0), batched_response(SERVER, 0.9 * CAPACITY)
    assert 0.026 < slow < busy < 2 * SERVER.seconds[-1]
    assert batched_response(SERVER, 4 * 0.9 * CAPACITY, servers=4) == pytest.approx(busy)
    assert batched_response(SERVER, CAPACITY) == math.inf


def test_past_capacity_the_population_sets_the_queue():
    for servers in (1, 4):
        clients, away = 8000, 10.0
        got = batched_sojourn(SERVER, clients, away, servers)
        assert got == pytest.approx(clients / (servers * CAPACITY) - away, rel=1e-6)


def test_sojourn_grows_with_clients_and_slope():
    seq = [batched_sojourn(SERVER, c, 10.0, 2) for c in (1, 100, 1000, 2000, 4000, 8000)]
    assert seq == sorted(seq)
    assert batched_sojourn(SERVER, 4000, 10.0, 2, slope=2.0) > seq[-2]


def _row(clients: int, ttft: float, away: float = 20.0, servers: int = 4) -> TtftRow:
    return TtftRow(isl=1024.0, ttft=ttft, prefill=SERVER.seconds[0], wait=0.0, clients=clients,
                   decode_s=away, servers=servers, batched=SERVER)


def test_a_saturated_row_identifies_the_slope_a_calm_one_the_latency():
    slope, latency = 2.5, 0.4
    rows = []
    for clients in (256, 8192):
        probe = _row(clients, 0.0)
        rows.append(_row(clients, latency + probe.sojourn(slope, latency)))
    assert rows[1].ttft > 10 * rows[0].ttft   # the wide load queued
    fitted = fit_queue_slope(rows, prior=1.0)
    assert fitted is not None
    assert fitted[0] == pytest.approx(slope, rel=0.02)
    assert fitted[1] == pytest.approx(latency, rel=0.05)


def test_rows_that_never_queued_leave_the_prior():
    rows = [_row(c, 0.3 + _row(c, 0.0).sojourn(1.0, 0.3)) for c in (16, 256, 1024)]
    assert all(r.excess(1.0, 0.0) < QUEUE_MIN_EXCESS_S for r in rows)
    assert fit_queue_slope(rows, prior=1.0) is None


def test_a_prefill_bound_deployment_is_predicted_from_its_other_saturated_row():
    # GB300 NVFP4 Dynamo SGLang, 4 prefill workers (TP4) and one TP48 decode worker: c4096
    # and c8192 both ran the prefill pool flat out (input 141k and 130k tok/s). Each is
    # predicted from the other (and the regimes beside them) by the closed form.
    store = AnchorStore.load(None)
    held = [r for r in store if r.id.startswith(
        "imax-gb300-dynamo-sglang-fp4-p4xtp4ep4dpa-d1xtp48ep48dpa-1024-1024-c")]
    assert len(held) == 2
    for record in held:
        others = store.subset([r.id for r in store if r.id != record.id])
        _, base = va.base_scenario(record, va.load_templates())
        target = va.anchor_workload(base, record)
        pred, _, cal = va.predict_closed_form(target, others, Knobs())
        assert cal.get("prefill_slope", 0) > 2.5   # the carried 1.5 left the pool 3x too fast
        measured = record.measurements.tput_per_gpu_total
        assert pred["tput_per_gpu"] == pytest.approx(measured, rel=0.15)
