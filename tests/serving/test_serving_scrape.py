"""The serving-metrics scrape is the dcgm-exporter scrape's bounded request (``gpuscope.net.http``): a server that
misbehaves (tests/hostile.py, a real server on loopback) leaves a gap in the same words, and a user, password or token
in the ``--serving-metrics`` URL is sent to the server but never shown, nor kept in any byte of the store."""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuscope.collectors.dcgm import DcgmSampler
from gpuscope.collectors.serving import ServingSampler
from tests import hostile as H
from tests.cli.helpers import gpuscope, one_clean_error_line
from tests.serving.endpoints import VLLM, Engine

NOW = 1_800_000_000_000_000_000
USER, PASSWORD, TOKEN = "ops", "srv-pw-6d1e0b", "srv-tok-93c2aa"
FAULTS: dict[str, tuple[H.Act, float]] = {
    "hangs after accepting": (H.hang, 0.3),
    "answers 500": (H.answer(500, b"oops"), 0.3),
    "sends an endless answer": (H.endless(b"# HELP x y\n"), 20),
    "cuts its answer short": (H.cut_short, 0.3),
    "resets the connection": (H.reset, 0.3),
}
"""Each fault, and the scrape's limit for it (an endless answer is stopped at the size cap, given time to reach
it)."""


@pytest.fixture
def server() -> Iterator[H.Hostile]:
    s = H.Hostile()
    yield s
    s.close()


def secret_url(server: H.Hostile) -> str:
    return f"http://{USER}:{PASSWORD}@127.0.0.1:{server.port}/metrics?token={TOKEN}"


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_fault_is_a_gap_in_the_words_of_the_dcgm_scrape(server: H.Hostile, fault: str) -> None:
    act, limit_s = FAULTS[fault]
    server.behave = lambda request: act
    serving, dcgm = ServingSampler(server.url, timeout_s=limit_s), DcgmSampler(server.url, timeout_s=limit_s)
    assert serving.sample(NOW) == [] and dcgm.sample(NOW) == []
    assert serving.gaps == dcgm.gaps == 1
    assert serving.last_error is not None and dcgm.last_error is not None
    assert dcgm.last_error == f"DCGM endpoint {server.url}/metrics: {serving.last_error}"


def test_the_credentials_are_sent_as_basic_auth_and_never_shown(server: H.Hostile) -> None:
    server.behave = lambda request: H.answer(200, Engine(VLLM, 100, 200, 1, 0, kv=0.5).text(1e9).encode())
    sampler = ServingSampler(secret_url(server), timeout_s=5)
    assert sampler.sample(NOW) != []
    (request,) = server.requests
    assert request.headers["authorization"] == "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    assert request.path == f"/metrics?token={TOKEN}", "the query is the server's to read"
    assert PASSWORD not in sampler.url and TOKEN not in sampler.url and USER not in sampler.url
    assert sampler.url.startswith(f"http://127.0.0.1:{server.port}/metrics?token=")


def test_a_recording_shows_and_keeps_no_secret_of_the_serving_url(server: H.Hostile, tmp_path: Path) -> None:
    server.behave = lambda request: H.answer(200, Engine(VLLM, 100, 200, 1, 0, kv=0.5).text(1e9).encode())
    home = tmp_path / "home"
    result = gpuscope("run", "--serving-metrics", secret_url(server), "--no-stacks", "--interval", "0.2", "--json",
                      "--", sys.executable, "-c", "import time; time.sleep(1)", home=home)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["serving"]["source"].startswith(f"http://127.0.0.1:{server.port}/metrics?token=")
    shown = [result.stdout + result.stderr]
    for args in (("runs", "--json"), ("show", report["run"]["id"]), ("show", report["run"]["id"], "--json")):
        shown.append(gpuscope(*args, home=home).stdout)
    files = [p for p in home.rglob("*") if p.is_file()]
    assert files
    for secret in (PASSWORD, TOKEN):
        assert all(secret not in text for text in shown), secret
        assert all(secret.encode() not in p.read_bytes() for p in files), secret


def test_a_bad_endpoint_with_credentials_is_one_line_without_them(tmp_path: Path) -> None:
    url = f"http://{USER}:{PASSWORD}@127.0.0.1:{H.closed_port()}/metrics?token={TOKEN}"
    result = gpuscope("run", "--serving-metrics", url, "--no-stacks", "--", sys.executable, "-c", "pass",
                      home=tmp_path / "home")
    assert result.returncode == 2
    line = one_clean_error_line(result)
    assert line.startswith("gpuscope: error: serving metrics endpoint http://127.0.0.1:")
    assert "/metrics?token=***: unreachable (" in line, "the masked URL and the message read apart"
    assert PASSWORD not in line and TOKEN not in line
