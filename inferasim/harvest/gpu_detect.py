"""The GPU part a harvest ran on, from the vendor tools' own output.

``rocm-smi`` (Concise Info: the PCI device id), ``amd-smi`` (default view ``GPU-Name``, or
``static``: ``MARKET_NAME`` / ``PRODUCT_NAME``) and ``nvidia-smi`` (default table or
``--query-gpu=name``). A text that names no part, or names more than one, detects nothing: the
anchor's part then stays unknown (behaviour.md 1), never guessed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Sequence
from typing import Any

from inferasim.anchors import normalise as nz

#: PCI device id (rocm-smi "DID") -> part. Only ids seen in real outputs or AMD's own docs.
AMD_DEVICE_IDS = {
    "0x74a0": "mi300a",
    "0x74a1": "mi300x",
    "0x74a5": "mi325x",
    "0x75a3": "mi355x",
}

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_NAME_PATTERNS = (
    re.compile(r"MARKET_NAME:\s*(.+)"),
    re.compile(r"PRODUCT_NAME:\s*(.+)"),
    re.compile(r"Card (?:series|model|SKU):\s*(.+)", re.I),
    re.compile(r"\b(AMD Instinct MI\d{3}\w*(?: OAM)?)"),
    re.compile(r"\b(NVIDIA [A-Z]?\d{2,3}\w*(?: [\w-]+)*?)\s{2,}"),
    re.compile(r"^\s*(NVIDIA [^,]+),", re.M),
)
_DID = re.compile(r"\b(0x7[45][0-9a-f]{2})\b", re.I)


def parts_in_text(text: str) -> list[str]:
    """Every GPU part the text names (deduplicated, in order of first mention)."""
    clean = _ANSI.sub("", text)
    found: list[str] = []
    for pattern in _NAME_PATTERNS:
        for match in pattern.finditer(clean):
            part = nz.normalise_gpu(match.group(1))
            if part and part not in found:
                found.append(part)
    for match in _DID.finditer(clean):
        part = AMD_DEVICE_IDS.get(match.group(1).lower())
        if part and part not in found:
            found.append(part)
    return found


def detect_part(text: str) -> tuple[str | None, str]:
    """(part, how it was decided). Several distinct parts -> None (ambiguous)."""
    parts = parts_in_text(text)
    if not parts:
        return None, "no GPU part named in the output"
    if len(parts) > 1:
        return None, f"ambiguous: the output names several parts ({', '.join(parts)})"
    return parts[0], f"{parts[0]} named by the GPU tool's output"


def capture(commands: Sequence[Sequence[str]], timeout: float = 60.0) -> dict[str, Any]:
    """Run each GPU tool that exists on this host; return their outputs and the detected part."""
    outputs: list[dict[str, Any]] = []
    for argv in commands:
        if not argv or shutil.which(argv[0]) is None:
            outputs.append({"argv": list(argv), "missing": True})
            continue
        try:
            proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
            outputs.append({"argv": list(argv), "rc": proc.returncode,
                            "output": proc.stdout + proc.stderr})
        except (OSError, subprocess.TimeoutExpired) as exc:
            outputs.append({"argv": list(argv), "error": str(exc)})
    text = "\n".join(o.get("output", "") for o in outputs)
    part, how = detect_part(text)
    return {"commands": outputs, "part": part, "isa": nz.gpu_isa(part), "how": how, "text": text}
