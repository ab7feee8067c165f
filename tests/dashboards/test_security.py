"""The dashboard's HTTP surface, over a real socket: a Content-Security-Policy on every response, nothing written
on GET, no file outside what Dash serves reachable through a run id or a download path, the token beyond loopback.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import sqlite3
from pathlib import Path

import pytest

from gpuscope.dashboards import create_app
from gpuscope.dashboards.auth import content_security_policy
from gpuscope.store import Store
from tests.dashboards.conftest import LIVE_ID, build_store
from tests.dashboards.serving import dashboard


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("dash-security") / "home"
    store, _ = build_store(folder)
    store.close()
    return folder


def get(port: int, path: str, method: str = "GET", body: bytes | None = None,
        headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """One request with ``path`` sent exactly as written (no client-side normalisation of ``..``)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


PAGES = ("/", f"/runs/{LIVE_ID}", "/compare?a=x&b=y", "/fleet", "/nowhere", "/_dash-layout", "/_dash-dependencies",
         "/_favicon.ico", "/_reload-hash", "/assets/x.css", "/static/x.js", f"/runs/{LIVE_ID}?token=anything")
TRAVERSALS = ("/runs/..%2F..%2F..%2Fetc%2Fpasswd", "/runs/../../etc/passwd", "/static/../app.py",
              "/static/..%2fapp.py", "/assets/..%2f..%2fdashboards%2fapp.py", "/assets/../../etc/passwd",
              "/_dash-component-suites/dash/..%2f..%2f..%2fgpuscope%2fdashboards%2fapp.py",
              "/_dash-component-suites/dash/../../../../etc/passwd",
              "/_dash-component-suites/gpuscope/dashboards/app.py",
              "/_dash-component-suites/dash/deps/..%2f..%2f__init__.py", "//etc/passwd", "/%2e%2e/%2e%2e/etc/passwd")


def test_every_response_carries_the_policy(home: Path) -> None:
    with Store(home) as store, dashboard(store) as port:
        answers = [get(port, path) for path in PAGES]
        forged = get(port, "/", headers={"Host": "evil.example"})
        callback = get(port, "/_dash-update-component", "POST", b"{}", {"Content-Type": "application/json"})
    assert forged[0] == 403
    policies = {headers.get("Content-Security-Policy", "") for _, headers, _ in [*answers, forged, callback]}
    assert len(policies) == 1 and "" not in policies
    (text,) = policies
    policy = dict(part.strip().split(" ", 1) for part in text.split(";"))
    assert policy["default-src"] == "'none'" and policy["connect-src"] == "'self'"
    assert policy["frame-ancestors"] == policy["base-uri"] == policy["form-action"] == "'none'"
    scripts = policy["script-src"].split()
    assert scripts[0] == "'self'" and all(s.startswith("'sha256-") for s in scripts[1:])  # no inline, no eval
    assert "unsafe-eval" not in text and "'unsafe-inline'" not in policy["script-src"]


def test_the_hashes_are_of_dashs_own_inline_script(home: Path) -> None:
    """The one inline script Dash writes (its renderer) is what the policy's hash allows, and only it."""
    with Store(home) as store:
        app = create_app(store)
        page = app.server.test_client().get("/").get_data(as_text=True)
    inline = page.split('<script id="_dash-renderer" type="application/javascript">', 1)[1].split("</script>", 1)[0]
    digest = base64.b64encode(hashlib.sha256(inline.encode()).digest()).decode()
    assert content_security_policy([f"'sha256-{digest}'"]) == app.server.test_client().get("/").headers[
        "Content-Security-Policy"]


def _snapshot(home: Path) -> tuple[list[str], list[str]]:
    """The store's rows, as SQL, and its files with their hashes (the database's own files aside)."""
    db = sqlite3.connect(f"file:{home / 'gpuscope.db'}?mode=ro", uri=True)
    try:
        rows = list(db.iterdump())
    finally:
        db.close()
    files = sorted(f"{p.relative_to(home)} {hashlib.sha256(p.read_bytes()).hexdigest()}" for p in home.rglob("*")
                   if p.is_file() and not p.name.startswith("gpuscope.db"))
    return rows, files


def test_no_request_changes_the_store(home: Path) -> None:
    """GETs of every page and route (and a callback) leave every row and file as they were; only Dash's callback
    endpoint takes anything but GET, HEAD and OPTIONS."""
    before = _snapshot(home)
    with Store(home) as store:
        app = create_app(store)
        methods = {rule.rule: rule.methods or set() for rule in app.server.url_map.iter_rules()}
        with dashboard(store) as port:
            for path in PAGES + TRAVERSALS:
                assert get(port, path)[0] in (200, 204, 304, 400, 403, 404), path
            get(port, "/_dash-update-component", "POST", b"{}", {"Content-Type": "application/json"})
    assert _snapshot(home) == before
    writes = {rule for rule, m in methods.items() if m - {"GET", "HEAD", "OPTIONS"}}
    assert writes == {"/_dash-update-component"}


def test_no_path_reaches_a_file_outside_what_dash_serves(home: Path) -> None:
    source = (Path(__file__).resolve().parents[2] / "gpuscope" / "dashboards" / "app.py").read_bytes()
    with Store(home) as store, dashboard(store) as port:
        for path in TRAVERSALS:
            status, headers, body = get(port, path)
            assert b"root:x:0:0" not in body and source[:200] not in body, path
            assert b"def create_app" not in body, path
            assert status == 404 if path.startswith(("/_dash", "/static", "/assets")) else status in (200, 404), path
            if status == 200:  # the page shell: the router then says the id is not a run id
                assert headers["Content-Type"].startswith("text/html"), path


def test_beyond_loopback_nothing_is_served_without_the_token(home: Path) -> None:
    with Store(home) as store, dashboard(store, token="tok-123") as port:
        for path in PAGES + TRAVERSALS:
            status, headers, _ = get(port, path.replace("?token=anything", ""))
            assert status == 403 and "Content-Security-Policy" in headers, path
        assert get(port, "/?token=tok-123")[0] == 200
        assert get(port, "/_dash-layout", headers={"Authorization": "Bearer tok-123"})[0] == 200
