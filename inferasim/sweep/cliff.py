"""Where a concurrency ladder falls off its KV cliff: per configuration, the two rungs between
which the prefix hit rate drops from at least 0.5 to below 0.2, the rule `validate agentx`
judges the measured ladders by (``cliff_between``, docs/agentic.md). A sweep of a session
workload prints it under its table and keeps it in sweep.json, since the rung past the cliff
is where a deployment needs more KV (more GPUs, a host tier), not more compute."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from inferasim.anchors.importers.agentx_ladder import cliff_between


def kv_cliffs(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """One record per configuration whose ladder falls off: the rungs either side, with
    their hit rates and mean TTFTs. A configuration whose hit rate is unknown on some rung
    (no prompt reached the cache) is not judged: the TTFT rule the measured ladders fall
    back on would call a queue's growth a cliff."""
    out = []
    for config, rungs in frame.groupby("config", sort=False):
        rows = rungs.sort_values("concurrency")
        hits = [float(h) for h in rows["prefix_hit_rate"]]
        if len(rows) < 2 or any(math.isnan(h) for h in hits):
            continue
        recs = [{"concurrency": int(c), "prefix_hit_rate": h, "ttft_mean_s": float(t)}
                for c, h, t in zip(rows["concurrency"], hits, rows["ttft_mean_s"], strict=True)]
        found = cliff_between(recs)
        if found is None:
            continue
        before, after = (next(r for r in recs if r["concurrency"] == c) for c in found)
        out.append({"config": str(config), "before": before, "after": after})
    return out


def cliff_text(cliff: dict[str, Any]) -> str:
    a, b = cliff["before"], cliff["after"]
    return (f"KV cliff ({cliff['config']}): between {a['concurrency']} and {b['concurrency']} "
            f"clients the prefix hit rate falls from {a['prefix_hit_rate']:.1%} to "
            f"{b['prefix_hit_rate']:.1%}, mean TTFT {a['ttft_mean_s']:.2f} -> "
            f"{b['ttft_mean_s']:.2f} s")
