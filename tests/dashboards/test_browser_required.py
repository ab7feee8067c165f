"""A browser test that cannot run skips on a developer's machine and fails in CI (GPUSCOPE_REQUIRE_BROWSER=1)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.dashboards.browser import REQUIRE_ENV, chromium_or_skip


def test_a_missing_driver_skips_the_test_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REQUIRE_ENV, raising=False)
    browser = tmp_path / "chromium"
    browser.touch()
    with pytest.raises(pytest.skip.Exception, match="^chromedriver not found"):
        chromium_or_skip(str(browser), str(tmp_path / "chromedriver"))


def test_where_required_a_missing_browser_fails_the_test(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REQUIRE_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match="chromium and chromedriver not found.*GPUSCOPE_REQUIRE_BROWSER=1"):
        chromium_or_skip(str(tmp_path / "chromium"), str(tmp_path / "chromedriver"))


def _script_test(tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], str]:
    """scripts/test run with no terminal on a PATH without chromium, chromedriver or prometheus, where python and
    apt-get are stubs that log their arguments: what it says, and what it would have run."""
    bin_dir, log = tmp_path / "bin", tmp_path / "log"
    bin_dir.mkdir(parents=True)
    for tool in ("bash", "id", "dirname", "cat", "mktemp", "rm"):
        (bin_dir / tool).symlink_to(shutil.which(tool) or f"/usr/bin/{tool}")
    for stub in ("python", "apt-get"):
        (bin_dir / stub).write_text(f'#!/bin/sh\ncase "$*" in *sys.prefix*) echo False; exit;; esac\n'
                                    f'echo "{stub} $*" >> {log}\n')
        (bin_dir / stub).chmod(0o755)
    (bin_dir / "sudo").write_text('#!/bin/sh\nexec "$@"\n')  # a run as another user than root goes through it
    (bin_dir / "sudo").chmod(0o755)
    result = subprocess.run(["bash", str(ROOT / "scripts" / "test")], capture_output=True, text=True,
                            stdin=subprocess.DEVNULL, timeout=60,
                            env={"PATH": str(bin_dir), "VIRTUAL_ENV": str(tmp_path), **env})
    return result, log.read_text() if log.exists() else ""


def test_scripts_test_says_what_it_would_install_and_installs_only_when_told(tmp_path: Path) -> None:
    quiet, ran = _script_test(tmp_path / "a")
    assert quiet.returncode == 0, quiet.stderr
    assert "need system packages that are not installed: chromium chromium-driver prometheus" in quiet.stdout
    assert "not installing them" in quiet.stdout and "apt-get" not in ran
    assert "python -m pytest -q" in ran, "the tests still run (those needing the packages skip, saying why)"
    told, ran = _script_test(tmp_path / "b", GPUSCOPE_INSTALL_SYSTEM="1")
    assert told.returncode == 0, told.stderr
    assert "apt-get install -y -qq chromium chromium-driver" in ran
    assert "apt-get install -y -qq --no-install-recommends prometheus" in ran


def test_ci_installs_and_requires_the_browser_and_prometheus() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert "./scripts/test" in ci
    exported = next(line for line in ci.splitlines() if line.startswith("export "))
    assert {f"{REQUIRE_ENV}=1", "GPUSCOPE_INSTALL_SYSTEM=1", "GPUSCOPE_REQUIRE_PROMETHEUS=1"} <= set(exported.split())
