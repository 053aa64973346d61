"""Importers: pure functions ``file -> list[AnchorRecord]``, one per benchmark tool's output.

Each takes ``hints`` (``--meta KEY=VALUE``: regime or provenance facts the file does not state;
a hint that contradicts the file is an error). Bad input raises ``ConfigError``.
"""

from __future__ import annotations

from collections.abc import Callable

from inferasim.anchors.importers.agentx_ladder import import_agentx_ladder
from inferasim.anchors.importers.aiperf import import_aiperf
from inferasim.anchors.importers.grid import import_grid
from inferasim.anchors.importers.inferencemax import import_inferencemax
from inferasim.anchors.importers.sglang_bench import import_sglang_bench
from inferasim.anchors.importers.vllm_bench import import_vllm_bench
from inferasim.anchors.record import AnchorRecord

IMPORTERS: dict[str, Callable[..., list[AnchorRecord]]] = {
    "inferencemax": import_inferencemax,
    "grid": import_grid,
    "vllm-bench": import_vllm_bench,
    "sglang-bench": import_sglang_bench,
    "aiperf": import_aiperf,
    "agentx-ladder": import_agentx_ladder,
}

#: Importers that accept a launch command's arguments (``server_args``).
TAKES_SERVER_ARGS = ("vllm-bench", "aiperf")

__all__ = ["IMPORTERS", "TAKES_SERVER_ARGS", "import_agentx_ladder", "import_aiperf", "import_grid",
           "import_inferencemax", "import_sglang_bench", "import_vllm_bench"]
