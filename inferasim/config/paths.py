"""Where a path a scenario names points: one rule for traces, anchors and any other file."""

from __future__ import annotations

from pathlib import Path

from inferasim.config.errors import ConfigError


def read_text(path: str | Path, what: str = "a text file") -> str:
    """A file's text; a file that is not UTF-8 is a ConfigError naming it (the decoder's
    own error names no file)."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"expected {what}, found bytes that are not UTF-8 text "
                          f"({exc.reason} at byte {exc.start})", file=str(path)) from None


def resolve_scenario_path(named: str, scenario_path: str | None, *, key: str,
                          what: str, origin: str | None = None) -> Path:
    """A relative path is taken against the scenario file's folder first, then the working
    directory (where a ``--set`` override naming it was typed). ``what`` names the thing
    looked for in the error, which names ``key`` and ``origin``, where the value was given
    (default: the scenario file)."""
    p = Path(named).expanduser()
    if p.is_absolute():
        candidates = [p]
    else:
        candidates = []
        if scenario_path:
            candidates.append(Path(scenario_path).resolve().parent / p)
        candidates.append(Path.cwd() / p)
    for cand in candidates:
        if cand.exists():
            return cand
    folders = dict.fromkeys(str(c.parent) for c in candidates)  # once each, in order
    raise ConfigError(f"{what} not found: {named} (looked in {', '.join(folders)})",
                      key=key, file=origin or scenario_path)
