"""Checks that a parallel layout can run at all: divisibility the engines enforce, and weights that fit."""

from __future__ import annotations

from inferasim.config.errors import ConfigError
from inferasim.config.scenario import Scenario


def _fail(message: str, key: str, origins: dict[str, str], path: str) -> ConfigError:
    return ConfigError(message, file=origins.get(key, path), key=key)


def _check_engine_layout(scenario: Scenario, origins: dict[str, str], path: str) -> None:
    """The layouts an engine has no launch flags for (a whole deployment's or one pool's)."""
    name, par = scenario.engine.name, scenario.parallel
    if name == "trt" and par.dp_attention not in (1, par.tp):
        # enable_attention_dp gives every one of the tp_size ranks its own attention group
        # (attention TP 1); there is no middle layout to launch
        raise _fail(f"TensorRT-LLM's attention DP runs every rank apart: expected "
                    f"parallel.dp_attention 1 or {par.tp} (the tp), got {par.dp_attention}",
                    "parallel.dp_attention", origins, path)
    if name == "vllm" and par.ep not in (1, par.tp):
        # --enable-expert-parallel spreads the experts over every GPU of the instance (its
        # TP x DP group flattened into one EP group); there is no smaller EP group to launch
        raise _fail(f"vLLM's expert parallelism spans the whole instance: expected "
                    f"parallel.ep 1 or {par.tp} (the tp), got {par.ep}",
                    "parallel.ep", origins, path)


def offload_problem(scenario: Scenario) -> str | None:
    """Why the scenario's KV offload connector cannot be launched under its engine, or None."""
    from inferasim.config.scenario import OFFLOAD_ENGINES

    eng = scenario.engine
    runs = OFFLOAD_ENGINES.get(eng.kv_offload)
    if runs is not None and eng.name not in runs:
        return f"{eng.kv_offload} runs under {', '.join(runs)}, not {eng.name}"
    return None


def _check_offload(scenario: Scenario, origins: dict[str, str], path: str) -> None:
    """A KV offload connector the engine does not run is replayed as asked, and said to be a
    deployment that cannot be launched (a search refuses it: ``search/space.py``)."""
    from inferasim.config.errors import warn

    problem = offload_problem(scenario)
    if problem:
        warn(f"{problem}: replayed as asked, a deployment that cannot be launched",
             file=origins.get("engine.kv_offload", path), key="engine.kv_offload")


def check_layout(scenario: Scenario, origins: dict[str, str], path: str, *,
                 check_fit: bool = True) -> None:
    model, par = scenario.model, scenario.parallel
    if par.tp % par.dp_attention:
        raise _fail(f"attention-DP size {par.dp_attention} must divide parallel.tp={par.tp}",
                    "parallel.dp_attention", origins, path)
    _check_engine_layout(scenario, origins, path)
    _check_offload(scenario, origins, path)
    attn_tp = par.attn_tp
    if model.num_attention_heads % attn_tp:
        raise _fail(f"attention TP {attn_tp} (tp / dp_attention) must divide the "
                    f"{model.num_attention_heads} attention heads of {model.name}",
                    "parallel.tp", origins, path)
    kind = model.attention.kind
    kvh = model.num_kv_heads
    if kind.startswith("gqa") and kvh >= attn_tp and kvh % attn_tp:
        raise _fail(f"attention TP {attn_tp} must divide the {kvh} KV heads of {model.name}",
                    "parallel.tp", origins, path)
    if kvh < attn_tp and kind.startswith("gqa") and attn_tp % kvh:
        raise _fail(f"the {kvh} KV heads of {model.name} cannot be replicated evenly over "
                    f"attention TP {attn_tp}", "parallel.tp", origins, path)
    if par.ep > 1:
        from inferasim.arch.memory import expert_slots

        if not model.ffn.is_moe:
            raise _fail(f"{model.name} has no experts; expert parallelism needs ep=1",
                        "parallel.ep", origins, path)
        if par.tp % par.ep or expert_slots(scenario) % par.ep:
            spare = f" and {par.redundant_experts} redundant" if par.redundant_experts else ""
            raise _fail(f"ep={par.ep} must divide tp={par.tp} and the "
                        f"{model.ffn.n_routed_experts} experts{spare} (set "
                        "parallel.redundant_experts to the EPLB slots beyond them)",
                        "parallel.ep", origins, path)
    elif par.redundant_experts:
        raise _fail("redundant experts are copies placed over expert-parallel ranks; they "
                    "need ep > 1 (expected parallel.redundant_experts 0)",
                    "parallel.redundant_experts", origins, path)
    if par.dcp > 1:
        if kind.startswith("mla") and (attn_tp % par.dcp):
            raise _fail(f"dcp={par.dcp} must divide attention TP {attn_tp} for MLA",
                        "parallel.dcp", origins, path)
        if kind.startswith("gqa") and (max(attn_tp // max(kvh, 1), 1) % par.dcp):
            raise _fail(f"dcp={par.dcp} must divide tp // kv_heads for GQA",
                        "parallel.dcp", origins, path)
    if check_fit:
        from inferasim.arch.memory import memory_plan

        plan = memory_plan(scenario)
        problem = fit_problem(scenario, plan)
        if problem:
            raise _fail(problem, "parallel.tp", origins, path)
        from inferasim.config.errors import warn

        short = context_problem(scenario, plan)
        if short:
            warn(short, file=origins.get("parallel.tp", path), key="parallel.tp")
        held = reservation_problem(scenario, plan)
        if held:
            warn(held, file=origins.get("engine.capacity_policy", path),
                 key="engine.capacity_policy")


def fit_problem(scenario: Scenario, plan=None) -> str | None:
    """Why the weights and KV do not fit on the GPU, or None (``plan``: the scenario's
    memory plan, where the caller has it)."""
    from inferasim.arch.engine_memory import weight_share
    from inferasim.arch.memory import GIB, memory_plan

    plan = plan or memory_plan(scenario)
    share = weight_share(scenario.engine)
    usable = scenario.gpu.hbm_bytes * share
    if plan.weight_bytes_per_gpu >= usable:
        return (
            f"weights need {plan.weight_bytes_per_gpu / GIB:.1f} GiB per GPU but only "
            f"{usable / GIB:.1f} GiB ({share:.2f} of "
            f"{scenario.gpu.name}) is usable; raise parallel.tp or use a smaller weight dtype")
    if plan.kv_pool_tokens <= 0:
        m = plan.memory
        kept = "".join(f" + {name} {value / GIB:.1f} GiB" for name, value in m.kept()
                       if value or name == "reserve")
        return (
            f"no memory left for the KV cache: weights {plan.weight_bytes_per_gpu / GIB:.1f} GiB"
            f"{kept} exceed the {m.budget_bytes / GIB:.1f} GiB budget "
            f"({scenario.engine.memory_rule})")
    return None


def context_problem(scenario: Scenario, plan=None) -> str | None:
    """Why vLLM would refuse to start this deployment, or None: it will not serve a
    max_model_len (``engine.max_model_len``, else the model's context) that one request
    cannot fill in its KV pool (its start-up check, engines.md 1.1)."""
    from inferasim.arch.memory import memory_plan

    # a pool the scenario states is what the engine allocated: it started, capped as it was
    if scenario.engine.memory_rule != "vllm-profile" or scenario.engine.kv_pool_tokens:
        return None
    plan = plan or memory_plan(scenario)
    context = scenario.context_limit
    if 0 < plan.kv_pool_tokens < context:
        whose = (f"its max_model_len of {context:,d} tokens" if scenario.engine.max_model_len
                 else f"{scenario.model.name}'s {context:,d}-token context")
        return (f"vLLM would refuse to start: its KV pool holds {plan.kv_pool_tokens:,d} "
                f"tokens, less than one request of {whose}; the real server needs "
                "--max-model-len at most the pool (engine.max_model_len), or more memory (a "
                "larger parallel.tp or engine.mem_fraction)")
    return None


def reservation_problem(scenario: Scenario, plan=None) -> str | None:
    """Why TensorRT-LLM would run fewer requests than the clients send, or None: under
    GUARANTEED_NO_EVICT each request reserves its prompt and its max_tokens, which the engine
    deduces as the longest request (the context, capped at the pool) less the prompt when the
    client sends none, as the synthetic chat workload's clients do unless
    ``workload.synthetic.max_tokens`` says (``EngineCore.max_new``)."""
    from inferasim.arch.memory import memory_plan

    eng, wl = scenario.engine, scenario.workload
    if eng.capacity_policy != "guaranteed-no-evict" or wl.format != "synthetic" \
            or wl.synthetic.max_tokens is not None or scenario.topology.kind != "colocated":
        return None
    plan = plan or memory_plan(scenario)
    pool = plan.kv_pool_tokens // max(1, scenario.parallel.dp_attention)
    longest = min(scenario.context_limit, pool)
    if longest <= 0:
        return None
    slots = pool // longest
    if slots >= wl.concurrency:
        return None
    return (f"TensorRT-LLM's GUARANTEED_NO_EVICT reserves each request's whole sequence, "
            f"{longest:,d} tokens where the client sends no max_tokens (the synthetic "
            f"workload sends none): at most {slots} of the {wl.concurrency} clients' requests "
            f"run at once in a pool of {pool:,d} tokens; workload.synthetic.max_tokens "
            "sets what the clients send, engine.capacity_policy=max-utilization reserves "
            "nothing")


def serving_caveat(scenario: Scenario, plan=None) -> str | None:
    """What the real server does with this deployment that its figures depend on and the
    scenario does not say (``context_problem``, ``reservation_problem``), or None."""
    from inferasim.arch.memory import memory_plan

    plan = plan or memory_plan(scenario)  # one plan for both readings
    found = [p for p in (context_problem(scenario, plan), reservation_problem(scenario, plan))
             if p]
    return "; ".join(found) or None
