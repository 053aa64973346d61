"""The ``inferasim`` command group. Each subcommand lives in its own module; this file only registers them."""

from __future__ import annotations

import click

from inferasim.cli.errors import ConfigErrorGroup


@click.group(cls=ConfigErrorGroup)
@click.version_option(package_name="inferasim")
def cli() -> None:
    """Simulate LLM serving deployments: engines, GPUs, topologies, workloads."""


def _register() -> None:
    from inferasim.cli import (
        ablate_cmd,
        anchors_cmd,
        compare_cmd,
        describe_cmd,
        families_cmd,
        harvest_cmd,
        knobs_cmd,
        price_cmd,
        project_cmd,
        run_cmd,
        search_cmd,
        sweep_cmd,
        trace_cmd,
        validate_cmd,
    )

    cli.add_command(run_cmd.run)
    cli.add_command(describe_cmd.describe)
    cli.add_command(knobs_cmd.knobs)
    cli.add_command(price_cmd.price)
    cli.add_command(anchors_cmd.anchors)
    anchors_cmd.anchors.add_command(families_cmd.families_cmd)
    cli.add_command(trace_cmd.trace)
    cli.add_command(harvest_cmd.harvest)
    cli.add_command(compare_cmd.compare)
    cli.add_command(sweep_cmd.sweep)
    cli.add_command(search_cmd.search)
    cli.add_command(ablate_cmd.ablate)
    cli.add_command(project_cmd.project)
    cli.add_command(validate_cmd.validate)


_register()


def main() -> None:
    cli(prog_name="inferasim")
