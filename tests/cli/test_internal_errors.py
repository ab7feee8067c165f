"""A failure in gpuscope's own analysis of a trace it read fine is an internal error: exit code 3, the trace and the
stage named, a request to report it; never "cannot be read" (which blames the user's file, exit code 2)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpuscope.model.errors import EXIT_INTERNAL, AnalysisError
from gpuscope.traces import TraceError, load
from tests import builders as b
from tests.cli.helpers import one_clean_error_line
from tests.conftest import SAMPLES

SAMPLE = SAMPLES / "resnet50_workers4"

# The real command line in a real process, with one analyzer replaced by one that fails (as a bug would).
INJECT = textwrap.dedent("""
    import sys
    import gpuscope.traces.loader as loader
    from gpuscope.analyzers import cost
    from gpuscope.analyzers.trace import kernels
    from gpuscope.cli.main import main

    def broken(*args, **kwargs):
        raise KeyError("stream")

    where, *argv = sys.argv[1:]
    if where == "per_rank":
        kernels.launch_stats = broken
    else:
        cost.assess = broken
    loader.PARALLEL_MIN_BYTES = 0  # worker processes even for small traces: the error crosses them
    sys.argv = ["gpuscope", *argv]
    main()
""")


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "GPUSCOPE_HOME": str(tmp_path / "home"), "COLUMNS": "200"}


def _run(stage: str, *argv: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", INJECT, stage, *argv], capture_output=True, text=True,
                          env=_env(tmp_path), timeout=120)


def test_a_failing_per_rank_analyzer_is_an_internal_error_naming_the_trace_and_stage(tmp_path: Path) -> None:
    folder = tmp_path / "job"
    folder.mkdir()
    for r in range(2):
        b.write(folder / f"rank{r}.json", b.trace(b.simple_training(3), rank=r))
    result = _run("per_rank", "analyze", str(folder), "--jobs", "2", "--no-save", tmp_path=tmp_path)
    assert result.returncode == EXIT_INTERNAL == 3
    line = one_clean_error_line(result)
    assert line.startswith("gpuscope: internal error: the per-rank analysis of ")
    assert str(folder / "rank0.json") in line  # the first failing trace, by name
    assert "KeyError: 'stream' in gpuscope.analyzers.trace.rank.analyze_rank" in line
    assert "bug in gpuscope" in line and "report it" in line
    assert "cannot be read" not in result.stderr and result.stdout == ""


def test_a_failing_diagnosis_is_an_internal_error_too(tmp_path: Path) -> None:
    result = _run("diagnosis", "analyze", str(SAMPLE), "--no-save", tmp_path=tmp_path)
    assert result.returncode == 3
    line = one_clean_error_line(result)
    (trace,) = SAMPLE.glob("*.json.gz")
    assert line.startswith(f"gpuscope: internal error: the analysis of {trace} failed (KeyError: 'stream' in "
                           "gpuscope.analyzers.report.build_report)")


def test_the_gate_reports_it_the_same_way(tmp_path: Path) -> None:
    baseline = tmp_path / "baseline.json"
    made = subprocess.run([sys.executable, "-m", "gpuscope", "analyze", str(SAMPLE), "--json", "--no-save"],
                          capture_output=True, text=True, timeout=120, env=_env(tmp_path))
    baseline.write_text(made.stdout)
    result = _run("per_rank", "gate", str(SAMPLE), "--baseline", str(baseline), tmp_path=tmp_path)
    assert result.returncode == 3 and "internal error: the per-rank analysis of" in one_clean_error_line(result)


def test_a_bad_file_is_still_the_users_and_its_error_crosses_worker_processes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for r in range(2):
        b.write(tmp_path / f"rank{r}.json", b.trace(b.simple_training(3), rank=r))
    (tmp_path / "rank2.json").write_text("not json")
    monkeypatch.setattr("gpuscope.traces.loader.PARALLEL_MIN_BYTES", 0)
    loaded = load(tmp_path, jobs=2)
    assert [t.rank for t in loaded.traces] == [0, 1]
    (error,) = loaded.errors
    assert isinstance(error, TraceError) and error.path.endswith("rank2.json") and "not valid JSON" in str(error)


def test_both_errors_pickle_by_their_fields() -> None:
    trace_error = pickle.loads(pickle.dumps(TraceError("a.json", "the file is empty")))
    assert (trace_error.path, trace_error.problem, str(trace_error)) == ("a.json", "the file is empty",
                                                                         "a.json: the file is empty")
    bug = pickle.loads(pickle.dumps(AnalysisError("a.json", "the per-rank analysis", "KeyError: 'x'")))
    assert (bug.what, bug.stage, bug.cause) == ("a.json", "the per-rank analysis", "KeyError: 'x'")


def test_the_api_raises_it_apart_from_user_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    import gpuscope

    def broken(*args: object, **kwargs: object) -> None:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr("gpuscope.analyzers.cost.assess", broken)
    with pytest.raises(gpuscope.AnalysisError, match="the analysis of .* failed \\(ZeroDivisionError") as caught:
        gpuscope.analyze(SAMPLE)
    assert not isinstance(caught.value, gpuscope.GpuscopeError)
