"""InferenceMAX's configuration families (GPU part x framework x precision x speculative
method x disaggregated or not), the scenario that expresses each, and a scenario written for
a family that has none.

A scenario expresses a family when its regime target (``regime.Target``) names the family's
part, framework (an engine, or an engine under an orchestrator: ``dynamo-trt``), weights,
speculative method and topology. The scenario written for a family runs its most common
layout (prefill and decode pools, worker counts), at the newest build that measured that
layout and the median of its measured concurrencies; the file says which rows it came from.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs
import yaml

from inferasim.anchors import normalise as nz
from inferasim.anchors.record import AnchorRecord
from inferasim.anchors.regime import Target

#: The model InferenceMAX's rows measure, by its spelling there.
MODEL_NAMES = {"dsr1": "deepseek-r1"}


@attrs.frozen
class Family:
    gpu: str
    framework: str
    precision: str
    spec: str
    disaggregated: bool

    @property
    def label(self) -> str:
        spec = "" if self.spec == "none" else f" {self.spec}"
        return (f"{self.gpu} {self.framework} {self.precision}{spec} "
                f"{'disaggregated' if self.disaggregated else 'colocated'}")

    @property
    def weight_dtype(self) -> str | None:
        return nz.weight_dtype_for_precision(self.precision, nz.gpu_vendor(self.gpu))

    def expressed_by(self, target: Target) -> bool:
        """Whether a scenario's regime target is this family's deployment."""
        wanted = self.weight_dtype
        return (target.gpu == self.gpu and target.engine == self.framework
                and (target.topology == "disaggregated") == self.disaggregated
                and (target.spec_method or "none") == self.spec
                and any(nz.weight_dtypes_match(wanted, d) for d in target.weight_dtypes))


def family_of(record: AnchorRecord) -> Family:
    """The family of an imported InferenceMAX anchor (its regime's spellings, settled)."""
    reg = record.regime
    return Family(gpu=reg.gpu or "?", framework=reg.engine or "?",
                  precision=_precision(reg.weight_dtype), spec=reg.spec_method or "none",
                  disaggregated=reg.disaggregated)


def _precision(weight_dtype: str | None) -> str:
    # InferenceMAX spells both 4-bit formats fp4 (MXFP4 on AMD parts, NVFP4 on NVIDIA's)
    return "fp4" if weight_dtype in nz.FP4_FAMILY else (weight_dtype or "?")


def families(records: Iterable[AnchorRecord]) -> dict[Family, list[AnchorRecord]]:
    out: dict[Family, list[AnchorRecord]] = {}
    for record in records:
        out.setdefault(family_of(record), []).append(record)
    return dict(sorted(out.items(), key=lambda kv: kv[0].label))


def scenario_for(family: Family, scenarios: Mapping[str, Target]) -> str | None:
    """The first scenario (by name) that expresses ``family``, or None."""
    return next((name for name, target in sorted(scenarios.items())
                 if family.expressed_by(target)), None)


# ---------------------------------------------------------------- writing a scenario


def _layout(record: AnchorRecord) -> tuple:
    reg = record.regime
    own = (reg.tp, reg.ep, reg.dp_attention)
    if not reg.disaggregated:
        return own
    return own + (reg.decode_workers, reg.prefill_tp, reg.prefill_ep,
                  reg.prefill_dp_attention, reg.prefill_workers)


def _expressible(record: AnchorRecord) -> bool:
    reg = record.regime
    return bool(reg.tp) and (not reg.disaggregated
                             or bool(reg.prefill_workers and reg.decode_workers))


def scenario_text(family: Family, rows: list[AnchorRecord], source: str) -> tuple[str, str]:
    """(file name, YAML text) of a scenario for ``family`` from its rows; ValueError when no
    row records a layout inferasim can run."""
    usable = [r for r in rows if _expressible(r)]
    if not usable:
        raise ValueError(f"{family.label}: no row records its layout (worker counts 0)")
    counts = Counter(_layout(r) for r in usable)
    # the most common layout; among equals, the one measured most recently
    layout = max(counts, key=lambda lay: (counts[lay], max(
        r.provenance.date or "" for r in usable if _layout(r) == lay)))
    chosen = [r for r in usable if _layout(r) == layout]
    newest = max(chosen, key=lambda r: r.provenance.date or "")
    reg = newest.regime
    orchestrator, engine = nz.worker_engine(family.framework)
    tag = nz.image_tag(newest.provenance.image) if newest.provenance.image else None
    conc = int(statistics.median_low(sorted(int(r.workload.concurrency) for r in chosen)))
    osl = Counter(int(r.workload.osl) for r in chosen).most_common(1)[0][0]
    model = MODEL_NAMES.get((reg.model or "").lower(), nz.model_name(reg.model) or "deepseek-r1")
    tp, ep, dpa = layout[:3]
    name = "-".join(p for p in (
        "dsr1", family.gpu, family.framework, family.weight_dtype or family.precision,
        family.spec if family.spec != "none" else "",
        "disagg" if family.disaggregated else f"tp{tp}", ) if p)
    lines = [
        f"# InferenceMAX DeepSeek-R1-0528: {family.framework} on {family.gpu}, "
        f"{family.weight_dtype} weights, {family.spec if family.spec != 'none' else 'no'} "
        f"speculation, {'disaggregated' if family.disaggregated else 'colocated'}.",
        "# Written by `inferasim anchors families --write-missing` from "
        f"{len(rows)} row(s) of {source};",
        f"# the layout is the family's most common ({len(chosen)} of {len(usable)} rows with a "
        "recorded layout),",
        f"# the build the newest of those rows ({newest.provenance.image or 'unrecorded'}), "
        f"the load their median concurrency ({conc}).",
    ]
    # the running limit where every row at that load carries the same one (the rows take it
    # from their launch recipes: importers/launch_recipes.py)
    limits = {r.regime.max_num_seqs for r in chosen if int(r.workload.concurrency) == conc}
    limit = limits.pop() if len(limits) == 1 else None
    lines.append("# Not recorded by the rows (the engine's defaults stand): KV dtype, MTP depth"
                 + ("." if limit else ", running-request caps."))
    data: dict[str, Any] = {
        "extends": "_base.yaml",
        "name": f"inferencemax-{name}",
        "description": f"InferenceMAX DeepSeek-R1 {family.label}",
        "model": {"name": model, "weight_dtype": family.weight_dtype},
        "gpu": {"name": family.gpu},
        "engine": {"name": engine, **({"version": tag} if tag else {})},
        "parallel": {"tp": tp, "ep": ep or 1, "dp_attention": dpa or 1},
    }
    if limit and not family.disaggregated:
        data["engine"]["max_num_seqs"] = int(limit)
        lines.append("# engine.max_num_seqs: the server's running limit at that load, from its "
                     "launch script (anchors/importers/launch_recipes.py).")
    if family.spec != "none":
        data["speculative"] = {"method": family.spec, "draft_tokens": 3}
        lines.append("# draft_tokens 3: the usual DeepSeek MTP depth (the rows do not record it).")
    if family.disaggregated:
        _dw, ptp, pep, pdpa, pw = layout[3:]
        data["topology"] = {
            "kind": "disaggregated", "orchestrator": orchestrator,
            "prefill": {"instances": pw, "parallel": {"tp": ptp, "ep": pep or 1,
                                                      "dp_attention": pdpa or 1}},
            "decode": {"instances": layout[3]},
        }
        lines.append("# parallel: the decode pool's layout; topology.prefill.parallel the "
                     "prefill pool's.")
        if limit:
            data["topology"]["decode"]["engine"] = {"max_num_seqs": int(limit)}
            lines.append("# topology.decode.engine.max_num_seqs: the decode workers' "
                         "running limit per attention-DP rank at that load (TensorRT-LLM's "
                         "max_batch_size, SGLang's max-running-requests over its ranks), "
                         "from its launch recipe "
                         "(anchors/importers/launch_recipes.py).")
    data["workload"] = {"osl": osl, "concurrency": conc}
    body = yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100)
    return f"{name}.yaml", "\n".join(lines) + "\n" + body


def write_missing(missing: dict[Family, list[AnchorRecord]], folder: Path, source: str
                  ) -> tuple[list[Path], list[str]]:
    """Write a scenario for each family (never over an existing file); (written, problems)."""
    from inferasim.report.atomic import write_text_atomic

    written, problems = [], []
    for family, rows in missing.items():
        try:
            name, text = scenario_text(family, rows, source)
        except ValueError as exc:
            problems.append(str(exc))
            continue
        path = folder / name
        if path.exists():
            problems.append(f"{family.label}: {path} exists and does not express the family")
            continue
        write_text_atomic(path, text)
        written.append(path)
    return written, problems
