"""`gpuscope show RUN_ID`: a saved run's report, as it was analysed (or re-analysed with --reanalyze)."""

from __future__ import annotations

import typer

from gpuscope.analyzers import consistency
from gpuscope.analyzers.report import build_report
from gpuscope.cli.common import TargetMfuOption, check_target_mfu, emit, fail, open_store
from gpuscope.cli.fleet import show_saved_fleet
from gpuscope.cli.prices import analysis_options


def register(app: typer.Typer) -> None:
    app.command("show")(show)


def show(
    run_id: str = typer.Argument(..., help="A run id, or a unique prefix of one (see `gpuscope runs`)."),
    json_out: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    reanalyze: bool = typer.Option(False, "--reanalyze", help="Analyse the saved data again with this version."),
    usd_per_gpu_hour: float | None = typer.Option(None, "--usd-per-gpu-hour", min=0.0,
                                                  help="Price per GPU-hour, over the catalog's (implies --reanalyze)."),
    job_hours: float | None = typer.Option(None, "--job-hours", min=0.0,
                                           help="Length of the whole job, to project its cost (implies --reanalyze)."),
    job_steps: int | None = typer.Option(None, "--job-steps", min=0,
                                         help="Steps in the whole job (implies --reanalyze)."),
    target_mfu: TargetMfuOption = None,
) -> None:
    """Print a saved run's report."""
    check_target_mfu(target_mfu)
    reanalyze = reanalyze or any(v is not None for v in (usd_per_gpu_hour, job_hours, job_steps, target_mfu))
    with open_store() as store:
        full_id = store.resolve(run_id)
        if store.get_meta(full_id).kind == "fleet":  # a fleet run has its own report: the fleet view
            if job_hours is not None or job_steps is not None or target_mfu is not None:
                fail(f"run {full_id} is a fleet run: --job-hours, --job-steps and --target-mfu do not apply")
            show_saved_fleet(store, full_id, json_out=json_out, reanalyze=reanalyze,
                             usd_per_gpu_hour=usd_per_gpu_hour)
            return
        if store.get_meta(full_id).kind == "memory":  # a snapshot's run: its memory report is the report
            from gpuscope.cli.memory import show_memory

            show_memory(full_id, store=store, json_out=json_out, reanalyze=reanalyze,
                        usd_per_gpu_hour=usd_per_gpu_hour, job_hours=job_hours)
            return
        report = None if reanalyze else store.load_report(full_id)
        if report is None:
            run = store.load_run(full_id)
            if not run.traces and run.samples is None and run.stacks is None:
                fail(f"run {full_id} has no recorded data to analyse")
            options = analysis_options(run.meta, usd_per_gpu_hour=usd_per_gpu_hour, job_hours=job_hours,
                                       job_steps=job_steps, target_mfu=target_mfu)
            report = build_report(run, options)
            store.save_report(full_id, report)
    emit(consistency.enforce(report), json_out=json_out)  # a saved report is checked as a fresh one is
