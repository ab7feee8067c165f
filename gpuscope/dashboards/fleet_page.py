"""The `/fleet` page: a saved fleet run (``?run=ID``, else the newest), with the options of `gpuscope fleet`.

``?group_by=namespace`` (or job, host, gpu, label=NAME) and ``?idle_below=0.1`` regroup the saved Prometheus answers
in the page: the same analysis as the command's, on the same saved data, so the numbers agree with `gpuscope show`.
The page never writes to the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from urllib.parse import parse_qs, quote

from dash import dcc, html
from dash.development.base_component import Component

from gpuscope.dashboards import grid
from gpuscope.dashboards.components import card, chart, kv_table, utc
from gpuscope.dashboards.data import RunReader, UnknownRun, valid_run_id
from gpuscope.dashboards.serving_view import fleet_serving
from gpuscope.figures.fleet import fleet_busy_timeline, group_costs
from gpuscope.fleet import FleetReport, Thresholds, analyze_fleet, check_group_by
from gpuscope.fleet.pricing import fleet_capabilities, fleet_prices
from gpuscope.fleet.saved import load_fleet_data, load_fleet_report
from gpuscope.fleet.terminal import energy, hours, shared_line, sharing
from gpuscope.format import gib, gpu_model, pct, printable_all, usd, without_credentials
from gpuscope.pricing import CatalogError, PriceError
from gpuscope.store import StoreError

_GROUP_BYS = ("pod", "namespace", "job", "host", "gpu")


def is_fleet_run(reader: RunReader, run_id: str) -> bool:
    try:
        return reader.meta(run_id).kind == "fleet"
    except UnknownRun:
        return False


def layout(reader: RunReader, search: str | None) -> html.Div:
    params = parse_qs((search or "").lstrip("?"))
    fleet_runs = [m for m in reader.store.list_runs() if m.kind == "fleet"]
    asked = valid_run_id(_param(params, "run"))
    meta = next((m for m in fleet_runs if m.id == asked), None) if asked else (fleet_runs[0] if fleet_runs else None)
    if meta is None:
        why = f"no fleet run {asked!r} in this store" if asked else "no fleet run yet"
        return _page([html.P(f"{why.capitalize()}: record one with `gpuscope fleet --prometheus URL`.",
                             className="absent", id="no-fleet")])
    try:
        report = _report(reader, meta.id, params)
    except (StoreError, PriceError, CatalogError, ValueError) as exc:
        return _page([html.P(f"Cannot show fleet run {meta.id}: {exc}", className="absent", id="fleet-error")])
    return _page(body(report, meta.id, [m.id for m in fleet_runs]))


def _report(reader: RunReader, run_id: str, params: dict[str, list[str]]) -> FleetReport:
    """The saved report, or the saved data analysed again with the page's options."""
    saved = load_fleet_report(reader.store, run_id)
    group_by, idle_below = _param(params, "group_by"), _param(params, "idle_below")
    if saved is not None and group_by in (None, saved.group_by) and idle_below is None:
        return saved
    if group_by is not None and check_group_by(group_by):
        raise ValueError(check_group_by(group_by))
    thresholds = saved.thresholds if saved is not None else Thresholds()
    if idle_below is not None:
        below = float(idle_below)
        if not 0 <= below <= 1:
            raise ValueError(f"idle_below must be within 0..1, not {idle_below!r}")
        thresholds = replace(thresholds, idle_below=below)
    data = load_fleet_data(reader.store, run_id)
    report = analyze_fleet(data, group_by=group_by or (saved.group_by if saved else "pod"),
                           prices=fleet_prices(data), thresholds=thresholds, capabilities=fleet_capabilities())
    return replace(report, run_id=run_id)


def body(report: FleetReport, run_id: str, others: list[str]) -> list[Component]:
    """The page's parts; every label of the report goes in ``printable``, the Prometheus URL without credentials."""
    report = printable_all(report)
    links = [dcc.Link(g, href=f"/fleet?run={quote(run_id)}&group_by={g}", id=f"group-by-{g}",
                      className="current" if g == report.group_by else "") for g in _GROUP_BYS]
    totals = [("Prometheus", without_credentials(report.prometheus_url)),
              ("selector", report.selector or "(all series)"),
              ("window", f"{utc(report.start_ns)} to {utc(report.end_ns)}, step {report.step_s:g} s"),
              ("GPUs", str(report.gpus)), ("GPU-hours", hours(report.gpu_hours)),
              ("busy", pct(report.busy)), ("cost", usd(report.cost_usd)), ("wasted", usd(report.wasted_usd)),
              ("of which idle", usd(report.idle_usd)), ("energy", energy(report.energy_kwh)),
              ("idle GPUs", str(len(report.idle_gpus)))]
    shared = shared_line(report)
    if shared:
        totals.append(("shared GPUs", shared))
    parts: list[Component] = [
        html.P([f"fleet run {run_id} · group by: ", *_spaced(links)], className="meta"),
        html.Div([card("Fleet", kv_table(totals, table_id="fleet-totals")), _advice(report)], className="row"),
        chart("fleet-busy", fleet_busy_timeline(report), revision=run_id),
        chart("fleet-costs", group_costs(report), revision=f"{run_id}/{report.group_by}"),
        card(f"By {report.group_by}", _groups_table(report)),
    ]
    if report.idle_gpus:
        parts.append(card("Idle GPUs", _idle_table(report)))
    if report.serving:
        parts += fleet_serving(report.serving, revision=run_id)
    parts += [html.P(f"warning: {w}", className="warning") for w in report.warnings]
    if len(others) > 1:
        parts.append(html.P(["Other fleet runs: ", *_spaced([dcc.Link(o, href=f"/fleet?run={quote(o)}")
                                                             for o in others if o != run_id])], className="meta"))
    return parts


def _param(params: dict[str, list[str]], key: str) -> str | None:
    values = params.get(key)
    return values[0] if values else None


def _page(children: list[Component]) -> html.Div:
    return html.Div([html.H1("Fleet"), *children], className="page", id="fleet-page")


def _spaced(items: Sequence[Component]) -> list[Component | str]:
    out: list[Component | str] = []
    for i, item in enumerate(items):
        out += [" · "] if i else []
        out.append(item)
    return out


def _advice(report: FleetReport) -> Component:
    if not report.recommendations:
        return card("What to do", html.P("Nothing to change: no idle, lightly used or oversized GPUs.",
                                         className="dim"))
    items = [html.Li([html.Strong(r.title), f" (saves {usd(r.est_saving_usd)} over the window)"
                      if r.est_saving_usd is not None else "", html.P(r.detail, className="dim")])
             for r in report.recommendations]
    return card("What to do", html.Ol(items, id="fleet-advice"))


def _groups_table(report: FleetReport) -> Component:
    return grid.dict_table("fleet-groups", [
        {report.group_by: g.name, "GPUs": g.gpus, "GPU-h": round(g.gpu_hours, 3), "busy": pct(g.busy),
         "SM active": pct(g.sm_active), "tensor pipes": pct(g.tensor_active), "cost": usd(g.cost_usd),
         "wasted": usd(g.wasted_usd), "idle": usd(g.idle_usd),
         "energy": energy(g.energy_kwh), "peak memory": gib(g.peak_memory_bytes), "GPU kind": sharing(g)}
        for g in report.groups])


def _idle_table(report: FleetReport) -> Component:
    return grid.dict_table("fleet-idle", [
        {"host": i.host or "n/a", "GPU": i.gpu, "model": gpu_model(i.model, i.mig_profile) if i.model else "n/a",
         f"held by ({report.group_by})": i.group,
         "busy": pct(i.busy), "idle": pct(i.idle_share, 0), "GPU-h": round(i.gpu_hours, 3), "cost": usd(i.cost_usd)}
        for i in report.idle_gpus])
