"""The analytic GEMM price against measured operator timings (Vidur's profiling CSVs).

Each row of a Vidur ``mlp.csv`` times the four projection GEMMs of one dense transformer
layer (QKV, attention output, MLP up with its gate, MLP down) at one token count and
tensor-parallel width, in milliseconds (``../shared/data/vidur-profiling/README.md``). The
same GEMMs priced by ``cost.oracle.gemm_roofline`` on the catalog part, plus a fixed time a
kernel (``KERNEL_FIXED_S``: launch and tail, which the analytic step carries per layer as
``layer_latency_s``), give a predicted time; the report is the log error by the GEMM's rows,
with the tile ramp (``GEMM_RAMP_ROWS``) and without it, and per model, so the ramp's fit can
be read held out by model.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import attrs
import numpy as np

from inferasim.config.errors import ConfigError
from inferasim.config.loader import catalog_gpu
from inferasim.cost import oracle as oracle_module

#: Launch and tail of one GEMM kernel, seconds: what the smallest GEMMs of the profiles take
#: beyond their weight read (the analytic step prices it per layer, not per GEMM).
KERNEL_FIXED_S = 6e-6
#: The profiled parts and the catalog entry that prices each.
PARTS = {"a100": "a100", "h100": "h100"}
#: Bins of the GEMM's rows (tokens) the report groups by.
ROW_BINS = (16, 64, 128, 256, 512, 1024, 2048, 4096)


@attrs.frozen
class GemmTiming:
    model: str
    op: str
    tp: int
    rows: int
    k: float
    n: float
    measured_s: float


def read_profiles(root: Path) -> dict[str, list[GemmTiming]]:
    """Every GEMM timing under ``root/compute/<part>/<org>/<model>/mlp.csv``, per part."""
    compute = root / "compute"
    if not compute.is_dir():
        raise ConfigError("expected Vidur's profiling folder with compute/<part>/.../mlp.csv",
                          file=str(root))
    out: dict[str, list[GemmTiming]] = {}
    for path in sorted(compute.glob("*/*/*/mlp.csv")):
        part = path.parts[-4]
        model = path.parts[-2]
        with path.open(newline="") as fh:
            for line, row in enumerate(csv.DictReader(fh), start=2):
                try:
                    out.setdefault(part, []).extend(_gemms(model, row))
                except (KeyError, ValueError) as exc:
                    raise ConfigError(f"line {line}: unreadable profiling row ({exc})",
                                      file=str(path)) from None
    if not out:
        raise ConfigError("no compute/<part>/<org>/<model>/mlp.csv found", file=str(root))
    return out


def _gemms(model: str, row: dict[str, str]) -> list[GemmTiming]:
    tp = int(row["num_tensor_parallel_workers"])
    rows = int(row["num_tokens"])
    hidden = float(row["n_embd"])
    ffn = float(row["n_expanded_embd"])
    heads, kv_heads = float(row["n_head"]), float(row["n_kv_head"])
    head_dim = hidden / heads
    gated = row["use_gated_mlp"].strip().lower() == "true"
    shapes = {"attn_pre_proj": (hidden, (heads + 2 * kv_heads) * head_dim / tp),
              "attn_post_proj": (hidden / tp, hidden),
              "mlp_up_proj": (hidden, (2.0 if gated else 1.0) * ffn / tp),
              "mlp_down_proj": (ffn / tp, hidden)}
    return [GemmTiming(model, op, tp, rows, k, n,
                       float(row[f"time_stats.{op}.median"]) * 1e-3)
            for op, (k, n) in shapes.items()]


def predicted_s(gpu, g: GemmTiming) -> float:
    """The analytic time of one profiled BF16 GEMM at ``gpu``'s tile ramp."""
    return oracle_module.gemm_roofline(gpu, 2.0 * g.rows * g.k * g.n, 2.0 * g.k * g.n, g.rows,
                                       "bf16") + KERNEL_FIXED_S


def _bin(rows: int) -> str:
    lo = 0
    for hi in ROW_BINS:
        if rows <= hi:
            return f"{lo + 1}-{hi}"
        lo = hi
    return f">{ROW_BINS[-1]}"


def _stats(errors: list[float]) -> dict[str, float]:
    e = np.array(errors, dtype=np.float64)
    return {"n": int(e.size), "median_abs": float(np.median(np.abs(e))),
            "median_signed": float(np.median(e))}


def kernel_report(profiles: dict[str, list[GemmTiming]]) -> dict:
    """Per profiled part of ``profiles`` (``read_profiles``): the log error (measured over
    predicted) of every GEMM, by rows and by model, with the tile ramp and without it."""
    report: dict = {}
    for part, timings in profiles.items():
        if part not in PARTS:
            report[part] = {"skipped": f"{part} is not in the catalog"}
            continue
        gpu = catalog_gpu(PARTS[part])
        priced = {True: gpu, False: attrs.evolve(gpu, gemm_ramp_rows=0.0)}
        errs = {True: {}, False: {}}
        for g in timings:
            for ramp, part_gpu in priced.items():
                e = math.log(g.measured_s / predicted_s(part_gpu, g))
                errs[ramp].setdefault(("rows", _bin(g.rows)), []).append(e)
                errs[ramp].setdefault(("model", g.model), []).append(e)
                errs[ramp].setdefault(("all", "all"), []).append(e)
        report[part] = {
            "gemms": len(timings),
            "ramp_rows": gpu.gemm_ramp_rows,
            "with_ramp": {f"{k[0]} {k[1]}": _stats(v) for k, v in errs[True].items()},
            "hard_roofline": {f"{k[0]} {k[1]}": _stats(v) for k, v in errs[False].items()},
        }
    return report


def fitted_ramp_by_model(timings: list[GemmTiming], part: str = "h100",
                         grid: tuple[float, ...] = tuple(range(0, 257, 16))) -> dict[str, float]:
    """Held out by model: the ramp (rows) that fits every other model's GEMMs of ``part``
    (``timings``) best (least squares on the log), per model. The shipped GEMM_RAMP_ROWS is
    one such fit over all."""
    gpu = catalog_gpu(PARTS[part])
    models = sorted({g.model for g in timings})
    # per ramp, every GEMM's log error (as priced by the oracle's own roofline)
    errors = {}
    for ramp in grid:
        ramped = attrs.evolve(gpu, gemm_ramp_rows=float(ramp))
        errors[ramp] = np.array([math.log(g.measured_s / predicted_s(ramped, g))
                                 for g in timings])
    who = np.array([g.model for g in timings])
    out = {}
    for model in models:
        keep = who != model
        out[model] = float(min(grid, key=lambda r: float(np.mean(errors[r][keep] ** 2))))
    return out
