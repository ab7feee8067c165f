from __future__ import annotations

import gc
import importlib.util
import os
import re
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import settings

from tests.as_nobody import NobodyPython, cannot_switch_user, readable_python

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"

# The suite draws the same examples on every run (a change is judged on the inputs the last run passed, and a red
# run can be run again to the same end); GPUSCOPE_HYPOTHESIS=explore draws new ones, to look for more.
settings.register_profile("repeatable", derandomize=True, database=None)
settings.register_profile("explore")
settings.load_profile("explore" if os.environ.get("GPUSCOPE_HYPOTHESIS") == "explore" else "repeatable")


def load_benchmark(name: str) -> ModuleType:
    """A script of benchmarks/ imported as a module (they are scripts, not a package), once per process: a worker
    process unpickles its functions by the module's name, so every test module must hold the same module."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def gpuscope_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty run store for the test, used by the CLI through GPUSCOPE_HOME."""
    home = tmp_path / "home"
    monkeypatch.setenv("GPUSCOPE_HOME", str(home))
    yield home


@pytest.fixture(scope="session")
def nobody_python() -> Iterator[NobodyPython]:
    """This interpreter, its packages, gpuscope and the test targets where user nobody may run them, whatever the
    checkout's permissions (a clone in a 0700 folder, pyenv under /root): see tests/as_nobody.py."""
    reason = cannot_switch_user()
    if reason is not None:
        pytest.skip(reason)
    with readable_python(ROOT) as python:
        probe = subprocess.run(python.argv("-c", "import gpuscope.cli.main"), env=python.env, capture_output=True,
                               text=True, timeout=120)
        assert probe.returncode == 0, f"user nobody cannot run the mirrored interpreter: {probe.stderr}"
        yield python


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test that turns warnings into errors starts with no garbage left by earlier tests: a socket an earlier
    test left in a reference cycle would otherwise warn when the collector happens to run inside this one."""
    if any("error" in mark.args for mark in item.iter_markers("filterwarnings")):
        with warnings.catch_warnings():  # the test's own filter is already in force here
            warnings.simplefilter("ignore", ResourceWarning)
            gc.collect()



_PROMETHEUS_FIXTURES = {"prometheus-fleets": ("fleets", "prometheus", "h100_prometheus"),
                        "prometheus-serving": ("serving_fleet",)}
"""Session fixtures that start a real Prometheus and wait for its scrapes, by the group of the files using them."""


def _groups(tests: Path) -> dict[str, str]:
    """Test files that share an xdist worker, by group: the files that take a Prometheus fixture, one group per
    Prometheus (so it starts and waits once per run); and each file that holds a module- or class-scoped fixture (a
    store filled by a dozen commands, a served dashboard), its own group (so it is made once, not once per worker).
    Read from the files' text, as the controller sees no collected test."""
    groups = {}
    for path in sorted(tests.rglob("test_*.py")):
        text = path.read_text(encoding="utf-8")
        name = str(path.relative_to(tests.parent))
        shared = [g for g, fixtures in _PROMETHEUS_FIXTURES.items()
                  if re.search(rf"[(,]\s*(?:{'|'.join(fixtures)})\s*:", text)]
        if shared:
            groups[name] = shared[0]
        elif re.search(r"scope=\"(?:module|class)\"", text):
            groups[name] = name
    return groups


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Load distribution (each test where a worker is free) but for the files ``_groups`` keeps together.
    (``--dist loadgroup`` with ``xdist_group`` marks would say it too, but pytest-xdist 3.8 groups by a node id
    attribute pytest 9 no longer reads.)"""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    groups = _groups(ROOT / "tests")

    class Grouped(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return groups.get(nodeid.split("::", 1)[0], nodeid)

    return Grouped(config, log)
