"""A trace file's lines, gzip-compressed or not: one reader for every trace format.

Compression is told by the file's first bytes, not its name, so ``trace.jsonl`` that is
really gzip (or ``trace.gz`` that is not) reads as what it is. A file that cannot be decoded
is a ConfigError naming the file and line: not UTF-8, or a gzip stream cut short.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from inferasim.config.errors import ConfigError

GZIP_MAGIC = b"\x1f\x8b"


class TraceDecodeError(ConfigError, ValueError):
    """A trace file that cannot be read as text: a ConfigError for the CLI, and a ValueError
    for the parsers that report bad traces as one."""


def is_gzip(path: str | Path) -> bool:
    """The file is gzip by its first bytes; one named ``.gz`` that is not is an error (it was
    meant to be compressed, and reading its bytes as text would say something misleading)."""
    with open(path, "rb") as fh:
        magic = fh.read(2)
    if magic == GZIP_MAGIC:
        return True
    if Path(path).suffix == ".gz":
        raise TraceDecodeError("not a whole gzip file: named .gz but does not start with "
                               "gzip's magic bytes", file=str(path))
    return False


def open_text(path: str | Path) -> IO[str]:
    """The file as UTF-8 text, decompressed when it is gzip."""
    if is_gzip(path):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def numbered_lines(path: str | Path, expected: str) -> Iterator[tuple[int, str]]:
    """(line number, line) of a text trace; ``expected`` names what the file should hold,
    for the error a file that cannot be decoded raises."""
    lineno = 0
    compressed = is_gzip(path)
    try:
        with open_text(path) as fh:
            for lineno, line in enumerate(fh, 1):
                yield lineno, line
    except UnicodeDecodeError as exc:
        after = " once decompressed" if compressed else ""
        raise TraceDecodeError(f"line {lineno + 1}: not UTF-8 text{after} ({exc.reason}); "
                               f"expected {expected}", file=str(path)) from None
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise TraceDecodeError(f"not a whole gzip file: it ends early or is damaged after "
                               f"{lineno} line(s) ({exc}); is it cut short? expected "
                               f"{expected}", file=str(path)) from None
