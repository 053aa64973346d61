"""Azure LLM inference traces (``workload.format: azure``; Splitwise's 2023 files and the
2024 week-long ones, AzurePublicDataset): CSV rows of ``TIMESTAMP`` (wall clock),
``ContextTokens`` (prompt) and ``GeneratedTokens`` (output).

The trace records no session, prefix or think time, so each request is its own: an open loop
at the recorded arrival times (from the first, divided by ``rate_scale``), prompts that share
no block with any other, outputs forced to the recorded length.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from inferasim.config.errors import ConfigError
from inferasim.config.scenario import Scenario
from inferasim.workload.stamped import StampedSource, StampedTrace, build_trace
from inferasim.workload.trace_path import resolve_trace_path

COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
# Keys only tell requests apart (none shares a block): one per 512 tokens, as Mooncake's.
AZURE_BLOCK_TOKENS = 512
_STRIDE = 1 << 32


def read_azure(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(arrival stamps in ns, prompt tokens, output tokens) in file order; a file that is not
    such a trace, or a row that is not a request, is a ConfigError naming the line."""
    where = str(path)
    try:
        frame = pd.read_csv(path, usecols=list(COLUMNS), dtype={"TIMESTAMP": str})
    except (ValueError, KeyError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise ConfigError(f"not an Azure LLM inference trace ({exc}); expected a CSV with "
                          f"columns {', '.join(COLUMNS)}", file=where) from None
    except OSError as exc:
        raise ConfigError(f"cannot read the trace: {exc}", file=where) from None
    if frame.empty:
        raise ConfigError("no requests in trace", file=where)
    stamps = pd.to_datetime(frame["TIMESTAMP"], errors="coerce", format="ISO8601")
    counts = {c: pd.to_numeric(frame[c], errors="coerce") for c in COLUMNS[1:]}
    bad = stamps.isna() | counts["ContextTokens"].isna() | counts["GeneratedTokens"].isna() \
        | (counts["ContextTokens"] < 1) | (counts["GeneratedTokens"] < 0) \
        | (counts["ContextTokens"] % 1 != 0) | (counts["GeneratedTokens"] % 1 != 0)
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        row = frame.iloc[i]
        raise ConfigError(f"line {i + 2}: expected a timestamp, ContextTokens >= 1 and "
                          f"GeneratedTokens >= 0 (whole numbers), got {row['TIMESTAMP']!r}, "
                          f"{row['ContextTokens']!r}, {row['GeneratedTokens']!r}", file=where)
    return (stamps.to_numpy().astype("datetime64[ns]").astype(np.int64),
            counts["ContextTokens"].to_numpy(np.int64),
            counts["GeneratedTokens"].to_numpy(np.int64))


def load_azure(path: Path) -> StampedTrace:
    ns, ins, outs = read_azure(path)
    times = (ns - ns.min()) / 1e9
    blocks = -(-ins // AZURE_BLOCK_TOKENS)
    ids = [-(i + 1) * _STRIDE - np.arange(n, dtype=np.int64) for i, n in enumerate(blocks)]
    n = len(ins)
    return build_trace(times, [np.nan] * n, ins.tolist(), outs.tolist(), ids, [-1] * n,
                       AZURE_BLOCK_TOKENS, False, source=str(path))


def azure_source(scenario: Scenario, rng: np.random.Generator) -> StampedSource:
    wl = scenario.workload
    if wl.rate_scale <= 0:
        raise ConfigError("expected a positive number", file=scenario.path,
                          key="workload.rate_scale")
    trace = load_azure(resolve_trace_path(scenario))
    return StampedSource(trace, wl.rate_scale, wl.duration_s, False, wl.warmup_s)
