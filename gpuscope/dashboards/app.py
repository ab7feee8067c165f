"""The Dash app over a run store: ``create_app(store)`` builds it, ``gpuscope dashboard`` serves it.

One router callback maps the URL to a page; pages are plain functions of the store's data. The app
only reads the store; a run that is still recording refreshes its own page (``dcc.Interval``). Every answer
leaves printable (``escape``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import dash
from dash import Input, Output, State, dcc, html
from dash.development.base_component import Component
from dash.exceptions import DependencyException
from flask import Response

from gpuscope.dashboards import compare_page, errors, escape, fleet_page, memory_page, ops_page, run_page, runs_list
from gpuscope.dashboards.auth import check_host, content_security_policy, harden, protect
from gpuscope.dashboards.components import nav
from gpuscope.dashboards.data import RunReader, UnknownRun
from gpuscope.dashboards.style import INDEX_STRING
from gpuscope.store import Store, StoreError


@dataclass(frozen=True)
class MenuPage:
    """A page of its own URL (not one run's): the router serves it and the menu links to it, from this one list."""

    path: str
    label: str
    layout: Callable[[RunReader, str | None], Component]


PAGES: tuple[MenuPage, ...] = (
    MenuPage("/", "Runs", lambda reader, _search: runs_list.layout(reader)),
    MenuPage("/fleet", "Fleet", fleet_page.layout),
    MenuPage("/compare", "Compare", compare_page.layout),
)
"""Every page besides a run's own (``/runs/ID``, ``/runs/ID/ops``, reached from the runs list)."""


def create_app(store: Store, *, token: str | None = None) -> dash.Dash:
    """A Dash app showing ``store``'s runs; with ``token``, every request must carry it."""
    reader = RunReader(store)
    app = dash.Dash(__name__, title="gpuscope", update_title=None,  # type: ignore[arg-type]
                    suppress_callback_exceptions=True,
                    index_string=INDEX_STRING, assets_folder="assets-none", serve_locally=True)
    check_host(app.server)
    if token is not None:
        protect(app.server, token)
    menu = nav([(page.label, page.path) for page in PAGES])
    app.layout = html.Div([dcc.Location(id="url", refresh=False), menu, html.Main(id="page")])
    _routes(app, reader)
    ops_page.add_download_route(app.server, reader)
    escape.install(app.server)
    harden(app.server, content_security_policy(app.csp_hashes()))  # hashes of every inline script, so: last
    errors.install(app.server)
    app.server.register_error_handler(DependencyException, _no_such_file)
    return app


def _no_such_file(_: Exception) -> Response:
    """Dash refuses a script path it did not register (``../`` included) by raising: a 404, not a 500."""
    return Response("gpuscope dashboard: no such file\n", status=404, mimetype="text/plain")


def route(reader: RunReader, pathname: str | None, search: str | None) -> Component:
    """The page for a URL; a store that cannot be read where the page needs it is a line on the page, and so is
    a failure of gpuscope's own (the internal error's one line)."""
    try:
        return _route(reader, pathname, search)
    except StoreError as exc:
        return _store_problem(exc)
    except Exception as exc:  # a bug of ours: said in one line where the page would be, not a blank page
        return _failed(errors.internal_error(exc, f"page {pathname or '/'}"))


def _route(reader: RunReader, pathname: str | None, search: str | None) -> Component:
    path = (pathname or "/").rstrip("/") or "/"
    page = next((p for p in PAGES if p.path == path), None)
    if page is not None:
        return page.layout(reader, search)
    if path.startswith("/runs/") and path.count("/") == 2:
        if fleet_page.is_fleet_run(reader, unquote(path[len("/runs/"):])):  # a fleet run has its own page
            return fleet_page.layout(reader, f"?run={path[len('/runs/'):]}")
        if memory_page.is_memory_run(reader, unquote(path[len("/runs/"):])):  # so has a snapshot's
            return memory_page.layout(reader, unquote(path[len("/runs/"):]))
        try:
            return run_page.layout(reader.load(unquote(path[len("/runs/"):]), samples=False))
        except UnknownRun as exc:
            return _not_found(str(exc))
    if path.startswith("/runs/") and path.endswith("/memory") and path.count("/") == 3:
        try:
            return memory_page.layout(reader, unquote(path[len("/runs/"):-len("/memory")]))
        except UnknownRun as exc:
            return _not_found(str(exc))
    if path.startswith("/runs/") and path.endswith("/ops") and path.count("/") == 3:
        try:
            return ops_page.layout(reader, unquote(path[len("/runs/"):-len("/ops")]))
        except UnknownRun as exc:
            return _not_found(str(exc))
    return _not_found("no such page")


def _run_id(pathname: str | None) -> str:
    return unquote((pathname or "").rsplit("/", 1)[-1])


def _store_problem(exc: StoreError) -> html.Div:
    return html.Div([html.H1("The run store cannot be read"), html.P(str(exc), className="warning",
                                                                    id="store-problem"),
                     dcc.Link("All runs", href="/")], className="page")


def _failed(line: str) -> html.Div:
    return html.Div([html.H1("This page could not be drawn"), html.P(line, className="warning", id="page-error"),
                     dcc.Link("All runs", href="/")], className="page")


def _not_found(reason: str) -> html.Div:
    return html.Div([html.H1("Not found"), html.P(reason, className="absent", id="not-found"),
                     dcc.Link("All runs", href="/")], className="page")


def _routes(app: dash.Dash, reader: RunReader) -> None:
    @app.callback(Output("page", "children"), Input("url", "pathname"), Input("url", "search"))
    def _page(pathname: str | None, search: str | None) -> Component:
        return route(reader, pathname, search)

    @app.callback(Output("run-body", "children"), Output("run-tick", "disabled"),
                  Input("run-tick", "n_intervals"), State("url", "pathname"), prevent_initial_call=True)
    def _live(_: int, pathname: str | None) -> tuple[Any, bool]:
        try:
            data = reader.load(_run_id(pathname), samples=False)
        except (UnknownRun, StoreError) as exc:
            return [html.P(str(exc), className="absent")], True
        return run_page.body(data), data.meta.status != "running"

    @app.callback(Output("run-samples", "children"), Input("run-tick", "n_intervals"), State("url", "pathname"))
    def _samples(_: int | None, pathname: str | None) -> Component:
        try:
            return run_page.sample_charts(reader.load(_run_id(pathname)))
        except (UnknownRun, StoreError) as exc:
            return html.P(str(exc), className="absent")

    @app.callback(Output("runs-table", "rowData"), Output("runs-tick", "disabled"),
                  Input("runs-tick", "n_intervals"), prevent_initial_call=True)
    def _runs(_: int) -> tuple[Any, bool]:
        try:
            rows = runs_list.rows(reader.runs())
        except StoreError:
            return dash.no_update, False  # the page's own warning says why; the table keeps what it showed
        return rows, not any(r["status"] == "running" for r in rows)

    @app.callback(Output("compare-link", "href"), Output("compare-link", "className"),
                  Input("runs-table", "selectedRows"))
    def _compare(selected: list[dict[str, Any]] | None) -> tuple[str, str]:
        return runs_list.compare_href(selected)
