"""The one way a command reports a user mistake: one line on stderr, exit status 2; a warning
is one line too, and an interruption one line and the shell's 128 + signal status."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import click

from inferasim.cli.interrupt import exit_status, interruptible, signal_name
from inferasim.config.errors import ConfigError, ConfigWarning, show_warning


class ConfigErrorGroup(click.Group):
    """A click group that turns a ConfigError into one line and exit 2 (no traceback), a
    ConfigWarning into one line, and Ctrl-C or SIGTERM into one line and exit 130 or 143, for
    the top-level ``inferasim`` group and for subgroups run on their own."""

    def invoke(self, ctx: click.Context):
        with warnings.catch_warnings(), interruptible():
            warnings.simplefilter("default", ConfigWarning)
            warnings.showwarning = show_warning
            return self._invoke_reporting(ctx)

    def _invoke_reporting(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except ConfigError as exc:
            click.echo(f"inferasim: error: {exc}", err=True)
            sys.exit(2)
        except KeyboardInterrupt as exc:
            # the commands write their results atomically: an interrupted one wrote nothing
            click.echo(f"\ninferasim: interrupted ({signal_name(exc)}); no result written",
                       err=True)
            sys.exit(exit_status(exc))
        except UnicodeDecodeError as exc:
            # a file given as a scenario, trace or result that is not text
            click.echo(f"inferasim: error: an input file is not UTF-8 text ({exc.reason} at "
                       f"byte {exc.start})", err=True)
            sys.exit(2)
        except OSError as exc:
            if exc.filename is None:
                raise
            why = "expected a file, got a folder" if isinstance(exc, IsADirectoryError) \
                else f"cannot read: {exc.strerror or exc}"
            click.echo(f"inferasim: error: {exc.filename}: {why}", err=True)
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
