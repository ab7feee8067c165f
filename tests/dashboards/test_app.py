"""The dashboard's server side without a browser: routing, id checks, escaping, the token, live top-ups."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest
from dash import html

from gpuscope.dashboards import create_app
from gpuscope.dashboards.app import route
from gpuscope.dashboards.auth import COOKIE, needs_token
from gpuscope.dashboards.compare_page import query_ids
from gpuscope.dashboards.data import RunReader, UnknownRun, summarize, valid_run_id
from gpuscope.dashboards.runs_list import compare_href, row
from gpuscope.format import markdown_text
from gpuscope.model.run import RunMeta
from gpuscope.store import Store
from tests.figures.fixtures import T0_NS, full_report, sample_rows


@pytest.fixture
def store(tmp_path: Path) -> Store:
    store = Store(tmp_path / "home")
    store.create_run(RunMeta(id="20261202-101010-abcdef", name="live", kind="attach", status="running",
                             started_ns=T0_NS))
    return store


def _text(component: object) -> str:
    """All text under a Dash component tree."""
    if isinstance(component, str | int | float):
        return str(component)
    if isinstance(component, list | tuple):
        return " ".join(_text(c) for c in component)
    children = getattr(component, "children", None)
    return "" if children is None else _text(children)


@pytest.mark.parametrize("text", ["../etc/passwd", "a b", "", "x" * 200, "-lead", "a'; DROP TABLE runs;--", None])
def test_run_ids_from_urls_are_checked(text: str | None) -> None:
    assert valid_run_id(text) is None


def test_a_real_id_passes() -> None:
    assert valid_run_id("20261202-101010-abcdef") == "20261202-101010-abcdef"


def test_routes(store: Store) -> None:
    reader = RunReader(store)
    assert "Runs" in _text(route(reader, "/", ""))
    assert "live" in _text(route(reader, "/runs/20261202-101010-abcdef", ""))
    assert "that is not a run id" in _text(route(reader, "/runs/..%2Fx", ""))
    assert "no run with id 20261202-999999-000000" in _text(route(reader, "/runs/20261202-999999-000000", ""))
    assert "no such page" in _text(route(reader, "/runs/a/b", ""))
    assert "Cannot compare" in _text(route(reader, "/compare", "?a=20261202-101010-abcdef"))
    with pytest.raises(UnknownRun):
        reader.meta("20261202-999999-000000")


def test_markdown_escaping_keeps_names_as_text() -> None:
    assert markdown_text("[x](javascript:alert(1)) <b>") == r"\[x\]\(javascript\:alert\(1\)\) \<b\>"
    meta = RunMeta(id="20261202-101010-abcdef", name="*a*", kind="trace", status="complete", started_ns=T0_NS,
                   ended_ns=T0_NS + 2 * 10**9)
    r = row(meta, summarize(full_report()), now_ns=T0_NS)
    assert r["name"] == r"[\*a\*](/runs/20261202-101010-abcdef)"
    assert r["duration_s"] == 2.0 and r["total_usd"] == 6.0 and r["verdict"] == "data loading (I/O)"
    assert row(meta, None, now_ns=T0_NS)["verdict"] == "n/a"


def test_compare_link_needs_exactly_two() -> None:
    assert compare_href([{"id": "b", "name": "x"}, {"id": "a"}]) == ("/compare?a=a&b=b", "")
    assert compare_href([{"id": "a"}]) == ("/compare", "disabled")
    assert compare_href([{"id": "a"}, {"id": "../x"}]) == ("/compare", "disabled")  # not a run id: not linked
    assert compare_href(None) == ("/compare", "disabled")
    assert query_ids("?a=1&b=2&a=3") == ("1", "2")
    assert query_ids(None) == (None, None)


def test_live_run_samples_are_topped_up(store: Store) -> None:
    reader = RunReader(store)
    rows = sample_rows(gpus=1, seconds=20, host=False)
    store.add_samples("20261202-101010-abcdef", rows[: len(rows) // 2])
    first = reader.samples("20261202-101010-abcdef", live=True)
    assert first is not None and len(first) == len(rows) // 2
    store.add_samples("20261202-101010-abcdef", rows[len(rows) // 2:])
    kept = reader.samples("20261202-101010-abcdef", live=False)
    assert kept is not None and len(kept) == len(rows) // 2  # finished: the cache is kept
    topped = reader.samples("20261202-101010-abcdef", live=True)
    assert topped is not None and len(topped) == len(rows)
    assert topped["ts_ns"].is_monotonic_increasing


def test_token_is_required_on_every_request(store: Store) -> None:
    client = create_app(store, token="s3cret").server.test_client()
    assert client.get("/").status_code == 403
    assert client.get("/_dash-layout").status_code == 403
    assert client.get("/?token=wrong").status_code == 403
    assert client.get("/_dash-layout", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    first = client.get("/?token=s3cret")
    assert first.status_code == 200
    cookie = first.headers["Set-Cookie"]
    assert cookie.startswith(f"{COOKIE}=s3cret") and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert client.get("/_dash-layout").status_code == 200  # the cookie now carries it
    assert first.headers["X-Frame-Options"] == "DENY"


def test_no_token_on_loopback(store: Store) -> None:
    assert create_app(store).server.test_client().get("/").status_code == 200
    assert not needs_token("127.0.0.1") and not needs_token("localhost")
    assert needs_token("0.0.0.0") and needs_token("10.1.2.3")


def test_run_page_with_nothing_saved(store: Store) -> None:
    page = route(RunReader(store), "/runs/20261202-101010-abcdef", "")
    text = _text(page)
    assert "Not analysed yet" in text and "Recording" in text
    assert "Verdict" in text
    assert isinstance(page, html.Div)


def test_sample_charts_load_after_the_page(store: Store) -> None:
    from gpuscope.dashboards.run_page import sample_charts

    reader = RunReader(store)
    text = _text(sample_charts(reader.load("20261202-101010-abcdef")))
    assert "GPU timelines: no live samples" in text and "Stack samples: no stack samples" in text
    assert "Step time breakdown: no profiler trace" in text and "Waste by cause: no cost" in text
    store.add_samples("20261202-101010-abcdef", sample_rows(gpus=1, seconds=10))
    charts = sample_charts(reader.load("20261202-101010-abcdef"))
    assert "GPU timelines" not in _text(charts)


def test_an_unreadable_report_is_one_warning_not_a_crash(store: Store) -> None:
    db = sqlite3.connect(store.path)  # a report written by an incompatible version
    with db:
        db.execute("INSERT INTO reports (run_id, created_ns, report) VALUES (?, 0, ?)",
                   ("20261202-101010-abcdef", b'{"schema": "gpuscope.report/1", "run": 3}'))
    db.close()
    reader = RunReader(store)
    view = reader.runs()
    assert view.runs[0][1] is None and "cannot be read" in view.problems[0]
    text = _text(route(reader, "/runs/20261202-101010-abcdef", ""))
    assert "the saved report of run 20261202-101010-abcdef" in text and "cannot be read" in text
    assert "--reanalyze" in text
    same = "?a=20261202-101010-abcdef&b=20261202-101010-abcdef"
    assert "Cannot compare" not in _text(route(reader, "/compare", same))


def test_the_runs_list_decodes_a_saved_report_once_until_it_changes(store: Store,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    ids = [f"20261202-10101{i}-abcdef" for i in range(1, 4)]
    for run_id in ids:
        store.create_run(RunMeta(id=run_id, name=run_id, kind="trace", status="complete", started_ns=T0_NS))
        store.save_report(run_id, full_report(run_id))
    decoded: list[str] = []
    real = store.load_report
    monkeypatch.setattr(store, "load_report", lambda run_id: decoded.append(run_id) or real(run_id))
    reader = RunReader(store)
    for _ in range(3):  # three refreshes of the list
        view = reader.runs()
    assert sorted(decoded) == ids  # the live run has no report: nothing to decode
    assert {m.id: s.verdict if s else None for m, s in view.runs}[ids[0]] == "data loading (I/O)"
    changed = full_report(ids[0])
    # (A verdict that still follows the report's stage shares: one that did not would be withdrawn when read.)
    store.save_report(ids[0], replace(changed, verdict=replace(changed.verdict, resource="cpu")))
    view = reader.runs()
    assert decoded[3:] == [ids[0]]  # only the report written since
    assert {m.id: s.verdict if s else None for m, s in view.runs}[ids[0]] == "data loading (CPU)"


def test_every_page_is_in_the_menu(store: Store) -> None:
    """Each page module of the dashboard whose page has a URL of its own is served and linked from the menu."""
    from gpuscope.dashboards.app import PAGES

    reader = RunReader(store)
    menu = create_app(store).layout.children[1]
    links = [(link.children, link.href) for link in menu.children[1:]]
    assert links == [(p.label, p.path) for p in PAGES] and ("Fleet", "/fleet") in links
    modules = sorted(p.stem.removesuffix("_page") for p in (Path(route.__code__.co_filename).parent).glob("*_page.py"))
    assert modules == ["compare", "fleet", "memory", "ops", "run"]
    for name in modules:  # memory, ops and run are one run's pages (/runs/ID/...), reached from the runs list
        served = "no such page" not in _text(route(reader, f"/{name}", ""))
        assert served == (f"/{name}" in [p.path for p in PAGES]), name
    for label, path in links:
        assert "no such page" not in _text(route(reader, path, "")), label
    assert "Pick two runs" in _text(route(reader, "/compare", ""))
