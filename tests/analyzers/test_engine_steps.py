"""Steps a serving engine marks (SGLang ``step[...]``, vLLM ``execute_...``) or the user names (``--step-range``),
where a trace has no ProfilerStep: the steps ``analyze`` and ``timeline`` use, spanned as the serving phases span
them. Traces built by hand, and the bundled SGLang decode step against figures read straight from its JSON."""

from __future__ import annotations

import gzip
import io
import json
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

import gpuscope
from gpuscope.analyzers.trace.steps import find_steps
from gpuscope.api.errors import GpuscopeError
from gpuscope.cli.main import app
from gpuscope.model.trace import RankTrace
from gpuscope.store.tracefile import load_trace, save_trace
from gpuscope.traces import read_trace
from tests import builders as b
from tests.cli.helpers import gpuscope as run_cli
from tests.cli.helpers import one_clean_error_line
from tests.conftest import SAMPLES

SGLANG_DECODE = SAMPLES / "serving" / "sglang_qwen3_8b_decode.json.gz"
VLLM_DECODE = SAMPLES / "serving" / "vllm_decode_graph_replay.json.gz"
OUTER = "execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk55086sqsq32sqsk55086)"


def engine_steps() -> list[b.Event]:
    """A vLLM-style marker around two SGLang steps (µs): EXTEND 100-300 launching three kernels, the last ending at
    450; DECODE 500-600 launching one kernel, 600-650."""
    return [b.cpu_op(OUTER, 0, 700, cat="user_annotation"),
            b.cpu_op("step[EXTEND bs=2 toks=512]", 100, 200, cat="user_annotation"),
            b.launch(110, 5, 1), b.kernel("k1", 120, 100, 1), b.launch(120, 5, 2), b.kernel("k2", 220, 100, 2),
            b.launch(130, 5, 3), b.kernel("k3", 320, 130, 3),
            b.cpu_op("step[DECODE bs=2]", 500, 100, cat="user_annotation"),
            b.launch(510, 5, 4), b.kernel("k4", 600, 50, 4)]


def read(tmp_path: Path, events: list[b.Event], name: str = "t") -> RankTrace:
    return read_trace(b.write(tmp_path / f"{name}.json", b.trace(events)))


def spans_us(trace: RankTrace) -> list[tuple[float, float]]:
    steps = find_steps(trace)
    t0 = int(trace.events.ts_ns.min())
    return [((s - t0) / 1000, (e - t0) / 1000) for s, e in zip(steps.starts_ns.tolist(), steps.ends_ns.tolist())]


def test_the_innermost_engine_ranges_are_the_steps(tmp_path: Path) -> None:
    trace = read(tmp_path, engine_steps())
    steps = find_steps(trace)
    assert (steps.source, steps.names, steps.from_profiler) == ("engine", ("0", "1"), True)
    # Each from its range's start to the end of the GPU work it launched; the decode step launched a third of the
    # extend step's kernels and is kept (a ProfilerStep that did would be taken for one cut short).
    assert spans_us(trace) == [(100, 450), (500, 650)]


def test_vllms_phaseless_execute_model_ranges_are_steps_when_nothing_else_is(tmp_path: Path) -> None:
    events = [b.cpu_op("execute_model", 0, 100, cat="user_annotation"), b.launch(10, 5, 1),
              b.kernel("k1", 20, 200, 1), b.cpu_op("execute_model", 300, 100, cat="user_annotation"),
              b.launch(310, 5, 2), b.kernel("k2", 320, 50, 2)]
    trace = read(tmp_path, events)
    assert spans_us(trace) == [(0, 220), (300, 400)]


def test_the_users_step_range_marks_the_steps(tmp_path: Path) -> None:
    events = [*engine_steps(), b.cpu_op("my_iter 0", 90, 300, cat="user_annotation"),
              b.cpu_op("my_iter 1", 480, 200, cat="user_annotation")]
    trace = replace(read(tmp_path, events), step_range="my_iter")
    steps = find_steps(trace)
    assert steps.source == "range my_iter" and spans_us(trace) == [(90, 450), (480, 680)]
    # A name no range has: the engine's steps, as without it (the commands then say the name marked nothing).
    assert find_steps(replace(trace, step_range="nothing")).source == "engine"


def test_step_range_on_profiler_steps_gives_the_profilers_steps(tmp_path: Path) -> None:
    trace = read(tmp_path, b.simple_training(4))
    by_name = find_steps(replace(trace, step_range="ProfilerStep#"))
    plain = find_steps(trace)
    assert by_name.source == "range ProfilerStep#" and plain.source == "ProfilerStep"
    assert by_name.starts_ns.tolist() == plain.starts_ns.tolist()
    assert by_name.ends_ns.tolist() == plain.ends_ns.tolist()


def test_the_step_range_is_kept_with_the_saved_trace(tmp_path: Path) -> None:
    trace = replace(read(tmp_path, engine_steps()), step_range="step[")
    buffer = io.BytesIO()
    save_trace(buffer, trace)
    (tmp_path / "rank.npz").write_bytes(buffer.getvalue())
    assert load_trace(tmp_path / "rank.npz").step_range == "step["


def test_the_sglang_decode_step_spans_its_range_to_its_gpu_work_and_names_the_one_call() -> None:
    doc = json.loads(gzip.decompress(SGLANG_DECODE.read_bytes()))
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    decode = next(e for e in events if e["name"].startswith("step[DECODE"))
    # The step ends where the last GPU work launched by a runtime call inside its range does.
    inside = {e["args"]["correlation"] for e in events if e.get("cat") == "cuda_runtime"
              and decode["ts"] <= e["ts"] and e["ts"] + e["dur"] <= decode["ts"] + decode["dur"]}
    gpu_end = max(e["ts"] + e["dur"] for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
                  and e["args"].get("correlation") in inside)
    copy = next(e for e in events if e["name"] == "hipMemcpyWithStream")
    report = gpuscope.analyze(SGLANG_DECODE, save=False).analysis
    rank = report.ranks[0]
    assert rank.step_source == "engine" and rank.steps == 1
    assert rank.step_time_us == pytest.approx(gpu_end - decode["ts"], abs=0.01)
    assert report.serving is not None and report.serving.phases["decode"].step_time_us == pytest.approx(
        rank.step_time_us, abs=0.01)
    assert rank.filling_call is not None and rank.filling_call.name == "hipMemcpyWithStream"
    assert rank.filling_call.duration_us == pytest.approx(copy["dur"], abs=0.01)
    assert "One hipMemcpyWithStream call of 463.1 ms fills 98% of the step" in report.verdict.summary
    assert report.serving.phases["decode"].bottleneck == "gpu_wait"


def test_timeline_writes_the_serving_engines_step(tmp_path: Path) -> None:
    result = run_cli("timeline", str(SGLANG_DECODE), "-o", str(tmp_path), home=tmp_path)
    assert result.returncode == 0, result.stderr
    (written,) = [Path(line) for line in result.stdout.splitlines() if line.strip()]
    doc = json.loads(written.read_text())
    assert doc["gpuscope"]["step_source"] == "engine" and doc["gpuscope"]["why"] == ["slowest", "median"]
    assert any(e["name"] == "hipMemcpyWithStream" for e in doc["traceEvents"])


def test_a_step_range_no_rank_has_is_one_line_and_exit_2(tmp_path: Path) -> None:
    path = b.write(tmp_path / "t.json", b.trace(engine_steps()))
    result = run_cli("timeline", str(path), "-o", str(tmp_path), "--step-range", "nope", home=tmp_path)
    assert result.returncode == 2 and "no range named 'nope'" in one_clean_error_line(result)
    with pytest.raises(GpuscopeError, match="no range named 'nope'"):
        gpuscope.analyze(path, save=False, step_range="nope")
    assert gpuscope.analyze(path, save=False, step_range="step[").analysis.ranks[0].step_source == "range step["


@pytest.mark.parametrize("command", ["analyze", "ops", "timeline", "gate", "diff", "report"])
def test_every_command_that_reads_steps_takes_step_range(command: str) -> None:
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0 and "--step-range" in result.stdout
