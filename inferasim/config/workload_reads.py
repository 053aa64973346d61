"""Which ``workload.*`` keys each workload format reads, so a ``--set`` of one it does not
read (``workload.isl`` on ``synthetic``) is warned about instead of changing nothing."""

from __future__ import annotations

from collections.abc import Mapping

from inferasim.config.errors import warn
from inferasim.config.overrides import OVERRIDE_ORIGIN

# Read whatever the format: the window, the seed (engine draws too), the request cap, and
# resident_tokens, which `project` reads.
COMMON = frozenset({"format", "duration_s", "warmup_s", "seed", "max_requests",
                    "resident_tokens"})
_LANES = frozenset({"trace", "concurrency", "rate_scale", "sampler", "start_min_ratio",
                    "start_max_ratio", "timing", "idle_cap_s", "idle_cap_ms", "output_scale",
                    "subagents", "live_responses"})
READS: Mapping[str, frozenset[str]] = {
    "synthetic": frozenset({"concurrency", "rate", "synthetic"}),
    "random": frozenset({"isl", "osl", "random_range_ratio", "concurrency", "rate"}),
    "mooncake": frozenset({"trace", "rate_scale", "mooncake_sessions"}),
    "bailian": frozenset({"trace", "rate_scale"}),
    "azure": frozenset({"trace", "rate_scale"}),
    "agentx": _LANES,
    "sessions": _LANES,
}


def unread_keys(fmt: str, origins: Mapping[str, str]) -> list[str]:
    """The ``workload.*`` keys given by ``--set`` that format ``fmt`` does not read."""
    reads = COMMON | READS.get(fmt, frozenset())
    out = []
    for key, origin in origins.items():
        parts = key.split(".")
        if origin == OVERRIDE_ORIGIN and len(parts) >= 2 and parts[0] == "workload" \
                and parts[1] not in reads:
            out.append(key)
    return sorted(out)


def warn_unread(fmt: str, origins: Mapping[str, str]) -> None:
    for key in unread_keys(fmt, origins):
        warn(f"the {fmt} workload format does not read it, so it changes nothing (it reads "
             f"{', '.join(sorted(READS.get(fmt, frozenset()) | COMMON))})",
             file=OVERRIDE_ORIGIN, key=key)
