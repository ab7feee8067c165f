"""`gpuscope fleet` as a user runs it (a real subprocess), the saved fleet run, and every error ending in one line."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.cli.helpers import gpuscope, one_clean_error_line
from tests.fleet.conftest import STEP_S, FleetUnderTest, _free_port
from tests.servers import serving


def window_args(fleet: FleetUnderTest) -> list[str]:
    return ["--prometheus", fleet.url, "--start", f"{fleet.start_s:.3f}", "--end", f"{fleet.end_s:.3f}",
            "--step", f"{STEP_S:g}s"]


@pytest.fixture(scope="module")
def saved(prometheus: FleetUnderTest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:  # type: ignore[type-arg]
    home = tmp_path_factory.mktemp("home")
    result = gpuscope("fleet", *window_args(prometheus), "--group-by", "job", "--json", home=home)
    assert result.returncode == 0, result.stderr
    return home, json.loads(result.stdout)


def test_json_has_groups_and_idle_gpus(saved: tuple[Path, dict]) -> None:  # type: ignore[type-arg]
    _, report = saved
    assert report["schema"] == "gpuscope.fleet/1" and report["group_by"] == "job"
    groups = {g["name"]: g for g in report["groups"]}
    assert set(groups) == {"ml/train-llama", "inference/serve-sd", "(no job)"}
    for g in report["groups"]:
        assert {"name", "gpus", "gpu_hours", "busy", "cost_usd", "wasted_usd"} <= set(g)
        assert 0 <= g["busy"] <= 1
    assert groups["ml/train-llama"]["busy"] > 0.75 > groups["inference/serve-sd"]["busy"]
    assert [(i["host"], i["gpu"], i["group"]) for i in report["idle_gpus"]] == [("node-b", 1, "inference/serve-sd")]


def test_the_fleet_run_is_saved_listed_and_shown_from_the_store(saved: tuple[Path, dict]) -> None:  # type: ignore[type-arg]
    home, report = saved
    listed = json.loads(gpuscope("runs", "--json", home=home).stdout)
    assert [(r["id"], r["kind"], r["status"]) for r in listed] == [(report["run_id"], "fleet", "complete")]
    shown = gpuscope("show", report["run_id"], "--json", home=home)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout) == report
    text = gpuscope("show", report["run_id"][:12], home=home)
    assert text.returncode == 0, text.stderr
    assert "gpuscope fleet" in text.stdout and "Give back 1 idle GPU" in text.stdout
    assert "inference/serve-sd" in text.stdout


def test_reanalysis_from_the_store_with_another_price(saved: tuple[Path, dict]) -> None:  # type: ignore[type-arg]
    home, report = saved
    again = gpuscope("show", report["run_id"], "--json", "--usd-per-gpu-hour", "2", home=home)
    assert again.returncode == 0, again.stderr
    redone = json.loads(again.stdout)
    assert redone["gpu_hours"] == report["gpu_hours"] and redone["group_by"] == "job"
    assert redone["cost_usd"] == pytest.approx(2 * report["gpu_hours"])


def test_terminal_view(prometheus: FleetUnderTest, tmp_path: Path) -> None:
    result = gpuscope("fleet", *window_args(prometheus), home=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "By pod, most waste first" in result.stdout and "inference/serve-sd-7d9c8b6f5-q9z8w" in result.stdout


class _Refusing(BaseHTTPRequestHandler):
    """Answers every query with the server's ``code`` and ``body`` (after ``delay_s``), as Prometheus or a proxy
    in front of it would."""

    def do_POST(self) -> None:  # noqa: N802
        self.server.seen = self.headers  # type: ignore[attr-defined]  # names case-insensitive
        time.sleep(getattr(self.server, "delay_s", 0.0))
        body = getattr(self.server, "body", b"Unauthorized")
        self.send_response(self.server.code)  # type: ignore[attr-defined]
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def refusing() -> Iterator[ThreadingHTTPServer]:
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)) as server:
        yield server


@pytest.mark.parametrize(("code", "words"), [(401, "needs credentials (HTTP 401)"), (403, "refused these credentials")])
def test_auth_errors(refusing: ThreadingHTTPServer, tmp_path: Path, code: int, words: str) -> None:
    refusing.code = code  # type: ignore[attr-defined]
    result = gpuscope("fleet", "--prometheus", f"127.0.0.1:{refusing.server_address[1]}", home=tmp_path)
    assert result.returncode == 2
    assert words in one_clean_error_line(result)


def test_a_query_over_the_servers_sample_limit(refusing: ThreadingHTTPServer, tmp_path: Path) -> None:
    refusing.code = 422  # type: ignore[attr-defined]
    refusing.body = (b'{"status":"error","errorType":"execution","error":"query processing would load too many '  # type: ignore[attr-defined]
                     b'samples into memory in query execution"}')
    result = gpuscope("fleet", "--prometheus", f"127.0.0.1:{refusing.server_address[1]}", home=tmp_path)
    assert result.returncode == 2
    line = one_clean_error_line(result)
    assert "refused the query as too large (HTTP 422: query processing would load too many samples" in line
    assert "use a larger --step or a shorter window" in line


def test_a_server_that_does_not_answer_in_time(refusing: ThreadingHTTPServer, tmp_path: Path) -> None:
    refusing.code, refusing.delay_s = 200, 2.0  # type: ignore[attr-defined]
    result = gpuscope("fleet", "--prometheus", f"127.0.0.1:{refusing.server_address[1]}", "--timeout", "0.3",
                      home=tmp_path)
    assert result.returncode == 2
    assert "did not answer within 0.3 s" in one_clean_error_line(result)


def test_credentials_and_headers_are_sent(refusing: ThreadingHTTPServer, tmp_path: Path) -> None:
    refusing.code = 403  # type: ignore[attr-defined]
    port = refusing.server_address[1]
    result = gpuscope("fleet", "--prometheus", f"http://ops:s%3Acret@127.0.0.1:{port}", "--header",
                      "X-Scope-OrgID: gpu-team", home=tmp_path)
    assert result.returncode == 2
    seen = refusing.seen  # type: ignore[attr-defined]
    assert seen["Authorization"] == "Basic " + base64.b64encode(b"ops:s:cret").decode()
    assert seen["X-Scope-OrgID"] == "gpu-team"
    assert "ops" not in result.stderr and "cret" not in result.stderr  # the password is not echoed
    gpuscope("fleet", "--prometheus", f"127.0.0.1:{port}", home=tmp_path, GPUSCOPE_PROMETHEUS_TOKEN="t0ken")
    assert refusing.seen["Authorization"] == "Bearer t0ken"  # type: ignore[attr-defined]
    bad = gpuscope("fleet", "--prometheus", f"127.0.0.1:{port}", "--header", "no colon", home=tmp_path)
    assert bad.returncode == 2 and "--header: expected 'Name: value'" in one_clean_error_line(bad)


def test_unreachable_or_not_a_url(tmp_path: Path) -> None:
    result = gpuscope("fleet", "--prometheus", f"http://127.0.0.1:{_free_port()}", home=tmp_path)
    assert result.returncode == 2
    assert "unreachable" in one_clean_error_line(result)
    result = gpuscope("fleet", "--prometheus", "ftp://prometheus:9090", home=tmp_path)
    assert result.returncode == 2
    assert "not a Prometheus URL" in one_clean_error_line(result)


@pytest.mark.parametrize(("extra", "words"), [
    (["--since", "1d", "--step", "1s"], "refused the query as too large"),  # Prometheus' 11,000 points a series
    (["--selector", 'namespace="nothing-here"'], 'no dcgm-exporter utilisation series (DCGM_FI_DEV_GPU_UTIL or'),
    (["--selector", "namespace=="], "rejected the query (HTTP 400:"),
    (["--since", "six hours"], "--since: not a duration"),
    (["--group-by", "team"], "--group-by must be one of"),
    (["--start", "yesterday"], "--start: not a time"),
])
def test_bad_queries_end_in_one_line(prometheus: FleetUnderTest, tmp_path: Path, extra: list[str],
                                     words: str) -> None:
    result = gpuscope("fleet", "--prometheus", prometheus.url, *extra, home=tmp_path)
    assert result.returncode == 2
    assert words in one_clean_error_line(result)


def test_an_exporter_is_not_a_prometheus(prometheus: FleetUnderTest, tmp_path: Path) -> None:
    result = gpuscope("fleet", "--prometheus", f"http://127.0.0.1:{prometheus.exporters[0].port}", home=tmp_path)
    assert result.returncode == 2
    line = one_clean_error_line(result)
    assert "HTTP 501" in line or "no query API" in line
