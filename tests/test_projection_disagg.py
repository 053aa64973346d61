"""The disaggregated closed form against the replay of the same xPyD deployment."""

from __future__ import annotations

import pytest

from inferasim.config.knobs import Knobs
from inferasim.config.loader import load_scenario
from inferasim.report.run_report import replay_summary
from inferasim.serve.simulation import simulate
from inferasim.sweep.projection import project_disaggregated

BASE = ["model.name=llama-3.1-8b", "gpu.name=h100", "workload.format=random",
        "workload.isl=1024", "workload.osl=512", "workload.duration_s=120",
        "topology.kind=disaggregated"]


@pytest.mark.parametrize("split, conc", [((1, 1), 16), ((1, 2), 64), ((2, 1), 32)])
def test_disaggregated_projection_tracks_the_replay(split, conc):
    sc = load_scenario(None, BASE + [f"topology.prefill.instances={split[0]}",
                                     f"topology.decode.instances={split[1]}",
                                     f"workload.concurrency={conc}"])
    _, rep = replay_summary(simulate(sc, Knobs()))
    proj = project_disaggregated(sc, Knobs())
    for key in ("total_tok_s_per_gpu", "interactivity_tok_s"):
        assert proj[key] == pytest.approx(rep[key], rel=0.15), key
    assert proj["kv_transfer_s"] > 0 and proj["prefill_capacity_rps"] > proj["request_rate"]


def test_a_prefill_pool_that_cannot_keep_up_caps_the_rate():
    # long prompts, short outputs, one prefill instance for four decode ones
    sc = load_scenario(None, ["model.name=llama-3.1-8b", "gpu.name=h100",
                              "workload.format=random", "workload.isl=16000",
                              "workload.osl=64", "workload.concurrency=256",
                              "topology.kind=disaggregated", "topology.prefill.instances=1",
                              "topology.decode.instances=4"])
    proj = project_disaggregated(sc, Knobs())
    assert proj["saturated"] == "prefill"
    assert proj["request_rate"] == pytest.approx(proj["prefill_capacity_rps"], rel=1e-3)
    with pytest.raises(ValueError):
        project_disaggregated(load_scenario(None, []), Knobs())
