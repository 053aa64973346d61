"""Instructions per replayed request, counted under valgrind: the simulator's work, free of the host's speed.

    python benchmarks/count_instructions.py [--case NAME ...] [--jobs N] [--json]

Wall-time ratios between a short case and a long one (``run_benchmarks.py``'s scaling and
fleet lines) swing with this machine's speed, which moves by up to 2x over minutes (bare
SimPy between about 0.7M and 1.5M events/s in one afternoon). The instructions a replay
executes do not. Each case runs once under ``valgrind --tool=cachegrind --cache-sim=no``,
and once more up to the replay's start (imports, the scenario, the anchors, the case's own
trace file), whose count is subtracted; what is left, over the requests replayed, is the
replay's instructions per request. A fleet's per-request count staying flat while its
wall time per request grows says the growth is the memory hierarchy (more instances' state
than the caches hold), not work the simulator adds per instance (docs/fleet.md).

Cases are ``run_benchmarks.py``'s (default: fleet-x1 and fleet-x4; fleet-x16 takes about
25 minutes). ``--jobs`` runs that many valgrind processes at once: counts do not depend on
what else the machine runs. Needs valgrind on the PATH.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import run_benchmarks as rb  # noqa: E402

DEFAULT = ("fleet-x1", "fleet-x4")
_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


def _child(name: str, setup_only: bool, out: Path) -> None:
    """The case's replay (or only what precedes it), its request count written to ``out``."""
    from inferasim.anchors.loading import default_store
    from inferasim.config.loader import load_scenario
    from inferasim.report.row_stream import RowStream
    from inferasim.serve.simulation import simulate

    sc = load_scenario(None, rb._case_overrides(name))
    default_store()
    requests = 0
    if not setup_only:
        rows = RowStream(tempfile.mkdtemp(prefix=f"count-{name}-")) if rb._streamed(name) \
            else None
        result = simulate(sc, rows=rows)
        requests = result.rows.totals.rows if rows is not None else len(result.requests)
    out.write_text(json.dumps({"requests": requests}))


def _count(name: str, setup_only: bool) -> tuple[int, int]:
    """(instructions, requests) of one child run under valgrind."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "requests.json"
        cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=no",
               f"--cachegrind-out-file={Path(tmp) / 'cg.out'}", sys.executable, __file__,
               "--child", name, "--out", str(out)] + (["--setup-only"] if setup_only else [])
        done = subprocess.run(cmd, capture_output=True, text=True)
        refs = _REFS.findall(done.stderr)
        if done.returncode or not refs or not out.exists():
            tail = "\n".join(done.stderr.strip().splitlines()[-5:])
            raise SystemExit(f"{name}{' (set-up)' if setup_only else ''} failed under "
                             f"valgrind (exit {done.returncode}):\n{tail}")
        return int(refs[-1].replace(",", "")), json.loads(out.read_text())["requests"]


def count_cases(names: list[str], jobs: int) -> list[dict]:
    """Per case, the replay's instructions (the whole run's less its set-up's)."""
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        runs = {(n, setup): pool.submit(_count, n, setup) for n in names
                for setup in (False, True)}
        rows = []
        for n in names:
            (total, requests), (before, _) = runs[n, False].result(), runs[n, True].result()
            rows.append({"case": n, "requests": requests, "instructions": total - before,
                         "setup_instructions": before,
                         "instructions_per_request": (total - before) / max(1, requests)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", action="append", choices=rb.CASES + rb.EXTRA_CASES)
    parser.add_argument("--jobs", type=int, default=2, help="valgrind processes at once")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--setup-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.setup_only, args.out)
        return
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not on the PATH (Debian: apt-get install valgrind)")
    names = args.case or list(DEFAULT)
    for name in names:
        need = rb._needs(name)
        if need is not None and not need.exists():
            sys.exit(f"{name} needs {need}, which is absent")
    rows = count_cases(names, args.jobs)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    first = rows[0]["instructions_per_request"]
    print(f"{'case':<16}{'requests':>10}{'instructions':>18}{'per request':>14}  vs first")
    for r in rows:
        per = r["instructions_per_request"]
        print(f"{r['case']:<16}{r['requests']:>10,}{r['instructions']:>18,}{per:>14,.0f}"
              f"  {per / first:.3f}x")


if __name__ == "__main__":
    main()
