"""`gpuscope timeline TRACE_OR_RUN`: the slowest and the median step of each rank (a profiler step, or a serving
engine's: ``steps.find_steps``) as small traces to open in Perfetto (ui.perfetto.dev) or chrome://tracing."""

from __future__ import annotations

from pathlib import Path

import typer

from gpuscope.analyzers.trace.step_pick import slowest_and_median
from gpuscope.cli.common import StepRangeOption, fail, stderr
from gpuscope.cli.trace_target import load_target
from gpuscope.reports.timeline import file_name, step_trace_bytes

OPEN_HINT = "open one in https://ui.perfetto.dev (Open trace file) or chrome://tracing (Load)"


def register(app: typer.Typer) -> None:
    app.command("timeline")(timeline)


def timeline(
    target: str = typer.Argument(..., metavar="TRACE_OR_RUN",
                                 help="A trace file, a directory of rank files, or a saved run id (or prefix)."),
    rank: int | None = typer.Option(None, "--rank", help="Only this rank (default: every rank)."),
    step_range: StepRangeOption = None,
    output: Path = typer.Option(Path("."), "--output", "-o", help="The folder to write the files in."),
    compress: bool = typer.Option(False, "--gzip", help="Write .json.gz (Perfetto opens it as it is)."),
) -> None:
    """Write each rank's slowest and median step (ProfilerStep, or a serving engine's step ranges) as a trace of
    that step alone; print the paths."""
    chosen = load_target(target, rank=rank, step_range=step_range)
    label = Path(chosen.label).name.removesuffix(".gz").removesuffix(".json").removesuffix(".sqlite")
    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        fail(f"cannot create {output}: {exc.strerror or exc}")
    written, stepless = 0, []
    for trace in chosen.traces:
        windows = slowest_and_median(trace)
        if not windows:
            stepless.append(str(trace.rank))
        for window in windows:
            path = output / file_name(label, window, compress=compress)
            try:
                path.write_bytes(step_trace_bytes(trace, window, compress=compress))
            except OSError as exc:
                fail(f"cannot write {path}: {exc.strerror or exc}")
            print(path)
            written += 1
    if not written:
        fail(f"{chosen.label}: no steps to write: no ProfilerStep, no serving engine's step range (SGLang step[...], "
             "vLLM execute_...), and no --step-range NAME given; the trace file itself opens in Perfetto (an "
             "Nsight Systems profile in nsys-ui)")
    if stepless:
        stderr.print(f"rank {', '.join(stepless)}: no steps, nothing written", markup=False)
    stderr.print(f"wrote {written} step trace{'s' if written != 1 else ''}: {OPEN_HINT}", markup=False)
