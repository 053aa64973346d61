"""Leave-one-out validation of the calibrated oracle on an anchor store.

Anchors are grouped by regime (every regime-defining axis) *and* engine build: a held-out anchor
is predicted only from the others of its own group — never one build's anchor from another
build's. For each held-out anchor the workload it measured (random prompts, its ISL/OSL, its
closed-loop concurrency) is replayed with a ``CalibratedOracle`` built from the rest of its
group, and throughput per GPU, TPOT and TTFT are compared with the measurement.

A group is skipped, with the reason, when inferasim cannot run its regime (an engine or GPU not
in the catalog) or when it has fewer than two anchors with a closed-loop decode step.

``hold_out="shape"`` asks the other question a projection raises: how well does a regime's
measurement at one ISL/OSL carry to another it did not measure? Anchors are then grouped by
regime alone, and each is predicted from the anchors of its regime at *other* shapes, its own
build preferred (the replay states it as its version) and crossed, with the point so marked,
where no anchor of its build measured another shape. History rows record no image:
``date_as_build`` reads each run date as one build (InferenceX runs one image per date).

``hold_out="layout"`` removes every anchor of the held-out anchor's regime (its layout and
dtypes, colocated or disaggregated, on its part and engine): the rest prices it as a prior, as
a deployment no anchor measured is priced (a disaggregated family's other pool layouts).

``hold_out="model"`` removes every anchor of the held-out anchor's model: what is left can
price it only as a prior (``store.PRIOR_LEVELS``: other models on its part and engine), or
not at all (the analytic model). Each point is scored and labelled with the
calibration it got, as a user running a model without anchors gets it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from inferasim.anchors import normalise as nz
from inferasim.anchors.deployment import deployment_topology, scenario_from_regime
from inferasim.anchors.families import family_of
from inferasim.anchors.record import DEFAULT_DRAFT_TOKENS, AnchorRecord
from inferasim.anchors.regime import Target, compare, regime_key
from inferasim.anchors.store import AnchorStore
from inferasim.config.catalog import REPO_ROOT
from inferasim.config.errors import ConfigError
from inferasim.config.knobs import Knobs
from inferasim.config.scenario import Scenario, SpeculativeSpec
from inferasim.cost.prefill_prior import store_slopes

TEMPLATE_DIR = REPO_ROOT / "scenarios" / "inferencemax"
METRICS = ("tput_per_gpu", "tpot", "ttft")
#: Requests a replay aims to complete when the anchor does not record its benchmark's count
#: (a few hundred, and at least three rounds of the loop).
TARGET_REQUESTS = 240
MIN_ROUNDS = 3
#: Above this concurrency a disaggregated held-out point is estimated in closed form, not
#: replayed (a replay of a thousand clients over a dozen workers takes 10-45 s of wall time).
MAX_REPLAY_CONCURRENCY = 256
#: The same for one colocated instance, whose replay of 512 clients takes about a second. The
#: colocated closed form sends every client's prompt in one burst, a loop's first round: with
#: 8k prompts that put its median TTFT at half the burst (33 s on ATOM MI355X at 512 clients)
#: where the replay's clients, spread out by then, wait 0.4 s.
MAX_COLOCATED_REPLAY_CONCURRENCY = 1024
#: The accuracy a regime should reach (median absolute error per metric), read on the groups
#: with at least TARGET_MIN_SCORED scored points (each then predicted from a sweep of two or
#: more; a group of two predicts each point from one other and carries no trend).
TARGETS = {"tput_per_gpu": 0.10, "tpot": 0.15, "ttft": 0.15}
TARGET_MIN_SCORED = 3
#: What a prediction leaves out: one anchor (``point``), every anchor of its ISL/OSL
#: (``shape``), or every long prompt (``isl``: the anchors at ISL >= ISL_HELD_FROM predicted
#: from those at ISL <= ISL_FITTED_UPTO of the same regime, as a projection to a longer prompt
#: than any measured is).
HOLD_OUT = ("point", "shape", "isl", "model", "layout")
ISL_HELD_FROM = 16384
ISL_FITTED_UPTO = 8192


@attrs.frozen
class IslSplit:
    """Which prompts ``--hold-out isl`` fits on and which it predicts. The default is issue
    29's (16k and longer from 8k and shorter); ``1024:8192:8192`` is the InferenceMAX case,
    whose anchors are all ISL 1024 and whose 8k/1k rows are projected from them."""

    fitted_upto: int = ISL_FITTED_UPTO
    held_from: int = ISL_HELD_FROM
    held_upto: int | None = None

    def __attrs_post_init__(self) -> None:
        if self.held_from <= self.fitted_upto:
            raise ValueError(f"the held-out prompts (from {self.held_from}) must be longer than "
                             f"the fitted ones (up to {self.fitted_upto})")
        if self.held_upto is not None and self.held_upto < self.held_from:
            raise ValueError(f"held-out prompts up to {self.held_upto} but from "
                             f"{self.held_from}: an empty range")

    def held(self, isl: int) -> bool:
        return isl >= self.held_from and (self.held_upto is None or isl <= self.held_upto)

    def fitted(self, isl: int) -> bool:
        return isl <= self.fitted_upto

    def describe(self) -> str:
        upto = f"-{self.held_upto}" if self.held_upto is not None else " and longer"
        return f"prompts of {self.held_from}{upto} tokens from those of {self.fitted_upto} or fewer"

    @classmethod
    def parse(cls, text: str) -> IslSplit:
        """``FITTED_UPTO:HELD_FROM[:HELD_UPTO]`` in tokens."""
        parts = text.split(":")
        if len(parts) not in (2, 3) or not all(p.strip().isdigit() for p in parts):
            raise ValueError(f"expected FITTED_UPTO:HELD_FROM[:HELD_UPTO] in tokens "
                             f"(e.g. 1024:8192:8192), got {text!r}")
        values = [int(p) for p in parts]
        return cls(values[0], values[1], values[2] if len(values) == 3 else None)


@attrs.frozen
class Prediction:
    anchor: str
    group: str
    isl: int
    osl: int
    concurrency: int
    measured: dict[str, float | None]
    predicted: dict[str, float | None]
    replay_requests: int
    wall_s: float
    method: str = "replay"
    # True when other anchors of the group lie on both sides of this concurrency (the ratio is
    # interpolated); False at the ends of the sweep (the end trend is carried on, bounded).
    bracketed: bool = False
    # Metric -> why the measurement is not scored (it contradicts the anchor's own latency).
    excluded: dict[str, str] = attrs.field(factory=dict)
    # Whether the anchors that calibrated it include its own build (always, leaving one point
    # out; leaving a shape out, only where its build measured another shape).
    same_build: bool = True
    # The calibration the prediction got: "anchored", "prior: <level>" or "analytic".
    calibration: str = "anchored"
    model: str | None = None
    # The InferenceMAX configuration family (anchors.families): part, framework, precision,
    # speculative method, colocated or disaggregated.
    family: str | None = None

    def error(self, metric: str) -> float | None:
        if metric in self.excluded:
            return None
        m, p = self.measured.get(metric), self.predicted.get(metric)
        if m is None or p is None or not (m > 0) or not math.isfinite(p):
            return None
        return p / m - 1.0


@attrs.frozen
class GroupResult:
    key: str
    anchors: int
    predictions: tuple[Prediction, ...] = ()
    skipped: str | None = None
    template: str | None = None
    notes: tuple[str, ...] = ()

    def stats(self) -> dict[str, dict[str, float | None]]:
        return error_stats(self.predictions)


def error_stats(predictions: Iterable[Prediction]) -> dict[str, dict[str, float | None]]:
    preds = list(predictions)
    out: dict[str, dict[str, float | None]] = {}
    for metric in METRICS:
        signed = np.array([e for p in preds if (e := p.error(metric)) is not None])
        errs = np.abs(signed)
        out[metric] = {
            "n": int(errs.size),
            "median_abs": float(np.median(errs)) if errs.size else None,
            "p90_abs": float(np.percentile(errs, 90)) if errs.size else None,
            # the lean: a transport that errs one way shows here, not in the absolute errors
            "median_signed": float(np.median(signed)) if signed.size else None,
        }
    return out


# ---------------------------------------------------------------- groups


def group_label(record: AnchorRecord, *, with_build: bool = True) -> str:
    reg = record.regime
    spec = reg.spec_method or "?"
    if spec not in ("none", "?") and reg.draft_tokens:
        spec += f"+{reg.draft_tokens}"
    label = (f"{reg.engine or '?'} {reg.gpu or reg.gpu_isa or '?'} {reg.weight_dtype or '?'} "
             f"{spec} tp{reg.tp} ep{reg.ep} dpa{reg.dp_attention}")
    if not with_build:
        return label
    build = record.provenance.build or "unrecorded"
    build = build.rsplit(":", 1)[-1] if ":" in build else build
    return f"{label} @{build}"


def regime_groups(records: Iterable[AnchorRecord], *, by_build: bool = True
                  ) -> dict[tuple, list[AnchorRecord]]:
    groups: dict[tuple, list[AnchorRecord]] = {}
    for record in records:
        key = regime_key(record)
        groups.setdefault(key if by_build else key[:-1], []).append(record)
    return groups


def shape_of(record: AnchorRecord) -> tuple[int, int]:
    return int(record.workload.isl), int(record.workload.osl)


def dates_as_builds(records: Iterable[AnchorRecord]) -> list[AnchorRecord]:
    """Records that name no build take their run date as one (``run-YYYY-MM-DD``): the
    InferenceMAX history rows carry a date and a run, not the image."""
    out = []
    for r in records:
        prov = r.provenance
        if prov.build is None and prov.date:
            r = attrs.evolve(r, provenance=attrs.evolve(prov, engine_version=f"run-{prov.date}"))
        out.append(r)
    return out


def _decodable(record: AnchorRecord) -> bool:
    w = record.workload
    return record.decode_step_s is not None and w.concurrency is not None and w.concurrency >= 1


# ---------------------------------------------------------------- scenarios


def load_templates(folder: Path | None = TEMPLATE_DIR) -> list[tuple[str, Scenario, Target]]:
    """The shipped scenarios an anchor's deployment is replayed from where one matches."""
    from inferasim.config.loader import load_scenario

    out = []
    if folder is None or not Path(folder).is_dir():
        return out
    for path in sorted(Path(folder).glob("*.yaml")):
        if path.name.startswith("_"):
            continue
        # a template that does not load is a broken shipped scenario: say so, do not skip it
        sc = load_scenario(path, [], check_fit=False)
        out.append((path.name, sc, attrs.evolve(Target.from_scenario(sc), build="")))
    return out


# The axes in which a shipped scenario of the anchor's family may differ from the anchor's
# deployment and still lend it its engine settings (its launch script's KV dtype, memory
# fraction, chunk and receive interval): the parallel layout, which ``anchor_workload`` takes
# from the anchor.
FAMILY_LAYOUT_AXES = frozenset({"tp", "ep", "dp_attention", "dcp"})


def _template_for(record: AnchorRecord, templates) -> tuple[str, Scenario] | None:
    """The shipped scenario of the anchor's regime, else one of its family (same engine, part,
    weights and speculative method) in another layout, else None. Of the family, the one that
    shares the anchor's attention (data-parallel ranks or not: the launch scripts set memory
    and MTP depth by it) and the most layout axes."""
    family: list[tuple[tuple[bool, int], str, Scenario]] = []
    ranks = (record.regime.dp_attention or 1) > 1
    for name, sc, target in templates:
        diffs, _ = compare(record.regime, target)
        if not diffs:
            return name, sc
        if {d.axis for d in diffs} <= FAMILY_LAYOUT_AXES:
            other = (sc.parallel.dp_attention > 1) != ranks
            family.append(((other, len(diffs)), name, sc))
    if not family:
        return None
    _, name, sc = min(family, key=lambda f: f[0])
    return name, _without_pool_limits(sc)


def _without_pool_limits(sc: Scenario) -> Scenario:
    """A family's disaggregated scenario without its pools' running limits: those are the
    launch recipe's for one layout and load (the anchor's own, where recorded, is set by
    ``deployment_topology``)."""
    if sc.topology.kind != "disaggregated":
        return sc
    pools = {role: attrs.evolve(pool, engine={k: v for k, v in pool.engine.items()
                                              if k != "max_num_seqs"})
             for role, pool in (("prefill", sc.topology.prefill),
                                ("decode", sc.topology.decode))}
    return attrs.evolve(sc, topology=attrs.evolve(sc.topology, **pools))


def base_scenario(record: AnchorRecord, templates) -> tuple[str | None, Scenario]:
    """The scenario an anchor's deployment replays from: the template that matches its
    regime or, in another layout, its family (its name), else one built from the regime alone
    (None)."""
    found = _template_for(record, templates)
    if found is not None:
        return found
    return None, scenario_from_regime(record)


def replay_problem(record: AnchorRecord, templates=()) -> str | None:
    """Why inferasim cannot replay the deployment an anchor measured (its engine, its pools'
    layout, its weights' fit at the engine's memory rule), or None; from the scenario of its
    regime or family among ``templates`` (``load_templates``) as validation replays it, else
    one built from its regime."""
    from inferasim.arch.layout import fit_problem
    from inferasim.config.loader import pool_scenario

    try:
        sc = anchor_workload(base_scenario(record, templates)[1], record)
        if sc.topology.kind == "disaggregated":
            for role in ("prefill", "decode"):
                pool_scenario(sc, role, check_fit=True)
        else:
            problem = fit_problem(sc)
            if problem:
                return problem
    except ConfigError as exc:
        return exc.message
    return None


def anchor_workload(base: Scenario, record: AnchorRecord, *,
                    target_requests: int = TARGET_REQUESTS) -> Scenario:
    """``base`` with the anchor's measured load: random prompts, its ISL/OSL and concurrency,
    no build preference. The requests are the benchmark's own count when the record has it
    (InferenceMAX sends 10 per client): its throughput is taken over the whole run, the
    ramp-down as the last requests finish included, and a longer replay would leave that
    out (on the shipped rows it read 1 point of median throughput error too fast).
    Otherwise the run lasts about ``target_requests`` requests."""
    w, reg = record.workload, record.regime
    conc = int(w.concurrency)
    step = record.decode_step_s or 0.02
    e2e = record.e2e_s or ((record.ttft_s or 0.0) + w.osl * step)
    if w.num_requests:
        sent = int(w.num_requests)
        # the count, not the horizon, ends the run: the horizon only has to be out of reach
        duration, cap = float((math.ceil(sent / conc) + 2) * e2e * 4), sent
    else:
        duration, cap = float(max(MIN_ROUNDS, math.ceil(target_requests / conc)) * e2e), None
    # the anchor's own length spread where it records one (the grids: fixed), else the base's
    spread = w.range_ratio if w.range_ratio is not None else base.workload.random_range_ratio
    wl = attrs.evolve(base.workload, format="random", trace=None, isl=int(w.isl),
                      osl=int(w.osl), concurrency=conc, rate=None, warmup_s=0.0,
                      duration_s=duration, max_requests=cap, random_range_ratio=spread)
    engine = attrs.evolve(base.engine, version="")
    if reg.max_num_seqs and not reg.disaggregated:
        engine = attrs.evolve(engine, max_num_seqs=int(reg.max_num_seqs))
    if reg.max_num_tokens and not reg.disaggregated:
        # the launch script's step budget (TensorRT-LLM's prompts enter whole within it)
        engine = attrs.evolve(engine, max_num_batched_tokens=int(reg.max_num_tokens),
                              chunked_prefill_size=int(reg.max_num_tokens))
    if reg.batch_wait_timeout_iters is not None and not reg.disaggregated:
        engine = attrs.evolve(engine, batch_wait_timeout_iters=int(reg.batch_wait_timeout_iters),
                              batch_wait_max_tokens_ratio=float(
                                  reg.batch_wait_max_tokens_ratio or 0.0))
    if engine.name.endswith("sglang") and (reg.dp_attention or 1) == 1:
        engine = attrs.evolve(engine,
                              scheduler_recv_interval=int(reg.scheduler_recv_interval or 1))
    par = base.parallel
    parallel = par.relaid(tp=reg.tp or par.tp, ep=reg.ep or par.ep,
                          dp_attention=reg.dp_attention or par.dp_attention,
                          dcp=reg.dcp or par.dcp)
    spec = base.speculative
    if reg.spec_method not in (None, "none") and spec.method == "none":
        spec = SpeculativeSpec(method=reg.spec_method,
                               draft_tokens=reg.draft_tokens or DEFAULT_DRAFT_TOKENS)
    topology = base.topology
    if reg.disaggregated:
        topology = deployment_topology(topology, record)
    return attrs.evolve(base, workload=wl, engine=engine, parallel=parallel, speculative=spec,
                        topology=topology, name=f"loo {record.id}")


def _with_measured_acceptance(target: Scenario, others: list[AnchorRecord]) -> Scenario:
    """A speculative target's acceptance set to the tokens per step its group's other anchors
    emitted (their mean), and its spread between requests to theirs, where their streams show
    them; the held-out point's own are not read. Without them the scenario's stand."""
    from inferasim.anchors.acceptance import carry_tokens_per_step

    spec = target.speculative
    osl = int(target.workload.osl)
    # each carried from its own output length to the target's (OUTPUT_LENGTH_EXPONENT)
    lengths = [carry_tokens_per_step(r.accept_length, r.workload.osl, osl, spec.verify_width)
               for r in others if r.accept_length is not None]
    if spec.method == "none" or not lengths:
        return target
    spec = attrs.evolve(spec.with_tokens_per_step(float(np.mean(lengths))), acceptance_osl=osl)
    spreads = [r.accept_spread for r in others if r.accept_spread is not None]
    if spreads:
        spec = attrs.evolve(spec, acceptance_cv=min(1.0, float(np.mean(spreads))))
    return attrs.evolve(target, speculative=spec)


# ---------------------------------------------------------------- measuring


def _bracketed(held: AnchorRecord, others: list[AnchorRecord], used: set[str]) -> bool:
    """Inside the sweep of the anchors that calibrated the prediction (``used``): one that
    contradicts itself calibrates nothing, so it brackets nothing either."""
    concs = [r.workload.concurrency for r in others if r.id in used]
    return bool(concs) and min(concs) < held.workload.concurrency < max(concs)


def _calibrated_by_own_build(held: AnchorRecord, others: list[AnchorRecord],
                             used: set[str]) -> bool:
    build = held.provenance.build
    return any(r.provenance.build == build for r in others if r.id in used)


def _inconsistent(record: AnchorRecord) -> dict[str, str]:
    """Metrics not scored: all of them when the anchor contradicts itself (which of its figures
    is wrong cannot be told; the calibrated oracle does not use it either)."""
    why = record.little_mismatch()
    return {metric: why for metric in METRICS} if why else {}


def measured_metrics(record: AnchorRecord) -> dict[str, float | None]:
    """Throughput, TPOT (its mean, else its median: ``tpot_statistic``), and TTFT as the
    median where recorded: a measured TTFT mean is carried by a few warm-up outliers
    (InferenceMAX's SGLang MI355X 1k/8k rows: mean 469-624 ms, median 105-122 ms over 40-640
    requests), which no serving model reproduces."""
    m = record.measurements
    tput = m.tput_per_gpu_total
    tpot = m.tpot_s
    return {"tput_per_gpu": tput, "tpot": tpot, "ttft": record.ttft_s}


def _as_store(others: list[AnchorRecord] | AnchorStore) -> AnchorStore:
    return others if isinstance(others, AnchorStore) else AnchorStore(others)


def predict(target: Scenario, others: list[AnchorRecord] | AnchorStore, knobs: Knobs,
            tpot_statistic: str = "mean") -> tuple[dict[str, float | None], int, dict]:
    """The replay's throughput per GPU, TPOT (its ``tpot_statistic`` over requests, the one
    the measurement reports) and median TTFT."""
    from inferasim.report.run_report import replay_summary
    from inferasim.serve.simulation import simulate

    # The replay builds its oracle as a run does: per rank where attention-DP ranks are
    # simulated apart, read against the lockstep group's step where they step together.
    result = simulate(target, knobs, store=_as_store(others))
    _frame, s = replay_summary(result)
    pred = {"tput_per_gpu": s["total_tok_s_per_gpu"],
            "tpot": s[f"tpot_{tpot_statistic}_ms"] / 1e3, "ttft": s["ttft_p50_s"]}
    return pred, int(s["requests_completed"]), result.calibration


def predict_closed_form(target: Scenario, others: list[AnchorRecord] | AnchorStore,
                        knobs: Knobs) -> tuple[dict[str, float | None], int, dict]:
    """The closed loop of fixed-length requests in closed form, for loads too wide to replay
    quickly: every client that holds a running slot prefills in one burst (chunked at the
    engine's batched-token budget) then decodes together at the mean context
    ``isl + osl / 2``; the loop runs ten rounds as InferenceMAX's ``num_prompts = 10 x
    concurrency`` does. The slots are the engine's running limit and what the KV pool holds
    at that context; a client beyond them waits ``slot_wait``. TTFT is the burst's median, as
    the replay's is, plus that wait."""
    from inferasim.arch.memory import memory_plan
    from inferasim.cost.calibrated import CalibratedOracle, with_measured_pool
    from inferasim.cost.oracle import StepBatch
    from inferasim.cost.ttft_model import requests_held, slot_wait

    if target.topology.kind == "disaggregated":
        return predict_closed_form_disaggregated(target, others, knobs)
    oracle = CalibratedOracle(target, _as_store(others), knobs)
    wl, eng, spec = target.workload, target.engine, oracle.scenario.speculative
    dp = target.parallel.dp_attention
    # running at once: the engine's limit, and no more than the pool holds at the mean
    # resident context (Little's law on the pool, as the calibration reads its anchors:
    # CalibratedOracle._running_cap); the clients beyond wait for a slot
    pool = memory_plan(with_measured_pool(target, oracle)).kv_pool_tokens
    by_memory = max(1, requests_held(pool, wl.isl, wl.osl) or 1) * dp
    n = max(1, min(wl.concurrency, eng.max_num_seqs * dp, by_memory))
    advance = spec.tokens_per_step
    step = oracle.step(StepBatch(decode_context=np.full(n, wl.isl + wl.osl / 2.0),
                                 width=spec.verify_width)).seconds
    budget = max(1, int(eng.max_num_batched_tokens))
    per_chunk = max(1, budget // max(1, wl.isl))
    burst, ttfts, left = 0.0, [], n
    while left > 0:
        k = min(per_chunk, left)
        burst += oracle.step(StepBatch(prefill_tokens=np.full(k, float(wl.isl)),
                                       prefill_resident=np.zeros(k), prefill_samples=k)).seconds
        ttfts += [burst] * k
        left -= k
    steps = math.ceil((wl.osl - 1) / advance)
    latency = oracle.frontend_latency(n)  # outside the engine: in each TTFT and the loop
    rnd = latency + burst + steps * step
    waited = slot_wait(steps * step, wl.concurrency, n)
    pred = {"tput_per_gpu": n * (wl.isl + wl.osl) / rnd / target.gpus_per_instance,
            "tpot": step / advance, "ttft": latency + float(np.median(ttfts)) + waited}
    return pred, 0, oracle.calibration


def predict_closed_form_disaggregated(target: Scenario, others: list[AnchorRecord] | AnchorStore,
                                      knobs: Knobs) -> tuple[dict[str, float | None], int, dict]:
    """The closed loop over prefill and decode pools in closed form. Each decode instance
    holds its share of the clients (``concurrency / instances``, at most its running cap)
    decoding at the mean context; the prefill pool is one station of its instances, each
    batching the prompts waiting for it up to its ranks' token budgets, that the clients
    visit between decodes, solved as ``batched_sojourn`` (the calibration reads the anchors'
    TTFTs with the same station); each prompt's KV then crosses the link alone. TTFT =
    frontend latency + prefill sojourn + the transfer + the wait for a decode slot past the decode
    workers' running limit; a round adds the decode."""
    from inferasim.arch.interconnect import kv_link_plan
    from inferasim.config.loader import pool_scenario
    from inferasim.cost.calibrated import CalibratedOracle
    from inferasim.cost.oracle import StepBatch
    from inferasim.cost.prefill_reading import batched_prefill
    from inferasim.cost.ttft_model import batched_sojourn, slot_wait
    from inferasim.serve.topology import full_kv_bytes_per_token

    store = _as_store(others)
    pre_sc = pool_scenario(target, "prefill", check_fit=False)
    dec_sc = pool_scenario(target, "decode", check_fit=False)
    pre, dec = CalibratedOracle(pre_sc, store, knobs), CalibratedOracle(dec_sc, store, knobs)
    wl, spec, topo = target.workload, dec.scenario.speculative, target.topology
    conc = int(wl.concurrency)
    cap = dec_sc.engine.max_num_seqs * dec_sc.parallel.dp_attention
    per_decoder = max(1, min(cap, round(conc / topo.decode.instances)))
    step = dec.step(StepBatch(decode_context=np.full(per_decoder, wl.isl + wl.osl / 2.0),
                              width=spec.verify_width)).seconds
    tpot = step / spec.tokens_per_step
    server = batched_prefill(pre, int(wl.isl))
    link = kv_link_plan(target)   # the link the replay's transfers cross
    transfer = wl.isl * full_kv_bytes_per_token(pre_sc) / link.bytes_per_s + link.latency_s
    frontend = pre.frontend_latency(conc)
    decode_s = (wl.osl - 1) * tpot
    # more clients than the decode instances run at once: a first token waits for a slot
    slots = cap * topo.decode.instances
    waited = slot_wait(decode_s, conc, slots)
    away = frontend + transfer + decode_s + waited
    sojourn = batched_sojourn(server, conc, away, topo.prefill.instances)
    ttft = frontend + sojourn + transfer + waited
    rnd = ttft + decode_s
    pred = {"tput_per_gpu": conc * (wl.isl + wl.osl) / rnd / target.total_gpus,
            "tpot": tpot, "ttft": ttft}
    calibration = dict(pre.calibration)
    calibration["decode_pool"] = dict(dec.calibration)
    return pred, 0, calibration


def validate_store(store: AnchorStore, *, knobs: Knobs | None = None,
                   templates: Path | None = TEMPLATE_DIR,
                   target_requests: int = TARGET_REQUESTS,
                   max_replay_concurrency: int = MAX_REPLAY_CONCURRENCY,
                   max_colocated_replay_concurrency: int = MAX_COLOCATED_REPLAY_CONCURRENCY,
                   hold_out: str = "point", date_as_build: bool = False,
                   isl_split: IslSplit | None = None) -> list[GroupResult]:
    if hold_out not in HOLD_OUT:
        raise ValueError(f"hold_out must be one of {HOLD_OUT}, not {hold_out!r}")
    knobs = knobs or Knobs()
    split = isl_split or IslSplit()
    temps = load_templates(templates)
    by_shape = hold_out in ("shape", "isl")
    by_model = hold_out == "model"
    # a held-out anchor's whole regime (or its model's) removed: priced as a prior or not at all
    by_prior = hold_out in ("model", "layout")
    records_in = dates_as_builds(store) if date_as_build else list(store)
    # leaving a model out, every other model's anchors: one store per model held out
    without: dict[Any, AnchorStore] = {}
    # The other regimes stand beside a held-out anchor's own in the store it is priced from,
    # as in a run: a regime measured at one prompt length carries its prefill slope from them
    # (cost/prefill_prior.py). Their readings are taken once, from the whole store.
    full = AnchorStore(records_in)
    if not by_prior:   # a prior's hold-out stores read their own
        store_slopes(full, knobs)
    results: list[GroupResult] = []
    for key, records in regime_groups(records_in, by_build=not (by_shape or by_prior)).items():
        label = group_label(records[0], with_build=not (by_shape or by_prior))
        if by_model:
            label = f"{records[0].regime.model} {label}"
        usable = [r for r in records if _decodable(r)]
        if not nz.modelled(records[0].regime.engine):
            results.append(GroupResult(label, len(records), skipped=(
                f"engine {records[0].regime.engine} is not modelled by inferasim")))
            continue
        if all(r.workload.dataset == "agentx" for r in records):
            # their lanes think and share a cached context: no closed loop of random prompts
            # reproduces them, and they record no TTFT or TPOT to score
            results.append(GroupResult(label, len(records), skipped=(
                "AgentX runs: scored by `inferasim validate agentx`, not replayed here")))
            continue
        if len(usable) < (1 if by_prior else 2):
            results.append(GroupResult(label, len(records), skipped=(
                f"{len(usable)} anchor(s) with a closed-loop decode step; leave-one-out needs 2")))
            continue
        if hold_out == "isl" and not (
                any(split.held(r.workload.isl) for r in usable)
                and any(split.fitted(r.workload.isl) for r in usable)):
            results.append(GroupResult(label, len(records), skipped=(
                f"no {split.describe()}")))
            continue
        if by_shape and len({shape_of(r) for r in usable}) < 2:
            results.append(GroupResult(label, len(records), skipped=(
                f"one ISL/OSL ({'/'.join(map(str, shape_of(usable[0])))}): no other shape "
                "to project from")))
            continue
        try:
            template_name, base = base_scenario(usable[0], temps)
            anchor_workload(base, usable[0])   # a deployment the anchor does not record
        except ConfigError as exc:
            results.append(GroupResult(label, len(records), skipped=str(exc)))
            continue
        preds: list[Prediction] = []
        notes: set[str] = set()
        own = regime_key(records[0])[:-1]
        beside_ids = [r.id for r in records_in if regime_key(r)[:-1] != own]
        for held in usable:
            if by_model:
                model = held.regime.model
                if model not in without:
                    without[model] = AnchorStore(r for r in records_in
                                                 if r.regime.model != model)
                others = without[model]
            elif hold_out == "layout":
                if key not in without:
                    without[key] = AnchorStore(r for r in records_in
                                               if regime_key(r)[:-1] != key)
                others = without[key]
            elif hold_out == "isl":
                if not split.held(held.workload.isl):
                    continue
                others = [r for r in usable if split.fitted(r.workload.isl)]
            elif by_shape:
                others = [r for r in usable if shape_of(r) != shape_of(held)]
            else:
                others = [r for r in usable if r.id != held.id]
            target = anchor_workload(base, held, target_requests=target_requests)
            build = held.provenance.build or ""
            if by_shape and build:
                # its own build preferred among the other shapes, crossed where it has none
                target = attrs.evolve(target, engine=attrs.evolve(target.engine, version=build))
            if not by_prior:  # another regime's acceptance is not this one's
                target = _with_measured_acceptance(target, others)
            priced_from = others if by_prior else full.subset(
                [r.id for r in others] + beside_ids)
            started = time.perf_counter()
            limit = max_replay_concurrency if held.regime.disaggregated \
                else max_colocated_replay_concurrency
            method = "replay" if held.workload.concurrency <= limit else "closed-form"
            try:
                if method == "replay":
                    pred, n, cal = predict(target, priced_from, knobs,
                                           held.measurements.tpot_statistic)
                else:
                    pred, n, cal = predict_closed_form(target, priced_from, knobs)
            except ConfigError as exc:
                notes.add(f"{held.id}: {exc}")
                continue
            # a disaggregated deployment's throughput and TPOT are its decode pool's
            cal = cal.get("decode_pool", cal)
            mode = cal.get("mode")
            if mode != "anchored" and not by_prior:
                notes.add(f"{held.id}: not calibrated ({cal.get('fallback')})")
                continue
            calibration = f"prior: {cal.get('prior_level')}" if mode == "prior" else mode
            notes.update(n for n in cal.get("notes", ()) if not n.startswith("build"))
            used = set(cal.get("anchors_used", ()))
            preds.append(Prediction(
                anchor=held.id, group=label, isl=held.workload.isl, osl=held.workload.osl,
                concurrency=int(held.workload.concurrency), measured=measured_metrics(held),
                predicted=pred, replay_requests=n, wall_s=time.perf_counter() - started,
                method=method, excluded=_inconsistent(held),
                bracketed=not by_prior and _bracketed(held, others, used),
                same_build=not by_prior and _calibrated_by_own_build(held, others, used),
                calibration=calibration, model=held.regime.model,
                family=family_of(held).label))
        results.append(GroupResult(label, len(records), predictions=tuple(preds),
                                   template=template_name, notes=tuple(sorted(notes))))
    return results


def _meeting(stats: Iterable[tuple[str, dict[str, dict[str, float | None]]]]
             ) -> dict[str, Any]:
    """Per metric, which of the (key, error_stats) pairs with at least TARGET_MIN_SCORED
    scored points meet TARGETS and which miss."""
    stats = list(stats)
    out: dict[str, Any] = {}
    for metric, limit in TARGETS.items():
        met, missed = [], []
        for key, by_metric in stats:
            st = by_metric[metric]
            if st["n"] >= TARGET_MIN_SCORED and st["median_abs"] is not None:
                (met if st["median_abs"] <= limit else missed).append(key)
        out[metric] = {"met": met, "missed": missed}
    return out


def targets_met(results: Iterable[GroupResult]) -> dict[str, Any]:
    """Per metric, which groups with enough scored points meet TARGETS and which miss."""
    return {"min_scored": TARGET_MIN_SCORED, "targets": dict(TARGETS),
            **_meeting((g.key, g.stats()) for g in results if not g.skipped)}


def family_targets(preds: list[Prediction]) -> dict[str, Any]:
    """The same per family, every regime of it pooled (issue 30's bar is per family)."""
    return {"min_scored": TARGET_MIN_SCORED, **_meeting(stats_by(preds, "family").items())}


METHODS = {
    "point": ("leave-one-out within each regime and build: each anchor's workload (random, its "
              "ISL/OSL/concurrency) replayed with the calibrated oracle built from the other "
              "anchors of its group"),
    "shape": ("leave-one-shape-out within each regime: each anchor's workload replayed with the "
              "calibrated oracle built from its regime's anchors at other ISL/OSL, its own build "
              "preferred"),
    "model": ("every anchor of a model held out: each anchor's workload replayed with the "
              "oracle the other models' anchors give it (a prior from its part and engine, "
              "else the analytic model), labelled with which"),
    "layout": ("every anchor of a regime held out (its layout, dtypes and topology on its part "
               "and engine): each anchor's workload replayed with the oracle the rest of the "
               "store gives it (a prior from its part and engine's other regimes, else the "
               "analytic model), labelled with which"),
    "isl": ("long prompts held out within each regime: each anchor of {held} replayed with "
            "the calibrated oracle built from its regime's anchors of the others, its own build "
            "preferred"),
}


def stats_by(preds: list[Prediction], field: str) -> dict[str, dict[str, dict[str, float | None]]]:
    """Error statistics per value of a prediction's ``field`` (``model``, ``calibration``)."""
    values = sorted({getattr(p, field) or "?" for p in preds})
    return {v: error_stats(p for p in preds if (getattr(p, field) or "?") == v)
            for v in values}


def report_dict(results: list[GroupResult], hold_out: str = "point",
                isl_split: IslSplit | None = None) -> dict[str, Any]:
    all_preds = [p for g in results for p in g.predictions]
    method = METHODS[hold_out]
    if hold_out == "isl":
        method = method.format(held=(isl_split or IslSplit()).describe())
    return {
        "method": method,
        "hold_out": hold_out,
        "overall": error_stats(all_preds),
        "overall_bracketed": error_stats(p for p in all_preds if p.bracketed),
        "overall_sweep_ends": error_stats(p for p in all_preds if not p.bracketed),
        "overall_same_build": error_stats(p for p in all_preds if p.same_build),
        "overall_cross_build": error_stats(p for p in all_preds if not p.same_build),
        "overall_by_calibration": stats_by(all_preds, "calibration"),
        "overall_by_model": stats_by(all_preds, "model"),
        "overall_by_family": stats_by(all_preds, "family"),
        "targets": targets_met(results),
        "family_targets": family_targets(all_preds),
        "groups": [{
            "group": g.key, "anchors": g.anchors, "skipped": g.skipped, "template": g.template,
            "stats": g.stats() if not g.skipped else None, "notes": list(g.notes),
            "predictions": [{
                "anchor": p.anchor, "isl": p.isl, "osl": p.osl, "concurrency": p.concurrency,
                "measured": p.measured, "predicted": p.predicted,
                "error": {m: p.error(m) for m in METRICS},
                "method": p.method, "bracketed": p.bracketed, "same_build": p.same_build,
                "calibration": p.calibration,
                "excluded": p.excluded,
                "replay_requests": p.replay_requests, "wall_s": round(p.wall_s, 3),
            } for p in g.predictions],
        } for g in results],
    }

