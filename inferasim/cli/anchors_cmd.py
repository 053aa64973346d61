"""``inferasim anchors``: import measurements, list and show anchors, check a scenario's anchors."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import click

from inferasim.cli.errors import ConfigErrorGroup, named_path
from inferasim.cli.options import deprecation
from inferasim.config.errors import ConfigError
from inferasim.config.paths import read_text


@click.group(cls=ConfigErrorGroup)
def anchors() -> None:
    """Measured anchors: import benchmark results, list them, check a scenario against them."""


def _pairs(values: tuple[str, ...], option: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ConfigError(f"expected KEY=VALUE, got {item!r}", key=option)
        key = key.strip()
        if key in out and out[key] != value.strip():
            raise ConfigError(f"given twice ({out[key]!r}, then {value.strip()!r}); give it once",
                              key=f"{option} {key}")
        out[key] = value.strip()
    return out


def anchors_option(help_text: str):
    """``--anchors PATH``: the anchor folder or file, named as run names it; the old
    ``--dir`` still works, with a deprecation line."""
    def wrap(func):
        func = click.option("--dir", "old_dir", type=click.Path(path_type=Path), hidden=True,
                            default=None)(func)
        return click.option("--anchors", "folder", type=click.Path(path_type=Path),
                            default=None, metavar="PATH", help=help_text)(func)
    return wrap


def _anchor_folder(folder: Path | None, old: Path | None, old_name: str) -> Path | None:
    """``--anchors``, or the old spelling (``--dir`` or the positional FOLDER) with a line
    saying so; both at once is an error."""
    if old is None:
        return folder
    if folder is not None:
        raise click.UsageError(f"give the anchor folder once: --anchors (not also {old_name})")
    deprecation(old_name, "--anchors PATH")
    return old


def _fmt(value: Any, scale: float = 1.0, digits: int = 1) -> str:
    if value is None:
        return "-"
    return f"{value * scale:.{digits}f}"


def _spec(reg) -> str:
    if reg.spec_method in (None, "none"):
        return reg.spec_method or "?"
    return f"{reg.spec_method}+{reg.draft_tokens}" if reg.draft_tokens else reg.spec_method


def _par(reg) -> str:
    def v(x):
        return "?" if x is None else str(x)

    return f"tp{v(reg.tp)} ep{v(reg.ep)} dpa{v(reg.dp_attention)}"


# ---------------------------------------------------------------- import


@anchors.command("import")
@click.option("--from", "source", required=True,
              type=click.Choice(["inferencemax", "grid", "vllm-bench", "sglang-bench", "aiperf",
                                 "agentx-ladder"]),
              help="Which tool wrote FILE.")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False),
              callback=named_path,
              help="Anchor file to write (.json or .yaml); written whole or not at all.")
@click.option("--meta", "meta", multiple=True, metavar="KEY=VALUE",
              help="A fact the file does not state: a regime axis (gpu, engine, tp, ...) or "
                   "provenance (image, run_url, date). Repeatable.")
@click.option("--server-cmd", "server_cmd", type=click.Path(dir_okay=False, path_type=Path),
              help="File holding the server's launch command (vllm-bench, aiperf).")
@click.option("--include-disagg", is_flag=True,
              help="inferencemax: keep disaggregated and multi-node rows too.")
def import_cmd(source: str, file: Path, out: Path, meta: tuple[str, ...], server_cmd: Path | None,
               include_disagg: bool) -> None:
    """Import FILE written by a benchmark tool into an anchor file."""
    from inferasim.anchors import normalise as nz
    from inferasim.anchors.importers import IMPORTERS, TAKES_SERVER_ARGS
    from inferasim.anchors.store import write_anchor_file

    kwargs: dict[str, Any] = {"hints": _pairs(meta, "--meta")}
    if server_cmd is not None:
        if source not in TAKES_SERVER_ARGS:
            raise ConfigError(f"--server-cmd applies to {', '.join(TAKES_SERVER_ARGS)}, "
                              f"not {source}", key="--server-cmd")
        if not server_cmd.is_file():
            raise ConfigError("file not found", file=str(server_cmd), key="--server-cmd")
        kwargs["server_args"] = nz.parse_server_command(
            read_text(server_cmd, "a server launch command"))
    if include_disagg:
        if source != "inferencemax":
            raise ConfigError("--include-disagg applies to inferencemax only",
                              key="--include-disagg")
        kwargs["include_disaggregated"] = True
    records = IMPORTERS[source](file, **kwargs)
    if not records:
        raise ConfigError("nothing to import (no rows kept)", file=str(file))
    words = ["inferasim anchors import --from", source, file.name]
    words += [f"--meta {shlex.quote(m)}" for m in meta]
    if server_cmd is not None:
        words.append(f"--server-cmd {server_cmd.name}")
    if include_disagg:
        words.append("--include-disagg")
    write_anchor_file(out, records, generated_by=" ".join(words) + f" --out {out.name}")
    click.echo(f"imported {len(records)} anchors from {file} -> {out}")


# ---------------------------------------------------------------- list / show


@anchors.command("list")
@click.argument("old_folder", metavar="[FOLDER]", required=False,
                type=click.Path(path_type=Path))
@anchors_option("Anchor folder or file (default: the shipped anchors/).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_cmd(old_folder: Path | None, folder: Path | None, old_dir: Path | None,
             as_json: bool) -> None:
    """List the anchors in --anchors (default: the shipped anchors/). FOLDER is the old
    spelling of --anchors."""
    from inferasim.anchors.store import AnchorStore

    folder = _anchor_folder(folder, old_dir, "--dir")
    folder = _anchor_folder(folder, old_folder, "the FOLDER argument")
    store = AnchorStore.load(folder)
    if as_json:
        click.echo(json.dumps([r.to_dict() for r in store], indent=1))
        return
    header = (f"{'id':60} {'engine':12} {'gpu':7} {'weights':7} {'spec':7} {'parallel':15} "
              f"{'isl/osl':>10} {'conc':>5} {'step ms':>8}")
    click.echo(header)
    for r in store:
        reg, w = r.regime, r.workload
        click.echo(f"{r.id:60} {reg.engine or '?':12} {reg.gpu or '?':7} "
                   f"{reg.weight_dtype or '?':7} {_spec(reg):7} {_par(reg):15} "
                   f"{w.isl:>5}/{w.osl:<4} {w.concurrency if w.concurrency is not None else '-':>5} "
                   f"{_fmt(r.decode_step_s, 1e3, 2):>8}")
    click.echo(f"{len(store)} anchors")


@anchors.command("show")
@click.argument("anchor_id")
@anchors_option("Anchor folder or file (default: anchors/).")
def show_cmd(anchor_id: str, folder: Path | None, old_dir: Path | None) -> None:
    """Show one anchor: provenance, regime (unknown axes shown as null), workload, measurements."""
    import attrs

    from inferasim.anchors.store import AnchorStore

    store = AnchorStore.load(_anchor_folder(folder, old_dir, "--dir"))
    record = store.get(anchor_id)
    data = record.to_dict()
    data["regime"] = attrs.asdict(record.regime)
    data["file"] = store.origin(anchor_id)
    click.echo(json.dumps(data, indent=1))


# ---------------------------------------------------------------- check


@anchors.command("check")
@click.argument("scenario", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a scenario key (repeatable).")
@anchors_option("Anchor folder or file, as run's --anchors (default: the scenario's "
                "sim.anchors, else anchors/).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("-v", "--verbose", is_flag=True, help="List every refused anchor.")
def check_cmd(scenario: Path, overrides: tuple[str, ...], folder: Path | None,
              old_dir: Path | None, as_json: bool, verbose: bool) -> None:
    """Which anchors may price SCENARIO: usable, refused (with the axis), build, coverage."""
    from inferasim.anchors.loading import anchor_store_path
    from inferasim.anchors.store import AnchorStore
    from inferasim.config.loader import load_scenario

    folder = _anchor_folder(folder, old_dir, "--dir")
    # --anchors is the run's --anchors: both set sim.anchors and find it by the same rule,
    # and without it the scenario's own sim.anchors is what the run would read
    given = [f"sim.anchors={folder}"] if folder is not None else []
    resolved = load_scenario(scenario, list(overrides) + given)
    path = anchor_store_path(resolved)
    if path is None:
        note = "sim.anchors is none: the run uses the analytic model and reads no anchor"
        click.echo(json.dumps({"usable": [], "refused": [], "notes": [note]}, indent=1)
                   if as_json else f"note: {note}")
        return
    store = AnchorStore.load(path)
    targets = {"": resolved}
    if resolved.topology.kind == "disaggregated":
        from inferasim.config.loader import pool_scenario

        # each pool's instances calibrate at their own layout, as the run's oracles do
        targets = {role: pool_scenario(resolved, role, check_fit=False)
                   for role in ("prefill", "decode")}
    results = {role: store.for_target(sc) for role, sc in targets.items()}
    if as_json:
        out = (results[""].to_dict() if "" in results
               else {"pools": {role: r.to_dict() for role, r in results.items()}})
        click.echo(json.dumps(out, indent=1, default=str))
        return
    for role, result in results.items():
        if role:
            click.echo(f"== {role} pool ==")
        _print_check(result, len(store), verbose)


def _print_check(result, loaded: int, verbose: bool) -> None:
    click.echo(f"target: {result.target.describe()}")
    click.echo(f"        isl {result.target.isl if result.target.isl is not None else '-'}, "
               f"decode batch {result.target.batch if result.target.batch is not None else '-'}")
    prior = result.prior_level
    usable = (f"{len(result.usable)} usable as a prior (same {prior}, refused for the regime)"
              if prior else f"{len(result.usable)} usable")
    click.echo(f"anchors: {loaded} loaded, {usable}, "
               f"{len(result.refused)} refused, {len(result.set_aside)} set aside (other build)")
    if result.usable:
        click.echo(f"usable{' as a prior' if prior else ''}:")
        for r in sorted(result.usable, key=lambda r: (r.workload.isl, r.workload.osl,
                                                      r.workload.concurrency or 0)):
            step, basis = r.decode_step
            skipped = ",".join(result.skipped_axes.get(r.id, ())) or "-"
            click.echo(f"  {r.id}  isl {r.workload.isl} osl {r.workload.osl} "
                       f"conc {r.workload.concurrency}  step {_fmt(step, 1e3, 2)} ms "
                       f"({(basis or '-').split(' ')[0]})  ttft {_fmt(r.ttft_s, 1e3, 0)} ms  "
                       f"build {r.provenance.build or '?'}  unknown: {skipped}")
    if result.refused:
        by_axis = ", ".join(f"{axis} {n}" for axis, n in result.refused_by_axis().items())
        click.echo(f"refused by axis: {by_axis}")
        shown = result.refused if verbose else _one_per_reason(result.refused)
        for refusal in shown:
            click.echo(f"  {refusal.anchor.id}: {refusal.reason}")
        if not verbose and len(shown) < len(result.refused):
            click.echo(f"  ... {len(result.refused) - len(shown)} more (--verbose lists all)")
    for note in result.notes:
        click.echo(f"note: {note}")


def _one_per_reason(refused) -> list:
    seen: set[tuple[str, ...]] = set()
    out = []
    for refusal in refused:
        key = refusal.axes
        if key not in seen:
            seen.add(key)
            out.append(refusal)
    return out[:12]


# ---------------------------------------------------------------- validate


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _target_cells(met: dict, verbose: bool) -> list[str]:
    """One cell per metric of ``targets_met`` / ``family_targets``: met of scored (and the
    target, where ``met`` states it; with ``verbose``, who missed it)."""
    cells = []
    for metric, name in (("tput_per_gpu", "tput/GPU"), ("tpot", "TPOT"), ("ttft", "TTFT")):
        got = met[metric]
        cell = f"{name} {len(got['met'])}/{len(got['met']) + len(got['missed'])}"
        if "targets" in met:
            cell += f" (<= {met['targets'][metric]:.0%})"
        if verbose and got["missed"]:
            cell += " missed by: " + "; ".join(got["missed"])
        cells.append(cell)
    return cells


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:+.1f}%"


@anchors.command("occupancy")
@anchors_option("Anchor folder or file (default: the shipped anchors/).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def occupancy_cmd(folder: Path | None, old_dir: Path | None, as_json: bool) -> None:
    """Each deployment's mean KV occupancy by Little's law (requests past their first token
    x their mean context), per ISL/OSL and load, beside the memory model's pool and the
    pool the anchors show where they hit a ceiling below it (the replay then runs at that
    pool; docs/anchors.md "The KV pool the anchors ran at")."""
    from inferasim.anchors.store import AnchorStore
    from inferasim.validate.occupancy import format_table, occupancy_tables

    store = AnchorStore.load(_anchor_folder(folder, old_dir, "--dir"))
    tables = occupancy_tables(list(store))
    if as_json:
        click.echo(json.dumps([{
            "regime": t.label, "model_pool_tokens": t.model_pool_tokens, "problem": t.problem,
            "ceiling": None if t.ceiling is None else {
                "pool_tokens": t.ceiling.pool_tokens,
                "occupancy_tokens": round(t.ceiling.occupancy_tokens),
                "anchors": list(t.ceiling.anchors)},
            "anchors": [{"id": o.anchor, "isl": o.isl, "osl": o.osl, "clients": o.clients,
                         "running": round(o.running, 2), "occupied_tokens": round(o.occupied)}
                        for o in t.rows]} for t in tables], indent=1))
        return
    for t in tables:
        click.echo(format_table(t))
        click.echo("")
    shown = sum(t.ceiling is not None for t in tables)
    click.echo(f"{len(tables)} deployment(s) with closed-loop anchors Little's law reads; "
               f"{shown} with a KV ceiling below the memory model's pool")


@anchors.command("validate")
@click.argument("old_folder", metavar="[FOLDER]", required=False,
                type=click.Path(path_type=Path))
@anchors_option("Anchor folder or file (default: the shipped anchors/).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("-v", "--verbose", is_flag=True, help="Print every held-out anchor.")
@click.option("--hold-out", type=click.Choice(["point", "shape", "isl", "model", "layout"]),
              default="point", show_default=True,
              help="point: predict each anchor from the others of its regime and build. shape: "
                   "from its regime's anchors at other ISL/OSL (its build preferred), as a "
                   "projection to an unmeasured shape is. isl: each prompt of 16k tokens or "
                   "more from its regime's prompts of 8k or fewer. model: from the other "
                   "models' anchors alone (a prior from the same part and engine, else "
                   "analytic), as a model without anchors is priced. layout: from the other "
                   "regimes of its part and engine alone, as a layout without anchors is.")
@click.option("--date-as-build", is_flag=True,
              help="Read each run date as one build where a record names no image or version "
                   "(the InferenceMAX history rows).")
@click.option("--markdown", is_flag=True,
              help="Print the summary as a Markdown table (docs/anchors.md's tables are this "
                   "output).")
@click.option("--topology", "topology", type=click.Choice(["any", "colocated", "disaggregated"]),
              default="any", show_default=True,
              help="Validate only the anchors that measured this topology.")
@click.option("--isl-split", "isl_split", default=None, metavar="FIT:HELD[:UPTO]",
              help="With --hold-out isl: fit on prompts of FIT tokens or fewer and predict those "
                   "of HELD (to UPTO) tokens. Default 8192:16384; 1024:8192:8192 projects 8k "
                   "prompts from 1k ones, as the InferenceMAX 8k/1k rows are.")
def validate_cmd(old_folder: Path | None, folder: Path | None, old_dir: Path | None,
                 as_json: bool, verbose: bool, hold_out: str, date_as_build: bool,
                 markdown: bool, topology: str, isl_split: str | None) -> None:
    """Leave-one-out within each regime and build: predict each anchor of --anchors (default:
    anchors/; a folder or one anchor file; FOLDER is its old spelling) from the others by replaying its workload with the
    calibrated oracle; print the median and p90 absolute error of throughput per GPU, TPOT and
    TTFT per regime, and the signed median (the lean) over all. With --hold-out shape, each
    anchor is predicted from its regime's anchors at other ISL/OSL instead; with --hold-out
    isl, each long prompt from the same regime's short ones."""
    from inferasim.anchors.store import AnchorStore
    from inferasim.config.knobs import Knobs
    from inferasim.report.tables import markdown_table
    from inferasim.validate.anchors import (
        IslSplit,
        error_stats,
        family_targets,
        report_dict,
        targets_met,
        validate_store,
    )

    if isl_split is not None and hold_out != "isl":
        raise ConfigError("--isl-split applies to --hold-out isl only", key="--isl-split")
    try:
        split = IslSplit.parse(isl_split) if isl_split is not None else IslSplit()
    except ValueError as exc:
        raise ConfigError(str(exc), key="--isl-split") from None

    folder = _anchor_folder(folder, old_dir, "--dir")
    folder = _anchor_folder(folder, old_folder, "the FOLDER argument")
    store = AnchorStore.load(folder)
    if topology != "any":
        store = AnchorStore(r for r in store if (r.regime.topology or "colocated") == topology)
    if not len(store):
        raise ConfigError("no anchors to validate", file=str(folder))
    results = validate_store(store, knobs=Knobs.from_env(), hold_out=hold_out,
                             date_as_build=date_as_build, isl_split=split)
    if as_json:
        click.echo(json.dumps(report_dict(results, hold_out, split), indent=1, default=str))
        return
    if markdown:
        click.echo(markdown_table(results))
        return
    by_shape = hold_out in ("shape", "isl", "model", "layout")
    click.echo({"shape": "leave-one-shape-out within each regime",
                "isl": f"within each regime, {split.describe()}",
                "model": "each model from the other models' anchors alone (a prior, or analytic)",
                "layout": "each regime from its part and engine's other regimes alone (a prior, "
                          "or analytic)",
                "point": "leave-one-out within each regime and build"}[hold_out]
               + "; abs error median / p90 (predicted / measured - 1)")
    click.echo(f"{'regime' if by_shape else 'regime @ build':78} {'n':>3} {'tput/GPU':>15} "
               f"{'TPOT':>15} {'TTFT':>15}")
    skipped = []
    for g in results:
        if g.skipped:
            skipped.append(g)
            continue
        st = g.stats()
        cells = [f"{_pct(st[m]['median_abs']):>7}/{_pct(st[m]['p90_abs']):<7}"
                 for m in ("tput_per_gpu", "tpot", "ttft")]
        click.echo(f"{g.key[:78]:78} {len(g.predictions):>3} {' '.join(cells)}")
        if verbose:
            for p in g.predictions:
                errs = "  ".join(f"{m} {_pct(p.error(m))}" for m in ("tput_per_gpu", "tpot", "ttft"))
                crossed = "" if p.same_build else ", from other builds"
                click.echo(f"    c{p.concurrency} {p.isl}/{p.osl}: {errs}  "
                           f"({p.method}, {p.replay_requests} requests, {p.wall_s:.2f} s"
                           f"{crossed})")
                for metric, why in p.excluded.items():
                    click.echo(f"      {metric} not scored: {why}")
    preds = [p for g in results for p in g.predictions]
    if hold_out in ("model", "layout"):
        splits = tuple((f"  {c}", [p for p in preds if p.calibration == c])
                       for c in sorted({p.calibration for p in preds})) + tuple(
            (f"  model {m}", [p for p in preds if p.model == m])
            for m in sorted({p.model or "?" for p in preds}))
    elif by_shape:
        splits = (("  calibrated by its own build at another shape",
                   [p for p in preds if p.same_build]),
                  ("  from other builds only (its build measured one shape)",
                   [p for p in preds if not p.same_build]))
    else:
        splits = (("  inside the sweep (ratio interpolated)", [p for p in preds if p.bracketed]),
                  ("  at its ends (trend extrapolated)", [p for p in preds if not p.bracketed]))
    for label, subset in (("all", preds), *splits):
        st = error_stats(subset)
        cells = [f"{_pct(st[m]['median_abs']):>7}/{_pct(st[m]['p90_abs']):<7}"
                 for m in ("tput_per_gpu", "tpot", "ttft")]
        click.echo(f"{label:78} {len(subset):>3} {' '.join(cells)}")
    lean = error_stats(preds)
    click.echo(f"{'signed median over all (the lean)':78} {len(preds):>3} "
               + " ".join(f"{_signed(lean[m]['median_signed']):>15}"
                          for m in ("tput_per_gpu", "tpot", "ttft")))
    met = targets_met(results)
    click.echo(f"regimes with >= {met['min_scored']} scored points meeting the target median: "
               + ", ".join(_target_cells(met, verbose)))
    by_family = family_targets(preds)
    click.echo(f"families with >= {by_family['min_scored']} scored points meeting it: "
               + ", ".join(_target_cells(by_family, verbose)))
    closed = sum(p.method == "closed-form" for p in preds)
    excluded = sum(bool(p.excluded) for p in preds)
    if closed or excluded:
        click.echo(f"{closed} point(s) estimated in closed form (concurrency above the replay "
                   f"limit); {excluded} anchor(s) not scored (their throughput contradicts their "
                   "own latency; -v lists them)")
    if skipped:
        click.echo(f"skipped {len(skipped)} group(s):")
        if verbose:
            for g in skipped:
                click.echo(f"  {g.key}: {g.skipped}")
        else:
            import re
            from collections import Counter

            reasons = Counter(re.sub(r"^<anchor [^>]*>: ", "", g.skipped).split(" (did you")[0]
                              for g in skipped)
            for reason, count in reasons.most_common():
                click.echo(f"  {count} x {reason}")
    click.echo("note: TTFT is scored by its median (measured means carry warm-up outliers); "
               "groups of 2 anchors predict each from one other point (no trend of their own: "
               "the ratio is held, or for MTP carried at the MTP sweeps' shared trend)")
