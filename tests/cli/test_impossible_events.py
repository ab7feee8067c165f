"""One impossible event in a real trace (a 6-day kernel in ResNet-50's one second): every command names it, and no
figure or verdict moves."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli.helpers import gpuscope
from tests.conftest import SAMPLES

REAL = next((SAMPLES / "resnet50_dataloader_bound").glob("*.json.gz"))
SIX_DAYS_US = 6 * 86_400e6


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The real trace as it is, and the same with one copy of a kernel of its fourth step stretched to 6 days."""
    root = tmp_path_factory.mktemp("impossible")
    doc = json.loads(gzip.decompress(REAL.read_bytes()))
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "Kernel"]
    bad = copy.deepcopy(kernels[len(kernels) // 2])
    bad.update(name="corrupt_kernel", dur=SIX_DAYS_US)
    doc["traceEvents"].append(bad)
    clean, injected = root / "clean" / REAL.name, root / "injected" / REAL.name
    for path, data in ((clean, REAL.read_bytes()), (injected, gzip.compress(json.dumps(doc).encode()))):
        path.parent.mkdir()
        path.write_bytes(data)
    return clean, injected


def analysed(path: Path, home: Path) -> dict[str, Any]:
    result = gpuscope("analyze", str(path), "--no-save", "--json", home=home)
    assert result.returncode == 0, result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def figures(doc: dict[str, Any]) -> dict[str, Any]:
    """Everything a report says of the job: all but the run's identity, where it was read from and the warnings."""
    rest = {k: v for k, v in doc.items() if k not in ("run", "warnings")}
    rest["ranks"] = [{k: v for k, v in r.items() if k != "source"} for r in doc["ranks"]]
    return rest


def test_the_report_names_the_kernel_and_keeps_every_figure_and_the_verdict(traces: tuple[Path, Path],
                                                                            tmp_path: Path) -> None:
    clean, injected = (analysed(p, tmp_path) for p in traces)
    (line,) = [w for w in injected["warnings"] if "corrupt_kernel" in w]
    assert line.startswith("rank 0 (") and "6.0 days" in line and "dropped 1 impossible GPU event" in line
    assert injected["verdict"]["primary"] == clean["verdict"]["primary"] == "data_loading"
    assert figures(injected) == figures(clean)


def test_the_terminal_warns_on_stderr_and_in_the_report(traces: tuple[Path, Path], tmp_path: Path) -> None:
    result = gpuscope("analyze", str(traces[1]), "--no-save", home=tmp_path)
    assert result.returncode == 0
    assert "corrupt_kernel" in result.stderr and "corrupt_kernel" in result.stdout
    assert "data loading" in result.stdout


def test_ops_warns_the_same_way_and_lists_no_such_kernel(traces: tuple[Path, Path], tmp_path: Path) -> None:
    clean = gpuscope("ops", str(traces[0]), "--json", home=tmp_path)
    result = gpuscope("ops", str(traces[1]), "--json", home=tmp_path)
    assert result.returncode == 0 and "corrupt_kernel" in result.stderr
    doc, before = json.loads(result.stdout), json.loads(clean.stdout)
    (line,) = doc["warnings"]
    assert "corrupt_kernel" in line and "6.0 days" in line and before["warnings"] == []
    assert doc["ranks"] == before["ranks"]


def test_timeline_warns_the_same_way_and_writes_the_same_steps(traces: tuple[Path, Path], tmp_path: Path) -> None:
    written = {}
    for path in traces:
        out = tmp_path / path.parent.name
        result = gpuscope("timeline", str(path), "-o", str(out), home=tmp_path)
        assert result.returncode == 0, result.stderr
        assert ("corrupt_kernel" in result.stderr) == (path == traces[1])
        written[path.parent.name] = {f.name: _steps_of(f) for f in out.iterdir()}
    assert written["injected"] == written["clean"] and written["clean"]


def _steps_of(step_file: Path) -> dict[str, Any]:
    """A step file's events and what it says of the step, less the trace it was cut from."""
    doc: dict[str, Any] = json.loads(step_file.read_bytes())
    doc["gpuscope"].pop("source")
    return doc


def test_a_saved_run_keeps_the_warning_for_ops_and_a_new_analysis(traces: tuple[Path, Path], tmp_path: Path) -> None:
    saved = gpuscope("analyze", str(traces[1]), "--json", home=tmp_path)
    assert saved.returncode == 0, saved.stderr
    run_id = json.loads(saved.stdout)["run"]["id"]
    ops = gpuscope("ops", run_id, "--json", home=tmp_path)
    assert "corrupt_kernel" in ops.stderr and any("corrupt_kernel" in w for w in json.loads(ops.stdout)["warnings"])
    again = json.loads(gpuscope("show", run_id, "--reanalyze", "--json", home=tmp_path).stdout)
    assert [w for w in again["warnings"] if "corrupt_kernel" in w] == [
        w for w in json.loads(saved.stdout)["warnings"] if "corrupt_kernel" in w]
    assert figures(again) == figures(json.loads(saved.stdout))
