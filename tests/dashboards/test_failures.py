"""The dashboard's own failures (gpuscope/dashboards/errors.py): a download whose making raises (as a bug would) is
one plain-text line with HTTP 500 naming what was asked and the gpuscope function, with any secret the exception
quotes masked, in the answer and in the server's log; werkzeug's own status pages are one line."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from gpuscope.api.analysis import analyze_path
from gpuscope.dashboards import ops_page
from gpuscope.dashboards.app import create_app
from gpuscope.store import Store
from tests.conftest import SAMPLES

TRACE = SAMPLES / "cpu_checkpoint_outlier"
URL = "https://alice:S3cretPW@store.invalid/t.json?token=T0kenValue42"
SECRETS = ("S3cretPW", "T0kenValue42", "alice")
REPORT_IT = ("This is a bug in gpuscope, not in your data: please report it with this line, `gpuscope --version` and, "
             "if you can share it, the trace.")


@pytest.fixture
def saved(tmp_path: Path) -> tuple[Store, str]:
    """A store holding one analysed trace with profiler steps (so its step downloads exist)."""
    store = Store(tmp_path / "home")
    _, meta = analyze_path(TRACE, save=True, store=store)
    return store, meta.id


def test_a_failing_download_is_one_masked_line_and_so_is_its_log(saved: tuple[Store, str],
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    store, run_id = saved
    client = create_app(store).server.test_client()
    assert client.get(f"/runs/{run_id}/timeline/slowest.json.gz").status_code == 200  # it works, unbroken

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError(f"cannot reach {URL}")

    monkeypatch.setattr(ops_page, "report_step_files", broken)
    path = f"/runs/{run_id}/timeline/slowest.json.gz"
    with caplog.at_level(logging.ERROR):
        answer = client.get(path)
    body = answer.get_data(as_text=True)
    assert answer.status_code == 500 and answer.mimetype == "text/plain"
    assert body == (f"gpuscope dashboard: internal error: the dashboard's answer to {path} failed (RuntimeError: "
                    f"cannot reach https://***@store.invalid/t.json?token=*** in "
                    f"gpuscope.dashboards.ops_page._step_file). {REPORT_IT}\n")
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert body.strip().removeprefix("gpuscope dashboard: ") in logged
    for secret in SECRETS:
        assert secret not in body and secret not in logged


def test_werkzeug_status_pages_are_one_line(saved: tuple[Store, str]) -> None:
    store, run_id = saved
    client = create_app(store).server.test_client()
    for method, path, status, line in (("GET", f"/runs/{run_id}/timeline/fastest.json.gz", 404, "not found"),
                                       ("DELETE", f"/runs/{run_id}/timeline/slowest.json.gz", 405,
                                        "method not allowed")):
        answer = client.open(path, method=method)
        assert (answer.status_code, answer.mimetype) == (status, "text/plain")
        assert answer.get_data(as_text=True) == f"gpuscope dashboard: {line}\n"
