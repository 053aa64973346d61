"""``inferasim knobs``: every INFERASIM_* knob with its meaning and current value."""

from __future__ import annotations

import os

import click

from inferasim.config.knobs import KNOBS


@click.command()
def knobs():
    """List the INFERASIM_* environment knobs."""
    for decl in KNOBS:
        current = os.environ.get(decl.name)
        shown = f" (set: {current})" if current is not None else ""
        click.echo(f"{decl.name}  [{decl.kind.__name__}, default {decl.default}]{shown}")
        click.echo(f"    {decl.meaning}")
