"""Run the real `gpuscope` command in a subprocess, as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def gpuscope(*args: str, home: Path, timeout: float = 120, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "GPUSCOPE_HOME": str(home), "COLUMNS": "120", **env}
    return subprocess.run([sys.executable, "-m", "gpuscope", *args], capture_output=True, text=True,
                          env=full_env, timeout=timeout)


def one_clean_error_line(result: subprocess.CompletedProcess[str]) -> str:
    """The single stderr line of a user error; fails on a traceback."""
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]
