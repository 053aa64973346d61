"""The calibration report of a ``CalibratedOracle`` (``oracle.calibration``): how its steps
are priced, in the words ``run``, ``anchors check`` and the validations print, and the figures
behind them. Read-only: it reads the fitted oracle, it fits nothing."""

from __future__ import annotations

import math
from typing import Any

from inferasim.cost.ratio_table import extrapolation
from inferasim.cost.ttft_model import QUEUE_MIN_EXCESS_S


def calibration_report(oracle) -> dict[str, Any]:
    """What priced a ``CalibratedOracle``'s steps: its mode (analytic, anchored, prior), the
    anchors it used and refused, the ratios and the prefill fit, and the notes a run prints."""
    res = oracle.result
    refused = res.refused_by_axis() if res is not None else {}
    crossed = bool(res.crossed_build) if res is not None else False
    notes = list(res.notes) if res is not None else []
    notes += oracle._notes
    if not oracle.calibrated:
        if res is None:
            reason = ("sim.anchors is none" if oracle.scenario.sim.anchors.strip().lower()
                      == "none" else "no anchor store") + ": the oracle is the analytic model"
        elif not res.usable:
            reason = "no usable anchor: the oracle falls back to the analytic model"
            if refused:
                top = ", ".join(f"{a} {n}" for a, n in list(refused.items())[:4])
                reason += f" ({len(res.refused)} refused; by axis: {top})"
        elif res.prior_level is not None:
            reason = (f"no regime of the {res.prior_level} prices this model: the oracle falls "
                      "back to the analytic model")
            notes = [n for n in notes if n != res.prior_note]   # the prior was not used
        else:
            reason = ("no usable anchor records a closed-loop decode step: the oracle falls "
                      "back to the analytic model")
        # the store's shorter form of the same reason gives way to this one
        notes = [n for n in notes if not reason.startswith(n)]
        notes.insert(0, reason)
        _warn_ranks_unread(oracle, notes, read=False)
        return {"mode": "analytic", "note": reason, "anchors_used": [],
                "refused": refused, "crossed_build": crossed, "notes": notes,
                "fallback": reason, "prefill": "analytic", "decode_ratio": {}}
    if oracle.prior is not None:
        return _prior_report(oracle, refused, crossed, notes)
    logb, ratios, log_ctx = oracle._table(oracle.width)
    table = {int(round(math.exp(b))): round(float(r), 4) for b, r in zip(logb, ratios, strict=True)}
    prefill = _prefill_mode(oracle)
    if prefill == "analytic" and not any("prefill" in n for n in notes):
        notes.append("prefill and TTFT stay analytic: no prefill curve was fitted")
    used = [p.id for p in oracle.points]
    lo, hi = min(table), max(table)
    ends = extrapolation(log_ctx, oracle._prior_slope, oracle._one_sided, oracle._prior_source)
    carried = ""
    if oracle.carried_slope is not None:
        carried = (f" (slope {oracle.prefill_slope:.3g} carried from the regimes of "
                   f"{oracle.carried_slope.level})")
        notes.append(oracle.carried_slope.note())
        _priced_otherwise(notes, res, f"at the slope carried from other regimes instead "
                          f"({oracle.prefill_slope:.3g})")
    elif oracle.identified_slope == "prefill queue":
        carried = (f" (slope {oracle.prefill_slope:.3g} read from the prefill pool's queue: "
                   "its TTFT at the loads that saturated it)")
        notes.append(f"prefill slope x{oracle.prefill_slope:.3g} the analytic, read from the "
                     "prefill pool's queue: rows whose TTFT exceeds the carried slope's model "
                     f"by {QUEUE_MIN_EXCESS_S:g} s or more ran it at its throughput")
    elif oracle._frontend_modelled and not oracle._prefill_calibrated:
        isls = ", ".join(str(int(r.isl)) for r in oracle.prefill_points)
        carried = f" (frontend latency carried from the TTFTs at ISL {isls})"
        notes.append(f"the TTFT beyond the analytic prefill at ISL {isls} is time outside "
                     "the engine, per request, and is carried to the target's ISL")
    if oracle.prefill_step_overhead_s:
        carried += (f"; each prefill step +{oracle.prefill_step_overhead_s * 1e3:.0f} ms "
                    "(read from the decode stalls)")
    if oracle._mixed_readings:
        carried += (f" (slope {oracle.prefill_slope:.3g} from {len(oracle._mixed_readings)} "
                    "mixed step(s) of saturated rungs)")
        _priced_otherwise(notes, res, f"from the agentic mixed steps instead (slope "
                          f"{oracle.prefill_slope:.3g})")
    polled = sorted({int(r.regime.scheduler_recv_interval) for r in oracle._usable
                     if (r.regime.scheduler_recv_interval or 1) > 1})
    if oracle._frontend_modelled and polled:
        notes.append("the anchors' TTFT includes the wait for SGLang's next read of new "
                     f"requests (receive interval {', '.join(map(str, polled))}: half "
                     "that many decode steps), read as engine time, not frontend latency")
    ceiling = oracle.kv_ceiling
    if ceiling is not None:
        notes.append(f"the replay's KV pool is the {ceiling.pool_tokens:,} tokens "
                     f"{len(ceiling.anchors)} anchor(s) ran at (Little's law on their TTFT "
                     f"and e2e latency), not the memory model's {ceiling.model_pool_tokens:,}: "
                     f"{oracle.kv_reserve_gib:.1f} GiB per GPU the engine held beyond it")
    note = (f"{len(used)} anchor(s), decode ratio {min(table.values()):.3g}-"
            f"{max(table.values()):.3g} over concurrency {lo}-{hi} ({ends}); "
            f"prefill {prefill}{carried}" + ("; build crossed" if crossed else ""))
    origins = sorted({oracle._store.origin(i) for i in used}) if oracle._store is not None else []
    out = {"mode": "anchored", "note": note, "anchors_used": used, "anchor_files": origins,
           "refused": refused,
           "crossed_build": crossed, "notes": notes, "fallback": None, "prefill": prefill,
           "decode_ratio": table}
    if ceiling is not None:
        out["kv_pool_measured"] = {
            "pool_tokens": ceiling.pool_tokens, "model_pool_tokens": ceiling.model_pool_tokens,
            "occupancy_tokens": int(round(ceiling.occupancy_tokens)),
            "reserve_gib": round(oracle.kv_reserve_gib, 2), "anchors": list(ceiling.anchors)}
    if oracle.carried_slope is not None:
        out["prefill_slope_carried"] = oracle.carried_slope.to_dict()
    if oracle._mixed_readings:
        out["prefill_slope"] = round(oracle.prefill_slope, 4)
        out["prefill_mixed_steps"] = {i: round(r, 4) for i, r in oracle._mixed_readings}
    if oracle._frontend_modelled:
        out["prefill_slope"] = round(oracle.prefill_slope, 4)
        if oracle._stall_points:
            out["prefill_step_overhead_ms"] = round(oracle.prefill_step_overhead_s * 1e3, 2)
            out["prefill_stalls"] = [
                {"isl": int(isl), "stall_per_prefill_ms": round(st * 1e3, 2),
                 "analytic_prefill_ms": round(pf * 1e3, 2)}
                for isl, st, pf in oracle._stall_points]
        out["frontend_latency_ms"] = round(oracle.frontend_latency_s * 1e3, 2)
        if oracle._latency_table is not None:
            logc, lat = oracle._latency_table
            out["frontend_latency_ms_by_concurrency"] = {
                int(round(math.exp(c))): round(v * 1e3, 2)
                for c, v in zip(logc, lat, strict=True)}
        out["prefill_fit"] = [
            {"isl": int(r.isl), "concurrency": r.clients, "ttft_ms": round(r.ttft * 1e3, 2),
             "analytic_prefill_ms": round(r.prefill * 1e3, 2),
             "queue_ms": round(r.queue(oracle.prefill_slope, oracle.frontend_latency_s,
                                       oracle.prefill_step_overhead_s) * 1e3, 2),
             "wait_ms": round(r.wait * 1e3, 2)}
            for r in oracle.prefill_points]
    return out


def _prefill_mode(oracle) -> str:
    """"calibrated" (its own anchors or its prior's regimes read the slope), "carried" (the
    slope other regimes identify: cost/prefill_prior.py) or "analytic"."""
    if oracle.carried_slope is not None:
        return "carried"
    return "calibrated" if oracle._prefill_calibrated else "analytic"


def _priced_otherwise(notes: list[str], res, how: str) -> None:
    """The store's "prefill refused ... falls back to the analytic model" note, where the
    prefill was priced after all (by the mixed steps, or a prior's slope): it says so."""
    refused = res.prefill_note if res is not None else None
    if refused in notes and refused.startswith("prefill refused"):
        probe = refused.split("; ")[0].replace("prefill refused", "no TTFT prefill curve")
        notes[notes.index(refused)] = f"{probe}; the prefill is priced {how}"


RANKS_UNREAD = ("attention-DP ranks priced from no attention-DP regime: on the shipped anchors "
                "an attention-DP decode step ran about twice its analytic price, a one-rank "
                "step about once (docs/anchors.md, \"Attention-DP regimes read apart\"); "
                "this deployment's steps are likely priced fast")


def _warn_ranks_unread(oracle, notes: list[str], *, read: bool) -> None:
    """Say so where an attention-DP target's steps come from the analytic model or a prior
    without an attention-DP regime: the price the measured deployments put furthest off."""
    if oracle.scenario.parallel.dp_attention > 1 and not read:
        notes.append(RANKS_UNREAD)


def _prior_report(oracle, refused: dict, crossed: bool, notes: list[str]) -> dict[str, Any]:
    """The calibration of a prior: its level, the regimes it pooled, the refusals."""
    prior = oracle.prior
    if oracle._prefill_calibrated:
        whose = "the slope carried from other regimes" if oracle.carried_slope is not None \
            else "the prior's slope"
        _priced_otherwise(notes, oracle.result,
                          f"at {whose} instead ({oracle.prefill_slope:.3g})")
    used = [r.id for r in oracle._usable]
    models = sorted({r.model for r in prior.readings})
    lo, hi = prior.batches
    _warn_ranks_unread(oracle, notes, read=any(r.ranks_apart for r in prior.readings))
    prefill = _prefill_mode(oracle)
    if oracle.carried_slope is not None:
        notes.append(oracle.carried_slope.note())
    if prior.split is None:
        decode = f"decode ratio {prior.ratio:.3g} (the median of their levels, flat in the batch)"
    else:
        decode = (f"decode attention x{prior.split.attention:.3g} and the rest of the step "
                  f"x{prior.split.rest:.3g} of the analytic (fitted over their "
                  f"{prior.split.steps} decode steps)")
    note = (f"from the same {prior.level}: {len(prior.readings)} regime(s) of "
            f"{', '.join(models)} ({len(used)} anchors), {decode}; prefill {prefill}")
    if oracle.prefill_step_overhead_s:
        note += (f"; each prefill step +{oracle.prefill_step_overhead_s * 1e3:.0f} ms")
    if oracle._frontend_from:
        note += (f"; time outside the engine {oracle.frontend_latency_s * 1e3:.0f} ms, carried "
                 f"from {len(oracle._frontend_from)} colocated layout(s) of the same model "
                 "and harness")
    origins = sorted({oracle._store.origin(i) for i in used}) if oracle._store is not None else []
    out = {"mode": "prior", "note": note, "anchors_used": used, "anchor_files": origins,
           "refused": refused, "crossed_build": crossed, "notes": notes, "fallback": None,
           "prefill": prefill, "decode_ratio": {lo: round(prior.ratio, 4),
                                                hi: round(prior.ratio, 4)},
           "prior_level": prior.level, "prior_models": models, "prior": prior.to_dict()}
    if oracle._prefill_calibrated:
        out["prefill_slope"] = round(oracle.prefill_slope, 4)
    if oracle.carried_slope is not None:
        out["prefill_slope_carried"] = oracle.carried_slope.to_dict()
    if oracle._frontend_from:
        out["frontend_latency_ms"] = round(oracle.frontend_latency_s * 1e3, 2)
        out["frontend_from"] = [r.label for r in oracle._frontend_from]
    return out
