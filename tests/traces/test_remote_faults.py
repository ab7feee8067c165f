"""A trace URL whose server misbehaves ends the command with one line naming what did not answer and how long it
was given, a non-zero exit, and never the URL's password or token: real servers on loopback that accept and never
answer, drip a byte a second, hang in the TLS handshake, redirect in a loop or answer 403 and 500, and a refused
port. ``--timeout`` keeps the waits short; one case runs on the stated defaults."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gpuscope.api.analysis import analyze_path
from gpuscope.api.errors import GpuscopeError
from gpuscope.net.deadline import CONNECT_S, Deadline, Timeouts
from tests import hostile as H
from tests.cli.helpers import gpuscope, one_clean_error_line

PW, TOKEN = "S3cretPW-in-url", "t0ken-in-query"
TIMEOUT_S = "3"


@pytest.fixture
def server() -> Iterator[H.Hostile]:
    s = H.Hostile()
    yield s
    s.close()


def url_of(scheme: str, port: int) -> str:
    return f"{scheme}://alice:{PW}@127.0.0.1:{port}/job/t.json.gz?token={TOKEN}&v=2"


def analyze(url: str, home: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], str]:
    result = gpuscope("analyze", url, "--no-save", *extra, home=home, timeout=120)
    assert result.returncode == 2, result.stderr
    line = one_clean_error_line(result)
    for secret in (PW, TOKEN):
        assert secret not in result.stdout + result.stderr
    return result, line


def stalls_after_headers(sock: socket.socket, server: H.Hostile) -> None:
    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + b"\x1f\x8b")
    server.closed.wait(120)


@pytest.mark.parametrize(("behave", "scheme", "said"), [
    (lambda r: H.hang, "http", "no answer within 3 s (still waiting for the answer's status and headers), the "
                               "limit of the whole command (--timeout)"),
    (lambda r: H.drip(headers_too=True), "http", "no answer within 3 s (still waiting for the answer's status and "
                                                 "headers), the limit of the whole command (--timeout)"),
    (lambda r: H.drip(headers_too=False), "http", "no answer within 3 s (still waiting for the rest of the answer "
                                                  "after "),
    (lambda r: H.hang, "https", "no answer within 3 s (still waiting for the TLS handshake), the limit of the whole "
                                "command (--timeout)"),
    (lambda r: H.answer(302, b"", headers={"Location": r.path}), "http",
     "redirected in a loop (the same address again, or more than 10 redirects)"),
    (lambda r: H.answer(403, b"denied"), "http", "the server refused to serve it (HTTP 403 "),
    (lambda r: H.answer(500, b"boom"), "http", "the server failed (HTTP 500 "),
], ids=["accepts_never_answers", "drips_headers", "drips_body", "tls_hangs", "redirect_loop", "http_403",
        "http_500"])
def test_a_misbehaving_server_is_one_line(server: H.Hostile, tmp_path: Path, behave: Callable[[H.Request], H.Act],
                                          scheme: str, said: str) -> None:
    server.behave = behave
    _, line = analyze(url_of(scheme, server.port), tmp_path, "--timeout", TIMEOUT_S)
    assert line.startswith(f"gpuscope: error: {scheme}://127.0.0.1:{server.port}/job/t.json.gz: {said}"), line
    assert "no such file" not in line


def test_an_answer_that_stalls_is_told_by_its_own_limit_before_the_deadline(server: H.Hostile) -> None:
    """The limit on a server's silence (``READ_S``, 30 s in every command) ends the read long before the command's
    deadline: here 1 s of 120, so the test need not wait the 30 s."""
    server.behave = lambda r: stalls_after_headers
    with pytest.raises(GpuscopeError) as caught:
        analyze_path(url_of("http", server.port), save=False, jobs=1,
                     timeouts=Timeouts(deadline=Deadline(120), read_s=1.0))
    line = str(caught.value)
    assert line.endswith("t.json.gz: the answer stalled: nothing for 1 s after 2 bytes"), line
    assert PW not in line and TOKEN not in line


def test_a_refused_connection_is_one_line(tmp_path: Path) -> None:
    _, line = analyze(url_of("http", H.closed_port()), tmp_path)
    assert line.endswith("/job/t.json.gz: cannot connect: connection refused")


def test_a_tls_handshake_that_hangs_ends_within_the_stated_default(server: H.Hostile, tmp_path: Path) -> None:
    server.behave = lambda r: H.hang
    _, line = analyze(url_of("https", server.port), tmp_path)
    assert line.endswith(f"t.json.gz: the TLS handshake did not finish within {CONNECT_S:g} s")



def test_a_blocking_filesystem_is_left_at_the_deadline(server: H.Hostile, tmp_path: Path) -> None:
    """fsspec's blocking filesystems (ftp:// here, whose welcome line never comes) are called in a thread the
    deadline does not wait for."""
    server.behave = lambda r: H.hang
    _, line = analyze(f"ftp://alice:{PW}@127.0.0.1:{server.port}/job/t.json.gz", tmp_path, "--timeout", TIMEOUT_S)
    assert line == (f"gpuscope: error: ftp://127.0.0.1:{server.port}/job/t.json.gz: no answer within 3 s while "
                    "connecting to it, the limit of the whole command (--timeout)")
