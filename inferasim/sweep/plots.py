"""A sweep's charts, as PNG files: one line per configuration (grid combination).

- ``pareto.png``: output throughput per GPU against interactivity (tokens/s per user =
  1000 / median TPOT ms, as InferenceMAX charts it), each point a concurrency rung;
- ``throughput_ttft.png`` and ``throughput_e2e.png``: the same throughput against median
  TTFT and median end-to-end latency, the other two charts InferenceMAX publishes;
- ``latency.png``: TTFT (mean and p90) and ITL (mean) against concurrency;
- ``prefix_hit.png``: prefix-cache hit rate against concurrency.

Every title names the deployment (``plot_title``: model, GPUs, engine, precision, ISL/OSL or
the workload's kind). Rung labels (``c=N``) are placed where they overlap no other label or
marker, or left out. The files carry no metadata (no software version, no date), so two
sweeps of one ladder write the same bytes.

matplotlib is imported here, lazily, with the Agg backend: never at CLI start-up.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

PLOTS = ("pareto.png", "throughput_ttft.png", "throughput_e2e.png", "latency.png",
         "prefix_hit.png")
DPI = 110
# PNG text chunks matplotlib would write: None drops them (Software names its version).
NO_METADATA = {"Software": None}
# Where a rung label may go, in points from its marker, in the order tried.
LABEL_OFFSETS = ((5, 5), (5, -11), (-24, 5), (-24, -11), (5, 14), (5, -20), (-24, 14),
                 (-24, -20))
MARKER_HALF_PX = 4.0
# An x axis spanning more than this ratio is drawn on a log scale (TTFT from 50 ms to 60 s).
LOG_SPAN = 30.0


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*")


def plot_title(scenario) -> str:
    """``deepseek-r1 on 8 x b200, sglang, fp8, ISL/OSL 1024/1024``: what a chart shows
    without its folder; the workload's kind where ISL and OSL are not fixed."""
    wl = scenario.workload
    topology = scenario.topology.kind
    where = f"{scenario.total_gpus} x {scenario.gpu.name}"
    if topology != "colocated":
        where += f" ({topology})"
    lengths = f"ISL/OSL {wl.isl}/{wl.osl}" if wl.format == "random" else f"{wl.format} workload"
    precision = scenario.weight_dtype or "?"
    if scenario.speculative.method != "none":
        precision += f", {scenario.speculative.method}"
    return f"{scenario.model.name} on {where}, {scenario.engine.name}, {precision}, {lengths}"


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


def _title(ax, what: str, title: str) -> None:
    ax.set_title(f"{what}\n{title}" if title else what, fontsize=10)


def _column(frame: pd.DataFrame, *names: str) -> str:
    """The first of ``names`` the rows have (an older results.csv lacks the newer ones)."""
    return next((n for n in names if n in frame.columns), names[-1])


def _marker_box(px: float, py: float):
    from matplotlib.transforms import Bbox

    return Bbox.from_bounds(px - MARKER_HALF_PX, py - MARKER_HALF_PX, 2 * MARKER_HALF_PX,
                            2 * MARKER_HALF_PX)


def _line_boxes(ax, step_px: float = 3.0) -> list:
    """Small boxes every ``step_px`` along each drawn line, so a label does not sit on one."""
    import numpy as np
    from matplotlib.transforms import Bbox

    boxes = []
    for line in ax.get_lines():
        xy = ax.transData.transform(np.column_stack(line.get_data()).astype(float))
        xy = xy[np.isfinite(xy).all(axis=1)]
        for (x0, y0), (x1, y1) in zip(xy[:-1], xy[1:], strict=True):
            n = max(2, int(np.hypot(x1 - x0, y1 - y0) / step_px))
            # the ends are markers, already obstacles of their own
            for t in np.linspace(0.0, 1.0, n)[1:-1]:
                px, py = x0 + t * (x1 - x0), y0 + t * (y1 - y0)
                boxes.append(Bbox.from_bounds(px - 1.0, py - 1.0, 2.0, 2.0))
    return boxes


def label_rungs(fig, ax, points: list[tuple[float, float, str, str]]) -> int:
    """Annotate each (x, y, text, colour) at the first of LABEL_OFFSETS where it overlaps no
    placed label, marker or line and stays inside the axes; a point with no such place goes
    unlabelled (its neighbours carry the ladder), and so does one that the same label
    already names (two configurations' rungs on one spot). Returns the labels placed."""
    if not points:
        return 0
    fig.canvas.draw()  # final limits and layout: the boxes below are where things are drawn
    renderer = fig.canvas.get_renderer()
    inside = ax.get_window_extent(renderer)
    spots = ax.transData.transform([(x, y) for x, y, _, _ in points])
    markers = [_marker_box(px, py) for px, py in spots]
    lines = _line_boxes(ax)
    labels: list = []
    named: list[tuple[str, object]] = []
    for i, (x, y, text, colour) in enumerate(points):
        if any(t == text and box.overlaps(markers[i]) for t, box in named):
            continue
        others = labels + markers[:i] + markers[i + 1:] + lines
        for offset in LABEL_OFFSETS:
            note = ax.annotate(text, (x, y), textcoords="offset points", xytext=offset,
                               fontsize=7, color=colour)
            box = note.get_window_extent(renderer)
            fits = inside.contains(box.x0, box.y0) and inside.contains(box.x1, box.y1)
            if fits and not any(box.overlaps(other) for other in others):
                labels.append(box)
                named.append((text, markers[i]))
                break
            note.remove()
    return len(labels)


def _throughput_chart(frame: pd.DataFrame, path: Path, plt, *, x: str, xlabel: str,
                      what: str, title: str) -> None:
    """Output tokens/s per GPU against ``x``, a point per rung labelled ``c=N``."""
    fig, ax = plt.subplots(figsize=(7.5, 5.2))
    points = []
    for label, group, style in _configs(frame):
        ax.plot(group[x], group["output_tok_s_per_gpu"], label=label, **style)
        points += [(float(px), float(py), f"c={int(c)}", style["color"]) for px, py, c in
                   zip(group[x], group["output_tok_s_per_gpu"], group["concurrency"],
                       strict=True) if pd.notna(px) and pd.notna(py)]
    values = frame[x].dropna()
    values = values[values > 0]
    if len(values) > 1 and values.max() / values.min() > LOG_SPAN:
        ax.set_xscale("log")
    else:
        ax.set_xlim(left=0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("output throughput per GPU (tokens/s/GPU)")
    _title(ax, what, title)
    ax.grid(True, alpha=0.3)
    ax.set_ylim(bottom=0)
    ax.margins(x=0.08, y=0.08)
    ax.legend(title="configuration", fontsize=8)
    fig.tight_layout()
    label_rungs(fig, ax, points)
    fig.savefig(path, dpi=DPI, metadata=NO_METADATA)
    plt.close(fig)


def pareto(frame: pd.DataFrame, path: Path, plt, title: str = "") -> None:
    x = _column(frame, "interactivity_median_tok_s", "interactivity_tok_s")
    basis = "median" if x == "interactivity_median_tok_s" else "mean"
    _throughput_chart(frame, path, plt, x=x, what="throughput vs interactivity", title=title,
                      xlabel=f"interactivity (output tokens/s per user = 1000 / {basis} "
                             "TPOT ms)")


def throughput_ttft(frame: pd.DataFrame, path: Path, plt, title: str = "") -> None:
    x = _column(frame, "ttft_median_s", "ttft_p50_s")
    _throughput_chart(frame, path, plt, x=x, what="throughput vs time to first token",
                      title=title, xlabel="time to first token, median (s)")


def throughput_e2e(frame: pd.DataFrame, path: Path, plt, title: str = "") -> None:
    x = _column(frame, "e2e_median_s", "e2e_mean_s")
    basis = "median" if x == "e2e_median_s" else "mean"
    _throughput_chart(frame, path, plt, x=x, what="throughput vs end-to-end latency",
                      title=title, xlabel=f"end-to-end latency, {basis} (s)")


def latency(frame: pd.DataFrame, path: Path, plt, title: str = "") -> None:
    fig, (ax_ttft, ax_itl) = plt.subplots(1, 2, figsize=(11.0, 4.8))
    for label, group, style in _configs(frame):
        ax_ttft.plot(group["concurrency"], group["ttft_mean_s"], label=f"{label} (mean)",
                     **style)
        if "ttft_p90_s" in group:
            ax_ttft.plot(group["concurrency"], group["ttft_p90_s"], linestyle="--",
                         markerfacecolor="none", label=f"{label} (p90)", **style)
        ax_itl.plot(group["concurrency"], group["itl_mean_ms"], label=label, **style)
    ax_ttft.set_ylabel("time to first token (s)")
    _title(ax_ttft, "TTFT vs concurrency", title)
    ax_itl.set_ylabel("inter-token latency, mean (ms)")
    _title(ax_itl, "ITL vs concurrency", title)
    for ax in (ax_ttft, ax_itl):
        _concurrency_axis(ax, frame)
        ax.set_ylim(bottom=0)
        ax.legend(title="configuration", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI, metadata=NO_METADATA)
    plt.close(fig)


def prefix_hit(frame: pd.DataFrame, path: Path, plt, title: str = "") -> None:
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for label, group, style in _configs(frame):
        ax.plot(group["concurrency"], 100.0 * group["prefix_hit_rate"], label=label, **style)
    _concurrency_axis(ax, frame)
    ax.set_ylabel("prefix-cache hit rate (% of prompt tokens)")
    ax.set_ylim(0, 100)
    _title(ax, "prefix hit rate vs concurrency", title)
    ax.legend(title="configuration", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI, metadata=NO_METADATA)
    plt.close(fig)


CHARTS = {"pareto.png": pareto, "throughput_ttft.png": throughput_ttft,
          "throughput_e2e.png": throughput_e2e, "latency.png": latency,
          "prefix_hit.png": prefix_hit}


def write_plots(frame: pd.DataFrame, out_dir: Path, title: str | None = None) -> list[str]:
    """Write the charts into ``out_dir``; returns the names written ([] without matplotlib).
    ``title``: the deployment line every chart carries (``plot_title``); default the
    scenario's name from ``frame.attrs``."""
    plt = _pyplot()
    if plt is None or frame.empty:
        return []
    out_dir = Path(out_dir)
    title = frame.attrs.get("scenario", "") if title is None else title
    for name, chart in CHARTS.items():
        chart(frame, out_dir / name, plt, title)
    return list(PLOTS)
