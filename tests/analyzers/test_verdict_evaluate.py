"""The evaluation script runs, prints its confusion table and passes on the labelled cases."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_evaluate_verdicts_prints_a_confusion_table_and_passes() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "evaluate_verdicts.py"), "--only", "built"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Stage verdicts (rows: label, columns: verdict)" in out.stdout
    assert "5 of 5 cases called right" in out.stdout
