"""`gpuscope hang PATH`: a hung job's flight-recorder dumps in, the collective it is stuck in and the ranks that
never joined it out."""

from __future__ import annotations

import typer

from gpuscope.api.hang import hang as read_hang
from gpuscope.cli.common import JsonOption, warn, write_json
from gpuscope.model.codec import to_json


def register(app: typer.Typer) -> None:
    app.command("hang")(hang)


def hang(
    path: str = typer.Argument(..., help="A folder of per-rank flight-recorder dumps (JSON or pickle, each file "
                                         "named with its rank at the end, as TORCH_NCCL_DEBUG_INFO_TEMP_FILE names "
                                         "them), or one dump."),
    json_out: JsonOption = False,
) -> None:
    """Say which collective a hung job is stuck in and which ranks never joined it, from flight-recorder dumps."""
    report = read_hang(path)
    for line in report.warnings:
        warn(line)
    if json_out:
        write_json(to_json(report))
        return
    from gpuscope.reports.hang import render  # the terminal view: not for --json

    render(report)
