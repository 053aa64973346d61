"""Requests that accept differently under speculative decoding (``speculative.acceptance_cv``):
each draws its own tokens per step, the harmonic mean and the closed loop's throughput stay,
and macro-steps still equal single steps."""

from __future__ import annotations

import numpy as np
import pytest

from inferasim.anchors.record import PLAIN_TPOT_CV, AnchorRecord
from inferasim.config.loader import load_scenario
from inferasim.report.run_report import replay_summary
from inferasim.serve.acceptance import RequestAdvance
from inferasim.serve.simulation import simulate

MTP = ["workload.format=random", "workload.isl=1024", "workload.osl=512",
       "workload.concurrency=16", "workload.duration_s=200", "speculative.method=mtp",
       "speculative.draft_tokens=3", "speculative.acceptance=0.66"]


def test_draws_keep_the_harmonic_mean_and_the_bounds():
    draw = RequestAdvance(2.4, 0.19, 4, seed=42)
    a = np.array([draw(rid) for rid in range(20_000)])
    assert a.min() >= 1.0 and a.max() <= 4.0
    assert 1.0 / np.mean(1.0 / a) == pytest.approx(2.4, rel=0.01)
    assert np.std(1.0 / a) / np.mean(1.0 / a) == pytest.approx(0.19, rel=0.05)
    assert draw(7) == RequestAdvance(2.4, 0.19, 4, seed=42)(7)  # fixed by seed and id
    assert draw(7) != RequestAdvance(2.4, 0.19, 4, seed=43)(7)


def _tpot_cv(result) -> float:
    frame, _ = replay_summary(result)
    tpot = ((frame.finish_s - frame.first_token_s) / (frame.output_tokens - 1)).to_numpy()
    tpot = tpot[np.isfinite(tpot)]
    return float(np.std(tpot) / np.mean(tpot))


def test_spread_requests_equal_single_steps_and_spread_their_tpot():
    common = [*MTP, "speculative.acceptance_cv=0.2"]
    exact = simulate(load_scenario(None, [*common, "sim.exact_steps=true"]))
    macro = simulate(load_scenario(None, common))
    fa, sa = replay_summary(exact)
    fb, sb = replay_summary(macro)
    np.testing.assert_allclose(fb.finish_s, fa.finish_s, rtol=1e-9)
    np.testing.assert_array_equal(fb.output_tokens, fa.output_tokens)
    assert macro.engines[0].stats.macro_steps > 0
    alike = simulate(load_scenario(None, MTP))
    assert _tpot_cv(alike) < 0.06 < 0.15 < _tpot_cv(macro)
    # the harmonic mean is the acceptance's tokens per step: throughput holds
    _, s_alike = replay_summary(alike)
    assert sb["output_tok_s"] == pytest.approx(s_alike["output_tok_s"], rel=0.05)


def _mtp_record(tpot_std: float | None, itl_mean: float = 0.024) -> AnchorRecord:
    return AnchorRecord.from_dict({
        "id": "t", "provenance": {"source": "test"},
        "regime": {"model": "deepseek-r1", "engine": "sglang", "gpu": "mi355x",
                   "spec_method": "mtp"},
        "workload": {"isl": 1024, "osl": 1024, "concurrency": 16},
        "measurements": {"tpot_mean_s": 0.010, "itl_mean_s": itl_mean,
                         **({"tpot_std_s": tpot_std} if tpot_std is not None else {})}})


def test_the_spread_is_read_beyond_the_plain_rows_spread():
    assert _mtp_record(0.0019).accept_spread == pytest.approx(
        np.sqrt(0.19**2 - PLAIN_TPOT_CV**2))
    assert _mtp_record(0.0001).accept_spread == 0.0  # below the plain spread: none
    assert _mtp_record(None).accept_spread is None
    assert _mtp_record(0.0019, itl_mean=0.47).accept_spread is None  # tokens per step unknown
