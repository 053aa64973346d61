"""Block-key namespaces: every session gets keys no other session can produce by accident."""

from __future__ import annotations

import numpy as np

# A session's own blocks are numbered from session_id << 32; shared prefixes use small ids.
SESSION_SHIFT = np.int64(32)


def session_base(session_id: int) -> np.int64:
    return np.int64(session_id + 1) << SESSION_SHIFT


def stream_keys(shared: np.ndarray, base: np.int64, n_blocks: int) -> np.ndarray:
    """The first ``n_blocks`` keys of a stream that starts with ``shared`` blocks."""
    if n_blocks <= shared.size:
        return shared[:n_blocks].copy()
    own = base + np.arange(n_blocks - shared.size, dtype=np.int64)
    return np.concatenate((shared, own))


def unique_keys(namespace: int, n_blocks: int) -> np.ndarray:
    """Keys no other request shares (a prompt with no reusable prefix)."""
    return session_base(namespace) + np.arange(n_blocks, dtype=np.int64)


def own_block_keys(rid: int, start: int, n_blocks: int) -> np.ndarray:
    """Keys of a request's own blocks ``start .. start + n_blocks`` (output no later turn
    shares): negative, a namespace no workload uses, one per request id."""
    return -(np.int64(rid + 1) << SESSION_SHIFT) - np.arange(start, start + n_blocks,
                                                               dtype=np.int64) - 1
