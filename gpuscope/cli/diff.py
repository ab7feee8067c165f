"""`gpuscope diff BASELINE CANDIDATE`: what changed between two runs, what each stage contributed, what it costs.

Exit 0: explained; 1: the runs cannot be diffed as asked (a rank one run lacks, without ``--allow-partial``;
another GPU model, GPU count, world size or workload with ``--strict``), each reason on stderr; 2: a usage or
input error.
"""

from __future__ import annotations

from pathlib import Path

import typer

from gpuscope.api.changes import NotComparable
from gpuscope.api.changes import diff as explain_change
from gpuscope.changes.price import HOURS_PER_MONTH
from gpuscope.cli.common import (
    JobHoursOption,
    JobStepsOption,
    JsonOption,
    StepRangeOption,
    TimeoutOption,
    UsdPerGpuHourOption,
    fail,
    stdout,
    warn,
    write_json,
)
from gpuscope.gate.config import ConfigError, read_config
from gpuscope.model.codec import to_json
from gpuscope.reports.diff import render

EXIT_NOT_COMPARABLE = 1
RUN_HELP = ("A trace file or folder of rank files (or an fsspec URL of either), a report saved with "
            "`gpuscope analyze --json` (a gate baseline), or a saved run's id, id prefix or name.")


def register(app: typer.Typer) -> None:
    app.command("diff")(diff)


def diff(
    baseline: str = typer.Argument(..., help=RUN_HELP),
    candidate: str = typer.Argument(..., help=RUN_HELP),
    json_out: JsonOption = False,
    usd_per_gpu_hour: UsdPerGpuHourOption = None,
    job_hours: JobHoursOption = None,
    job_steps: JobStepsOption = None,
    hours_per_month: float = typer.Option(HOURS_PER_MONTH, "--hours-per-month", min=0.001,
                                          help="Hours a month the job runs, to price the change per month "
                                               "(730: 24x7)."),
    config: Path | None = typer.Option(None, "--config", help="The gate's settings for what counts as beyond noise "
                                                              "(default ./gpuscope-gate.toml when it exists)."),
    allow_partial: bool = typer.Option(False, "--allow-partial",
                                       help="When a rank is missing from either run (a rank file that cannot be "
                                            "read, fewer ranks than its world size or than the other run), compare "
                                            "and price the ranks both runs have instead of failing."),
    strict: bool = typer.Option(False, "--strict", help="Refuse runs of another GPU model, GPU count, world size "
                                                        "or workload instead of explaining them with a caveat."),
    timeout_s: float | None = TimeoutOption,
    step_range: StepRangeOption = None,
) -> None:
    """Explain and price the change from BASELINE to CANDIDATE: the step time's change split into stages that
    add up to it, the kernels and operators that changed, the set-up, and the price per step, job and month."""
    try:
        settings = read_config(config)
    except ConfigError as exc:
        fail(str(exc))
    try:
        result = explain_change(baseline, candidate, usd_per_gpu_hour=usd_per_gpu_hour, job_steps=job_steps,
                                job_hours=job_hours, hours_per_month=hours_per_month, config=settings,
                                allow_partial=allow_partial, strict=strict, timeout_s=timeout_s,
                                step_range=step_range)
    except NotComparable as exc:  # one line: every reason, and what would let it through
        hint = ("--strict refuses runs of another job" if exc.strict
                else "no rank is in both runs: there is nothing to compare" if exc.no_common_rank
                else "--allow-partial compares the ranks both runs have")
        fail(f"not compared: {'; '.join(exc.reasons)} ({hint})", code=EXIT_NOT_COMPARABLE)
    for reason in result.missing_ranks:  # allowed, but said where a person looks: what the diff left out
        warn(f"compared on rank(s) {', '.join(map(str, result.ranks))} only: {reason}")
    if json_out:
        write_json(to_json(result))
    else:
        render(result, stdout)
