"""The one error type a user mistake raises: it names the file, the key path and what was expected."""

from __future__ import annotations


class ConfigError(Exception):
    """A bad scenario, override or catalog entry.

    The CLI prints ``str(err)`` as one line and exits with status 2; nothing is written.
    """

    def __init__(self, message: str, *, file: str | None = None, key: str | None = None):
        self.file = file
        self.key = key
        self.message = message
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.file:
            where.append(str(self.file))
        if self.key:
            where.append(self.key)
        prefix = ": ".join(where)
        return f"{prefix}: {self.message}" if prefix else self.message


class ConfigWarning(UserWarning):
    """Something accepted that is probably not what was meant (a misspelled knob, a key the
    workload does not read, an override given twice). The CLI prints it as one line on
    stderr and goes on."""

    def __init__(self, message: str, *, file: str | None = None, key: str | None = None):
        self.file = file
        self.key = key
        self.message = message
        super().__init__(ConfigError(message, file=file, key=key).args[0])


def warn(message: str, *, file: str | None = None, key: str | None = None) -> None:
    """Issue a ConfigWarning (shown once per place by Python's default filter)."""
    import warnings

    warnings.warn(ConfigWarning(message, file=file, key=key), stacklevel=2)


def show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """``warnings.showwarning`` for the CLI and its pool workers: a ConfigWarning as one
    line, ``inferasim: warning: ...``, any other warning as Python prints it."""
    import sys
    import warnings

    if issubclass(category, ConfigWarning):
        sys.stderr.write(f"inferasim: warning: {message}\n")
    else:
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))
    sys.stderr.flush()  # in order with what stdout printed before it
