"""The one way a command reports a user mistake: one line on stderr, exit status 2."""

from __future__ import annotations

import sys

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
