"""`gpuscope analyze` imports what reading and analysing traces needs, not the live, fleet or dashboard parts, nor
what traces by URL or on Dask need (fsspec, the object stores' libraries, distributed and asyncio)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import SAMPLES

NOT_FOR_ANALYZE = (
    "pandas", "psutil", "dash", "plotly", "prometheus_client", "pynvml", "selenium", "gpuscope.collectors",
    "gpuscope.dashboards", "gpuscope.figures", "gpuscope.fleet", "gpuscope.torch",
    "gpuscope.collectors.nvml", "gpuscope.collectors.dcgm", "gpuscope.collectors.host",
    "gpuscope.collectors.sampler", "gpuscope.collectors.replay", "gpuscope.collectors.torch_profiler",
    "gpuscope.cli.attach", "gpuscope.cli.run", "gpuscope.cli.dashboard", "gpuscope.cli.fleet",
    "gpuscope.traces.remote", "gpuscope.traces.nsys.build", "gpuscope.traces.nsys.database",
    "multiprocessing", "concurrent.futures.process",  # the small sample is read without worker processes
)
NOT_FOR_LOCAL_TRACES = {"pandas", "dash", "plotly", "prometheus_client", "pynvml", "selenium", "fsspec", "s3fs",
                        "gcsfs", "adlfs", "aiohttp", "botocore", "distributed", "dask", "asyncio", "pydantic"}
"""Third-party packages a local `gpuscope analyze` has no use for."""
_PROBE = """
import atexit, json, sys
atexit.register(lambda: print("MODULES " + json.dumps(sorted(sys.modules)), file=sys.stderr))
sys.argv = ["gpuscope", *sys.argv[1:]]
from gpuscope.cli.main import main
main()
"""


def _modules_after(*args: str, home: Path) -> set[str]:
    env = {**os.environ, "GPUSCOPE_HOME": str(home)}
    result = subprocess.run([sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, env=env,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    line = next(x for x in result.stderr.splitlines() if x.startswith("MODULES "))
    return set(json.loads(line.removeprefix("MODULES ")))


@pytest.mark.parametrize("args", [("--json", "--no-save"), ()], ids=["json", "saved"])
def test_analyze_imports_no_live_fleet_or_dashboard_parts(tmp_path: Path, args: tuple[str, ...]) -> None:
    modules = _modules_after("analyze", str(SAMPLES / "dlrm_8rank"), *args, home=tmp_path)
    assert "gpuscope.traces.kineto" in modules and "gpuscope.analyzers.report" in modules  # the probe sees imports
    loaded = sorted(m for m in modules if m.split(".")[0] in NOT_FOR_LOCAL_TRACES or
                    any(m == bad or m.startswith(bad + ".") for bad in NOT_FOR_ANALYZE))
    assert loaded == []


def test_the_progress_bar_is_only_imported_for_a_terminal(tmp_path: Path) -> None:
    assert "rich.progress" not in _modules_after("analyze", str(SAMPLES / "dlrm_8rank"), "--json", "--no-save",
                                                 home=tmp_path)


def test_the_full_command_set_is_there_for_help(tmp_path: Path) -> None:
    env = {**os.environ, "GPUSCOPE_HOME": str(tmp_path), "COLUMNS": "200"}
    result = subprocess.run([sys.executable, "-m", "gpuscope", "--help"], capture_output=True, text=True, env=env,
                            timeout=60)
    assert result.returncode == 0
    for command in ("analyze", "runs", "show", "attach", "run", "dashboard"):
        assert f" {command} " in result.stdout


def test_ops_imports_no_live_fleet_or_dashboard_parts(tmp_path: Path) -> None:
    modules = _modules_after("ops", str(SAMPLES / "dlrm_8rank"), "--json", home=tmp_path)
    assert "gpuscope.analyzers.trace.ops" in modules  # the probe sees imports
    loaded = sorted(m for m in modules if m.split(".")[0] in {"pandas", "dash", "plotly", "prometheus_client",
                                                              "pynvml", "selenium", "psutil"} or
                    any(m == bad or m.startswith(bad + ".") for bad in NOT_FOR_ANALYZE))
    assert loaded == []


_BLOCKED = """
import importlib.abc, sys
class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"dash", "flask", "werkzeug"}:
            raise ImportError(f"{name} is blocked", name=name)
        return None
sys.meta_path.insert(0, Blocker())
"""


def test_report_needs_plotly_not_dash_or_flask(tmp_path: Path) -> None:
    """`gpuscope report` (the [report] extra) writes its HTML with the dashboard's packages unimportable."""
    out = tmp_path / "r.html"
    probe = _BLOCKED + _PROBE
    env = {**os.environ, "GPUSCOPE_HOME": str(tmp_path / "home")}
    result = subprocess.run([sys.executable, "-c", probe, "report", str(SAMPLES / "resnet50_dataloader_bound"),
                             "-o", str(out)], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    assert out.stat().st_size > 0
    line = next(x for x in result.stderr.splitlines() if x.startswith("MODULES "))
    modules = set(json.loads(line.removeprefix("MODULES ")))
    assert "plotly" in modules and "gpuscope.reports.html" in modules  # the probe sees the report's imports
    assert not {m for m in modules if m.split(".")[0] in {"dash", "flask", "werkzeug"}}
    blocked = subprocess.run([sys.executable, "-c", _BLOCKED + "import dash"], capture_output=True, text=True,
                             timeout=60)
    assert blocked.returncode != 0 and "dash is blocked" in blocked.stderr, "the blocker blocks"
