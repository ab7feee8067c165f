"""Credentials given to `gpuscope fleet` (in the URL, in --header, in a netrc file) reach Prometheus and nowhere else:
not the store (the run's command is saved), not the terminal, the JSON or an error line, not a redirect's target."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from gpuscope.cli.fleet import redact_command
from gpuscope.fleet import Prometheus
from gpuscope.model.redact import redact_url
from gpuscope.net.http import endpoint
from gpuscope.store import Store
from tests import hostile as H
from tests.cli.helpers import gpuscope, one_clean_error_line
from tests.fleet.test_faults import WINDOW, good, server  # noqa: F401 - the fixture

SECRET = "s3cr3t-Pa55"


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def leaks(home: Path, *outputs: str) -> list[str]:
    """Where SECRET shows: any output given, any file under the store (database, WAL, run folders)."""
    found = [f"output {i}" for i, text in enumerate(outputs) if SECRET in text]
    found += [str(p) for p in home.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    return found


def test_url_credentials_are_sent_and_never_saved_or_shown(server: H.Hostile, tmp_path: Path) -> None:  # noqa: F811
    server.behave = good
    url = f"http://ops:{SECRET}@127.0.0.1:{server.port}"
    as_json = gpuscope("fleet", "--prometheus", url, *WINDOW, "--json", home=tmp_path)
    assert as_json.returncode == 0, as_json.stderr
    assert all(r.headers["authorization"] == basic("ops", SECRET) for r in server.requests)
    report = json.loads(as_json.stdout)
    assert report["prometheus_url"] == f"http://127.0.0.1:{server.port}"
    terminal = gpuscope("fleet", f"--prometheus={url}", *WINDOW, home=tmp_path)
    assert terminal.returncode == 0, terminal.stderr
    listed = gpuscope("runs", "--json", home=tmp_path)
    shown = gpuscope("show", report["run_id"], home=tmp_path)
    outputs = [as_json.stdout, as_json.stderr, terminal.stdout, terminal.stderr, listed.stdout, shown.stdout]
    assert leaks(tmp_path, *outputs) == []
    with Store(tmp_path) as store:
        commands = sorted(meta.command for meta in store.list_runs())
    assert commands == [("gpuscope", "fleet", "--prometheus", f"http://***@127.0.0.1:{server.port}", *WINDOW, "--json"),
                        ("gpuscope", "fleet", f"--prometheus=http://***@127.0.0.1:{server.port}", *WINDOW)]


def test_credential_headers_are_sent_and_never_saved(server: H.Hostile, tmp_path: Path) -> None:  # noqa: F811
    server.behave = good
    result = gpuscope("fleet", "--prometheus", server.url, *WINDOW, "--header", f"Authorization: Bearer {SECRET}",
                      f"--header=X-Api-Key: {SECRET}", "--header", "X-Scope-OrgID: gpu-team", home=tmp_path)
    assert result.returncode == 0, result.stderr
    seen = server.requests[0].headers
    assert seen["authorization"] == f"Bearer {SECRET}" and seen["x-api-key"] == SECRET
    assert seen["x-scope-orgid"] == "gpu-team"
    assert leaks(tmp_path, result.stdout, result.stderr) == []
    with Store(tmp_path) as store:
        (meta,) = store.list_runs()
    assert meta.command[-5:] == ("--header", "Authorization: ***", "--header=X-Api-Key: ***", "--header",
                                 "X-Scope-OrgID: gpu-team"), "a header that is no credential is kept as given"


@pytest.mark.parametrize("args", [
    ["--prometheus", f"http://ops:{SECRET}@127.0.0.1:{H.closed_port()}"],
    ["--prometheus", f"ftp://ops:{SECRET}@prometheus:9090"],
    ["--prometheus", f"http://ops:{SECRET}@127.0.0.1:notaport"],
    ["--prometheus", "http://127.0.0.1:9", "--header", f"Bearer {SECRET}"],
])
def test_error_lines_never_show_credentials(tmp_path: Path, args: list[str]) -> None:
    result = gpuscope("fleet", *args, *WINDOW, home=tmp_path)
    assert result.returncode == 2
    assert SECRET not in one_clean_error_line(result) and SECRET not in result.stdout


def test_a_hanging_server_with_credentials_is_one_line_without_them(server: H.Hostile,  # noqa: F811
                                                                     tmp_path: Path) -> None:
    server.behave = lambda r: H.hang
    result = gpuscope("fleet", "--prometheus", f"http://ops:{SECRET}@127.0.0.1:{server.port}", *WINDOW,
                      "--timeout", "1", home=tmp_path)
    line = one_clean_error_line(result)
    assert result.returncode == 2 and "did not answer within 1 s" in line and SECRET not in line


def test_a_netrc_entry_is_the_credential_when_the_url_has_none(server: H.Hostile, tmp_path: Path) -> None:  # noqa: F811
    server.behave = good
    netrc = tmp_path / "netrc"
    netrc.write_text(f"machine 127.0.0.1 login ops password {SECRET}\nmachine elsewhere login x password y\n")
    home = tmp_path / "home"
    result = gpuscope("fleet", "--prometheus", server.url, *WINDOW, home=home, NETRC=str(netrc))
    assert result.returncode == 0, result.stderr
    assert server.requests[-1].headers["authorization"] == basic("ops", SECRET)
    assert leaks(home, result.stdout, result.stderr) == []

    gpuscope("fleet", "--prometheus", f"http://me:mine@127.0.0.1:{server.port}", *WINDOW, home=home,
             NETRC=str(netrc))
    assert server.requests[-1].headers["authorization"] == basic("me", "mine"), "the URL's own comes first"
    gpuscope("fleet", "--prometheus", server.url, *WINDOW, home=home, NETRC=str(netrc),
             GPUSCOPE_PROMETHEUS_TOKEN="t0ken")
    assert server.requests[-1].headers["authorization"] == "Bearer t0ken", "then the token"


def test_credentials_do_not_follow_a_redirect(server: H.Hostile) -> None:  # noqa: F811
    elsewhere = H.Hostile()
    try:
        server.behave = lambda r: H.answer(302, b"", headers={"Location": elsewhere.url + "/api/v1/query_range"})
        client = Prometheus(f"http://ops:{SECRET}@127.0.0.1:{server.port}", timeout_s=10,
                            headers={"X-Api-Key": SECRET})
        client.query_range("up", start_s=1060, end_s=1600, step_s=60)
        assert server.requests[0].headers["authorization"] == basic("ops", SECRET)
        assert elsewhere.requests, "the redirect was followed"
        assert "authorization" not in elsewhere.requests[0].headers
        assert "x-api-key" not in elsewhere.requests[0].headers
    finally:
        elsewhere.close()


@pytest.mark.parametrize(("url", "shown"), [
    (f"http://ops:{SECRET}@prom:9090/", "http://***@prom:9090/"),
    (f"https://{SECRET}@prom/x?dedup=true&api_key={SECRET}", "https://***@prom/x?dedup=true&api_key=***"),
    (f"http://ops:p%40ss{SECRET}@prom:9090", "http://***@prom:9090"),
    ("http://prom:9090/?token=abc&step=1", "http://prom:9090/?token=***&step=1"),
    ("http://prom:9090", "http://prom:9090"),
    (f"http://[bad@{SECRET}", "***"),
])
def test_redacted_urls(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_user_info_becomes_basic_auth_with_escapes_decoded() -> None:
    target = endpoint("http://ops:s%3Acret%40x@prom:9090/p")
    assert (target.url, target.shown) == ("http://prom:9090/p", "http://prom:9090/p")
    assert target.authorization == basic("ops", "s:cret@x")


def test_the_saved_command() -> None:
    assert redact_command(["fleet", "--prometheus", f"ops:{SECRET}@prom:9090", "--header", f"Cookie: id={SECRET}",
                           "--header", "X-Scope-OrgID: t1", "--selector", 'pod="a@b"']) == (
        "fleet", "--prometheus", "***@prom:9090", "--header", "Cookie: ***", "--header", "X-Scope-OrgID: t1",
        "--selector", 'pod="a@b"')
    assert redact_command([f"--prometheus=http://u:{SECRET}@p", f"--header={SECRET}"]) == (
        "--prometheus=http://***@p", "--header=***")
