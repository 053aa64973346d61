"""A deployment search in two stages.

1. **Prune.** The closed-form projection (``sweep.projection``) prices every candidate. One whose projected SLA figure misses a bound by more than ``margin`` is pruned;
   so is one whose projected objective trails, by more than ``margin``, the best candidate
   projected to meet the SLA with ``margin`` to spare. Disaggregated candidates are priced by
   ``project_disaggregated`` (the decode pool with its requests arriving prefilled, the
   prefill pool as servers of the mean uncached prompt, the KV link once per request).
2. **Replay.** Every survivor, and a deterministic sample of the pruned (the audit), is
   replayed on the executor, each result cached by its resolved scenario's hash. The best
   replayed candidate meeting the SLA wins per objective; the audit says whether the replay
   agrees that the pruned it sampled lose.
3. **Reprieve.** A candidate pruned for trailing the best sure candidate was pruned on that
   candidate's projection; where the replays confirm no candidate within the margin of it
   (the sure one missed the SLA in its replay, or fell far short of its projection), the
   pruned that the best *replayed* candidate meeting the SLA does not beat by the margin are
   replayed too, best projected first, in rounds of ``REPRIEVE_ROUND``, until the replays
   confirm a best that beats every one left. Where the confirmed best is within the margin
   of the bar, every pruned candidate is still projected below it and stays pruned.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from inferasim.config.errors import ConfigError
from inferasim.config.knobs import Knobs
from inferasim.search.economics import economics
from inferasim.search.replay import FAILED, RECORD_VERSION, replay_task
from inferasim.search.sla import OBJECTIVES, Sla, objective_of
from inferasim.search.space import Candidate

DEFAULT_MARGIN = 0.3
DEFAULT_AUDIT = 3
AUDIT_SEED = 20261202
# Reprieved candidates replayed per round: a few per worker, so that one confirmed winner
# stops the rounds before the long tail of the pruned is replayed.
REPRIEVE_ROUND = 8
TRAILS = "trails the best sure candidate's"
REPRIEVED = "reprieved: the replays confirmed no candidate beating it by the margin"


@attrs.frozen
class Verdict:
    stage: str                      # "replay" | "pruned"
    reason: str
    projection: Mapping[str, Any] | None = None
    bar: float = math.nan           # pruned for trailing: the projected best it trailed


@attrs.frozen
class SearchResult:
    candidates: tuple[Candidate, ...]
    verdicts: tuple[Verdict, ...]
    records: dict[int, dict[str, Any]]      # replayed candidates' records by index
    walls: dict[int, float]
    audited: tuple[int, ...]
    best: dict[str, int | None]            # objective -> winning candidate index
    audit_agrees: tuple[tuple[int, bool, str], ...]
    resumed: int
    projection_error: dict[str, float | None]


def _projection_moments(scenario, cache: dict):
    from inferasim.sweep.projection import workload_moments

    wl = scenario.workload
    key = (attrs.evolve(wl, concurrency=1), scenario.engine.page_size)
    if key not in cache:
        cache[key] = workload_moments(scenario)
    return cache[key]


def project_candidate(candidate: Candidate, knobs: Knobs, moments_cache: dict,
                      prices: Mapping[str, float],
                      oracles: dict | None = None) -> Verdict | dict[str, Any]:
    """The projection of one candidate with its projected economics, or a Verdict saying why
    it has none (it then goes to the replay). ``oracles``: the step-cost oracles the search's
    projections share (one per deployment, whatever its number of clients)."""
    from inferasim.sweep.projection import project, project_disaggregated

    sc = candidate.scenario
    closed_form = project if sc.topology.kind == "colocated" else project_disaggregated
    try:
        proj = closed_form(sc, knobs, moments=_projection_moments(sc, moments_cache),
                           oracles=oracles)
    except ConfigError as exc:
        return Verdict("replay", f"not projected ({exc.message}): replayed")
    proj = dict(proj)
    # the closed forms have the engines busy throughout: the modelled draw at full use
    money = economics(sc, proj, 1.0, prices, None)
    proj.update({k: money[k] for k in ("cost_per_mtok_usd", "joules_per_token")})
    return proj


def _better(a: float, b: float, sense: int) -> bool:
    return a > b if sense > 0 else a < b


def prune(candidates: Sequence[Candidate], projections: Sequence[Verdict | dict],
          sla: Sla, objective: str, margin: float) -> list[Verdict]:
    key, sense = objective_of(objective)
    slack = 1.0 + margin
    verdicts: list[Verdict | None] = [None] * len(candidates)
    best = math.nan
    for i, proj in enumerate(projections):
        if isinstance(proj, Verdict):
            verdicts[i] = proj
            continue
        room = sla.slack(proj, projected=True)
        if room < 1.0 / slack:
            verdicts[i] = Verdict("pruned", f"projected to miss the SLA by {1 / max(room, 1e-9):.2f}x",
                                  proj)
            continue
        value = float(proj.get(key, math.nan))
        if room >= slack and math.isfinite(value) and (math.isnan(best) or _better(value, best, sense)):
            best = value
    for i, proj in enumerate(projections):
        if verdicts[i] is not None:
            continue
        value = float(proj.get(key, math.nan))
        lagging = math.isfinite(value) and math.isfinite(best) and (
            value * slack < best if sense > 0 else value > best * slack)
        if lagging:
            verdicts[i] = Verdict("pruned", f"projected {objective} {value:.4g} {TRAILS} "
                                  f"{best:.4g} by more than the margin", proj, bar=best)
        else:
            verdicts[i] = Verdict("replay", "projected within the margin", proj)
    return [v for v in verdicts if v is not None]


def reprieved(verdicts: Sequence[Verdict], records: Mapping[int, Mapping[str, Any]],
              sla: Sla, objective: str, margin: float) -> list[int]:
    """The candidates pruned for trailing the best sure candidate, not replayed, where the
    replays broke the pruning's premise (no candidate meeting the SLA within the margin of
    the bar they trailed) and the best replayed candidate meeting the SLA does not beat them
    by the margin (all of them where none meets it), best projected first."""
    key, sense = objective_of(objective)
    slack = 1.0 + margin
    met = [float(r.get(key, math.nan)) for r in records.values() if sla.met(r)]
    met = [v for v in met if math.isfinite(v)]
    confirmed = (max(met) if sense > 0 else min(met)) if met else math.nan
    out = []
    for i, v in enumerate(verdicts):
        if v.stage != "pruned" or not math.isfinite(v.bar) or i in records:
            continue
        value = float(v.projection.get(key, math.nan))
        if math.isfinite(confirmed):
            # the premise holds: a confirmed best within the margin of the bar, which the
            # candidate trailed by more than the margin, so it is projected below the best
            if confirmed * slack >= v.bar if sense > 0 else confirmed <= v.bar * slack:
                continue
            if value * slack < confirmed if sense > 0 else value > confirmed * slack:
                continue  # the confirmed best beats it by the margin
        out.append(i)
    return sorted(out, key=lambda i: -sense * float(verdicts[i].projection.get(key, math.nan)))


def audit_sample(verdicts: Sequence[Verdict], n: int) -> list[int]:
    pruned = [i for i, v in enumerate(verdicts) if v.stage == "pruned"]
    if n <= 0 or not pruned:
        return []
    rng = np.random.default_rng(AUDIT_SEED)
    return sorted(int(i) for i in rng.choice(pruned, size=min(n, len(pruned)), replace=False))


def candidate_record(candidate: Candidate, record: Mapping[str, Any],
                     prices: Mapping[str, float], store) -> dict[str, Any]:
    out = dict(record)
    out.update(economics(candidate.scenario, record, float(record.get("gpu_busy", 1.0)),
                         prices, store))
    return out


def pick_best(indices: Sequence[int], records: Mapping[int, Mapping[str, Any]], sla: Sla
              ) -> dict[str, int | None]:
    best: dict[str, int | None] = {}
    for objective, (key, sense) in OBJECTIVES.items():
        chosen, value = None, math.nan
        for i in indices:
            rec = records[i]
            v = float(rec.get(key, math.nan))
            if not sla.met(rec) or not math.isfinite(v):
                continue
            if chosen is None or _better(v, value, sense):
                chosen, value = i, v
        best[objective] = chosen
    return best


def pareto(points: Sequence[tuple[int, float, float]]) -> set[int]:
    """Indices not dominated in (throughput per GPU, interactivity), both higher-better."""
    front: set[int] = set()
    for i, x, y in points:
        if not (math.isfinite(x) and math.isfinite(y)):
            continue
        if not any((x2 >= x and y2 >= y and (x2 > x or y2 > y))
                   for j, x2, y2 in points if j != i and math.isfinite(x2) and math.isfinite(y2)):
            front.add(i)
    return front


def _audit(audited: Sequence[int], best: int | None, records, sla: Sla, objective: str
           ) -> list[tuple[int, bool, str]]:
    key, sense = objective_of(objective)
    out = []
    for i in audited:
        rec = records[i]
        if FAILED in rec:
            out.append((i, True, "served nothing in the replay"))
            continue
        if not sla.met(rec):
            out.append((i, True, "misses the SLA in the replay"))
            continue
        if best is None:
            out.append((i, False, "meets the SLA in the replay where no survivor does"))
            continue
        v, b = float(rec.get(key, math.nan)), float(records[best].get(key, math.nan))
        loses = not _better(v, b, sense)
        out.append((i, loses, f"replayed {objective} {v:.4g} against the winner's {b:.4g}"))
    return out


def _median_abs_pct(pairs: list[tuple[float, float]]) -> float | None:
    errs = [abs(p - r) / abs(r) * 100 for p, r in pairs
            if math.isfinite(p) and math.isfinite(r) and r != 0]
    return float(np.median(errs)) if errs else None


def search(candidates: Sequence[Candidate], *, sla: Sla, objective: str, knobs: Knobs,
           executor, margin: float = DEFAULT_MARGIN, audit: int = DEFAULT_AUDIT,
           prices: Mapping[str, float] | None = None, store=None,
           percentiles: Sequence[float] | None = None,
           on_projected: Callable[[int], None] | None = None,
           on_replayed: Callable[[int, int], None] | None = None) -> SearchResult:
    prices = dict(prices or {})
    objective_of(objective)
    if margin < 0:
        raise ConfigError(f"expected a margin of at least 0, got {margin:g}", key="--margin")
    moments: dict = {}
    oracles: dict = {}
    projections = []
    for i, cand in enumerate(candidates):
        projections.append(project_candidate(cand, knobs, moments, prices, oracles))
        if on_projected is not None:
            on_projected(i + 1)
    verdicts = prune(candidates, projections, sla, objective, margin)
    survivors = [i for i, v in enumerate(verdicts) if v.stage == "replay"]
    audited = audit_sample(verdicts, audit)
    todo = survivors + audited
    pct = None if percentiles is None else list(percentiles)
    records: dict[int, dict[str, Any]] = {}
    walls: dict[int, float] = {}
    progress = {"done": 0, "total": len(todo)}

    def replay(indices: list[int]) -> None:
        tasks = [(candidates[i].scenario, knobs, pct, None, RECORD_VERSION) for i in indices]
        for position, (record, wall) in executor.run(replay_task, tasks):
            i = indices[position]
            records[i] = dict(record) if FAILED in record else \
                candidate_record(candidates[i], record, prices, store)
            walls[i] = float(wall)
            progress["done"] += 1
            if on_replayed is not None:
                on_replayed(progress["done"], progress["total"])

    replay(todo)
    while True:
        batch = reprieved(verdicts, records, sla, objective, margin)[:REPRIEVE_ROUND]
        if not batch:
            break
        for i in batch:
            verdicts[i] = Verdict("replay", REPRIEVED, verdicts[i].projection)
        progress["total"] += len(batch)
        replay(batch)
        todo += batch
    if records and all(FAILED in r for r in records.values()):
        raise ConfigError(f"no deployment replayed could serve the workload (the first: "
                          f"{records[min(records)][FAILED]})", key="workload")
    best = pick_best(todo, records, sla)
    agrees = _audit(audited, best.get(objective), records, sla, objective)
    key, _ = objective_of(objective)
    pairs = [(float(verdicts[i].projection.get(key, math.nan)), float(records[i].get(key, math.nan)))
             for i in todo if verdicts[i].projection is not None]
    error = {objective: _median_abs_pct(pairs)}
    return SearchResult(tuple(candidates), tuple(verdicts), records, walls, tuple(audited), best,
                        tuple(agrees), int(getattr(executor, "resumed", 0)), error)
