"""``--percentiles`` and ``--slo``: which latency percentiles a summary reports and the
service levels its goodput counts against (as ``vllm bench serve --metric-percentiles`` and
``--goodput`` take them: percentiles as numbers, SLOs in milliseconds)."""

from __future__ import annotations

import math

import click

from inferasim.config.errors import ConfigError


def parse_percentiles(text: str | None) -> list[float] | None:
    if text is None:
        return None
    out = []
    for part in (p.strip() for p in text.split(",")):
        try:
            out.append(float(part))
        except ValueError:
            raise ConfigError(f"expected numbers such as 50,90,99.9, got {part!r}",
                              key="--percentiles") from None
    return out  # the range is checked by the summary, which names the option


def parse_slo(text: str | None) -> dict[str, float] | None:
    """``ttft=300,tpot=50,e2el=10000`` (ms) -> seconds by metric name."""
    if text is None:
        return None
    from inferasim.report.summary import SLO_KEYS

    slo: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",")):
        key, sep, raw = part.partition("=")
        key = key.strip().lower()
        if not sep or key not in SLO_KEYS:
            raise ConfigError(f"expected {'|'.join(SLO_KEYS)}=MILLISECONDS, got {part!r}",
                              key="--slo")
        if key in slo:
            raise ConfigError(f"{key} given twice", key="--slo")
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value <= 0:
            raise ConfigError(f"{key}: expected a positive number of milliseconds, got {raw!r}",
                              key="--slo")
        slo[key] = value / 1000.0
    return slo


def metrics_options(func):
    func = click.option("--slo", "slo_text", default=None, metavar="ttft=MS,tpot=MS,e2el=MS",
                        help="Service levels for request goodput, in milliseconds (as "
                             "vllm bench serve --goodput).")(func)
    func = click.option("--percentiles", "percentiles_text", default=None, metavar="P1,P2,...",
                        help="Latency percentiles to report beside the defaults, e.g. "
                             "99.9.")(func)
    return func
