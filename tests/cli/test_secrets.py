"""A password or token given in a trace URL (to `gpuscope memory` too), in a snapshot's file name or in a command
gpuscope runs or attaches to appears in no output, no error line, no report file, no dashboard page and no byte of
the store (its SQLite database and WAL, its run folders): real commands, a real HTTP server on loopback serving a
real trace, a real memory snapshot, real `gpuscope run` and `attach` targets, and the dashboard in headless
Chromium."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuscope.store import Store
from tests import hostile as H
from tests.cli.helpers import gpuscope
from tests.conftest import SAMPLES

URL_PW, URL_TOKEN, URL_SIG = "S3cretPW-4c9f", "tok-7f2e91d0", "sig-a81b33c7"
RUN_PW, RUN_TOKEN, ENV_PW, ATTACH_PW = "hunter2-xyz-991", "tkn-b71c0e55", "envpw-55aa3e1f", "attpw-0d9e7c2b"
SECRETS = (URL_PW, URL_TOKEN, URL_SIG, RUN_PW, RUN_TOKEN, ENV_PW, ATTACH_PW)
TRACE = next((SAMPLES / "h200" / "pageable_h2d").glob("*.json.gz")).read_bytes()  # small, with memory events
SNAPSHOT = SAMPLES / "memory_snapshots" / "cs336_forward_backward_windows.pickle.gz"


@pytest.fixture(scope="module")
def server() -> Iterator[H.Hostile]:
    """Serves the trace at /job/t.json.gz (whatever credentials come with it) and refuses /denied/."""
    s = H.Hostile()
    s.behave = lambda r: H.answer(403, b"no") if r.path.startswith("/denied/") else H.answer(200, TRACE)
    yield s
    s.close()


def url(server: H.Hostile, path: str = "/job/t.json.gz") -> str:
    return f"http://alice:{URL_PW}@127.0.0.1:{server.port}{path}?token={URL_TOKEN}&sig={URL_SIG}"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("home")


@pytest.fixture(scope="module")
def shown(server: H.Hostile, home: Path, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Everything every command printed or wrote, the store filled by them on the way."""
    out = tmp_path_factory.mktemp("out")
    good, denied, closed = url(server), url(server, "/denied/t.json.gz"), url(server)
    closed = closed.replace(str(server.port), str(H.closed_port()))
    runs = [
        ("analyze", good), ("analyze", good, "--json", "--new-run"), ("analyze", denied), ("analyze", closed),
        ("gate", good, "--baseline", good), ("gate", closed, "--baseline", good), ("gate", "nothing", "--baseline",
                                                                                   f"{good}x"),
        ("diff", good, good), ("diff", good, denied), ("report", good, "-o", str(out / "report.html")),
        ("memory", good), ("memory", good, "--json", "--no-save"), ("memory", denied), ("memory", closed),
        ("memory", str(_secret_named_snapshot(out))),
        ("run", "--no-stacks", "--interval", "0.1", "--", "env", f"DB_PASSWORD={ENV_PW}", sys.executable, "-c",
         "import time; time.sleep(0.5)", "--password", RUN_PW, f"--token={RUN_TOKEN}"),
    ]
    texts = [_both(gpuscope(*args, home=home)) for args in runs]
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "--password", ATTACH_PW])
    try:
        texts.append(_both(gpuscope("attach", str(target.pid), "--no-stacks", "--duration", "1", "--interval",
                                    "0.2", home=home)))
    finally:
        target.kill()
        target.wait()
    run_ids = [r["id"] for r in json.loads(gpuscope("runs", "--json", home=home).stdout)]
    texts += [_both(gpuscope("runs", home=home)), _both(gpuscope("runs", "--json", home=home))]
    for run_id in run_ids:
        texts += [_both(gpuscope("show", run_id, home=home)), _both(gpuscope("show", run_id, "--json", home=home)),
                  _both(gpuscope("memory", run_id, home=home))]
    texts.append((out / "report.html").read_text())
    return texts


def _secret_named_snapshot(folder: Path) -> Path:
    """A real memory snapshot under a file name that holds a token (as a name=value word)."""
    path = folder / f"token={RUN_TOKEN}.pickle.gz"
    path.write_bytes(SNAPSHOT.read_bytes())
    return path


def _both(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    return result.stdout + result.stderr


def test_the_commands_did_their_work(shown: list[str], home: Path) -> None:
    with Store(home) as store:
        runs = store.list_runs()
    assert {m.kind for m in runs} == {"trace", "run", "attach", "memory"}
    recorded = next(m for m in runs if m.kind == "run")
    assert recorded.command == ("env", "DB_PASSWORD=***", sys.executable, "-c", "import time; time.sleep(0.5)",
                                "--password", "***", "--token=***")
    attached = next(m for m in runs if m.kind == "attach")
    assert attached.command[-2:] == ("--password", "***")
    assert any("the server refused to serve it (HTTP 403" in text for text in shown)
    assert any("cannot connect: connection refused" in text for text in shown)
    assert any("gpuscope memory trace http://127.0.0.1:" in text and "peak" in text for text in shown)


def test_no_output_error_line_or_report_holds_a_secret(shown: list[str]) -> None:
    for text in shown:
        for secret in SECRETS:
            assert secret not in text, f"{secret} in: {text[:2000]}"


def test_no_byte_of_the_store_holds_a_secret(shown: list[str], home: Path) -> None:
    files = [p for p in home.rglob("*") if p.is_file()]
    assert any(p.name.endswith(".db") or p.suffix == ".sqlite" or "wal" in p.name for p in files), files
    for path in files:
        data = path.read_bytes()
        for secret in SECRETS:
            assert secret.encode() not in data, f"{secret} in {path}"


def test_no_dashboard_page_holds_a_secret(shown: list[str], home: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    from tests.dashboards.browser import CHROMEDRIVER, CHROMIUM, WAIT_S, chromium
    from tests.dashboards.serving import dashboard

    driver, profile = chromium(CHROMIUM, CHROMEDRIVER)
    try:
        with Store(home) as store, dashboard(store) as port:
            ids = [m.id for m in store.list_runs()]
            pages = ["/", *(f"/runs/{run_id}{tail}" for run_id in ids for tail in ("", "/ops", "/memory")),
                     f"/compare?a={ids[0]}&b={ids[-1]}"]
            for page in pages:
                driver.get(f"http://127.0.0.1:{port}{page}")
                WebDriverWait(driver, WAIT_S).until(ec.presence_of_element_located((By.CSS_SELECTOR, "main *")))
                WebDriverWait(driver, WAIT_S).until(lambda d: not d.find_elements(By.CSS_SELECTOR, "._dash-loading"))
                text = driver.page_source + driver.execute_script("return document.body.innerText;")
                for secret in SECRETS:
                    assert secret not in text, f"{secret} on {page}"
    finally:
        driver.quit()
        profile.cleanup()


def test_a_librarys_own_warning_on_the_terminal_is_masked() -> None:
    """botocore and fsspec log without a handler of their own: Python's last-resort handler prints them."""
    code = ("import logging, gpuscope.cli.common; logging.getLogger('botocore.endpoint').warning("
            f"'retrying https://alice:{URL_PW}@h/x?X-Amz-Signature={URL_SIG}')")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stderr.strip() == "retrying https://***@h/x?X-Amz-Signature=***"
