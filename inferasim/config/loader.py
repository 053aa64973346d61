"""Scenario file + overrides -> a resolved, validated ``Scenario``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from inferasim.arch.gpu import GpuSpec
from inferasim.arch.spec import ModelSpec
from inferasim.config.catalog import DEFAULT_SCENARIO, load_entry
from inferasim.config.engine_defaults import derived_defaults
from inferasim.config.errors import ConfigError, ConfigWarning
from inferasim.config.overrides import OVERRIDE_ORIGIN, apply_overrides
from inferasim.config.scenario import ENGINES, EngineSpec, Scenario, ScenarioSpec
from inferasim.config.typed import build_spec, spec_to_dict
from inferasim.config.workload_reads import warn_unread
from inferasim.config.yaml_tree import deep_merge, load_tree


def engines_for_vendor(vendor: str) -> tuple[str, ...]:
    """The catalog's engines that run on ``vendor``'s parts (their ``vendors`` key)."""
    default = attrs.fields(EngineSpec).vendors.default

    def runs_on(name: str) -> bool:
        data = load_entry("engines", name, key="engine.name", origin_file="<catalog>")[0]
        return vendor in data.get("vendors", default)

    return tuple(name for name in ENGINES if runs_on(name))


def _origin(origins: dict[str, str], key: str, fallback: str) -> str:
    return origins.get(key, fallback)


def catalog_model(name: str, weight_dtype: str | None = None, *,
                  origin_file: str = "<catalog>", dtype_origin: str = "<catalog>",
                  default_file: str | None = None) -> ModelSpec:
    """A catalog model, its weights in ``weight_dtype`` when given (else the entry's own)."""
    mdata, morigins, _ = load_entry("models", name, key="model.name", origin_file=origin_file,
                                    scenario_path=default_file, weight_dtype=weight_dtype)
    if weight_dtype is not None:
        mdata["weight_dtype"] = weight_dtype
        morigins["weight_dtype"] = dtype_origin
    return build_spec(ModelSpec, mdata, prefix="model", default_file=default_file or origin_file,
                      origins={f"model.{k}": v for k, v in morigins.items()})


def catalog_gpu(name: str, *, origin_file: str = "<catalog>",
                default_file: str | None = None) -> GpuSpec:
    """A catalog GPU part."""
    gdata, gorigins, _ = load_entry("gpus", name, key="gpu.name", origin_file=origin_file,
                                    scenario_path=default_file)
    return build_spec(GpuSpec, gdata, prefix="gpu", default_file=default_file or origin_file,
                      origins={f"gpu.{k}": v for k, v in gorigins.items()})


def resolve(data: dict[str, Any], origins: dict[str, str], path: str, *,
            check_fit: bool = True) -> Scenario:
    spec: ScenarioSpec = build_spec(ScenarioSpec, data, origins=origins, default_file=path)

    model = catalog_model(spec.model.name, spec.model.weight_dtype,
                          origin_file=_origin(origins, "model.name", path),
                          dtype_origin=_origin(origins, "model.weight_dtype", path),
                          default_file=str(path))

    gpu = catalog_gpu(spec.gpu.name, origin_file=_origin(origins, "gpu.name", path),
                      default_file=str(path))

    engine_name = spec.engine.get("name")
    if not isinstance(engine_name, str):
        what = "missing required key" if engine_name is None else f"got {engine_name!r}"
        raise ConfigError(f"{what}; expected an engine name: {', '.join(ENGINES)}",
                          file=_origin(origins, "engine.name", _origin(origins, "engine", path)),
                          key="engine.name")
    edata, eorigins, _ = load_entry("engines", engine_name, key="engine.name",
                                    origin_file=_origin(origins, "engine.name", path))
    merged_engine = deep_merge(edata, spec.engine)
    eorigins = {f"engine.{k}": v for k, v in eorigins.items()}
    eorigins.update({k: v for k, v in origins.items() if k.startswith("engine.")})
    engine = build_spec(EngineSpec, merged_engine, prefix="engine", origins=eorigins,
                        default_file=str(path))

    if gpu.vendor not in engine.vendors:
        raise ConfigError(
            f"{engine.name} runs on {' and '.join(engine.vendors)} parts only; gpu.name "
            f"{gpu.name} is {gpu.vendor}'s: choose an engine that runs on it "
            f"({', '.join(engines_for_vendor(gpu.vendor))}) or another part",
            file=_origin(origins, "engine.name", path), key="engine.name")
    description = _description(spec, origins, model.name, gpu.name, engine.name)
    scenario = Scenario(name=spec.name, description=description, path=str(path),
                        model=model, gpu=gpu, engine=engine, parallel=spec.parallel,
                        speculative=spec.speculative, workload=spec.workload, sim=spec.sim,
                        topology=spec.topology, origins=dict(origins))
    derived = derived_defaults(scenario, spec.engine)
    if derived.get("mem_fraction", 1.0) <= 0:
        # SGLang's rule reserves memory for the chunk, the graphs and the draft before the
        # pool: a chunk set too large leaves it nothing, which no TP degree would fix
        raise ConfigError(
            f"SGLang's rule leaves mem_fraction_static at {derived['mem_fraction']:g} for a "
            f"chunked_prefill_size of {scenario.engine.chunked_prefill_size} on "
            f"{gpu.name}: nothing for weights and KV; lower engine.chunked_prefill_size or "
            "set engine.mem_fraction",
            file=_origin(origins, "engine.chunked_prefill_size", path),
            key="engine.chunked_prefill_size")
    if derived:
        scenario = attrs.evolve(scenario, engine=attrs.evolve(engine, **derived))
    if engine.scheduler_recv_interval > 1:
        if not engine.name.endswith("sglang"):
            raise ConfigError(f"a scheduler receive interval is SGLang's; {engine.name} reads "
                              "new requests every step (expected 1)",
                              file=_origin(origins, "engine.scheduler_recv_interval", path),
                              key="engine.scheduler_recv_interval")
        if spec.parallel.dp_attention > 1:
            raise ConfigError("a scheduler receive interval above 1 is not modelled with "
                              "attention-DP ranks (expected 1, or parallel.dp_attention 1)",
                              file=_origin(origins, "engine.scheduler_recv_interval", path),
                              key="engine.scheduler_recv_interval")
    if (engine.max_model_len or 0) > model.max_context:
        # vLLM refuses a max_model_len past the model's own (without an override the
        # simulator does not model), SGLang likewise
        raise ConfigError(f"expected at most {model.name}'s context of {model.max_context:,d} "
                          f"tokens, got {engine.max_model_len:,d}",
                          file=_origin(origins, "engine.max_model_len", path),
                          key="engine.max_model_len")
    wl = scenario.workload
    warn_unread(wl.format, origins)
    limit = scenario.context_limit
    if wl.format == "random" and wl.isl + wl.osl > limit:
        whose = (f"the server's max_model_len ({limit} tokens)" if engine.max_model_len
                 else f"the context of {model.name} ({limit} tokens)")
        raise ConfigError(f"isl + osl = {wl.isl + wl.osl} tokens exceed {whose}; the server "
                          "would refuse every request", file=_origin(origins, "workload.isl", path),
                          key="workload.isl")
    # Imported here: the layout checks live with the memory math they depend on.
    from inferasim.arch.layout import check_layout

    check_layout(scenario, origins, path, check_fit=check_fit)
    if scenario.topology.kind == "disaggregated":
        for role in ("prefill", "decode"):
            pool_scenario(scenario, role, origins)  # each pool's layout must hold too
    return scenario


# Keys a scenario's description states (the quickstart's "Llama-3.1-8B on one H100 under
# vLLM, ..., 16 clients"): a --set of one of them makes the file's description untrue.
DESCRIBED_KEYS = ("model.", "gpu.", "engine.name", "parallel.", "topology.", "speculative.",
                  "workload.format", "workload.concurrency", "workload.rate")


def _description(spec: ScenarioSpec, origins: dict[str, str], model: str, gpu: str,
                 engine: str) -> str:
    """The file's description, or one derived from what runs when ``--set`` changed what it
    describes (and did not set the description itself)."""
    changed = sorted(k for k, v in origins.items()
                     if v == OVERRIDE_ORIGIN and k.startswith(DESCRIBED_KEYS))
    if not changed or not spec.description or origins.get("description") == OVERRIDE_ORIGIN:
        return spec.description
    wl, par = spec.workload, spec.parallel
    layout = f"tp {par.tp}" + (f", ep {par.ep}" if par.ep > 1 else "") + \
        (f", attention-DP {par.dp_attention}" if par.dp_attention > 1 else "")
    load = f"{wl.rate:g} req/s" if wl.rate is not None else f"{wl.concurrency} clients"
    return (f"{model} on {gpu} ({layout}) under {engine}, {wl.format} workload, {load} "
            f"(derived: --set changed {', '.join(changed)})")


def resolved_pools(scenario: Scenario) -> tuple[Scenario, Scenario]:
    """A resolved disaggregated scenario's prefill and decode pools, derived again where a
    replay or a projection needs them. Their layouts were checked, and any warning said, when
    the scenario was resolved: said again by every replay (in every pool worker) it would
    only repeat itself."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConfigWarning)
        return pool_scenario(scenario, "prefill"), pool_scenario(scenario, "decode")


def pool_scenario(scenario: Scenario, role: str, origins: dict[str, str] | None = None,
                  *, check_fit: bool = True) -> Scenario:
    """The scenario one pool of a disaggregated deployment runs: its parallel layout and
    engine keys over the scenario's own."""
    import attrs

    from inferasim.config.scenario import ParallelSpec

    pool = getattr(scenario.topology, role)
    origins = origins or {}
    prefix = f"topology.{role}"
    # the scenario's EPLB slots are its expert-parallel pools': a pool that sets none of its
    # own takes them only where it runs expert parallel (ParallelSpec.relaid)
    # (read after the pool's values are checked, so that a bad one is named, not raised)
    par = build_spec(ParallelSpec, {**spec_to_dict(scenario.parallel), **pool.parallel},
                     prefix=f"{prefix}.parallel", origins=origins, default_file=scenario.path)
    if "redundant_experts" not in pool.parallel:
        par = attrs.evolve(par, redundant_experts=scenario.parallel.relaid(
            ep=par.ep).redundant_experts)
    named = pool.engine.get("name", scenario.engine.name)
    if named != scenario.engine.name:
        # the pool's keys merge over the scenario's engine: a new name would relabel its
        # settings (and pick another engine's policy) without loading that engine's catalog
        raise ConfigError(f"a pool runs the deployment's engine ({scenario.engine.name}), not "
                          f"{named!r}; set engine.name for the whole deployment",
                          file=origins.get(f"{prefix}.engine.name", scenario.path),
                          key=f"{prefix}.engine.name")
    engine = build_spec(EngineSpec, deep_merge(spec_to_dict(scenario.engine), pool.engine),
                        prefix=f"{prefix}.engine", origins=origins, default_file=scenario.path)
    # A figure the scenario's engine derived from its layout is derived again for the pool's
    # (a DP decode pool reserves more for its graphs); a figure it was given stays.
    own = attrs.evolve(scenario, engine=engine)
    mine = derived_defaults(scenario, ())
    again = derived_defaults(attrs.evolve(own, parallel=par), pool.engine)
    engine = attrs.evolve(engine, **{k: v for k, v in again.items()
                                     if getattr(scenario.engine, k) == mine.get(k)})
    decode_cache = engine.disagg_decode_prefix_caching
    if role == "decode" and decode_cache is not None and "prefix_caching" not in pool.engine:
        engine = attrs.evolve(engine, prefix_caching=decode_cache)
    out = attrs.evolve(scenario, parallel=par, engine=engine, pool=role)
    from inferasim.arch.layout import check_layout

    try:
        check_layout(out, {k.replace(f"{prefix}.", ""): v for k, v in origins.items()},
                     scenario.path, check_fit=check_fit)
    except ConfigError as exc:
        # the layout check names the scenario's keys; a value the pool sets is the pool's
        axis = (exc.key or "").removeprefix("parallel.")
        if exc.key and exc.key.startswith("parallel.") and axis in pool.parallel:
            raise ConfigError(exc.message, file=exc.file, key=f"{prefix}.{exc.key}") from None
        raise
    return out


def rank_scenario(scenario: Scenario) -> Scenario:
    """The scenario one attention-DP rank's scheduler runs: the engine's per-rank figures
    (``dp_attention_splits_chunk``, ``dp_attention_reserve_scale``) applied; the scenario
    itself when there is one rank."""
    dp = scenario.parallel.dp_attention
    eng = scenario.engine
    if dp == 1:
        return scenario
    changes: dict[str, Any] = {}
    if eng.dp_attention_splits_chunk:
        changes["chunked_prefill_size"] = max(1, eng.chunked_prefill_size // dp)
    if eng.dp_attention_reserve_scale != 1.0:
        scale = eng.dp_attention_reserve_scale
        changes["new_token_ratio_init"] = min(1.0, eng.new_token_ratio_init * scale)
        changes["new_token_ratio_min"] = min(1.0, eng.new_token_ratio_min * scale)
    return attrs.evolve(scenario, engine=attrs.evolve(eng, **changes)) if changes else scenario


def load_scenario(path: str | Path | None = None, overrides: list[str] | None = None, *,
                  check_fit: bool = True) -> Scenario:
    """Load a scenario (the bundled quickstart when ``path`` is None) and apply ``--set`` overrides.

    ``check_fit=False`` skips the weights-fit check (``describe`` reports it instead)."""
    scenario_path = Path(path) if path is not None else DEFAULT_SCENARIO
    data, origins = load_tree(scenario_path)
    apply_overrides(data, origins, list(overrides or []))
    return resolve(data, origins, str(scenario_path.resolve()), check_fit=check_fit)


def scenario_to_dict(scenario: Scenario) -> dict[str, Any]:
    return spec_to_dict(scenario)
