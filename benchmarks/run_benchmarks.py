"""Speed and memory of replays, measured in one run so figures compare across machines as ratios.

    python benchmarks/run_benchmarks.py [--case NAME ...] [--json]

For each case (the replay alone: imports and the anchor store are loaded before the clock
starts; trace parsing is inside it): wall seconds, simulated requests per wall second, simulated seconds per wall
second and peak RSS (each case runs in its own process so its peak is its own), plus the
machine's bare SimPy event rate measured in the same run. Cases that need ../shared/data
are skipped with a reason where it is absent.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
MOONCAKE = DATA / "mooncake" / "conversation_trace.jsonl"
AGENTX = DATA / "agentx-traces" / "traces_v8_present.jsonl.gz"
sys.path.insert(0, str(REPO))

MOONCAKE_DEPLOYMENT = ["model.name=llama-3.1-70b", "gpu.name=b200", "parallel.tp=8"]


def simpy_event_rate(n: int = 200_000) -> float:
    """Bare SimPy: one process yielding n timeouts; events per wall second."""
    import simpy

    env = simpy.Environment()

    def proc():
        for _ in range(n):
            yield env.timeout(1.0)

    env.process(proc())
    start = time.perf_counter()
    env.run()
    return n / (time.perf_counter() - start)


def _tiled_mooncake(copies: int) -> Path:
    """The conversation trace repeated ``copies`` times over the same hour: each copy its own
    hash namespace (offset ids), so load grows and reuse stays per copy."""
    rows = MOONCAKE.read_text().splitlines()
    out = Path(tempfile.mkdtemp()) / f"mooncake-x{copies}.jsonl"
    offset = 10**9
    with out.open("w") as fh:
        for c in range(copies):
            for line in rows:
                rec = json.loads(line)
                rec["hash_ids"] = [h + c * offset for h in rec["hash_ids"]]
                fh.write(json.dumps(rec) + "\n")
    return out


def _case_overrides(name: str) -> list[str] | None:
    if name == "fixed-2048-512":
        return ["model.name=llama-3.1-8b", "gpu.name=h100", "workload.format=random",
                "workload.isl=2048", "workload.osl=512", "workload.rate=0.5",
                "workload.max_requests=5000", "workload.duration_s=20000"]
    if name == "mooncake-hour":
        return ["workload.format=mooncake", f"workload.trace={MOONCAKE}", *MOONCAKE_DEPLOYMENT]
    if name == "agentx-c32":
        return ["model.name=minimax-m2.5", "model.weight_dtype=mxfp4", "gpu.name=mi355x",
                "engine.name=vllm", "workload.format=agentx", f"workload.trace={AGENTX}",
                "workload.concurrency=32", "engine.max_num_seqs=32", "workload.duration_s=1800"]
    if name.startswith("scaling-x"):
        copies = int(name.removeprefix("scaling-x"))
        trace = MOONCAKE if copies == 1 else _tiled_mooncake(copies)
        # The deployment grows with the load (copies x 8 GPUs), so each rung is as loaded.
        return ["workload.format=mooncake", f"workload.trace={trace}", *MOONCAKE_DEPLOYMENT,
                f"topology.instances={copies}", "topology.router=prefix-affinity"]
    if name.startswith("exact-"):
        return [*_case_overrides(name.removeprefix("exact-")), "sim.exact_steps=true"]
    return None


def _needs(name: str) -> Path | None:
    if "mooncake" in name or "scaling" in name:
        return MOONCAKE
    if "agentx" in name:
        return AGENTX
    return None


def _run_case(name: str, queue) -> None:
    from inferasim.config.loader import load_scenario
    from inferasim.cost.calibrated import default_store
    from inferasim.report.run_report import replay_summary
    from inferasim.serve.simulation import simulate

    sc = load_scenario(None, _case_overrides(name))
    default_store()  # read the shipped anchors before the clock starts: a replay is timed
    start = time.perf_counter()
    result = simulate(sc)
    wall = time.perf_counter() - start
    _, summary = replay_summary(result)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    queue.put({"case": name, "wall_s": wall, "requests": len(result.requests),
               "sim_s": result.end_s, "req_per_wall_s": len(result.requests) / wall,
               "sim_s_per_wall_s": result.end_s / wall, "peak_rss_mb": peak_kib / 1024,
               "steps": summary["engine_steps"], "macro_steps": summary["macro_steps"],
               "ttft_mean_s": summary["ttft_mean_s"], "output_tok_s": summary["output_tok_s"]})


def run_case(name: str) -> dict:
    need = _needs(name)
    if need is not None and not need.exists():
        return {"case": name, "skipped": f"{need} absent"}
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_run_case, args=(name, queue))
    proc.start()
    while True:  # a case that crashes must not hang the runner on its queue
        try:
            out = queue.get(timeout=1.0)
            break
        except Exception:  # queue.Empty
            if not proc.is_alive():
                return {"case": name, "skipped": f"failed (exit code {proc.exitcode})"}
    proc.join()
    return out


CASES = ("fixed-2048-512", "mooncake-hour", "agentx-c32", "scaling-x1", "scaling-x2",
         "scaling-x4", "exact-mooncake-hour")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", action="append", choices=CASES, help="run only these")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rate = simpy_event_rate()
    rows = [run_case(c) for c in (args.case or CASES)]
    if args.json:
        print(json.dumps({"simpy_events_per_s": rate, "cases": rows}, indent=2))
        return
    print(f"bare SimPy: {rate:,.0f} events/s")
    print(f"{'case':<22}{'wall s':>9}{'req/wall s':>12}{'sim s/wall s':>14}{'peak MB':>9}"
          f"{'steps':>9}{'macro':>8}")
    for r in rows:
        if "skipped" in r:
            print(f"{r['case']:<22} skipped: {r['skipped']}")
            continue
        print(f"{r['case']:<22}{r['wall_s']:>9.2f}{r['req_per_wall_s']:>12.0f}"
              f"{r['sim_s_per_wall_s']:>14.0f}{r['peak_rss_mb']:>9.0f}{r['steps']:>9}"
              f"{r['macro_steps']:>8}")
    by = {r["case"]: r for r in rows if "skipped" not in r}
    if {"scaling-x1", "scaling-x4"} <= set(by):
        print(f"scaling: 4x requests in {by['scaling-x4']['wall_s'] / by['scaling-x1']['wall_s']:.2f}x "
              "the time (target <= 4.4x)")
    if {"mooncake-hour", "exact-mooncake-hour"} <= set(by):
        print(f"macro-steps vs reference on mooncake-hour: "
              f"{by['exact-mooncake-hour']['wall_s'] / by['mooncake-hour']['wall_s']:.1f}x faster "
              "(target >= 10x)")


if __name__ == "__main__":
    main()
