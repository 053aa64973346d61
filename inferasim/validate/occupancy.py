"""``inferasim anchors occupancy``: each deployment's mean KV occupancy by Little's law, per
prompt length and load, beside the memory model's pool and the ceiling the calibration reads
(``inferasim.cost.kv_ceiling``)."""

from __future__ import annotations

from pathlib import Path

import attrs

from inferasim.anchors.acceptance import resolved
from inferasim.anchors.record import AnchorRecord
from inferasim.arch.memory import model_memory_plan
from inferasim.config.errors import ConfigError
from inferasim.cost.kv_ceiling import KvCeiling, Occupancy, occupancy, read_ceiling
from inferasim.validate.anchors import (
    TEMPLATE_DIR,
    anchor_workload,
    base_scenario,
    group_label,
    load_templates,
    regime_groups,
)


@attrs.frozen
class OccupancyTable:
    """One deployment and build: its anchors' occupancies and what they show."""

    label: str
    rows: tuple[Occupancy, ...]
    model_pool_tokens: int | None
    ceiling: KvCeiling | None
    problem: str | None = None    # why the memory model could not size its pool


def occupancy_tables(records: list[AnchorRecord], templates: Path | None = TEMPLATE_DIR
                     ) -> list[OccupancyTable]:
    """A table per regime and build with at least one anchor Little's law reads."""
    temps = load_templates(templates)
    out = []
    for _key, group in regime_groups(records).items():
        rows = tuple(o for o in map(occupancy, group) if o is not None)
        if not rows:
            continue
        label = group_label(group[0])
        try:
            sc = anchor_workload(base_scenario(group[0], temps)[1], group[0])
            pool = model_memory_plan(sc).kv_pool_tokens
        except ConfigError as exc:
            out.append(OccupancyTable(label, rows, None, None, str(exc).splitlines()[0]))
            continue
        # the tokens a verify step emits: the group's own where its streams show them
        ceiling = read_ceiling(group, pool, sc.engine.chunked_prefill_size,
                               resolved(sc, group).speculative.tokens_per_step)
        out.append(OccupancyTable(label, rows, pool, ceiling))
    return out


def format_table(table: OccupancyTable) -> str:
    """Thousands of tokens resident in one scheduler's pool (an attention-DP rank's, a
    replica's), ISL down, clients across; ``*`` marks the anchors at the ceiling the
    calibration reads."""
    shapes = sorted({(o.isl, o.osl) for o in table.rows})
    clients = sorted({o.clients for o in table.rows})
    cell = {(o.isl, o.osl, o.clients): o for o in table.rows}
    marked = set(table.ceiling.anchors) if table.ceiling else set()
    lines = [table.label]
    if table.problem:
        lines.append(f"  memory model: {table.problem}")
    elif table.ceiling:
        c = table.ceiling
        lines.append(f"  memory model pool {table.model_pool_tokens:,} tokens; the anchors ran "
                     f"at {c.pool_tokens:,} ({c.occupancy_tokens:,.0f} resident at the "
                     f"ceiling, {len(c.anchors)} anchors marked *)")
    else:
        lines.append(f"  memory model pool {table.model_pool_tokens:,} tokens; no ceiling "
                     "below it")
    lines.append("  k tokens resident per scheduler (requests running x (ISL + OSL/2)), "
                 "ISL/OSL x clients")
    lines.append("  " + f"{'ISL/OSL':>11}" + "".join(f"{c:>9}" for c in clients))
    for isl, osl in shapes:
        cells = "".join(f"{_cell(cell.get((isl, osl, c)), marked):>9}" for c in clients)
        lines.append("  " + f"{f'{isl}/{osl}':>11}" + cells)
    return "\n".join(lines)


def _cell(o: Occupancy | None, marked: set[str]) -> str:
    if o is None:
        return ""
    return f"{o.occupied / 1e3:.0f}" + ("*" if o.anchor in marked else " ")
