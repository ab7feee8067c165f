"""`gpuscope show RUN_ID`: a saved run's report, as it was analysed (or re-analysed with --reanalyze)."""

from __future__ import annotations

import typer

from gpuscope.analyzers.report import AnalysisOptions, build_report
from gpuscope.cli.common import fail, open_store, write_json
from gpuscope.model.codec import to_json
from gpuscope.reports.terminal import render


def register(app: typer.Typer) -> None:
    app.command("show")(show)


def show(
    run_id: str = typer.Argument(..., help="A run id, or a unique prefix of one (see `gpuscope runs`)."),
    json_out: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    reanalyze: bool = typer.Option(False, "--reanalyze", help="Analyse the saved data again with this version."),
) -> None:
    """Print a saved run's report."""
    with open_store() as store:
        full_id = store.resolve(run_id)
        report = None if reanalyze else store.load_report(full_id)
        if report is None:
            run = store.load_run(full_id)
            if not run.traces and run.samples is None and run.stacks is None:
                fail(f"run {full_id} has no recorded data to analyse")
            report = build_report(run, AnalysisOptions())
            store.save_report(full_id, report)
    if json_out:
        write_json(to_json(report))
    else:
        render(report)
