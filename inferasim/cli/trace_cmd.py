"""``inferasim trace``: look into a trace file (``stats``) and generate agentic sessions (``synth``)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from inferasim.cli.errors import named_path
from inferasim.config.errors import ConfigError


@click.group()
def trace() -> None:
    """Inspect and generate workload traces."""


@trace.command()
@click.argument("file", type=click.Path(exists=True))
@click.option("--format", "fmt", type=click.Choice(["agentx", "sessions", "mooncake", "bailian", "azure"]),
              default=None, help="Trace format (default: detected from the first record).")
@click.option("--json", "as_json", is_flag=True, help="Print the statistics as one JSON object.")
def stats(file, fmt, as_json):
    """Requests, sessions, length and think-time percentiles, ideal prefix reuse of FILE."""
    from inferasim.workload.trace_stats import detect_format, format_stats, trace_stats

    try:
        fmt = fmt or detect_format(Path(file))
    except ValueError as exc:
        raise ConfigError(str(exc), file=file) from None
    try:
        result = trace_stats(Path(file), fmt)
    except (ValueError, KeyError, json.JSONDecodeError) as exc:
        # the project's one-line error (exit 2), naming the file
        raise ConfigError(f"cannot read it as {fmt}: {exc}",
                          file=file) from None
    if as_json:
        click.echo(json.dumps(result))
    else:
        click.echo(format_stats(result))


@trace.command()
@click.option("--out", "out", type=click.Path(dir_okay=False), required=True,
              callback=named_path, help="Where to write the sessions JSONL.")
@click.option("--sessions", "n", type=click.IntRange(min=1, max=1_000_000), default=50,
              show_default=True,
              help="Number of session trees.")
@click.option("--seed", type=click.IntRange(min=0), default=42, show_default=True)
@click.option("--subagent-frac", type=click.FloatRange(0.0, 1.0), default=None,
              help="Share of sessions with subagent fan-outs (default: the corpus's 2.4%).")
@click.option("--max-context", type=click.IntRange(min=4096 + 64), default=None,
              help="Largest prompt + output (default: 196608, MiniMax-M2.5's window).")
def synth(out, n, seed, subagent_frac, max_context):
    """Generate agentic coding sessions fitted to the AgentX corpus (sessions format)."""
    import attrs

    from inferasim.workload.agentic_synth import AgenticSynthSpec, write_synth

    spec = AgenticSynthSpec()
    if subagent_frac is not None:
        spec = attrs.evolve(spec, subagent_frac=subagent_frac)
    if max_context is not None:
        spec = attrs.evolve(spec, max_context=max_context)
    turns = write_synth(out, n, seed, spec)
    size = Path(out).stat().st_size
    click.echo(f"wrote {n} sessions, {turns} requests to {out} ({size / 1024:.0f} KiB)")
