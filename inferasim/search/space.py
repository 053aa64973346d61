"""The candidate deployments of a search: every engine, layout, topology, speculative choice
and concurrency the catalog and the engines allow for one model and GPU within a GPU budget,
narrowed by ``--space key=v1,v2``.

A deployment is a list of ``key=value`` overrides on the user's scenario, so a candidate is
resolved (and its memory fit checked) by the same loader ``inferasim run`` uses, and the
winner is written back as a scenario that ``extends:`` the user's file with those keys.
Layouts that do not fit, or that an engine refuses, are dropped with the loader's reason.
"""

from __future__ import annotations

import copy
import itertools
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from inferasim.arch.layout import offload_problem
from inferasim.config.catalog import DEFAULT_SCENARIO, names_a_file
from inferasim.config.errors import ConfigError, ConfigWarning
from inferasim.config.loader import engines_for_vendor, resolve
from inferasim.config.overrides import apply_overrides
from inferasim.config.paths import resolve_scenario_path
from inferasim.config.scenario import LANE_FORMATS, OFFLOAD_ENGINES, Scenario
from inferasim.config.yaml_tree import load_tree

# The engines searched by default are those the catalog runs on the part's vendor (each
# engine's ``vendors``), but mori-sglang: SGLang with AMD's MoRI KV transfer, a disaggregated
# variant searched only when --space names it.
NAMED_ONLY_ENGINES = ("mori-sglang",)
# Tensor-parallel degrees searched: powers of two up to the scale-up domain and the budget.
TP_DEGREES = (1, 2, 4, 8, 16, 32, 64, 72)
# Deployment-wide client counts per serving instance (the ladder is this times the instances
# that take clients), the InferenceMAX ladder's span.
PER_INSTANCE_CONCURRENCY = (4, 8, 16, 32, 64, 128, 256)
# An MTP candidate's draft depth where the scenario gives none: DeepSeek-V3's one MTP module.
# Its acceptance is left to the anchors' chain (anchors/acceptance.py).
MTP_DRAFT_TOKENS = 1

# --space keys the search itself reads; any other scenario key is a further grid axis.
SPACE_KEYS = ("engine.name", "parallel.tp", "parallel.ep", "parallel.dp_attention",
              "topology.kind", "topology.split", "topology.orchestrator", "speculative.method",
              "workload.concurrency")
#: Who may run a part's disaggregated pools: the engine natively, and on NVIDIA parts Dynamo
#: (InferenceMAX's disaggregated NVIDIA rows all ran under it).
VENDOR_ORCHESTRATORS = {"nvidia": ("native", "dynamo"), "amd": ("native",)}


@attrs.frozen
class Deployment:
    """One deployment without its load: the overrides that make it, and how it is split."""

    overrides: tuple[tuple[str, str], ...]
    kind: str                 # colocated | disaggregated
    instances: int            # colocated instances, or decode instances (those taking clients)

    @property
    def label(self) -> str:
        """``sglang tp8 ep8 dpa8 2x`` / ``vllm tp4 1p2d dynamo mtp``: what the deployment is."""
        o = dict(self.overrides)
        parts = [o.get("engine.name", "?"), f"tp{o.get('parallel.tp', '1')}"]
        if o.get("parallel.ep", "1") != "1":
            parts.append(f"ep{o['parallel.ep']}")
        if o.get("parallel.dp_attention", "1") != "1":
            parts.append(f"dpa{o['parallel.dp_attention']}")
        if self.kind == "disaggregated":
            parts.append(f"{o.get('topology.prefill.instances', '1')}p"
                         f"{o.get('topology.decode.instances', '1')}d")
            # two splits that differ only in who routes them must not read alike
            if o.get("topology.orchestrator", "native") != "native":
                parts.append(o["topology.orchestrator"])
        else:
            parts.append(f"{o.get('topology.instances', '1')}x")
        if o.get("speculative.method", "none") != "none":
            parts.append(o["speculative.method"])
        if o.get("engine.kv_offload", "none") != "none":
            parts.append(f"+{o['engine.kv_offload']}")
        known = {"engine.name", "parallel.tp", "parallel.ep", "parallel.dp_attention",
                 "speculative.method", "speculative.draft_tokens", "speculative.acceptance",
                 "engine.kv_offload"}
        parts += [f"{k}={v}" for k, v in self.overrides
                  if k not in known and not k.startswith("topology.")]
        return " ".join(parts)


@attrs.frozen
class Candidate:
    index: int
    deployment: Deployment
    concurrency: int
    scenario: Scenario = attrs.field(eq=False, repr=False)

    @property
    def closed_loop(self) -> bool:
        """Clients drive the load (else the trace's stamps or the rate do, and the
        concurrency is no axis)."""
        return self.scenario.workload.clients_drive_load

    @property
    def label(self) -> str:
        if not self.closed_loop:
            return self.deployment.label
        return f"{self.deployment.label} c{self.concurrency}"

    @property
    def gpus(self) -> int:
        return self.scenario.total_gpus


@attrs.frozen
class Space:
    candidates: tuple[Candidate, ...]
    refused: tuple[tuple[str, str], ...]   # (deployment label, the loader's reason)
    axes: dict[str, tuple[str, ...]]


def parse_space(items: Sequence[str]) -> list[tuple[str, list[str]]]:
    """``("engine.name=sglang,vllm", ...)`` -> [("engine.name", ["sglang", "vllm"]), ...]."""
    out: list[tuple[str, list[str]]] = []
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        values = [v.strip() for v in raw.split(",")]
        if not sep or not key or not raw.strip() or not all(values):
            raise ConfigError(f"expected KEY=V1,V2,..., got {item!r}", key="--space")
        if key in dict(out):
            raise ConfigError("given twice", key=f"--space {key}")
        if key.startswith("INFERASIM_"):
            raise ConfigError("knobs are set in the environment for the whole search, not "
                              "searched over", key=f"--space {key}")
        out.append((key, list(dict.fromkeys(values))))
    return out


def _ints(key: str, values: Sequence[str]) -> list[int]:
    try:
        out = [int(v) for v in values]
    except ValueError:
        raise ConfigError(f"expected integers, got {', '.join(values)}",
                          key=f"--space {key}") from None
    if any(v < 1 for v in out):
        raise ConfigError("every value must be at least 1", key=f"--space {key}")
    return out


def parse_split(text: str) -> tuple[int, int]:
    """``"2p1d"`` -> (2, 1): prefill and decode instances."""
    low = text.lower()
    p, sep, d = low.partition("p")
    if not sep or not d.endswith("d") or not p.isdigit() or not d[:-1].isdigit() \
            or int(p) < 1 or int(d[:-1]) < 1:
        raise ConfigError(f"expected xPyD (e.g. 1p1d, 2p1d), got {text!r}",
                          key="--space topology.split")
    return int(p), int(d[:-1])


def _layouts(base: Scenario, tp: int) -> list[tuple[int, int]]:
    """(ep, dp_attention) pairs for one TP degree: dense models shard only by TP; a MoE model
    also runs its experts across the TP ranks (EP = TP), and with that attention data-parallel
    on every rank (wide EP with DP attention, as SGLang, vLLM, ATOM and TensorRT-LLM's
    enable_attention_dp launch it: a KV cache and a scheduler per rank)."""
    if tp == 1 or not base.model.ffn.is_moe:
        return [(1, 1)]
    return [(1, 1), (tp, 1), (tp, tp)]


def default_axes(base: Scenario, gpus: int) -> dict[str, list[str]]:
    vendor = base.gpu.vendor
    engines = [e for e in engines_for_vendor(vendor) if e not in NAMED_ONLY_ENGINES]
    domain = max(1, int(base.gpu.scaleup_domain))
    tps = [t for t in TP_DEGREES if t <= min(domain, gpus)]
    spec = ["none", "mtp"] if base.model.mtp_layers > 0 else ["none"]
    axes = {"engine.name": engines, "parallel.tp": [str(t) for t in tps],
            "topology.kind": ["colocated", "disaggregated"], "speculative.method": spec,
            "topology.orchestrator": list(VENDOR_ORCHESTRATORS.get(vendor, ("native",)))}
    if base.workload.format in LANE_FORMATS:
        # agentic lanes past the GPU pool's cliff either buy GPUs or spill to host memory:
        # each engine's own connectors are searched beside none (offload_axis)
        axes["engine.kv_offload"] = ["none", *OFFLOAD_ENGINES]
    return axes


def offload_axis(engine: str, values: Sequence[str]) -> list[str]:
    """The offload connectors of ``values`` that ``engine`` runs (none always)."""
    return [v for v in values if v == "none" or engine in OFFLOAD_ENGINES.get(v, ())]


def _splits(instances: int) -> list[tuple[int, int]]:
    return [(p, d) for p in range(1, instances) for d in range(1, instances - p + 1)]


def _speculative(base: Scenario, method: str) -> list[tuple[str, str]]:
    if method == "none":
        return [("speculative.method", "none")]
    spec = base.speculative
    if spec.method == method and spec.draft_tokens >= 1:
        return [("speculative.method", method)]  # the scenario's own depth and acceptance
    return [("speculative.method", method), ("speculative.draft_tokens", str(MTP_DRAFT_TOKENS))]


def deployments(base: Scenario, gpus: int, narrow: Sequence[tuple[str, list[str]]]
                ) -> tuple[list[Deployment], list[tuple[str, ...]]]:
    """Every deployment of the space, and the extra grid axes' (key, value) pairs applied."""
    axes = default_axes(base, gpus)
    given = dict(narrow)
    for key, values in narrow:
        if key in ("parallel.tp", "parallel.ep", "parallel.dp_attention"):
            _ints(key, values)
        elif key == "topology.kind":
            bad = [v for v in values if v not in ("colocated", "disaggregated")]
            if bad:
                raise ConfigError(f"expected colocated or disaggregated, got {bad[0]!r}",
                                  key="--space topology.kind")
        elif key == "topology.split":
            for v in values:
                parse_split(v)
        elif key == "topology.orchestrator":
            bad = [v for v in values if v not in ("native", "dynamo")]
            if bad:
                raise ConfigError(f"expected native or dynamo, got {bad[0]!r}",
                                  key="--space topology.orchestrator")
    for key in ("engine.name", "parallel.tp", "topology.kind", "speculative.method",
                "topology.orchestrator"):
        if key in given:
            axes[key] = given[key]
    if ("topology.split" in given or "dynamo" in given.get("topology.orchestrator", ())) \
            and "topology.kind" not in given:
        axes["topology.kind"] = ["disaggregated"]
    eps = set(_ints("parallel.ep", given["parallel.ep"])) if "parallel.ep" in given else None
    dps = set(_ints("parallel.dp_attention", given["parallel.dp_attention"])) \
        if "parallel.dp_attention" in given else None
    splits = [parse_split(v) for v in given.get("topology.split", [])]
    extra_keys = [(k, v) for k, v in narrow if k not in SPACE_KEYS]
    # a default offload axis (agentic lanes) is searched per engine, colocated only (the
    # closed form prices a host tier behind a colocated pool); a --space one is a grid axis
    offload = axes.get("engine.kv_offload") if "engine.kv_offload" not in given else None
    out: list[Deployment] = []
    for engine, tp_text, kind, method in itertools.product(
            axes["engine.name"], axes["parallel.tp"], axes["topology.kind"],
            axes["speculative.method"]):
        tp = int(tp_text)
        slots = gpus // tp
        if slots < 1:
            continue
        layouts = _layouts(base, tp)
        if eps is not None or dps is not None:
            # named layouts are searched as given, whichever the defaults would pick
            layouts = [(e, d) for e in (sorted(eps) if eps else {p[0] for p in layouts})
                       for d in (sorted(dps) if dps else {p[1] for p in layouts})]
        for ep, dp in sorted(set(layouts)):
            layout = [("engine.name", engine), ("parallel.tp", str(tp)), ("parallel.ep", str(ep)),
                      ("parallel.dp_attention", str(dp))]
            spec = _speculative(base, method)
            tiers = [[("engine.kv_offload", v)] for v in offload_axis(engine, offload)] \
                if offload else [[]]
            if kind == "colocated":
                topo = [("topology.kind", "colocated"), ("topology.instances", str(slots))]
                out.extend(Deployment(tuple(layout + topo + spec + tier), kind, slots)
                           for tier in tiers)
                continue
            for (p, d), orchestrator in itertools.product(splits or _splits(slots),
                                                          axes["topology.orchestrator"]):
                if p + d > slots:
                    continue
                topo = [("topology.kind", "disaggregated"), ("topology.instances", "1"),
                        ("topology.prefill.instances", str(p)),
                        ("topology.decode.instances", str(d)),
                        ("topology.orchestrator", orchestrator)]
                out.append(Deployment(tuple(layout + topo + spec), kind, d))
    extra = [list(itertools.product([k], vs)) for k, vs in extra_keys]
    return out, [tuple(f"{k}={v}" for k, v in combo) for combo in itertools.product(*extra)]


# Scenario keys that may name a file, with the test that they do.
PATH_KEYS = (("workload.trace", bool),
             ("sim.anchors", lambda v: v.strip().lower() not in ("", "none")),
             ("model.name", names_a_file), ("gpu.name", names_a_file))


class DeploymentResolver:
    """Resolves a deployment's overrides on the user's scenario (its file, then ``--set``).

    A deployment on another engine than the scenario's starts from that engine's catalog
    entry: the scenario's engine keys (an SGLang receive interval, a vLLM build) belong to its
    own engine. ``tree`` gives the scenario's YAML as a mapping, self-contained (what it
    extends merged in), which is how the winner is written out."""

    def __init__(self, path: str | Path | None, overrides: Sequence[str]):
        self.path = Path(path) if path is not None else DEFAULT_SCENARIO
        data, origins = load_tree(self.path)
        apply_overrides(data, origins, list(overrides))
        self._data, self._origins = data, origins
        # the scenario is the search's template: its own layout need not fit (a TP1
        # quickstart naming DeepSeek-R1), each candidate's is checked as it is built
        self.base = resolve(copy.deepcopy(data), dict(origins), str(self.path.resolve()),
                            check_fit=False)

    def tree(self, overrides: Sequence[tuple[str, str]]) -> dict[str, Any]:
        data = copy.deepcopy(self._data)
        engine = dict(overrides).get("engine.name")
        if engine is not None and engine != self.base.engine.name:
            data["engine"] = {"name": engine}
        data.pop("extends", None)
        data.pop("bases", None)
        origins = dict(self._origins)
        apply_overrides(data, origins, [f"{k}={v}" for k, v in overrides])
        self._anchor_paths(data)
        return data

    def _anchor_paths(self, data: dict[str, Any]) -> None:
        """Files the scenario names (a trace, anchors, a model or GPU file) as absolute
        paths, found as the loader finds them: the tree is written to another folder (the
        search's winner), where a relative path would name nothing."""
        for key, is_file in PATH_KEYS:
            section, field = key.split(".")
            value = (data.get(section) or {}).get(field)
            if isinstance(value, str) and is_file(value):
                found = resolve_scenario_path(value, str(self.path.resolve()), key=key,
                                              what="a file the scenario names")
                data[section][field] = str(found.resolve())

    def __call__(self, overrides: Sequence[tuple[str, str]]) -> Scenario:
        data = self.tree(overrides)
        origins = dict(self._origins)
        return resolve(data, origins, str(self.path.resolve()))


def _reason(exc: ConfigError) -> str:
    """A refused deployment's reason with the key it names (an unknown --space key)."""
    return f"{exc.key}: {exc.message}" if exc.key else exc.message


def build_space(resolver: DeploymentResolver, gpus: int,
                narrow: Sequence[tuple[str, list[str]]]) -> Space:
    """Resolve every deployment (a bad one is refused with the loader's reason, not fatal)
    and cross it with its concurrency ladder. A layout is first resolved as one colocated
    instance: one that does not fit is refused once, not once per topology."""
    if gpus < 1:
        raise ConfigError(f"expected a budget of at least 1 GPU, got {gpus}", key="--gpus")
    base = resolver.base
    given = dict(narrow)
    ladder = _ints("workload.concurrency", given["workload.concurrency"]) \
        if "workload.concurrency" in given else None
    found, extras = deployments(base, gpus, narrow)
    with warnings.catch_warnings():
        # a candidate's layout warnings are the base concurrency's, and the winner's are in
        # the report (``layout.serving_caveat``): one per deployment would bury the search
        warnings.simplefilter("ignore", ConfigWarning)
        candidates, refused = _candidates(resolver, gpus, found, extras, ladder)
    if not candidates:
        why = "; ".join(f"{label}: {reason}" for label, reason in refused[:3])
        raise ConfigError(f"no deployment in the space fits {gpus} GPU(s)"
                          + (f" ({why})" if why else ""), key="--space")
    axes: dict[str, Any] = {k: tuple(v) for k, v in default_axes(base, gpus).items()}
    axes.update({k: tuple(v) for k, v in narrow})
    return Space(tuple(candidates), tuple(refused), axes)


def _candidates(resolver: DeploymentResolver, gpus: int, found, extras, ladder
                ) -> tuple[list[Candidate], list[tuple[str, str]]]:
    """Each deployment resolved (refused with the loader's reason where it cannot be) and
    crossed with its concurrency ladder."""
    candidates: list[Candidate] = []
    refused: list[tuple[str, str]] = []
    probed: dict[tuple, str | None] = {}
    for dep, extra in itertools.product(found, extras or [()]):
        more = tuple((k, v) for k, _, v in (e.partition("=") for e in extra))
        dep = attrs.evolve(dep, overrides=dep.overrides + more)
        layout = tuple((k, v) for k, v in dep.overrides if not k.startswith("topology."))
        if layout not in probed:
            try:
                resolver(layout + (("topology.kind", "colocated"), ("topology.instances", "1")))
                probed[layout] = None
            except ConfigError as exc:
                probed[layout] = _reason(exc)
                refused.append((Deployment(layout, "colocated", 1).label.rsplit(" 1x", 1)[0]
                                + " " + " ".join(f"{k}={v}" for k, v in layout
                                                 if k.startswith("speculative.")),
                                probed[layout]))
        if probed[layout] is not None:
            continue
        try:
            scenario = resolver(dep.overrides)
        except ConfigError as exc:
            refused.append((dep.label, _reason(exc)))
            continue
        if (problem := offload_problem(scenario)) is not None:
            refused.append((dep.label, f"engine.kv_offload: {problem}"))
            continue
        if scenario.total_gpus > gpus:
            refused.append((dep.label, f"{scenario.total_gpus} GPUs exceed the budget of {gpus}"))
            continue
        if not scenario.workload.clients_drive_load:
            concs = [scenario.workload.concurrency]  # the load is the trace's or the rate's
        else:
            concs = ladder or [c * dep.instances for c in PER_INSTANCE_CONCURRENCY]
        for conc in concs:
            wl = attrs.evolve(scenario.workload, concurrency=int(conc))
            candidates.append(Candidate(len(candidates), dep, int(conc),
                                        scenario.evolve(workload=wl)))
    return candidates, refused
