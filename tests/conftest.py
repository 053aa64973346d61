"""Shared test helpers: the repo root, the real data folder beside it, small scenario files."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


def shared_data(*parts: str) -> Path:
    """A path under ../shared/data, or a skip naming what is missing."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"real data not present: {path} (../shared/data is absent on this machine)")
    return path


@pytest.fixture
def write_yaml(tmp_path):
    def write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    return write


def assert_same_requests(exact, macro, count: int) -> None:
    """Two replay frames of ``count`` requests, one step by step and one in macro-steps, give
    every request the same first token and finish."""
    import numpy as np

    assert len(exact) == len(macro) == count
    for col in ("first_token_s", "finish_s"):
        np.testing.assert_allclose(macro[col], exact[col], rtol=1e-9)
