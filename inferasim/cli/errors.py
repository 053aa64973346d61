"""The one way a command reports a user mistake: one line on stderr, exit status 2."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from inferasim.config.errors import ConfigError


class ConfigErrorGroup(click.Group):
    """A click group that turns a ConfigError into one line and exit 2 (no traceback), for
    the top-level ``inferasim`` group and for subgroups run on their own."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except ConfigError as exc:
            click.echo(f"inferasim: error: {exc}", err=True)
            sys.exit(2)
        except UnicodeDecodeError as exc:
            # a file given as a scenario, trace or result that is not text
            click.echo(f"inferasim: error: an input file is not UTF-8 text ({exc.reason} at "
                       f"byte {exc.start})", err=True)
            sys.exit(2)
        except OSError as exc:
            if exc.filename is None:
                raise
            click.echo(f"inferasim: error: {exc.filename}: cannot read: "
                       f"{exc.strerror or exc}", err=True)
            sys.exit(2)


def named_path(ctx: click.Context, param: click.Parameter, value):
    """A click callback for a path option (of type ``click.Path`` without ``path_type``: a
    Path makes "" the current folder, where the command would then write its files): an
    empty one is refused, any other returned as a Path."""
    if value is None:
        return None
    if not str(value).strip():
        raise click.BadParameter("is empty; name the file or folder to write", ctx, param)
    return Path(value)
