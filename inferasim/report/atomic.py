"""Write a result folder or file all at once: into a temporary sibling, renamed into place on
success."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from inferasim.config.errors import ConfigError

# Every result folder inferasim writes holds this file: a folder that does not is not replaced.
RESULT_MARKER = "scenario.resolved.yaml"


def check_out_dir(out_dir: str | Path) -> Path:
    """``out_dir`` may be written: absent, empty, or a result folder inferasim wrote before
    (which the new result replaces whole). Anything else would be deleted by the replacement,
    so it is a ConfigError, raised before any work is done: so is the current folder or one
    holding it (the replacement would pull the ground from under the shell), and a symbolic
    link (replacing it would drop the link, not write where it points)."""
    if not str(out_dir).strip():
        raise ConfigError("--out is empty; name the folder to write the result to")
    out_dir = Path(out_dir)
    if out_dir.is_symlink():
        raise ConfigError(f"is a symbolic link (to {os.readlink(out_dir)}); name the folder "
                          "itself", file=str(out_dir))
    here = Path.cwd().resolve()
    target = out_dir.resolve()
    if target == here or target in here.parents:
        raise ConfigError("is the current folder or holds it, which replacing it would "
                          "delete; name another folder", file=str(out_dir))
    if out_dir.exists():
        if not out_dir.is_dir():
            raise ConfigError("exists and is not a folder; name a new or empty folder",
                              file=str(out_dir))
        if any(out_dir.iterdir()) and not (out_dir / RESULT_MARKER).is_file():
            raise ConfigError("holds files inferasim did not write (no "
                              f"{RESULT_MARKER}), which replacing it would delete; name a "
                              "new or empty folder, or a previous result folder",
                              file=str(out_dir))
    return out_dir


@contextmanager
def atomic_dir(out_dir: str | Path) -> Iterator[Path]:
    """Yield a temporary folder; on success it replaces ``out_dir`` (``check_out_dir``: only
    an empty folder or an earlier result), on any failure it is removed and ``out_dir`` is
    left as it was: never a half-written result, never a half-deleted old one (the old
    folder is renamed aside, the new one renamed in, and only then the old one deleted)."""
    out_dir = check_out_dir(out_dir)
    parent = out_dir.resolve().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}-", dir=parent))
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp's private 0700 is not a result's mode
    except OSError as exc:
        raise _unwritable(out_dir, exc) from None
    try:
        yield tmp
        _swap_in(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _swap_in(new: Path, out_dir: Path) -> None:
    old = None
    try:
        if out_dir.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}-old-", dir=new.parent))
            os.replace(out_dir, old)  # onto the empty placeholder: one rename
        os.replace(new, out_dir)
    except OSError as exc:
        if old is not None:
            if out_dir.exists():
                shutil.rmtree(old, ignore_errors=True)  # the placeholder: nothing moved
            else:
                os.replace(old, out_dir)  # the previous result goes back where it was
        raise ConfigError(f"cannot replace the folder: {exc.strerror or exc}",
                          file=str(out_dir)) from None
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file in the same folder and a rename: a
    reader never sees half of it, and a failure leaves the old file (or none). A folder that
    cannot be made or written is a ConfigError naming the path."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise _unwritable(path, exc) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _unwritable(path: Path, exc: OSError) -> ConfigError:
    return ConfigError(f"cannot write here: {exc.strerror or exc}", file=str(path))
