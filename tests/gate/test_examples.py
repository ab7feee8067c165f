"""The example CI workflows parse, call `gpuscope gate` with options it has, and the documented profile script
records a trace that the documented commands analyse and gate."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cli.helpers import gpuscope
from tests.conftest import ROOT

EXAMPLES = ROOT / "examples" / "ci"
DOC = ROOT / "docs" / "ci.md"


def _commands(text: str) -> list[list[str]]:
    """Every `gpuscope ...` command line in the shell text of a workflow (folded lines joined)."""
    lines = " ".join(text.split("\n")).split("||")[0]
    found = []
    for part in re.split(r"(?:^|\s)(?=gpuscope (?:gate|analyze|runs) )", lines):
        if part.startswith("gpuscope "):
            words = shlex.split(part.split(" > ")[0].split(" | ")[0], comments=True)
            found.append(words)
    return found


def _gate_options() -> set[str]:
    result = gpuscope("gate", "--help", home=Path("/nonexistent"), COLUMNS="200")
    return set(re.findall(r"--[a-z][a-z-]+", result.stdout))


def _check_gate_calls(shell: list[str], options: set[str]) -> int:
    calls = 0
    for text in shell:
        for words in _commands(text):
            if words[1] == "gate":
                calls += 1
                used = {w for w in words if w.startswith("--")}
                assert used <= options, used - options
                assert "--junit" in used and "--benchmark-json" in used
    return calls


def test_github_actions_workflow_is_valid_and_gates_with_real_options() -> None:
    doc: dict[Any, Any] = yaml.safe_load((EXAMPLES / "github-actions.yml").read_text())
    triggers = doc.get("on", doc.get(True))  # YAML 1.1 reads a bare `on` key as true
    assert set(triggers) == {"push", "pull_request"}
    steps = doc["jobs"]["profile"]["steps"]
    assert all(("uses" in s) != ("run" in s) for s in steps)
    runs = [s["run"] for s in steps if "run" in s]
    assert _check_gate_calls(runs, _gate_options()) == 1
    uses = {s["uses"].split("@")[0] for s in steps if "uses" in s}
    assert {"actions/upload-artifact", "actions/cache/restore", "actions/cache/save",
            "benchmark-action/github-action-benchmark"} <= uses
    bench = next(s for s in steps if s.get("uses", "").startswith("benchmark-action/"))
    assert bench["with"]["tool"] == "customSmallerIsBetter"
    assert any("profile_short.py" in r for r in runs)


def test_gitlab_ci_is_valid_and_reports_the_junit_file_it_writes() -> None:
    doc: dict[str, Any] = yaml.safe_load((EXAMPLES / "gitlab-ci.yml").read_text())
    base = doc[".profile"]
    junit = base["artifacts"]["reports"]["junit"]
    options = _gate_options()
    for job in ("gpu-gate", "gpu-baseline"):
        assert doc[job]["extends"] == ".profile"
        assert _check_gate_calls(doc[job]["script"], options) == 1
        assert f"--junit {junit}" in " ".join(doc[job]["script"])
    assert doc["gpu-gate"]["cache"]["policy"] == "pull" and doc["gpu-baseline"]["cache"]["policy"] == "pull-push"
    assert set(doc["stages"]) == {base["stage"]}


def _profile_script() -> str:
    text = DOC.read_text()
    match = re.search(r"```python\n(\"\"\"ci/profile_short\.py.*?)```", text, re.S)
    assert match, "docs/ci.md shows ci/profile_short.py"
    return match.group(1)


def test_the_documented_profile_script_records_steps_the_gate_reads(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    script = tmp_path / "profile_short.py"
    script.write_text(_profile_script())
    traces = tmp_path / "traces"
    env_run = subprocess.run([sys.executable, str(script), "--steps", "8"], capture_output=True, text=True,
                             timeout=300, env={"GPUSCOPE_TRACE_DIR": str(traces), "PATH": "/usr/bin:/bin",
                                               "HOME": str(tmp_path)})
    assert env_run.returncode == 0, env_run.stderr
    home = tmp_path / "home"
    report = gpuscope("analyze", str(traces), "--no-save", "--json", home=home)
    assert report.returncode == 0, report.stderr
    (tmp_path / "report.json").write_text(report.stdout)
    assert gpuscope("analyze", str(traces), "--name", "main", home=home).returncode == 0
    gate = gpuscope("gate", str(tmp_path / "report.json"), "--baseline-from-store", "main", home=home)
    assert gate.returncode == 0, gate.stdout + gate.stderr
    # 8 steady steps profiled; the gate tests every one of them, the same on both sides (one recording), a step
    # slowed by the machine or a garbage collection included: the job paid for it. The typical steps (the stage
    # shares') leave out at most the one lone slow step.
    facts = json.loads(report.stdout)["facts"]
    assert facts["steady_steps"] == 8 and facts["typical_steps"] + facts["outlier_step_count"] == 8
    assert "8 vs 8 steady steps" in gate.stdout
