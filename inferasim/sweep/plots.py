"""A sweep's charts, as PNG files: one line per configuration (grid combination).

- ``pareto.png``: output throughput per GPU against interactivity (tokens/s per user =
  1000 / TPOT ms), each point a concurrency rung — the chart inference benchmarks publish;
- ``latency.png``: TTFT (mean and p90) and ITL (mean) against concurrency;
- ``prefix_hit.png``: prefix-cache hit rate against concurrency.

matplotlib is imported here, lazily, with the Agg backend: never at CLI start-up.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

PLOTS = ("pareto.png", "latency.png", "prefix_hit.png")


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*")


def _configs(frame: pd.DataFrame):
    """(label, rows sorted by concurrency, style) per configuration, in rung order."""
    for i, (label, group) in enumerate(frame.groupby("config", sort=False)):
        style = {"color": f"C{i % 10}", "marker": MARKERS[i % len(MARKERS)]}
        yield str(label), group.sort_values("concurrency"), style


def _concurrency_axis(ax, frame: pd.DataFrame) -> None:
    ladder = sorted(frame["concurrency"].unique())
    if len(ladder) > 1 and ladder[-1] / ladder[0] >= 8:
        ax.set_xscale("log", base=2)
    ax.set_xticks(ladder)
    ax.set_xticklabels([str(c) for c in ladder])
    ax.minorticks_off()
    ax.set_xlabel("concurrency (clients)")
    ax.grid(True, alpha=0.3)


def _title(frame: pd.DataFrame, what: str) -> str:
    name = frame.attrs.get("scenario", "")
    return f"{name}: {what}" if name else what


def pareto(frame: pd.DataFrame, path: Path, plt) -> None:
    fig, ax = plt.subplots(figsize=(7.5, 5.0))
    for label, group, style in _configs(frame):
        ax.plot(group["interactivity_tok_s"], group["output_tok_s_per_gpu"], label=label,
                **style)
        for _, row in group.iterrows():
            ax.annotate(f"c={int(row['concurrency'])}",
                        (row["interactivity_tok_s"], row["output_tok_s_per_gpu"]),
                        textcoords="offset points", xytext=(4, 4), fontsize=7, alpha=0.8)
    ax.set_xlabel("interactivity (output tokens/s per user = 1000 / TPOT ms)")
    ax.set_ylabel("output throughput per GPU (tokens/s/GPU)")
    ax.set_title(_title(frame, "throughput vs interactivity"))
    ax.grid(True, alpha=0.3)
    ax.set_ylim(bottom=0)
    ax.set_xlim(left=0)
    ax.legend(title="configuration", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def latency(frame: pd.DataFrame, path: Path, plt) -> None:
    fig, (ax_ttft, ax_itl) = plt.subplots(1, 2, figsize=(11.0, 4.5))
    for label, group, style in _configs(frame):
        ax_ttft.plot(group["concurrency"], group["ttft_mean_s"], label=f"{label} (mean)",
                     **style)
        if "ttft_p90_s" in group:
            ax_ttft.plot(group["concurrency"], group["ttft_p90_s"], linestyle="--",
                         markerfacecolor="none", label=f"{label} (p90)", **style)
        ax_itl.plot(group["concurrency"], group["itl_mean_ms"], label=label, **style)
    ax_ttft.set_ylabel("time to first token (s)")
    ax_ttft.set_title(_title(frame, "TTFT vs concurrency"))
    ax_itl.set_ylabel("inter-token latency, mean (ms)")
    ax_itl.set_title(_title(frame, "ITL vs concurrency"))
    for ax in (ax_ttft, ax_itl):
        _concurrency_axis(ax, frame)
        ax.set_ylim(bottom=0)
        ax.legend(title="configuration", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def prefix_hit(frame: pd.DataFrame, path: Path, plt) -> None:
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for label, group, style in _configs(frame):
        ax.plot(group["concurrency"], 100.0 * group["prefix_hit_rate"], label=label, **style)
    _concurrency_axis(ax, frame)
    ax.set_ylabel("prefix-cache hit rate (% of prompt tokens)")
    ax.set_ylim(0, 100)
    ax.set_title(_title(frame, "prefix hit rate vs concurrency"))
    ax.legend(title="configuration", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_plots(frame: pd.DataFrame, out_dir: Path) -> list[str]:
    """Write the charts into ``out_dir``; returns the names written ([] without matplotlib)."""
    plt = _pyplot()
    if plt is None or frame.empty:
        return []
    out_dir = Path(out_dir)
    pareto(frame, out_dir / "pareto.png", plt)
    latency(frame, out_dir / "latency.png", plt)
    prefix_hit(frame, out_dir / "prefix_hit.png", plt)
    return list(PLOTS)
