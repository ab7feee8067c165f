from __future__ import annotations

import gc
import importlib.util
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.as_nobody import NobodyPython, cannot_switch_user, readable_python

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"


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



_SHARED_SERVERS = {"fleets": "prometheus-fleets", "serving_fleet": "prometheus-serving"}
"""Session fixtures that start a real Prometheus and wait for its scrapes: the xdist group of the tests using each."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Which tests share an xdist worker (``--dist loadgroup``): those of each Prometheus session fixture, so it
    starts and waits once per run; every other test with the tests of its module, so a module's fixtures (a
    store filled by a dozen commands, a served dashboard) are made once, not once per worker."""
    for item in items:
        shared = sorted(set(getattr(item, "fixturenames", ())) & set(_SHARED_SERVERS))
        group = _SHARED_SERVERS[shared[0]] if shared else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(group))
