"""A fleet run in the store: kind "fleet" in the catalog, and in its folder what Prometheus answered (``fleet.npz``)
and the report computed from it (``fleet_report.json``), so every view, and any later re-analysis, reads the same."""

from __future__ import annotations

import zipfile
import zlib
from dataclasses import replace
from pathlib import Path

import msgspec
import numpy as np

from gpuscope.model.fleet import FleetData, FleetReport, FleetWindow, GpuSeriesInfo
from gpuscope.model.gpu import GpuInfo
from gpuscope.model.run import RunMeta
from gpuscope.model.serving import FleetServingData, PodHistogram, ServingSeriesInfo, SkippedSeries
from gpuscope.store import Store, StoreError, new_run_id

DATA_FILE = "fleet.npz"
REPORT_FILE = "fleet_report.json"


class _Header(msgspec.Struct):
    prometheus_url: str
    selector: str
    window: FleetWindow
    gpus: list[GpuSeriesInfo]
    metrics: list[str]
    warnings: list[str] = []
    serving_pods: list[ServingSeriesInfo] = []
    serving_metrics: list[str] = []
    serving_histograms: list[PodHistogram] = []
    serving_skipped: list[SkippedSeries] = []


def save_fleet_run(store: Store, data: FleetData, report: FleetReport, *, name: str | None = None,
                   command: tuple[str, ...] = ()) -> tuple[RunMeta, FleetReport]:
    """Add a complete fleet run to the catalog and write its data and report (which gets the run's id)."""
    physical = {(g.host, g.gpu): g for g in data.gpus}
    meta = RunMeta(
        id=new_run_id(), name=name or f"fleet {data.prometheus_url}", kind="fleet", status="complete",
        started_ns=data.window.start_ns, ended_ns=data.window.end_ns, command=command,
        gpus=tuple(GpuInfo(index=g.gpu, name=g.model, uuid=g.uuid) for g in physical.values()),
        price_source="; ".join(sorted({s for s in report.price_sources.values() if s})) or None,
        tags={"prometheus": data.prometheus_url, "selector": data.selector, "group_by": report.group_by})
    meta = store.create_run(meta)
    report = replace(report, run_id=meta.id)
    folder = store.run_dir(meta.id)
    serving = data.serving
    header = _Header(prometheus_url=data.prometheus_url, selector=data.selector, window=data.window,
                     gpus=list(data.gpus), metrics=list(data.metrics), warnings=list(data.warnings),
                     serving_pods=list(serving.pods) if serving else [],
                     serving_metrics=list(serving.metrics) if serving else [],
                     serving_histograms=list(serving.histograms) if serving else [],
                     serving_skipped=list(serving.skipped) if serving else [])
    try:
        np.savez(folder / DATA_FILE, header=np.frombuffer(msgspec.json.encode(header), dtype=np.uint8),
                 values=data.values, serving_values=serving.values if serving else np.zeros((0, 0, 0)))
        save_fleet_report(store, meta.id, report)
    except OSError as exc:
        raise StoreError(f"cannot write fleet run {meta.id} to {folder}: {exc}") from exc
    return meta, report


def save_fleet_report(store: Store, run_id: str, report: FleetReport) -> None:
    path = store.run_dir(run_id) / REPORT_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(msgspec.json.encode(report))
    tmp.replace(path)


def load_fleet_data(store: Store, run_id: str) -> FleetData:
    """What Prometheus answered for a saved fleet run; StoreError when the folder lacks it or it is damaged (not an
    archive, or values of another type or shape than its header says)."""
    path = store.home / "runs" / run_id / DATA_FILE
    try:
        with np.load(path, allow_pickle=False) as saved:
            header = msgspec.json.decode(saved["header"].tobytes(), type=_Header)
            values = saved["values"]
            serving_values = saved["serving_values"] if "serving_values" in saved.files else None
        window = header.window
        if window.step_ns <= 0 or window.buckets < 0:
            raise ValueError(f"its window has {window.buckets} buckets of {window.step_ns} ns")
        shape = (len(header.gpus), len(header.metrics), window.buckets)
        if values.dtype.kind != "f" or values.shape != shape:
            raise ValueError(f"its values are {values.dtype} {values.shape}, not float {shape}")
        if header.serving_pods and serving_values is not None:
            shape = (len(header.serving_pods), len(header.serving_metrics), window.buckets)
            if serving_values.dtype.kind != "f" or serving_values.shape != shape:
                raise ValueError(f"its serving values are {serving_values.dtype} {serving_values.shape}, "
                                 f"not float {shape}")
    except (OSError, EOFError, KeyError, ValueError, TypeError, RecursionError, RuntimeError, zipfile.BadZipFile,
            zlib.error, msgspec.DecodeError, msgspec.ValidationError) as exc:  # RuntimeError: zipfile's own
        raise StoreError(f"fleet run {run_id} has no readable data at {path} ({type(exc).__name__}: {exc})") \
            from None
    serving = FleetServingData(pods=tuple(header.serving_pods), metrics=tuple(header.serving_metrics),
                               values=serving_values, histograms=tuple(header.serving_histograms),
                               skipped=tuple(header.serving_skipped)) \
        if header.serving_pods and serving_values is not None else None
    return FleetData(prometheus_url=header.prometheus_url, selector=header.selector, window=header.window,
                     gpus=tuple(header.gpus), metrics=tuple(header.metrics), values=values,
                     warnings=tuple(header.warnings), serving=serving)


def load_fleet_report(store: Store, run_id: str) -> FleetReport | None:
    """The saved report; None when there is none or it was written by an incompatible version."""
    path = _report_path(store, run_id)
    try:
        return msgspec.json.decode(path.read_bytes(), type=FleetReport)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None


def report_json(report: FleetReport) -> bytes:
    return msgspec.json.encode(report)


def _report_path(store: Store, run_id: str) -> Path:
    return store.home / "runs" / run_id / REPORT_FILE
