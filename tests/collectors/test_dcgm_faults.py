"""A dcgm-exporter endpoint that misbehaves (tests/hostile.py, a real server on loopback): each scrape ends within its
timeout whatever the endpoint does; a failed scrape is a gap (no row), never a zero; an endpoint the user asked for
that gives nothing at the start is one line and exit 2 before anything is launched; one that fails during a run
leaves gaps, a warning, and the good scrapes' values as they were."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gpuscope.collectors.dcgm import DcgmSampler
from gpuscope.collectors.sampler import SamplingLoop
from gpuscope.model import schema as S
from gpuscope.model.run import RunMeta
from gpuscope.store import Store
from tests import hostile as H
from tests.cli.helpers import gpuscope, one_clean_error_line
from tests.fakes import FakeClock

NOW = 1_800_000_000_000_000_000
BOUND_S = 30.0
SCRAPE = (b'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",modelName="NVIDIA A100-SXM4-80GB",Hostname="n1"} 90\n'
          b'DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-a",modelName="NVIDIA A100-SXM4-80GB",Hostname="n1"} 300.5\n')
"""One A100 at 90% and 300.5 W."""
GOOD: H.Act = H.answer(200, SCRAPE)
FAULTS: dict[str, tuple[H.Act, str]] = {
    "hangs after accepting": (H.hang, "no answer within 0.3 s"),
    "drips its headers": (H.drip(headers_too=True), "no answer within 0.3 s"),
    "drips its body": (H.drip(headers_too=False), "no answer within 0.3 s"),
    "answers 500": (H.answer(500, b"oops"), "HTTP 500"),
    "answers garbage": (H.answer(200, b"<html>welcome to nginx</html>\n"), "not Prometheus text"),
    "sends a gzip bomb": (H.gzip_bomb, "answer larger than 16 MiB"),
    "sends an endless answer": (H.endless(b"# HELP x y\n"), "answer larger than 16 MiB"),
    "cuts its answer short": (H.cut_short, "bad HTTP answer (cut short: 100 of 10000 bytes)"),
    "resets the connection": (H.reset, "bad HTTP answer (Connection reset by peer)"),
}


@pytest.fixture
def endpoint() -> Iterator[H.Hostile]:
    server = H.Hostile()
    yield server
    server.close()


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_each_fault_is_a_gap_within_the_scrape_timeout(endpoint: H.Hostile, fault: str) -> None:
    act, words = FAULTS[fault]
    endpoint.behave = lambda request: act
    # An answer without end is stopped at the size cap, given the time to reach it; else by the timeout.
    sampler = DcgmSampler(endpoint.url, timeout_s=20 if "16 MiB" in words else 0.3)
    start = time.monotonic()
    assert sampler.sample(NOW) == []
    assert time.monotonic() - start < BOUND_S
    assert sampler.gaps == 1 and sampler.last_error is not None and words in sampler.last_error
    assert "\n" not in sampler.last_error
    endpoint.behave = lambda request: GOOD
    assert {row[4]: row[5] for row in sampler.sample(NOW + 1)} == {S.GPU_UTIL: 0.9, S.GPU_POWER_W: 300.5}, \
        "it recovers at the next scrape"


def test_a_refusing_endpoint_is_a_gap() -> None:
    sampler = DcgmSampler(f"127.0.0.1:{H.closed_port()}", timeout_s=0.3)
    assert sampler.sample(NOW) == [] and sampler.gaps == 1
    assert sampler.last_error is not None and "unreachable (Connection refused)" in sampler.last_error


def flapping(faults: list[H.Act]) -> Callable[[H.Request], H.Act]:
    """Good scrapes and faults in turn: good, faults[0], good, faults[1], ... (round and round)."""
    count = {"n": 0}

    def behave(_request: H.Request) -> H.Act:
        n = count["n"]
        count["n"] += 1
        return GOOD if n % 2 == 0 else faults[(n // 2) % len(faults)]
    return behave


def test_a_flapping_endpoint_leaves_gaps_not_zeros_in_the_run(endpoint: H.Hostile, tmp_path: Path) -> None:
    """The real loop and store (on a fake clock): of 12 ticks, the 6 good scrapes are stored as served, the 6
    failed ones are missing rows; and the scrape's own timeout bounds each failed tick."""
    endpoint.behave = flapping([H.answer(500, b""), H.hang, H.reset, H.answer(200, b"garbage\n")])
    clock = FakeClock(NOW)
    sampler = DcgmSampler(endpoint.url, timeout_s=0.3)
    with Store(tmp_path / "home") as store:
        store.create_run(RunMeta(id="r1", name="flap", kind="attach", status="running", started_ns=NOW))
        SamplingLoop(store, "r1", [sampler], interval_s=1.0, duration_s=11.0, clock=clock).run()
        samples = store.samples("r1")
    util = samples[samples["metric"] == S.GPU_UTIL]
    assert sorted(util["ts_ns"]) == [NOW + i * 10**9 for i in range(0, 12, 2)], "a row for each good scrape only"
    assert set(util["value"]) == {0.9}, "no 0 where a scrape failed"
    assert sampler.gaps == 6 and len(endpoint.requests) == 12


def _run(endpoint_url: str, home: Path, *command: str) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.monotonic()
    result = gpuscope("run", "--dcgm", endpoint_url, "--no-stacks", "--interval", "0.2", "--json", "--",
                      *command, home=home, timeout=BOUND_S + 30)
    return result, time.monotonic() - start


@pytest.mark.parametrize("fault", ["refuses", "hangs after accepting", "answers garbage"])
def test_an_endpoint_asked_for_that_fails_at_the_start_is_one_line_and_nothing_runs(
        endpoint: H.Hostile, tmp_path: Path, fault: str) -> None:
    url = f"127.0.0.1:{H.closed_port()}" if fault == "refuses" else f"127.0.0.1:{endpoint.port}"
    if fault != "refuses":
        endpoint.behave = lambda request: FAULTS[fault][0]
    marker = tmp_path / "ran"
    result, took_s = _run(url, tmp_path / "home", sys.executable, "-c", f"open({str(marker)!r}, 'w')")
    assert result.returncode == 2 and result.stdout == ""
    line = one_clean_error_line(result)
    assert line.startswith(f"gpuscope: error: DCGM endpoint http://{url}/metrics: ")
    assert line.endswith("check --dcgm, or leave it out to record without DCGM")
    assert took_s < BOUND_S
    assert not marker.exists(), "the command was not launched"
    assert not list((tmp_path / "home").glob("runs/*")), "nothing recorded"


def test_an_endpoint_that_fails_during_a_run_leaves_gaps_and_a_warning(endpoint: H.Hostile, tmp_path: Path) -> None:
    """`gpuscope run --dcgm` of a 3 s command against an endpoint whose every other scrape fails (the first, the
    check at the start, is good): the run ends as the command does, its report's utilisation is the served 90%,
    and one warning says how many scrapes gave nothing and why."""
    served = {"good": 0}
    flap = flapping([H.answer(503, b""), H.reset, H.hang])

    def counted(request: H.Request) -> H.Act:
        act = flap(request)
        served["good"] += act is GOOD
        return act

    endpoint.behave = counted
    home = tmp_path / "home"
    result, took_s = _run(f"127.0.0.1:{endpoint.port}", home, sys.executable, "-c", "import time; time.sleep(3)")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and took_s < BOUND_S
    report = json.loads(result.stdout)
    (gpu,) = report["live"]["gpus"]
    assert gpu["util_mean"] == pytest.approx(0.9) and gpu["power_mean_w"] == pytest.approx(300.5)
    warned = [w for w in report["warnings"] if "DCGM scrape" in w]
    assert len(warned) == 1 and warned[0].startswith(f"{sampled_gaps(endpoint, served)} DCGM scrapes gave nothing")
    assert "gpuscope: warning: " + warned[0] in result.stderr.splitlines()
    with Store(home) as store:
        (meta,) = store.list_runs()
        samples = store.samples(meta.id)
    util = samples[samples["metric"] == S.GPU_UTIL]
    assert len(util) == served["good"] - 1, "one row per good scrape of the run (the first was the check)"
    assert set(util["value"]) == {0.9}


def sampled_gaps(endpoint: H.Hostile, served: dict[str, int]) -> int:
    """Scrapes of the run that failed: all the endpoint was asked, less the check at the start and the good ones."""
    return len(endpoint.requests) - served["good"]


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="Linux")
def test_the_sampler_leaves_no_thread_behind_a_hung_endpoint(endpoint: H.Hostile) -> None:
    """A scrape past its timeout has its socket shut down, so the thread that read it ends too."""
    endpoint.behave = lambda request: H.hang
    sampler = DcgmSampler(endpoint.url, timeout_s=0.2)
    before = _threads()
    for i in range(5):
        sampler.sample(NOW + i)
    deadline = time.monotonic() + 10
    while _threads() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _threads() <= before


def _threads() -> int:
    import threading

    return sum(1 for t in threading.enumerate() if t.name == "gpuscope-fetch")


def test_credentials_in_the_endpoint_are_sent_and_never_shown(endpoint: H.Hostile) -> None:
    endpoint.behave = lambda request: GOOD
    sampler = DcgmSampler(f"http://ops:s3cret@127.0.0.1:{endpoint.port}", timeout_s=2)
    assert sampler.sample(NOW)
    assert endpoint.requests[0].headers["authorization"] == "Basic b3BzOnMzY3JldA=="
    assert sampler.url == f"http://127.0.0.1:{endpoint.port}/metrics"
    endpoint.behave = lambda request: H.answer(500, b"")
    sampler.sample(NOW + 1)
    problem = DcgmSampler.probe(f"ops:s3cret@127.0.0.1:{endpoint.port}")
    assert sampler.last_error is not None and "s3cret" not in sampler.last_error and "ops" not in sampler.last_error
    assert problem is not None and "s3cret" not in problem


def test_no_proxy_is_used_for_the_exporter(endpoint: H.Hostile, monkeypatch: pytest.MonkeyPatch) -> None:
    endpoint.behave = lambda request: GOOD
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{H.closed_port()}")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    assert DcgmSampler(endpoint.url, timeout_s=2).sample(NOW), "scraped directly, not through the dead proxy"
    assert os.environ["http_proxy"]


def test_the_api_checks_the_endpoint_before_launching(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gpuscope

    monkeypatch.setenv("GPUSCOPE_HOME", str(tmp_path / "home"))
    marker = tmp_path / "ran"
    with pytest.raises(gpuscope.GpuscopeError, match=r"unreachable \(Connection refused\); check --dcgm"):
        gpuscope.record(command=[sys.executable, "-c", f"open({str(marker)!r}, 'w')"],
                        dcgm_url=f"127.0.0.1:{H.closed_port()}", stacks=False)
    assert not marker.exists()
