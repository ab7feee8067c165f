"""`gpuscope dashboard` as a user runs it: a real process, a real port, real HTTP."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

CLI = (sys.executable, "-c", "from gpuscope.cli.main import main; main()", "dashboard")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def _serving(home: Path, *args: str) -> Iterator[tuple[str, str]]:
    """Start the dashboard; yield the URL it printed and what it wrote to stderr so far."""
    env = {**os.environ, "GPUSCOPE_HOME": str(home)}
    env.pop("GPUSCOPE_DASHBOARD_TOKEN", None)
    proc = subprocess.Popen([*CLI, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("gpuscope dashboard: http://"), (line, proc.stderr.read() if proc.stderr else "")
        yield line.split(": ", 1)[1].strip(), ""
    finally:
        proc.terminate()
        proc.communicate(timeout=10)  # waits, and closes the pipes


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_serves_on_loopback_without_a_token(tmp_path: Path) -> None:
    port = _free_port()
    with _serving(tmp_path, "--port", str(port)) as (url, _):
        assert url == f"http://127.0.0.1:{port}/"
        assert _status(url) == 200
        assert _status(url + "_dash-layout") == 200


def test_other_host_generates_a_token_and_refuses_requests_without_it(tmp_path: Path) -> None:
    port = _free_port()
    with _serving(tmp_path, "--port", str(port), "--host", "0.0.0.0") as (url, _):
        match = re.fullmatch(rf"http://0\.0\.0\.0:{port}/\?token=([\w-]{{20,}})", url)
        assert match, url
        base = f"http://127.0.0.1:{port}/"
        assert _status(base) == 403
        assert _status(base + "_dash-layout") == 403
        assert _status(f"{base}?token={match.group(1)}") == 200


def test_given_token_is_enforced_on_loopback_too(tmp_path: Path) -> None:
    port = _free_port()
    with _serving(tmp_path, "--port", str(port), "--token", "correct-horse") as (url, _):
        assert url.endswith("?token=correct-horse")
        assert _status(f"http://127.0.0.1:{port}/") == 403
        assert _status(url) == 200


@pytest.mark.parametrize(("args", "message"), [
    (("--token", "short"), "--token must be at least 8 characters"),
    (("--port", "PORT_IN_USE"), "cannot listen on 127.0.0.1:"),
])
def test_user_errors_are_one_line(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        argv = [port if a == "PORT_IN_USE" else a for a in args]
        done = subprocess.run([*CLI, *argv], env={**os.environ, "GPUSCOPE_HOME": str(tmp_path)},
                              capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().count("\n") == 0
