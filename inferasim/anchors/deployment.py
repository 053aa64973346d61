"""The deployment an anchor measured, as a scenario: from its regime alone, and the pools of a
disaggregated one. Validation replays anchors from these, and the calibration reads other
regimes' prefill on them (``cost/prefill_prior.py``)."""

from __future__ import annotations

from typing import Any

import attrs

from inferasim.anchors import normalise as nz
from inferasim.anchors.record import DEFAULT_DRAFT_TOKENS, AnchorRecord
from inferasim.config.errors import ConfigError
from inferasim.config.scenario import Scenario, TopologySpec
from inferasim.config.typed import spec_to_dict


def scenario_from_regime(record: AnchorRecord) -> Scenario:
    """A scenario for the deployment an anchor measured, from its regime alone."""
    from inferasim.config.loader import resolve

    reg = record.regime
    if not nz.modelled(reg.engine):
        raise ConfigError(f"engine {reg.engine} is not modelled by inferasim")
    if reg.model is None or reg.gpu is None:
        raise ConfigError("the anchor does not record its model and GPU part")
    orchestrator, engine = nz.worker_engine(reg.engine)
    data: dict[str, Any] = {
        "name": f"anchor {record.id}",
        "model": {"name": reg.model},
        "gpu": {"name": reg.gpu},
        "engine": {"name": engine},
        "parallel": {"tp": reg.tp or 1, "ep": reg.ep or 1, "dp_attention": reg.dp_attention or 1,
                     "dcp": reg.dcp or 1},
        "workload": {"format": "random"},
    }
    if reg.weight_dtype and reg.weight_dtype != "fp4":
        data["model"]["weight_dtype"] = reg.weight_dtype
    if reg.kv_dtype:
        data["engine"]["kv_dtype"] = reg.kv_dtype
    if reg.kernel_family:
        data["engine"]["attention_backend"] = reg.kernel_family
    if reg.spec_method not in (None, "none"):
        data["speculative"] = {"method": reg.spec_method,
                               "draft_tokens": reg.draft_tokens or DEFAULT_DRAFT_TOKENS}
    if reg.disaggregated:
        data["topology"] = spec_to_dict(deployment_topology(TopologySpec(), record))
        data["topology"]["orchestrator"] = orchestrator
    return resolve(data, {}, f"<anchor {record.id}>", check_fit=False)


def deployment_topology(base: TopologySpec, record: AnchorRecord) -> TopologySpec:
    """``base`` with the pools a disaggregated anchor measured: its worker counts and its
    prefill pool's layout (the decode pool's is the scenario's own ``parallel``)."""
    reg = record.regime
    if not (reg.prefill_workers and reg.decode_workers and reg.prefill_tp):
        raise ConfigError("the anchor does not record its pools' worker counts and prefill "
                          "layout (a disaggregated row with num_workers 0)")
    prefill = {"tp": reg.prefill_tp, "ep": reg.prefill_ep or 1,
               "dp_attention": reg.prefill_dp_attention or 1}
    spare = base.prefill.parallel.get("redundant_experts")
    if spare and prefill["ep"] > 1:  # the scenario's EPLB slots, which the rows do not record
        prefill["redundant_experts"] = spare
    # a recorded running limit is the decode workers' (the launch recipe's max_batch_size)
    decode_engine = {"max_num_seqs": int(reg.max_num_seqs)} if reg.max_num_seqs else {}
    return attrs.evolve(
        base, kind="disaggregated",
        prefill=attrs.evolve(base.prefill, instances=reg.prefill_workers, parallel=prefill),
        decode=attrs.evolve(base.decode, instances=reg.decode_workers, parallel={},
                            engine={**base.decode.engine, **decode_engine}))
