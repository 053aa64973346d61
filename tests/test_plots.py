"""The sweep's charts: titles that name the deployment, interactivity from the median TPOT,
rung labels that never overlap, the throughput against TTFT and E2E charts, and PNGs without
metadata that would differ between two sweeps."""

from __future__ import annotations

import struct

import pandas as pd
import pytest

from inferasim.config.loader import load_scenario
from inferasim.sweep import plots

plt = pytest.importorskip("matplotlib.pyplot", reason="matplotlib (the plot extra) is absent")


def _rows(n: int = 8, configs: int = 2) -> pd.DataFrame:
    """A ladder whose configurations coincide at low concurrency, as a grid of
    max_num_seqs does below its smallest value: crowded labels."""
    rows = []
    for k in range(configs):
        for i in range(n):
            c = 2 ** i
            cap = 16 * (k + 1)
            rows.append({"config": f"engine.max_num_seqs={cap}", "concurrency": c,
                         "output_tok_s_per_gpu": 50.0 * min(c, cap),
                         "interactivity_tok_s": 100.0 / (1 + 0.02 * c),
                         "interactivity_median_tok_s": 110.0 / (1 + 0.02 * min(c, cap)),
                         "ttft_median_s": 0.1 * (1 + max(0, c - cap)),
                         "e2e_median_s": 5.0 + 0.05 * c,
                         "ttft_mean_s": 0.2, "ttft_p90_s": 0.3, "itl_mean_ms": 10.0,
                         "prefix_hit_rate": 0.3})
    return pd.DataFrame(rows)


def test_titles_name_model_gpu_engine_precision_and_lengths():
    sc = load_scenario("scenarios/inferencemax/dsr1-b200-sglang-fp8-tp8.yaml", [])
    assert plots.plot_title(sc) == "deepseek-r1 on 8 x b200, sglang, fp8, ISL/OSL 1024/1024"
    quick = load_scenario(None, [])
    assert plots.plot_title(quick) == "llama-3.1-8b on 1 x h100, vllm, bf16, synthetic workload"


def test_rung_labels_never_overlap_and_coinciding_rungs_are_named_once():
    frame = _rows()
    fig, ax = plt.subplots(figsize=(7.5, 5.2))
    points = []
    for label, group, style in plots._configs(frame):
        ax.plot(group["interactivity_median_tok_s"], group["output_tok_s_per_gpu"],
                label=label, **style)
        points += [(x, y, f"c={c}", style["color"]) for x, y, c in
                   zip(group["interactivity_median_tok_s"], group["output_tok_s_per_gpu"],
                       group["concurrency"], strict=True)]
    placed = plots.label_rungs(fig, ax, points)
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in ax.texts]
    assert len(boxes) == placed
    assert all(not a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    texts = [t.get_text() for t in ax.texts]
    # the two configurations share their rungs up to c=16: each of those is named once
    assert texts.count("c=1") == texts.count("c=16") == 1
    assert all(texts.count(t) <= 2 for t in texts)
    assert placed >= 8
    plt.close(fig)


def _png_text_chunks(data: bytes) -> list[bytes]:
    chunks, at = [], 8
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        if kind in (b"tEXt", b"iTXt", b"zTXt", b"tIME"):
            chunks.append(kind + data[at + 8:at + 8 + length])
        at += 12 + length
    return chunks


def test_every_chart_is_written_without_metadata(tmp_path):
    written = plots.write_plots(_rows(), tmp_path, title="a deployment")
    assert written == list(plots.PLOTS)
    assert {"throughput_ttft.png", "throughput_e2e.png", "pareto.png"} <= set(written)
    for name in written:
        data = (tmp_path / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
        assert _png_text_chunks(data) == [], name


def test_the_pareto_reads_the_median_tpot(monkeypatch):
    seen = {}

    def spy(frame, path, plt, *, x, xlabel, what, title):
        seen["x"], seen["xlabel"] = x, xlabel

    monkeypatch.setattr(plots, "_throughput_chart", spy)
    frame = _rows()
    plots.pareto(frame, None, plt)
    assert seen["x"] == "interactivity_median_tok_s" and "median TPOT" in seen["xlabel"]
    plots.pareto(frame.drop(columns="interactivity_median_tok_s"), None, plt)
    assert seen["x"] == "interactivity_tok_s"  # a results.csv from before the median
