"""Bytes per stored element by dtype, scales included (block scales amortised per element)."""

from __future__ import annotations

BYTES_PER_ELEMENT = {
    "bf16": 2.0,
    "fp16": 2.0,
    "fp32": 4.0,  # recurrent states only (linear attention), never weights
    "fp8": 1.0,
    "int8": 1.0,
    # 4-bit formats carry one scale per group: MX e8m0 per 32, NVFP4 fp8 per 16, int4 bf16 per 32.
    "mxfp4": 0.5 + 1 / 32,
    "fp4": 0.5 + 1 / 32,
    "nvfp4": 0.5 + 1 / 16,
    "int4": 0.5 + 2 / 32,
}

FOUR_BIT = frozenset({"mxfp4", "fp4", "nvfp4", "int4"})


def bytes_per_element(dtype: str) -> float:
    try:
        return BYTES_PER_ELEMENT[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}") from None


def kv_element_bytes(kv_dtype: str) -> int:
    return 1 if kv_dtype == "fp8" else 2
