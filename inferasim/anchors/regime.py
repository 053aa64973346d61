"""Regime signatures: what a target scenario asks for, how an anchor's regime is settled from
its spellings, and the distance between the two (the axes that differ).

An axis is compared only when both sides know it: ``None`` on the anchor is skipped, never
matched as wrong.
"""

from __future__ import annotations

from typing import Any

import attrs

from inferasim.anchors import normalise as nz
from inferasim.anchors.record import AnchorRecord, Regime, derive_accept_length

#: Axes that define a regime, in the order a refusal names them.
REGIME_AXES = ("model", "engine", "topology", "gpu", "gpu_isa", "kernel_family", "weight_dtype",
               "kv_dtype", "speculative", "tp", "ep", "dp_attention", "dcp")


@attrs.frozen
class Target:
    """The regime a scenario asks anchors for, plus the build and load it prefers."""

    model: str | None = None
    engine: str | None = None
    gpu: str | None = None
    gpu_isa: str | None = None
    kernel_family: str | None = None
    # Every dtype the checkpoint's weights come in (its stack dtype and its routed experts').
    weight_dtypes: tuple[str, ...] = ()
    kv_dtype: str | None = None
    spec_method: str | None = None
    draft_tokens: int | None = None
    tp: int | None = None
    ep: int | None = None
    dp_attention: int | None = None
    dcp: int | None = None
    # "colocated" or "disaggregated"; with the pool of a disaggregated deployment the
    # scenario is ("prefill", "decode", or "" for a whole one): a prefill pool's layout is
    # compared with the prefill layout its anchors measured.
    topology: str = "colocated"
    pool: str = ""
    # The engine build (scenario engine.version): an image, a tag or a bare version; "" = any.
    build: str = ""
    # Prompt length and decode batch the target runs at (None when the workload has no one value).
    isl: int | None = None
    batch: int | None = None

    @classmethod
    def from_scenario(cls, scenario: Any) -> Target:
        model, engine, par, spec = (scenario.model, scenario.engine, scenario.parallel,
                                    scenario.speculative)
        dtypes = tuple(d for d in (model.weight_dtype, getattr(model, "expert_weight_dtype", None))
                       if d)
        workload = scenario.workload
        isl = workload.isl if workload.format == "random" else None
        batch = None
        if workload.rate is None:
            batch = min(workload.concurrency, engine.max_num_seqs * par.dp_attention)
        topo = scenario.topology
        return cls(
            model=nz.model_name(model.name),
            engine=nz.orchestrated_engine(engine.name, topo.orchestrator),
            topology=topo.kind, pool=scenario.pool_role,
            gpu=nz.normalise_gpu(scenario.gpu.name),
            gpu_isa=scenario.gpu.isa or nz.gpu_isa(nz.normalise_gpu(scenario.gpu.name)),
            kernel_family=nz.kernel_family(engine.attention_backend),
            weight_dtypes=dtypes,
            kv_dtype=scenario.kv_dtype,
            spec_method=nz.spec_method(spec.method),
            draft_tokens=spec.draft_tokens if spec.method != "none" else None,
            tp=par.tp, ep=par.ep, dp_attention=par.dp_attention, dcp=par.dcp,
            build=engine.version or "",
            isl=isl, batch=batch,
        )

    def describe(self) -> str:
        spec = self.spec_method or "?"
        if spec not in ("none", "?") and self.draft_tokens:
            spec += f"+{self.draft_tokens}"
        dtypes = "/".join(self.weight_dtypes) or "?"
        pool = f"{self.pool} pool of a " if self.pool else ""
        where = "" if self.topology == "colocated" else f", {pool}{self.topology} deployment"
        return (f"{self.model} on {self.gpu} ({self.gpu_isa}){where}, {self.engine} build "
                f"{self.build or 'any'}, kernels {self.kernel_family or '?'}, weights {dtypes}, "
                f"kv {self.kv_dtype or '?'}, spec {spec}, tp{self.tp} ep{self.ep} "
                f"dpa{self.dp_attention} dcp{self.dcp}")


@attrs.frozen
class AxisMismatch:
    axis: str
    anchor: Any
    target: Any

    def __str__(self) -> str:
        return f"{self.axis}: anchor {self.anchor} != target {self.target}"


def _spec_label(method: str | None, draft: int | None) -> str:
    if method in (None, "none") or not draft:
        return str(method)
    return f"{method}+{draft}"


def compare(anchor: Regime, target: Target) -> tuple[list[AxisMismatch], list[str]]:
    """(axes that differ, axes skipped because the anchor or target does not know them)."""
    diffs: list[AxisMismatch] = []
    skipped: list[str] = []

    def check(axis: str, a: Any, t: Any, same: Any = None) -> None:
        if a is None or t is None:
            skipped.append(axis)
            return
        equal = same(a, t) if same else a == t
        if not equal:
            diffs.append(AxisMismatch(axis, a, t))

    check("model", anchor.model, target.model)
    check("engine", anchor.engine, target.engine)
    # an anchor that does not say measured a colocated instance (every source but the
    # disaggregated rows), so this axis is never skipped
    check("topology", anchor.topology or "colocated", target.topology)
    if anchor.gpu is not None and target.gpu is not None:
        check("gpu", anchor.gpu, target.gpu)
    else:
        skipped.append("gpu")
        check("gpu_isa", anchor.gpu_isa, target.gpu_isa)
    check("kernel_family", anchor.kernel_family, target.kernel_family)
    if anchor.weight_dtype is None or not target.weight_dtypes:
        skipped.append("weight_dtype")
    elif not any(nz.weight_dtypes_match(anchor.weight_dtype, t) for t in target.weight_dtypes):
        diffs.append(AxisMismatch("weight_dtype", anchor.weight_dtype,
                                  "/".join(target.weight_dtypes)))
    check("kv_dtype", anchor.kv_dtype, target.kv_dtype)
    if anchor.spec_method is None or target.spec_method is None:
        skipped.append("speculative")
    elif anchor.spec_method != target.spec_method:
        diffs.append(AxisMismatch("speculative", _spec_label(anchor.spec_method, anchor.draft_tokens),
                                  _spec_label(target.spec_method, target.draft_tokens)))
    elif anchor.spec_method != "none":
        if anchor.draft_tokens is None or target.draft_tokens is None:
            skipped.append("speculative.draft_tokens")
        elif anchor.draft_tokens != target.draft_tokens:
            diffs.append(AxisMismatch(
                "speculative", _spec_label(anchor.spec_method, anchor.draft_tokens),
                _spec_label(target.spec_method, target.draft_tokens)))
    prefill_pool = target.pool == "prefill" and anchor.disaggregated
    for axis in ("tp", "ep", "dp_attention", "dcp"):
        measured = getattr(anchor, axis)
        if prefill_pool and axis != "dcp":
            measured = getattr(anchor, f"prefill_{axis}")
        check(axis, measured, getattr(target, axis))
    return diffs, skipped


# ---------------------------------------------------------------- settling an anchor's regime


#: Tokens per verify step at or below which a speculative row accepted no draft at all.
NOTHING_ACCEPTED_TOKENS = 1.02


def settle(record: AnchorRecord) -> AnchorRecord:
    """Normalise every spelling of a record and stamp what can be argued (idempotent).

    - engine, kernel family, dtypes, spec method, GPU part through the ``normalise`` tables;
    - engine from the image when the record names none;
    - GPU part / ISA from the image tag when the record names no part (``mi35x`` -> MI355X,
      ``mi30x`` -> gfx942 only);
    - an MXFP4 checkpoint on an AMD part ran on gfx950 (no other AMD ISA runs MXFP4);
    - ATOM always runs AITER kernels;
    - attention-DP size (and the other parallel axes) from server args when unrecorded;
    - a speculative row whose steps emitted one token each (no draft ever accepted: the
      client's accept length, or its stream) measured plain decoding: ``spec_method`` none.
    """
    reg = record.regime
    prov = record.provenance
    notes = list(prov.notes)
    changes: dict[str, Any] = {}

    def put(field: str, value: Any, note: str | None = None) -> None:
        if value is None or getattr(reg, field) == value:
            return
        changes[field] = value
        if note and note not in notes:
            notes.append(note)

    if record.server_args:
        from_args = nz.regime_from_server_args(record.server_args, reg.engine)
        for field, value in from_args.items():
            if getattr(reg, field) is None:
                put(field, value)
    merged = attrs.evolve(reg, **changes)
    changes = {}
    reg = merged

    engine = nz.normalise_engine(reg.engine) or nz.engine_from_image(prov.image)
    put("engine", engine)
    put("model", nz.model_name(reg.model))
    gpu = nz.normalise_gpu(reg.gpu)
    put("gpu", gpu)
    img_part, img_isa, img_vendor = nz.gpu_from_image(prov.image)
    if gpu is None and img_part is not None:
        gpu = img_part
        put("gpu", img_part, f"gpu {img_part} from image tag {nz.image_tag(prov.image)}")
    isa = nz.gpu_isa(gpu) or reg.gpu_isa or img_isa
    put("gpu_isa", isa)
    vendor = nz.gpu_vendor(gpu) or img_vendor
    if engine in ("atom", "mori-sglang"):
        vendor = vendor or "amd"
    wdtype = reg.weight_dtype
    if wdtype is not None:
        wdtype = nz.weight_dtype(wdtype)
        if wdtype == "fp4" and vendor:
            wdtype = nz.weight_dtype_for_precision("fp4", vendor)
        if wdtype is None:
            changes["weight_dtype"] = None
        else:
            put("weight_dtype", wdtype)
    if wdtype == "mxfp4" and vendor == "amd" and isa is None:
        put("gpu_isa", "gfx950", "gpu_isa gfx950 stamped: among AMD parts only gfx950 runs MXFP4")
    family = reg.kernel_family or nz.kernel_family(reg.attention_backend)
    if family is None and engine == "atom":
        family = "aiter"
        put("kernel_family", family, "kernel_family aiter stamped: ATOM always runs AITER")
    put("kernel_family", nz.kernel_family(family) if family != "aiter" else family)
    if reg.kv_dtype is not None:
        kv = nz.kv_dtype(reg.kv_dtype)
        if kv is None:
            changes["kv_dtype"] = None
        else:
            put("kv_dtype", kv)
    if reg.spec_method is not None:
        spec = nz.spec_method(reg.spec_method)
        put("spec_method", spec)
        accept, source = derive_accept_length(record.measurements,
                                              attrs.evolve(reg, spec_method=spec))
        if accept is not None and accept <= NOTHING_ACCEPTED_TOKENS:
            put("spec_method", "none",
                f"spec_method none: labelled {spec} by its source, but its verify steps emitted "
                f"{accept:.2f} tokens by {source}: nothing was speculated, so it "
                "measured plain decode steps")
            if reg.draft_tokens is not None:
                changes["draft_tokens"] = None
    settled = attrs.evolve(reg, **changes)
    new_prov = prov
    if not prov.engine_version and prov.image:
        new_prov = attrs.evolve(new_prov, engine_version=nz.engine_version_from_image(prov.image))
    if notes != list(prov.notes):
        new_prov = attrs.evolve(new_prov, notes=tuple(notes))
    if settled == record.regime and new_prov == prov:
        return record
    return attrs.evolve(record, regime=settled, provenance=new_prov)


def regime_key(record: AnchorRecord) -> tuple:
    """An anchor record's regime on every axis of REGIME_AXES, then its build."""
    reg = record.regime
    values = []
    for axis in REGIME_AXES:
        if axis == "speculative":
            values.append((reg.spec_method, reg.draft_tokens))
        else:
            values.append(getattr(reg, axis))
    return tuple(values) + (record.provenance.build,)
