"""An Nsight Systems run against a PyTorch profiler (Kineto) run of the same job: the diff compares what both
record and says what it cannot compare."""

from __future__ import annotations

from pathlib import Path

import gpuscope
from tests.conftest import load_benchmark
from tests.traces.nsys.exports import training_job

bench = load_benchmark("bench_nsys")


def test_a_diff_of_an_nsys_run_and_a_kineto_run_of_one_job(tmp_path: Path, gpuscope_home: Path) -> None:
    export = training_job(ranks=1, steps=6).write(tmp_path / "job.sqlite")
    bench.make_kineto(export, tmp_path / "kineto")  # the same events, as Kineto writes them
    d = gpuscope.diff(str(export), str(tmp_path / "kineto"))
    profiler = next(i for i in d.setup if i.key == "profiler")
    assert (profiler.baseline, profiler.candidate, profiler.changed) == ("Nsight Systems", "PyTorch profiler", True)
    (note,) = [n for n in d.notes if "recorded by different profilers" in n]
    assert "operators, their input shapes and dtypes, the DataLoader and allocator memory" in note
    assert d.operators == ()
    assert (d.baseline.steady_steps, d.candidate.steady_steps) == (6, 6)  # the same steps, read from either
    assert d.step_time_us.baseline == d.step_time_us.candidate
    assert len(d.kernels) >= 4 and all(k.change_us == 0 for k in d.kernels)  # compared, and the same
    assert all(p.change_us == 0 for p in d.parts) and d.parts
