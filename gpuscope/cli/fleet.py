"""`gpuscope fleet --prometheus URL` or `--demo`: a cluster's GPUs, jobs and waste, from Prometheus (dcgm-exporter)."""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime

import typer

from gpuscope.analyzers.advice.gpu_swap import Capabilities
from gpuscope.cli.common import fail, open_store, write_json
from gpuscope.fleet import (
    FleetData,
    FleetReport,
    Prometheus,
    PrometheusError,
    Thresholds,
    analyze_fleet,
    check_group_by,
    choose_step_s,
    fetch_fleet,
    plan_window,
)
from gpuscope.fleet.demo import demo_data
from gpuscope.fleet.pricing import fleet_capabilities
from gpuscope.fleet.pricing import fleet_prices as resolve_fleet_prices
from gpuscope.fleet.prometheus import MAX_ANSWER_BYTES, PrometheusTimeout
from gpuscope.fleet.saved import load_fleet_data, load_fleet_report, report_json, save_fleet_report, save_fleet_run
from gpuscope.fleet.terminal import render_fleet
from gpuscope.model.cost import Price
from gpuscope.model.redact import MASK
from gpuscope.model.redact import redact_command as redact_cli
from gpuscope.pricing import CatalogError, PriceError
from gpuscope.specs import SpecError
from gpuscope.store import Store

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_UNIT_S = {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def register(app: typer.Typer) -> None:
    app.command("fleet")(fleet)


def fleet(
    prometheus: str | None = typer.Option(None, "--prometheus", help="Base URL of Prometheus (or Thanos, Mimir), "
                                          "e.g. http://prometheus:9090; user:password@ for basic auth (or a netrc "
                                          "entry, or GPUSCOPE_PROMETHEUS_TOKEN)."),
    demo: bool = typer.Option(False, "--demo", help="Replay a real fleet's recorded Prometheus answers (143 serving "
                                                    "pods, 22.8 h) instead of asking a Prometheus."),
    since: str | None = typer.Option(None, "--since", help="Window ending now (or at --end): 30m, 6h, 1d, 1h30m "
                                                           "(default 6h)."),
    start: str | None = typer.Option(None, "--start", help="Window start: ISO 8601 (2026-12-03T08:00Z) or epoch s."),
    end: str | None = typer.Option(None, "--end", help="Window end (default now): ISO 8601 or epoch seconds."),
    step: str | None = typer.Option(None, "--step", help="Bucket length (default: the window / 720, at least 60s); "
                                                         "never below the scrape interval."),
    group_by: str = typer.Option("pod", "--group-by", help="pod, namespace, job, host, gpu, or label=NAME."),
    selector: str = typer.Option("", "--selector", help='PromQL label matchers, e.g. \'namespace="ml"\'.'),
    usd_per_gpu_hour: float | None = typer.Option(None, "--usd-per-gpu-hour", min=0.0,
                                                  help="Price per GPU-hour for every GPU, over the catalog's."),
    idle_below: float = typer.Option(0.05, "--idle-below", min=0.0, max=1.0,
                                     help="A GPU busy under this share (0..1) in a step is idle there."),
    json_out: bool = typer.Option(False, "--json", help="Print the fleet report as JSON."),
    timeout_s: float = typer.Option(60.0, "--timeout", min=0.1,
                                    help="Seconds for the whole command: one deadline for every query to "
                                         "Prometheus together, retries included, not a limit per query."),
    max_answer_mb: float = typer.Option(MAX_ANSWER_BYTES / 2**20, "--max-answer-mb", min=1.0,
                                        help="The most one query's answer may hold, in MiB (uncompressed)."),
    header: list[str] = typer.Option([], "--header", help="An HTTP header for every query, 'Name: value' "
                                                          "(e.g. 'X-Scope-OrgID: tenant' for Mimir); repeatable."),
) -> None:
    """Which jobs hold GPUs and leave them idle, what that costs, and which GPUs could be shared or given back."""
    problem = check_group_by(group_by)
    if problem:
        fail(problem)
    if demo:
        given = [name for name, value in (("--prometheus", prometheus), ("--since", since), ("--start", start),
                                          ("--end", end), ("--step", step), ("--selector", selector or None),
                                          ("--header", header or None)) if value is not None]
        if given:
            fail(f"--demo replays a recorded window: {', '.join(given)} does not apply to it")
        data = demo_data()
    elif prometheus is None:
        fail("give --prometheus URL (the Prometheus that scrapes dcgm-exporter), or try --demo")
    else:
        data = _fetch(prometheus, since=since or "6h", start=start, end=end, step=step, selector=selector,
                      timeout_s=timeout_s, max_answer_mb=max_answer_mb, header=header)
    thresholds = Thresholds(idle_below=idle_below)
    report = analyze_fleet(data, group_by=group_by, prices=fleet_prices(data, usd_per_gpu_hour),
                           thresholds=thresholds, capabilities=_capabilities())
    with open_store() as store:
        _meta, report = save_fleet_run(store, data, report, command=("gpuscope", *redact_command(sys.argv[1:])))
    show_fleet(report, json_out=json_out)


def _fetch(prometheus: str, *, since: str, start: str | None, end: str | None, step: str | None, selector: str,
           timeout_s: float, max_answer_mb: float, header: list[str]) -> FleetData:
    headers = _headers(header)
    end_s = _time_s(end, "--end") if end is not None else time.time()
    start_s = _time_s(start, "--start") if start is not None else end_s - _duration_s(since, "--since")
    step_s = choose_step_s(end_s - start_s, _duration_s(step, "--step") if step is not None else None)
    try:
        client = Prometheus(prometheus, timeout_s=timeout_s, headers=headers,
                            max_answer_bytes=round(max_answer_mb * 2**20))
        return fetch_fleet(client, plan_window(start_s, end_s, step_s), selector)
    except PrometheusTimeout as exc:
        fail(f"{exc}, the --timeout for all of the command's queries together; raise it, or ask for a shorter "
             f"window or a larger --step")
    except PrometheusError as exc:
        fail(str(exc))


def show_fleet(report: FleetReport, *, json_out: bool) -> None:
    if json_out:
        write_json(report_json(report))
    else:
        render_fleet(report, run_id=report.run_id)


def show_saved_fleet(store: Store, run_id: str, *, json_out: bool, reanalyze: bool,
                     usd_per_gpu_hour: float | None = None, group_by: str | None = None) -> None:
    """`gpuscope show` of a fleet run: the saved report, or one computed again from the saved Prometheus answers."""
    report = None if reanalyze else load_fleet_report(store, run_id)
    if report is None:
        data = load_fleet_data(store, run_id)
        old = load_fleet_report(store, run_id)
        report = analyze_fleet(data, group_by=group_by or (old.group_by if old else "pod"),
                               prices=fleet_prices(data, usd_per_gpu_hour),
                               thresholds=old.thresholds if old else Thresholds(), capabilities=_capabilities())
        report = replace(report, run_id=run_id)
        save_fleet_report(store, run_id, report)
    show_fleet(report, json_out=json_out)


def fleet_prices(data: FleetData, usd_per_gpu_hour: float | None) -> dict[str | None, Price]:
    """One resolved price per GPU model label, with the precedence runs use; a bad setting ends in one line."""
    try:
        return resolve_fleet_prices(data, usd_per_gpu_hour)
    except (PriceError, CatalogError) as exc:
        fail(str(exc))


def _capabilities() -> Capabilities:
    """What each GPU model supports (the GPU spec table); a bad [gpu_specs] entry ends in one line."""
    try:
        return fleet_capabilities()
    except SpecError as exc:
        fail(str(exc))


def redact_command(args: Sequence[str]) -> tuple[str, ...]:
    """The command line as it may be saved and shown: ``gpuscope.model.redact``'s rules, and the whole value of a
    --header that is no 'Name: value' line (perhaps a credential pasted alone)."""
    out: list[str] = []
    for i, arg in enumerate(args):
        if (args[i - 1] if i else "") == "--header" and not _header_line(arg):
            arg = MASK
        elif arg.startswith("--header=") and not _header_line(arg.removeprefix("--header=")):
            arg = "--header=" + MASK
        out.append(arg)
    return redact_cli(out)


def _header_line(line: str) -> bool:
    name, sep, _value = line.partition(":")
    return bool(sep) and bool(name.strip()) and " " not in name.strip()


def _headers(lines: list[str]) -> dict[str, str]:
    out = {}
    for line in lines:
        name, sep, value = line.partition(":")
        if not sep or not name.strip() or any(c.isspace() for c in name.strip()):
            # Not echoed: a line without its name may be a credential alone.
            fail("--header: expected 'Name: value' (a name without spaces, a colon, then the value)")
        out[name.strip()] = value.strip()
    return out


def _duration_s(text: str, option: str) -> float:
    """Prometheus-style durations: 90s, 30m, 6h, 1d, 1h30m (a bare number is seconds)."""
    text = text.strip()
    try:
        value = float(text)
    except ValueError:
        parts = _DURATION.findall(text)
        if not parts or "".join(n + u for n, u in parts) != text:
            fail(f"{option}: not a duration: {text!r} (e.g. 90s, 30m, 6h, 1d)")
        value = sum(float(n) * _UNIT_S[u] for n, u in parts)
    if value <= 0:
        fail(f"{option}: must be positive, got {text!r}")
    return value


def _time_s(text: str, option: str) -> float:
    """ISO 8601 (a time without zone is UTC) or seconds since the epoch."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        fail(f"{option}: not a time: {text!r} (ISO 8601 such as 2026-12-03T08:00Z, or epoch seconds)")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()
