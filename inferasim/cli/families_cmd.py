"""``inferasim anchors families``: every InferenceMAX configuration family in a results file and
the scenario that expresses it."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import click

from inferasim.config.catalog import REPO_ROOT
from inferasim.config.errors import ConfigError

DEFAULT_TABLE = REPO_ROOT.parent / "shared" / "data" / "inferencemax" / "benchmarks_flat.csv"
SCENARIO_DIR = REPO_ROOT / "scenarios" / "inferencemax"


def _targets(folder: Path) -> dict:
    from inferasim.anchors.regime import Target
    from inferasim.config.loader import load_scenario

    out = {}
    for path in sorted(folder.glob("*.yaml")):
        if not path.name.startswith("_"):
            out[path.name] = Target.from_scenario(load_scenario(path, [], check_fit=False))
    return out


@click.command("families")
@click.argument("table", type=click.Path(path_type=Path), required=False)
@click.option("--scenarios", "folder", type=click.Path(path_type=Path), default=SCENARIO_DIR,
              show_default="scenarios/inferencemax", help="Folder of scenarios to match.")
@click.option("--write-missing", is_flag=True,
              help="Write a scenario into the folder for each family none expresses.")
def families_cmd(table: Path | None, folder: Path, write_missing: bool) -> None:
    """List every configuration family (GPU x framework x precision x speculative method x
    disaggregated) of an InferenceMAX results TABLE (default: the shared
    benchmarks_flat.csv) and the scenario that expresses it. Exits 1 when a family has none."""
    from inferasim.anchors.families import families, scenario_for
    from inferasim.anchors.families import write_missing as write
    from inferasim.anchors.importers.inferencemax import import_inferencemax
    from inferasim.validate.anchors import load_templates, replay_problem

    table = table or DEFAULT_TABLE
    if not Path(folder).is_dir():
        raise ConfigError("not a folder of scenarios", file=str(folder), key="--scenarios")
    # as the table spells them (not settled: a row labelled mtp whose steps accepted nothing
    # is still of the mtp family)
    records = import_inferencemax(table, include_disaggregated=True)
    found = families(records)
    targets = _targets(folder)
    missing = {f: rows for f, rows in found.items() if scenario_for(f, targets) is None}
    if write_missing and missing:
        written, problems = write(missing, Path(folder), table.name)
        for path in written:
            click.echo(f"wrote {path}")
        for problem in problems:
            click.echo(f"not written: {problem}", err=True)
        targets = _targets(folder)
        missing = {f: rows for f, rows in found.items() if scenario_for(f, targets) is None}
    # rows are priced from the folder's scenarios, as validation replays them
    templates = load_templates(folder)
    width = max(len(f.label) for f in found) if found else 10
    click.echo(f"{'family':<{width}}  rows  priced  scenario")
    unpriced: Counter[str] = Counter()
    for family, rows in found.items():
        name = scenario_for(family, targets) or "MISSING"
        problems = [why for r in rows if (why := replay_problem(r, templates)) is not None]
        unpriced.update(f"{family.label}: {why}" for why in problems)
        click.echo(f"{family.label:<{width}}  {len(rows):>4}  {len(rows) - len(problems):>6}"
                   f"  {name}")
    click.echo(f"{len(found)} families, {len(found) - len(missing)} expressed, "
               f"{len(missing)} missing")
    if unpriced:
        # rows of an expressed family that inferasim cannot replay as they ran, and why
        click.echo(f"{sum(unpriced.values())} row(s) not priced as measured:")
        for why, count in sorted(unpriced.items()):
            click.echo(f"  {count} x {why}")
    if missing:
        raise SystemExit(1)
