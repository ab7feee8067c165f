"""A live run's DCGM profiling counters: `gpuscope attach` on a real process, with a real dcgm-exporter scrape served
on loopback (DataDog's recorded Tesla T4 scrape, plus the DCGM_FI_PROF_* fields its fixture file names, in the same
label dialect). Tensor-pipe activity is read beside SM active; n/a where the exporter does not give it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from gpuscope.cli.main import app
from gpuscope.model.codec import report_from_json
from gpuscope.reports.terminal import render
from tests.cli.live_targets import SPIN, started
from tests.conftest import SAMPLES
from tests.servers import serving

THIRD = SAMPLES / "dcgm" / "third_party_samples"
SCRAPE = THIRD / "datadog_integrations-core_dcgm_tests_docker_serve_metrics.prom"
FIELDS = THIRD / "datadog_integrations-core_dcgm_tests_fixtures_metrics.prom"
PROF = {"DCGM_FI_PROF_SM_ACTIVE": 0.9, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.04, "DCGM_FI_PROF_SM_OCCUPANCY": 0.3,
        "DCGM_FI_PROF_DRAM_ACTIVE": 0.2}
"""A GPU whose SMs are busy and whose tensor pipes are nearly idle: fp32 matrix work on the CUDA cores."""
UTIL_PCT = 95


def scrape(prof: dict[str, float]) -> bytes:
    """The recorded T4 scrape, its utilisation set to ``UTIL_PCT``, and ``prof``'s fields in its labels. Each name
    is one the recorded fixture file carries (its PROF block), so the names are dcgm-exporter's own."""
    lines = SCRAPE.read_text().splitlines()
    util = next(line for line in lines if line.startswith("DCGM_FI_DEV_GPU_UTIL{"))
    labels = util[util.index("{"):util.index("}") + 1]
    recorded = set(re.findall(r"^(DCGM_FI_PROF_\w+)", FIELDS.read_text(), flags=re.M))
    assert set(prof) <= recorded
    body = [f"{labels_line[:labels_line.rindex(' ')]} {UTIL_PCT}" if labels_line == util else labels_line
            for labels_line in lines]
    body += [f"{name}{labels} {value}" for name, value in prof.items()]
    return ("\n".join(body) + "\n").encode()


def endpoint(body: bytes) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server hook's name
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    with serving(HTTPServer(("127.0.0.1", 0), Handler)) as server:
        yield f"127.0.0.1:{server.server_address[1]}"


@pytest.fixture
def with_prof() -> Iterator[str]:
    yield from endpoint(scrape(PROF))


@pytest.fixture
def without_prof() -> Iterator[str]:
    yield from endpoint(scrape({}))


def attach(url: str) -> dict[str, Any]:
    with started(str(SPIN), "30") as target:
        result = CliRunner().invoke(app, ["attach", str(target.pid), "--duration", "1", "--interval", "0.2",
                                          "--no-stacks", "--dcgm", url, "--json"])
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def text(doc: dict[str, Any]) -> str:
    console = Console(record=True, width=200, color_system=None)
    render(report_from_json(json.dumps(doc)), console)
    return console.export_text()


def test_tensor_pipes_idle_beside_busy_sms_is_a_finding_with_advice(gpuscope_home: Path, with_prof: str) -> None:
    doc = attach(with_prof)
    (gpu,) = doc["live"]["gpus"]
    assert gpu["sm_active_mean"] == pytest.approx(PROF["DCGM_FI_PROF_SM_ACTIVE"])
    assert gpu["tensor_active_mean"] == pytest.approx(PROF["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"])
    assert gpu["sm_occupancy_mean"] == pytest.approx(PROF["DCGM_FI_PROF_SM_OCCUPANCY"])
    assert gpu["dram_active_mean"] == pytest.approx(PROF["DCGM_FI_PROF_DRAM_ACTIVE"])
    evidence = doc["verdict"]["evidence"]
    assert evidence["sm_busy"] == pytest.approx(0.9) and evidence["tensor_pipe_busy"] == pytest.approx(0.04)
    (found,) = [f for f in doc["findings"] if f["code"] == "tensor_pipe_idle"]
    assert found["evidence"]["tensor_active_share"] == pytest.approx(0.04)
    (rec,) = [r for r in doc["recommendations"] if r["code"] == "amp"]
    assert rec["est_step_saving"] is None and "autocast" in rec["detail"]  # no saving claimed from counters alone
    shown = text(doc)
    assert "GPU busy 95.0% · SM busy 90.0% · tensor pipe busy 4.0%" in shown  # the verdict's evidence
    assert re.search(r"\b0\s+95\.0%\s+90\.0%\s+4\.0%", shown)  # the live table: util, SM active, tensor


def test_without_the_profiling_fields_they_are_na(gpuscope_home: Path, without_prof: str) -> None:
    doc = attach(without_prof)
    (gpu,) = doc["live"]["gpus"]
    assert gpu["util_mean"] == pytest.approx(UTIL_PCT / 100)
    assert gpu["sm_active_mean"] is None and gpu["tensor_active_mean"] is None and gpu["sm_occupancy_mean"] is None
    evidence = doc["verdict"]["evidence"]
    assert evidence["sm_busy"] is None and evidence["tensor_pipe_busy"] is None
    assert not any(f["code"] == "tensor_pipe_idle" for f in doc["findings"])
    shown = text(doc)
    assert "SM busy n/a · tensor pipe busy n/a" in shown and re.search(r"\b0\s+95\.0%\s+n/a\s+n/a", shown)


def test_a_bad_target_mfu_is_one_line_before_anything_is_sampled(gpuscope_home: Path, with_prof: str) -> None:
    with started(str(SPIN), "30") as target:
        result = CliRunner().invoke(app, ["attach", str(target.pid), "--duration", "1", "--dcgm", with_prof,
                                          "--target-mfu", "45"])
    assert result.exit_code == 2 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line == ("gpuscope: error: --target-mfu must be a fraction of peak above 0 and at most 1, e.g. 0.4 for "
                    "40%, not 45.0 (a percentage? 45% is 0.45)")
