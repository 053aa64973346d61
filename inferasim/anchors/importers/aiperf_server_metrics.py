"""AIPerf's scrape of a vLLM server's ``/metrics`` (``server_metrics_export.csv``, beside the
profile export): the prefix cache's counters over the run, which an agentic export reads its
uncached prompt tokens from (``aiperf.py``).

The file is sections of CSV after ``#`` comment lines; the counter section's header is
``Endpoint,Type,Metric,Unit,total,rate,...`` and a counter's ``total`` is its increase over
the scrape, its ``rate`` that over the scrape's length. Read here:

- ``vllm:prefix_cache_hits`` and ``vllm:prefix_cache_queries``: the hit rate, in tokens;
- ``vllm:prompt_tokens_by_source`` with source ``local_compute``: the prompt tokens the
  server computed a second.
"""

from __future__ import annotations

import csv
from pathlib import Path

import attrs

from inferasim.config.errors import ConfigError

#: The profile export's name and its sibling's, as AIPerf writes them into one artifact folder.
PROFILE_SUFFIX = "profile_export_aiperf.json"
SERVER_SUFFIX = "server_metrics_export.csv"


@attrs.frozen
class ServerPrefix:
    hit_rate: float          # cached prompt tokens over queried, over the scrape
    computed_tok_s: float    # prompt tokens the server computed a second


def sibling(profile: str | Path) -> Path | None:
    """The server-metrics export beside ``profile``, or None where there is none."""
    profile = Path(profile)
    if not profile.name.endswith(PROFILE_SUFFIX):
        return None
    path = profile.with_name(profile.name[: -len(PROFILE_SUFFIX)] + SERVER_SUFFIX)
    return path if path.is_file() else None


def read_server_prefix(path: str | Path) -> ServerPrefix | None:
    """The prefix counters of a server-metrics export, or None where it holds none (a server
    without prefix caching, or another engine's metrics)."""
    file = str(path)
    totals: dict[str, float] = {}
    computed: float | None = None
    header: list[str] | None = None
    with open(path, newline="") as fh:
        for row in csv.reader(line for line in fh if not line.startswith("#")):
            if not row:
                header = None
                continue
            if row[0] == "Endpoint":
                header = row
                continue
            if header is None or "total" not in header or len(row) != len(header):
                continue
            cells = dict(zip(header, row, strict=True))
            metric = cells.get("Metric", "")
            try:
                if metric in ("vllm:prefix_cache_hits", "vllm:prefix_cache_queries"):
                    totals[metric] = float(cells["total"])
                elif (metric == "vllm:prompt_tokens_by_source"
                      and cells.get("source") == "local_compute"):
                    computed = float(cells["rate"])
            except (KeyError, ValueError) as exc:
                raise ConfigError(f"counter {metric} has no numeric total/rate ({exc})",
                                  file=file, key=metric) from exc
    queries = totals.get("vllm:prefix_cache_queries")
    hits = totals.get("vllm:prefix_cache_hits")
    if not queries or hits is None or computed is None:
        return None
    if not 0 <= hits <= queries or computed < 0:
        raise ConfigError(f"prefix cache hits {hits:g} of {queries:g} queried and "
                          f"{computed:g} computed tokens a second do not add up", file=file,
                          key="vllm:prefix_cache_hits")
    return ServerPrefix(hits / queries, computed)
