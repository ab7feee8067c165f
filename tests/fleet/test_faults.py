"""`gpuscope fleet` against a Prometheus that misbehaves: a real server on loopback (tests/hostile.py) and the real
command in a subprocess. Whatever the server does, the command ends by its --timeout with one line and exit code 2,
holds a bounded amount of memory, retries a transient refusal a bounded number of times, and saves nothing."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests import hostile as H
from tests.cli.helpers import gpuscope, one_clean_error_line

WINDOW = ("--start", "1000", "--end", "1600", "--step", "60s")
"""Ten buckets of 60 s; the queries ask for points at 1060, 1120, ... 1600."""
BOUND_S = 30.0
"""What "ends" means here: far above every --timeout below, far below "never"."""
UTIL_LABELS = {"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "0", "UUID": "GPU-1", "Hostname": "n1",
               "modelName": "Tesla T4", "namespace": "ml", "pod": "train-0"}


def util_answer(value: str = "50") -> bytes:
    return H.matrix([(UTIL_LABELS, [(float(t), value) for t in range(1060, 1601, 60)])])


def good(request: H.Request) -> H.Act:
    """What a healthy Prometheus answers: one GPU's utilisation, nothing for the other metrics."""
    if "DCGM_FI_DEV_GPU_UTIL" in request.form.get("query", ""):
        return H.answer(200, util_answer())
    return H.answer(200, H.empty_matrix())


@pytest.fixture
def server() -> Iterator[H.Hostile]:
    s = H.Hostile()
    yield s
    s.close()


def run_fleet(url: str, home: Path, *args: str, **env: str) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.monotonic()
    result = gpuscope("fleet", "--prometheus", url, *WINDOW, *args, home=home, timeout=BOUND_S + 30, **env)
    return result, time.monotonic() - start


def saved_runs(home: Path) -> list[object]:
    listed = gpuscope("runs", "--json", home=home)
    assert listed.returncode == 0, listed.stderr
    runs: list[object] = json.loads(listed.stdout)
    return runs


FAULTS: dict[str, tuple[Callable[[H.Request], H.Act], str]] = {
    "hangs after accepting": (lambda r: H.hang, "did not answer within 3 s, the --timeout for all of the command's"),
    "drips its headers": (lambda r: H.drip(headers_too=True), "did not answer within 3 s"),
    "drips its body": (lambda r: H.drip(headers_too=False), "did not answer within 3 s"),
    "answers 500": (lambda r: H.answer(500, b"<html><h1>Internal Server Error</h1></html>"),
                    ": HTTP 500 X: <html><h1>Internal Server Error</h1></html>"),
    "answers garbage": (lambda r: H.answer(200, b"<html>welcome to nginx</html>"),
                        "answered, but not with the Prometheus API's JSON"),
    "answers malformed points": (lambda r: H.answer(200, H.matrix([(UTIL_LABELS, [(1060.0, "fifty")])])),
                                 "answered a series with malformed points"),
    "answers a point of three numbers": (
        lambda r: H.answer(200, b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"gpu":"0"},'
                                b'"values":[[1060],[1120,"3","4"]]}]}}'),
        "answered a series with malformed points"),
    "cuts its answer short": (lambda r: H.cut_short, "bad HTTP answer (cut short: 100 of 10000 bytes)"),
    "resets the connection": (lambda r: H.reset, "bad HTTP answer (Connection reset by peer)"),
    "answers part and fails the rest": (
        lambda r: good(r) if "GPU_UTIL" in r.form["query"] else H.answer(500, b'{"status":"error","errorType":'
                                                                              b'"internal","error":"store down"}'),
        ": HTTP 500 X: store down"),
    "answers part and hangs on the rest": (lambda r: good(r) if "GPU_UTIL" in r.form["query"] else H.hang,
                                           "did not answer within 3 s"),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_each_fault_ends_in_one_line_within_the_deadline(server: H.Hostile, tmp_path: Path, fault: str) -> None:
    server.behave, words = FAULTS[fault]
    result, took_s = run_fleet(server.url, tmp_path, "--timeout", "3")
    assert result.returncode == 2 and result.stdout == ""
    assert words in one_clean_error_line(result)
    assert took_s < BOUND_S
    assert saved_runs(tmp_path) == [], "a fleet run made of part of the answers is not saved"


def test_a_refusing_server_ends_at_once(tmp_path: Path) -> None:
    result, took_s = run_fleet(f"http://127.0.0.1:{H.closed_port()}", tmp_path, "--timeout", "20")
    assert result.returncode == 2
    assert "is unreachable (Connection refused)" in one_clean_error_line(result)
    assert took_s < BOUND_S


def test_the_deadline_is_one_for_the_whole_command(server: H.Hostile, tmp_path: Path) -> None:
    """Each query alone answers within the timeout (2 s), all of them together do not: the command ends at 3 s."""
    def slow(request: H.Request) -> H.Act:
        act = good(request)

        def late(sock: object, hostile: H.Hostile) -> None:
            hostile.closed.wait(2.0)
            act(sock, hostile)  # type: ignore[arg-type]
        return late

    server.behave = slow
    result, took_s = run_fleet(server.url, tmp_path, "--timeout", "3")
    assert result.returncode == 2 and "did not answer within 3 s" in one_clean_error_line(result)
    assert took_s < BOUND_S
    assert len(server.requests) >= 5, "seven queries four at a time: the second round was under way"


@pytest.mark.parametrize("act", ["endless", "gzip bomb"])
def test_an_endless_answer_is_cut_at_the_cap_and_memory_stays_bounded(server: H.Hostile, tmp_path: Path,
                                                                      act: str) -> None:
    server.behave = (lambda r: H.endless(b'{"metric":{"gpu":"0"},"values":[]},')) if act == "endless" \
        else (lambda r: H.gzip_bomb)
    import os

    env = {**os.environ, "GPUSCOPE_HOME": str(tmp_path)}
    ceiling = 1 << 30
    code, peak, stderr = H.peak_rss_of([sys.executable, "-m", "gpuscope", "fleet", "--prometheus", server.url,
                                        *WINDOW, "--timeout", "20", "--max-answer-mb", "8"], env,
                                       ceiling_bytes=ceiling, bound_s=BOUND_S + 30)
    assert peak < ceiling, f"killed at {peak / 2**20:.0f} MiB"
    assert code == 2, stderr
    assert "answered more than 8 MiB to one query" in stderr and "Traceback" not in stderr
    # Python, numpy and the CLI take about 100 MiB; four queries at once hold at most 8 MiB each, twice over
    # while a buffer grows. Without the cap the process grows by the server's speed times 20 s.
    assert peak < 300 * 2**20, f"{peak / 2**20:.0f} MiB"


def test_transient_refusals_are_retried_a_bounded_number_of_times(server: H.Hostile, tmp_path: Path) -> None:
    busy_left = {"n": 2}

    def flaky(request: H.Request) -> H.Act:
        if "DCGM_FI_DEV_GPU_UTIL" in request.form["query"] and busy_left["n"] > 0:
            busy_left["n"] -= 1
            return H.answer(503, b"", headers={"Retry-After": "0"})
        return good(request)

    server.behave = flaky
    result, _ = run_fleet(server.url, tmp_path, "--json", "--timeout", "20")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["gpus"] == 1
    util_asked = [r for r in server.requests if "DCGM_FI_DEV_GPU_UTIL" in r.form["query"]]
    assert len(util_asked) == 3, "two refusals, then the answer"

    server.requests.clear()
    server.behave = lambda r: H.answer(503, b"", headers={"Retry-After": "0"})
    result, took_s = run_fleet(server.url, tmp_path, "--timeout", "20")
    assert result.returncode == 2 and "HTTP 503 X (tried 3 times)" in one_clean_error_line(result)
    by_query: dict[str, int] = {}
    for r in server.requests:
        by_query[r.form["query"]] = by_query.get(r.form["query"], 0) + 1
    assert max(by_query.values()) <= 3, "one try and two retries a query, no more"
    assert took_s < BOUND_S


def test_a_retry_that_would_pass_the_deadline_is_not_waited_for(server: H.Hostile, tmp_path: Path) -> None:
    server.behave = lambda r: H.answer(503, b"", headers={"Retry-After": "3600"})
    result, took_s = run_fleet(server.url, tmp_path, "--timeout", "10")
    assert result.returncode == 2 and one_clean_error_line(result).endswith(": HTTP 503 X")
    assert took_s < BOUND_S


def test_retries_wait_one_then_two_seconds_without_a_retry_after(server: H.Hostile) -> None:
    from gpuscope.fleet import Prometheus, PrometheusError

    asked: list[float] = []

    def busy(request: H.Request) -> H.Act:
        asked.append(time.monotonic())
        return H.answer(502, b"Bad Gateway")

    server.behave = busy
    with pytest.raises(PrometheusError, match=r"HTTP 502 X: Bad Gateway \(tried 3 times\)$"):
        Prometheus(server.url, timeout_s=20).query_range("up", start_s=1060, end_s=1600, step_s=60)
    assert len(asked) == 3
    assert asked[1] - asked[0] >= 1.0 and asked[2] - asked[1] >= 2.0
