"""A saved report read back as a gate's baseline: any file ends as a report or one line naming it, and a report
that reads is compared and written out in every format without a traceback."""

from __future__ import annotations

import gzip
import io
import os
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from gpuscope.gate.compare import compare
from gpuscope.gate.config import GateConfig
from gpuscope.gate.junit import to_junit
from gpuscope.gate.markdown import to_markdown
from gpuscope.gate.saved import ReportFileError, is_report, read_report
from gpuscope.gate.terminal import render
from gpuscope.model.codec import to_json
from gpuscope.model.report import Report
from tests.cli.helpers import gpuscope, one_clean_error_line
from tests.conftest import load_benchmark

fi = load_benchmark("fuzz_inputs")


@pytest.fixture(scope="module")
def saved(cpu_runs: tuple[Report, Report]) -> bytes:
    return to_json(cpu_runs[0])


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_a_saved_report_reads_back_equal(tmp_path: Path, saved: bytes, cpu_runs: tuple[Report, Report]) -> None:
    for name, data in (("r.json", saved), ("r.json.gz", gzip.compress(saved))):
        path = write(tmp_path / name, data)
        assert is_report(path) and read_report(path) == cpu_runs[0]


@pytest.mark.parametrize(("name", "damage", "words"), [
    ("deep.json", lambda s: s[:-1] + b',"x":' + b"[" * 5000 + b"]" * 5000 + b"}", "nested too deeply"),
    ("bad.json.gz", lambda s: gzip.compress(s)[:20] + b"\x00garbage" * 50 + gzip.compress(s)[-8:],
     "not a readable"),
    ("cut.json", lambda s: s[: len(s) // 2], "not a readable"),
])
def test_damage_that_was_a_traceback_is_one_line(tmp_path: Path, saved: bytes, name: str, damage: object,
                                                 words: str) -> None:
    """Deep nesting (RecursionError) and a damaged deflate stream (zlib.error) escaped as tracebacks before."""
    path = write(tmp_path / name, damage(saved))  # type: ignore[operator]
    with pytest.raises(ReportFileError, match=words) as info:
        read_report(path)
    assert str(info.value).startswith(str(path)) and "\n" not in str(info.value)


def test_through_the_gate_command(tmp_path: Path, saved: bytes) -> None:
    good = write(tmp_path / "good.json", saved)
    deep = write(tmp_path / "deep.json", saved[:-1] + b',"x":' + b"[" * 5000 + b"]" * 5000 + b"}")
    result = gpuscope("gate", str(good), "--baseline", str(deep), home=tmp_path)
    assert result.returncode == 2 and "nested too deeply" in one_clean_error_line(result)
    fifo = tmp_path / "base.json"
    os.mkfifo(fifo)
    result = gpuscope("gate", str(good), "--baseline", str(fifo), home=tmp_path, timeout=60)
    assert result.returncode == 2 and "a named pipe (FIFO)" in one_clean_error_line(result)


def test_a_report_past_the_cap_is_not_read(tmp_path: Path, saved: bytes) -> None:
    with pytest.raises(ReportFileError, match="too large"):
        read_report(write(tmp_path / "r.json", saved), max_bytes=100)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(rng=st.randoms(use_true_random=False), gz=st.booleans())
def test_mutated_baselines_compare_or_fail_in_one_line(rng: random.Random, gz: bool, tmp_path: Path, saved: bytes,
                                                        cpu_runs: tuple[Report, Report]) -> None:
    text = fi.dumps(fi.mutate_doc(rng, fi.json.loads(saved))) if rng.random() < 0.7 else saved
    text = fi.mutate_bytes(rng, text) if rng.random() < 0.4 else text
    path = write(tmp_path / ("b.json.gz" if gz else "b.json"), gzip.compress(text) if gz else text)
    try:
        baseline = read_report(path)
    except ReportFileError as exc:
        assert "\n" not in str(exc) and str(exc).startswith(str(path))
        return
    result = compare(baseline, cpu_runs[1], GateConfig())
    to_json(result), to_junit(result), to_markdown(result)
    render(result, Console(file=io.StringIO(), width=100))
