"""DNS rebinding: the dashboard on loopback answers only requests that name loopback in their Host header."""

from __future__ import annotations

import http.client
import re
from pathlib import Path

from gpuscope.dashboards.auth import host_allowed, is_loopback
from tests.dashboards.test_cli import _free_port, _serving


def status(port: int, host_header: str | None, path: str = "/") -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers={} if host_header is None else {"Host": host_header})
        return conn.getresponse().status
    finally:
        conn.close()


def test_a_forged_host_gets_403_on_loopback(tmp_path: Path) -> None:
    port = _free_port()
    with _serving(tmp_path, "--port", str(port)):
        assert status(port, None) == 200  # http.client names 127.0.0.1:PORT, as a browser would
        for good in (f"localhost:{port}", f"127.0.0.1:{port}", "localhost", f"[::1]:{port}"):
            assert status(port, good) == 200, good
        for forged in (f"evil.example:{port}", "evil.example", f"localhost.evil.example:{port}",
                       f"127.0.0.1.nip.io:{port}", f"localhost:{port + 1}", ""):
            assert status(port, forged) == 403, forged
        assert status(port, f"evil.example:{port}", "/_dash-layout") == 403  # Dash's own routes too


def test_beyond_loopback_the_token_rules_stay(tmp_path: Path) -> None:
    port = _free_port()
    with _serving(tmp_path, "--host", "0.0.0.0", "--port", str(port)) as (url, _):
        token = re.search(r"token=([\w-]+)", url)
        assert token is not None
        assert status(port, f"gpu-node.example:{port}") == 403  # no token
        assert status(port, f"gpu-node.example:{port}", f"/?token={token.group(1)}") == 200  # any name with it


def test_host_rules() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("127.0.0.2") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.0.0.1") and not is_loopback("gpu-node")
    assert host_allowed("[::1]", "::1", "8050") and host_allowed("[::1]:8050", "::1", "8050")
    assert host_allowed("127.0.0.2:8050", "127.0.0.2", "8050")
    assert not host_allowed("127.0.0.3:8050", "127.0.0.2", "8050")
    assert host_allowed("LOCALHOST:8050", "127.0.0.1", "8050")
