"""Anchor files and the store: load a folder, answer "which anchors may price this target?".

``store.for_target(scenario)`` returns a ``TargetAnchors``: the usable anchors, the refused
ones (each naming the axes that differed), whether the usable set crosses to another engine
build, and coverage notes (prefill probe too short -> prefill refused; decode sweep short of the
target's batch -> warned, with no claim of direction). ``store.frame(records)`` gives the
oracle one row per anchor.
"""

from __future__ import annotations

import difflib
import json
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs
import pandas as pd
import yaml

from inferasim.anchors import normalise as nz
from inferasim.anchors.record import SCHEMA_VERSION, AnchorRecord
from inferasim.anchors.regime import AxisMismatch, Target, compare, settle
from inferasim.config.catalog import REPO_ROOT
from inferasim.config.errors import ConfigError
from inferasim.config.paths import read_text
from inferasim.config.versions import version_tuple
from inferasim.report.atomic import write_text_atomic

DEFAULT_ANCHOR_DIR = REPO_ROOT / "anchors"
ANCHOR_SUFFIXES = (".json", ".yaml", ".yml")

#: A prefill probe fits a context curve only with this many distinct prompt lengths (the
#: curve then carries to any prompt; the report says when it goes past the probe's longest).
PREFILL_MIN_ISLS = 3
#: A shorter probe (one or two ISLs) fits no curve, but calibrates a target whose ISL lies
#: within this factor of a probed one: no curve is needed to stay where it measured.
PREFILL_POINT_BAND = 1.25

#: Where no anchor of the target's regime exists, the resolution chain's next steps, nearest
#: first: each names the regime axes it may cross. What is crossed is priced by the analytic
#: model on both sides (the anchor's own model, weights, KV and layout against the target's),
#: so what an anchor carries over is how far its part and engine ran from the analytic step,
#: not its step. Speculative regimes are never a prior to another width: a verify step of
#: another width is another step; a speculative target with nothing nearer reads its part and
#: engine's plain regimes, last (below). Nor is the engine crossed: held out by model, a
#: prior from the part's other engines did worse than the analytic model on two of the three
#: regimes it reached and barely better on the third (DeepSeek-R1 SGLang and TRT-LLM on H200
#: from vLLM's grids, GLM-5 vLLM MTP from SGLang and TRT-LLM; docs/anchors.md, "A prior per
#: part and engine"). Past the part,
#: the same model under the same engine on another part of the same ISA (MI300X and MI325X,
#: H100 and H200, B200 and GB200): the same kernels on the same silicon generation, other
#: memory and clocks, which the analytic step reads from each part's own figures. Not another
#: model there: nothing held out supports it, and the vLLM H200 grids' MoE models would price
#: Llama-3.1-8B on an H100 at 4.6x the analytic TPOT (docs/anchors.md, "A prior per model, ISA
#: and engine"). Then the analytic model.
_LAYOUT_AXES = frozenset({"weight_dtype", "kv_dtype", "tp", "ep", "dp_attention", "dcp"})
PRIOR_LEVELS = (
    ("part and engine", _LAYOUT_AXES | {"model"}),
    ("model, ISA and engine", _LAYOUT_AXES | {"gpu"}),
    # A speculative target with none of the above: the part and engine's plain regimes,
    # their steps read plain and the target's verify step priced at its width (its
    # acceptance is read apart, anchors/acceptance.py). Without it such a target fell to the
    # analytic step while its plain neighbours took the prior, and a search or a comparison
    # set an uncalibrated verify step against calibrated plain ones (docs/anchors.md,
    # "Speculative targets read the plain regimes of their part").
    ("part and engine, plain decoding", _LAYOUT_AXES | {"model", "speculative"}),
)


# ---------------------------------------------------------------- files


def read_anchor_file(path: str | Path) -> list[AnchorRecord]:
    """Records of one anchor file (JSON or YAML, ``{schema_version, anchors: [...]}``)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError("anchor file not found", file=str(path))
    text = read_text(path, "an anchor file (JSON or YAML)")
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise ConfigError(f"not valid {path.suffix.lstrip('.').upper()}: {exc}".splitlines()[0],
                          file=str(path)) from None
    if not isinstance(data, dict) or "anchors" not in data:
        raise ConfigError("expected a mapping with 'schema_version' and 'anchors'", file=str(path))
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ConfigError(f"schema_version {version!r} is not supported (expected "
                          f"{SCHEMA_VERSION})", file=str(path), key="schema_version")
    items = data["anchors"]
    if not isinstance(items, list):
        raise ConfigError("expected a list", file=str(path), key="anchors")
    return [settle(AnchorRecord.from_dict(item, file=str(path), key=f"anchors[{i}]"))
            for i, item in enumerate(items)]


def write_anchor_file(path: str | Path, records: Sequence[AnchorRecord],
                      generated_by: str | None = None) -> Path:
    """Write records atomically (a temporary file in the same folder, then a rename)."""
    path = Path(path)
    if path.suffix not in ANCHOR_SUFFIXES:
        raise ConfigError(f"anchor files end in {', '.join(ANCHOR_SUFFIXES)}", file=str(path))
    ids = Counter(r.id for r in records)
    dupes = [i for i, n in ids.items() if n > 1]
    if dupes:
        raise ConfigError(f"duplicate anchor id {dupes[0]!r}", file=str(path))
    doc: dict[str, Any] = {"schema_version": SCHEMA_VERSION}
    if generated_by:
        doc["generated_by"] = generated_by
    doc["anchors"] = [r.to_dict() for r in records]
    for i, item in enumerate(doc["anchors"]):
        # what loading the file will check, checked before it is written: an importer's row
        # with a value out of range (a negative count, say) is refused here, not later
        AnchorRecord.from_dict(item, file=str(path), key=f"anchors[{i}]")
    if path.suffix == ".json":
        text = json.dumps(doc, indent=1, allow_nan=False) + "\n"
    else:
        text = yaml.safe_dump(doc, sort_keys=False)
    return write_text_atomic(path, text)


# ---------------------------------------------------------------- for_target result


@attrs.frozen
class Refusal:
    anchor: AnchorRecord
    mismatches: tuple[AxisMismatch, ...]

    @property
    def axes(self) -> tuple[str, ...]:
        return tuple(m.axis for m in self.mismatches)

    @property
    def reason(self) -> str:
        return "; ".join(str(m) for m in self.mismatches)


@attrs.frozen
class TargetAnchors:
    """What the store can offer one target."""

    target: Target
    # Anchors that may price the target (of its build when any are).
    usable: tuple[AnchorRecord, ...]
    refused: tuple[Refusal, ...]
    # Regime-compatible anchors of other builds, left out because the target's build has some.
    set_aside: tuple[AnchorRecord, ...] = ()
    # True when no usable anchor is of the target's build and other builds are used instead.
    crossed_build: bool = False
    build_note: str | None = None
    # False: the prefill falls back to the analytic model (decode may still be calibrated).
    prefill_calibrated: bool = False
    prefill_note: str | None = None
    warnings: tuple[str, ...] = ()
    # Anchor id -> regime axes it does not record (skipped in the comparison).
    skipped_axes: dict[str, tuple[str, ...]] = attrs.field(factory=dict)
    # No anchor of the target's regime: ``usable`` is a prior from the level of
    # PRIOR_LEVELS named here (other models or layouts on the part), and ``refused`` still
    # lists every anchor the regime refused.
    prior_level: str | None = None

    @property
    def calibrated(self) -> bool:
        return bool(self.usable)

    @property
    def prior_note(self) -> str | None:
        if self.prior_level is None:
            return None
        models = sorted({r.regime.model or "?" for r in self.usable})
        engines = sorted({r.regime.engine or "?" for r in self.usable})
        return (f"prior: no anchor of this regime; {len(self.usable)} anchor(s) of the same "
                f"{self.prior_level} ({', '.join(models)} under {', '.join(engines)}) carry "
                "how far their part and engine ran from the analytic step, each against its "
                "own model's analytic step on its own part; a prior, not a measurement of this "
                "deployment")

    @property
    def notes(self) -> list[str]:
        out = []
        if not self.usable:
            out.append("no usable anchor: the oracle falls back to the analytic model")
        if self.prior_level is not None:
            out.append(self.prior_note)
        if self.build_note:
            out.append(self.build_note)
        if self.prefill_note:
            out.append(self.prefill_note)
        out.extend(self.warnings)
        return out

    def refused_by_axis(self) -> dict[str, int]:
        counts: Counter[str] = Counter()
        for refusal in self.refused:
            counts.update(refusal.axes)
        return dict(counts.most_common())

    def frame(self) -> pd.DataFrame:
        return anchor_frame(self.usable)

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": attrs.asdict(self.target),
            "usable": [r.id for r in self.usable],
            "refused": [{"id": r.anchor.id, "axes": list(r.axes), "reason": r.reason}
                        for r in self.refused],
            "set_aside": [r.id for r in self.set_aside],
            "crossed_build": self.crossed_build,
            "build_note": self.build_note,
            "prefill_calibrated": self.prefill_calibrated,
            "prefill_note": self.prefill_note,
            "warnings": list(self.warnings),
            "skipped_axes": {k: list(v) for k, v in self.skipped_axes.items()},
            "prior_level": self.prior_level,
            "notes": self.notes,
        }


FRAME_COLUMNS = ("id", "source", "engine", "gpu", "build", "date", "isl", "osl", "concurrency",
                 "decode_step_s", "decode_step_source", "tpot_mean_s", "itl_median_s", "ttft_s",
                 "ttft_mean_s", "ttft_median_s", "tput_per_gpu_total", "tput_per_gpu_output",
                 "tput_per_gpu_input", "interactivity", "tp", "ep", "dp_attention",
                 "spec_method", "draft_tokens", "replicas")


def anchor_frame(records: Iterable[AnchorRecord]) -> pd.DataFrame:
    """One row per anchor: workload, derived decode step (s), TTFT (s; median when recorded,
    else mean) and per-GPU throughput (tok/s), with the regime facts the oracle transports by."""
    rows = []
    for r in records:
        step, basis = r.decode_step
        m, reg, w = r.measurements, r.regime, r.workload
        rows.append({
            "id": r.id, "source": r.provenance.source, "engine": reg.engine, "gpu": reg.gpu,
            "build": r.provenance.build, "date": r.provenance.date,
            "isl": w.isl, "osl": w.osl, "concurrency": w.concurrency,
            "decode_step_s": step, "decode_step_source": basis,
            "tpot_mean_s": m.tpot_mean_s, "itl_median_s": m.itl_median_s,
            "ttft_s": r.ttft_s, "ttft_mean_s": m.ttft_mean_s, "ttft_median_s": m.ttft_median_s,
            "tput_per_gpu_total": m.tput_per_gpu_total,
            "tput_per_gpu_output": m.tput_per_gpu_output,
            "tput_per_gpu_input": m.tput_per_gpu_input, "interactivity": m.interactivity,
            "tp": reg.tp, "ep": reg.ep, "dp_attention": reg.dp_attention,
            "spec_method": reg.spec_method, "draft_tokens": reg.draft_tokens,
            "replicas": reg.replicas,
        })
    frame = pd.DataFrame(rows, columns=list(FRAME_COLUMNS))
    return frame.sort_values(["isl", "osl", "concurrency", "id"], na_position="last",
                             ignore_index=True) if len(frame) else frame


# ---------------------------------------------------------------- the store


class AnchorStore:
    """Anchors loaded from files; ids are unique across the store."""

    def __init__(self, records: Iterable[AnchorRecord] = (), *,
                 origins: dict[str, str] | None = None):
        self._records: dict[str, AnchorRecord] = {}
        self._origins: dict[str, str] = {}
        self._memo: dict[str, object] = {}
        # for_target's answers, per store (not shared with subsets: they hold other records)
        self._targets: dict[tuple[Target, bool], TargetAnchors] = {}
        origins = origins or {}
        for record in records:
            record = settle(record)
            where = origins.get(record.id, "<memory>")
            if record.id in self._records:
                raise ConfigError(f"duplicate anchor id {record.id!r} (also in "
                                  f"{self._origins[record.id]})", file=where)
            self._records[record.id] = record
            self._origins[record.id] = where

    @classmethod
    def load(cls, path: str | Path | None = None) -> AnchorStore:
        """Every anchor file in a folder (recursively), or one file; default ``anchors/``."""
        root = Path(path) if path is not None else DEFAULT_ANCHOR_DIR
        if root.is_file():
            files = [root]
        elif root.is_dir():
            files = sorted(p for p in root.rglob("*") if p.suffix in ANCHOR_SUFFIXES
                           and p.is_file() and not p.name.startswith("."))
        else:
            raise ConfigError("anchor folder not found", file=str(root))
        records: list[AnchorRecord] = []
        origins: dict[str, str] = {}
        for file in files:
            for record in read_anchor_file(file):
                if record.id in origins:
                    raise ConfigError(f"duplicate anchor id {record.id!r} (also in "
                                      f"{origins[record.id]})", file=str(file))
                origins[record.id] = str(file)
                records.append(record)
        return cls(records, origins=origins)

    def ids(self) -> frozenset[str]:
        """Every anchor id the store holds."""
        return frozenset(self._records)

    def memo(self, name: Hashable, compute):
        """``compute()``, remembered under ``name`` for this store's life (and the stores
        sharing its memo): what the calibration derives from the whole store (the prefill
        slopes its regimes identify) is read once, not once per oracle."""
        if name not in self._memo:
            self._memo[name] = compute()
        return self._memo[name]

    def subset(self, ids: Iterable[str]) -> AnchorStore:
        """The store of these anchors, in this order, as this store settled them, sharing its
        memo: what the memo holds is read per anchor id, so it stays true of any subset (a
        validation's hold-out stores), and nothing is settled twice."""
        out = AnchorStore()
        out._memo = self._memo
        for anchor_id in ids:
            out._records[anchor_id] = self._records[anchor_id]
            out._origins[anchor_id] = self._origins[anchor_id]
        return out

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self):
        return iter(self._records.values())

    @property
    def records(self) -> tuple[AnchorRecord, ...]:
        return tuple(self._records.values())

    def origin(self, anchor_id: str) -> str:
        return self._origins.get(anchor_id, "<memory>")

    def get(self, anchor_id: str) -> AnchorRecord:
        if anchor_id in self._records:
            return self._records[anchor_id]
        near = difflib.get_close_matches(anchor_id, list(self._records), n=1, cutoff=0.6)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise ConfigError(f"no anchor {anchor_id!r}{hint}; {len(self)} anchors loaded")

    def frame(self, records: Iterable[AnchorRecord] | TargetAnchors | None = None) -> pd.DataFrame:
        """The oracle's view: (isl, osl, concurrency, decode_step_s, ttft, throughput ...)."""
        if records is None:
            records = self.records
        if isinstance(records, TargetAnchors):
            records = records.usable
        return anchor_frame(records)

    def for_target(self, scenario: Any, *, isl: int | None = None,
                   batch: int | None = None, prior: bool = True) -> TargetAnchors:
        """Anchors usable for a scenario (or a ``Target``), the refused ones with their axes,
        the build preference and the coverage notes. With none of the target's regime and
        ``prior``, the nearest level of PRIOR_LEVELS that holds anchors stands in for them
        (``TargetAnchors.prior_level`` says which)."""
        target = scenario if isinstance(scenario, Target) else Target.from_scenario(scenario)
        if isl is not None or batch is not None:
            target = attrs.evolve(target, isl=isl if isl is not None else target.isl,
                                  batch=batch if batch is not None else target.batch)
        # Remembered: a search or a validation asks for one target thousands of times, and
        # the answer is a function of the target and the store's records alone.
        found = self._targets.get((target, prior))
        if found is None:
            found = self._targets[(target, prior)] = self._for_target(target, prior)
        return found

    def _for_target(self, target: Target, prior: bool) -> TargetAnchors:
        compatible: list[AnchorRecord] = []
        refused: list[Refusal] = []
        skipped: dict[str, tuple[str, ...]] = {}
        for record in self._records.values():
            diffs, unknown = compare(record.regime, target)
            if diffs:
                refused.append(Refusal(record, tuple(diffs)))
            else:
                compatible.append(record)
                if unknown:
                    skipped[record.id] = tuple(unknown)
        usable, set_aside, crossed, build_note = _prefer_build(compatible, target.build)
        level = None
        if not usable and prior:
            level, usable = _prior(refused, target.build, target.gpu_isa)
        prefill_ok, prefill_note = prefill_coverage(usable, target.isl)
        warnings = _contradictions(usable) + _decode_coverage(usable, target.batch)
        return TargetAnchors(
            target=target, usable=tuple(usable), refused=tuple(refused),
            set_aside=tuple(set_aside), crossed_build=crossed, build_note=build_note,
            prefill_calibrated=prefill_ok, prefill_note=prefill_note, warnings=tuple(warnings),
            skipped_axes={k: v for k, v in skipped.items() if any(r.id == k for r in usable)},
            prior_level=level,
        )


def _prior(refused: list[Refusal], build: str, isa: str | None
           ) -> tuple[str | None, list[AnchorRecord]]:
    """The nearest level of PRIOR_LEVELS that holds anchors, and those anchors: within each
    regime they hold (its part, model, weights, KV, layout, engine), the target's build where
    that regime has it, else its newest build, as for the target's own anchors (builds months
    apart are not pooled). Another part counts only where its ISA is the target's ``isa``.
    Engines inferasim does not model, anchors without a closed-loop decode step, and agentic
    rungs whose steps' prompt share is unknown (``AnchorRecord.prompt_share_unknown``) are no
    prior."""
    for level, crossing in PRIOR_LEVELS:
        found = [r.anchor for r in refused if set(r.axes) <= crossing
                 and ("gpu" not in r.axes or (isa and r.anchor.regime.gpu_isa == isa))
                 and nz.modelled(r.anchor.regime.engine) and r.anchor.regime.model is not None
                 and r.anchor.decode_step_s is not None
                 and not r.anchor.prompt_share_unknown
                 and ("speculative" not in r.axes or r.anchor.regime.spec_method == "none")]
        if not found:
            continue
        regimes: dict[tuple, list[AnchorRecord]] = {}
        for r in found:
            reg = r.regime
            regimes.setdefault((reg.gpu, reg.model, reg.weight_dtype, reg.kv_dtype, reg.tp,
                                reg.ep, reg.dp_attention, reg.dcp, reg.engine, reg.spec_method,
                                reg.draft_tokens), []).append(r)
        chosen: list[AnchorRecord] = []
        for group in regimes.values():
            same = [r for r in group if build and _build_matches(r, build)]
            chosen += same or _newest_build(group)[0]
        return level, chosen
    return None, []


def _build_matches(record: AnchorRecord, build: str) -> bool:
    from inferasim.anchors.normalise import build_matches

    return build_matches(build, record.provenance.image, record.provenance.engine_version)


def _newest_build(records: list[AnchorRecord]
                  ) -> tuple[list[AnchorRecord], list[AnchorRecord], str | None]:
    """A target naming no build: the newest build the compatible anchors hold (the latest
    run date among its records), the others set aside. Builds months apart differ by 30% and
    more on one regime (docs/anchors.md), so pooling them calibrates no deployment anyone
    runs; the newest is the one a user starting today most likely runs. Records that name no
    build are one group; when no record names one, all are kept (nothing tells them apart)."""
    groups: dict[str | None, list[AnchorRecord]] = {}
    for r in records:
        groups.setdefault(r.provenance.build, []).append(r)
    if len(groups) < 2:
        return records, [], None
    def age(build: str | None) -> tuple:
        # the latest run date, then the version number the build names (records undated)
        recs = groups[build]
        version = max((version_tuple(r.provenance.engine_version or r.provenance.build)
                       or () for r in recs), default=())
        return (max(r.provenance.date or "" for r in recs), build is not None, version)

    newest = max(groups, key=age)
    keep = groups[newest]
    aside = [r for r in records if r.provenance.build != newest]
    date = max(r.provenance.date or "" for r in keep) or "undated"
    name = newest or "(unrecorded build)"
    note = (f"build: engine.version not set; using the newest build the anchors hold for "
            f"this regime, {name} ({len(keep)} anchors, run {date}); {len(aside)} anchors of "
            f"{len(groups) - 1} other build(s) set aside (set engine.version to choose one)")
    return keep, aside, note


def _prefer_build(records: list[AnchorRecord], build: str
                  ) -> tuple[list[AnchorRecord], list[AnchorRecord], bool, str | None]:
    if not records:
        return records, [], False, None
    if not build:
        keep, aside, note = _newest_build(records)
        return keep, aside, False, note
    same = [r for r in records if _build_matches(r, build)]
    other = [r for r in records if not _build_matches(r, build)]
    if same:
        note = None
        if other:
            note = (f"build: using {len(same)} anchors of build {build}; {len(other)} "
                    "regime-compatible anchors of other builds set aside")
        return same, other, False, note
    builds = sorted({r.provenance.build or "unrecorded" for r in other})
    shown = ", ".join(builds[:4]) + (f" and {len(builds) - 4} more" if len(builds) > 4 else "")
    note = (f"build crossed: no anchor of build {build}; using {len(other)} anchors of "
            f"other builds ({shown})")
    return other, [], True, note


def prefill_coverage(records: list[AnchorRecord], target_isl: int | None
                     ) -> tuple[bool, str | None]:
    if not records:
        return False, None
    isls = sorted({r.workload.isl for r in records if r.ttft_s is not None})
    fallback = ("the prefill falls back to the analytic model (TTFT keeps the anchors' time "
                "outside the engine); decode stays calibrated")
    if len(isls) < PREFILL_MIN_ISLS:
        if target_isl is not None and any(
                i / PREFILL_POINT_BAND <= target_isl <= i * PREFILL_POINT_BAND for i in isls):
            return True, None
        shown = ", ".join(str(i) for i in isls) or "none with a TTFT"
        where = ("the target's ISL is unknown" if target_isl is None
                 else f"the target's ISL {target_isl} is not within {PREFILL_POINT_BAND:g}x of it")
        return False, (f"prefill refused: the probe has {len(isls)} distinct ISL(s) ({shown}); "
                       f"a context curve needs at least {PREFILL_MIN_ISLS} and {where}; "
                       f"{fallback}")
    if target_isl is not None and isls[-1] < target_isl:
        # A curve over several ISLs is an efficiency of the analytic prefill, whose growth
        # (the attention's quadratic part included) carries it on: held out of the ISL grids,
        # prompts of 16k-32k predicted from those of 1k-8k this way (docs/anchors.md).
        return True, (f"prefill transported: the longest probed ISL {isls[-1]} is below the "
                      f"target's ISL {target_isl}; the fitted efficiency is carried on by the "
                      "analytic prefill's growth in the prompt")
    return True, None


def _contradictions(records: list[AnchorRecord]) -> list[str]:
    """Usable anchors that calibrate nothing: which of their figures is wrong cannot be told
    when the throughput contradicts the anchor's own latency (CalibratedOracle skips them)."""
    return [f"{r.id} does not calibrate: {why}" for r in records
            if (why := r.little_mismatch())]


def _decode_coverage(records: list[AnchorRecord], batch: int | None) -> list[str]:
    if not records or batch is None:
        return []
    # the anchors that can calibrate decode: one whose throughput contradicts its own
    # latency calibrates nothing (CalibratedOracle._collect), so it covers nothing either
    concs = [r.workload.concurrency for r in records
             if r.workload.concurrency is not None and r.decode_step_s is not None
             and not r.little_mismatch()]
    if not concs:
        return [f"decode: no usable anchor records a closed-loop concurrency; the target's "
                f"batch of {batch} is not covered by a measured sweep"]
    # Below the sweep is no safer than past it: held out of the InferenceMAX history, a
    # sweep's lowest concurrency is predicted worse than its highest (docs/anchors.md).
    if batch > max(concs):
        end, side, edge = "stops", "past", max(concs)
    elif batch < min(concs):
        end, side, edge = "starts", "below", min(concs)
    else:
        return []
    return [f"decode: the measured sweep {end} at concurrency {edge}; the target asks for a "
            f"batch of {batch}; steps {side} {edge} are transported from the measured sweep, "
            "not measured"]
