"""Timelines from live samples: per-GPU utilization, SM activity, memory and power; host CPU and I/O.

Every series goes through ``downsample`` (min/max per time bucket), so a day-long 8-GPU run draws
as fast as a minute-long one and its one-second spikes stay visible. The x axis is wall-clock time
(UTC): plotly reads numbers on a date axis as milliseconds since the epoch, which travel as compact
binary arrays instead of date strings.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from gpuscope.figures.base import Absent, ChartResult, gpu_color, styled
from gpuscope.figures.downsample import DEFAULT_BUCKETS, downsample
from gpuscope.model import schema as m

_GIB = float(2**30)
_MB = 1e6


@dataclass(frozen=True)
class _Row:
    """One panel of a timeline figure: which metrics it draws, how, and in which unit."""

    title: str
    metrics: tuple[str, ...]
    scale: float = 1.0
    percent: bool = False


_GPU_ROWS = (
    _Row("Utilization / SM active", (m.GPU_UTIL, m.GPU_SM_ACTIVE), percent=True),
    _Row("Memory used (GiB)", (m.GPU_MEMORY_USED_BYTES,), scale=1 / _GIB),
    _Row("Power (W)", (m.GPU_POWER_W,)),
)
_DASH = {m.GPU_SM_ACTIVE: "dot"}
_SHORT = {m.GPU_UTIL: "util", m.GPU_SM_ACTIVE: "SM active", m.GPU_MEMORY_USED_BYTES: "memory",
          m.GPU_POWER_W: "power"}
GPU_TIMELINE_METRICS = tuple(metric for row in _GPU_ROWS for metric in row.metrics)
"""The sample metrics ``gpu_timelines`` reads (a caller can load only these)."""
HOST_TIMELINE_METRICS = (m.PROC_CPU_CORES, m.PROC_IS_WORKER, m.HOST_CPU, m.HOST_IOWAIT,
                         m.PROC_READ_BYTES_PER_S, m.PROC_WRITE_BYTES_PER_S)
"""The sample metrics ``host_timelines`` reads."""
_HOST_CODE = {metric: code for code, metric in enumerate(HOST_TIMELINE_METRICS)}


def gpu_timelines(samples: pd.DataFrame | None, *, buckets: int = DEFAULT_BUCKETS) -> ChartResult:
    """Per-GPU utilization (and DCGM SM activity where present), memory used and power over the run.

    One line per GPU and metric, one colour per GPU across panels; a panel the run has no data
    for is left out.
    """
    if samples is None or samples.empty:
        return Absent("no live samples in this run (a trace alone has no GPU timelines)")
    series = _gpu_series(samples)
    if not series:
        return Absent("no GPU samples in this run (no NVML or DCGM data was recorded)")
    rows = [row for row in _GPU_ROWS if any(metric in row.metrics for metric, _ in series)]
    fig = _panels(rows)
    legend: set[int] = set()
    for i, row in enumerate(rows, 1):
        for metric in row.metrics:
            for (name, gpu), (ts, values) in series.items():
                if name != metric:
                    continue
                x, y = downsample(ts, values, buckets=buckets)
                index = int(gpu)
                fig.add_trace(_line(x, y * row.scale, color=gpu_color(index), name=f"GPU {index} {_SHORT[metric]}",
                                    group=f"GPU {index}", legend=index not in legend, dash=_DASH.get(metric, "solid"),
                                    percent=row.percent), row=i, col=1)
                legend.add(index)
    fig = _side_legend(styled(fig, title="GPU timelines", height=170 + 190 * len(rows)))
    # One legend entry per GPU: clicking it hides that GPU in every panel.
    for trace in fig.data:
        if trace.showlegend:
            trace.name = trace.legendgroup
    return fig


def host_timelines(samples: pd.DataFrame | None, *, buckets: int = DEFAULT_BUCKETS) -> ChartResult:
    """The target's CPU (main process vs DataLoader workers, in cores), host CPU and iowait, and read/write rates."""
    if samples is None or samples.empty:
        return Absent("no live samples in this run (a trace alone has no host timelines)")
    picked = _select(samples, HOST_TIMELINE_METRICS)
    host = picked[picked["gpu"] == m.NO_GPU]
    panels: list[tuple[_Row, dict[str, pd.Series]]] = []
    cores = _process_cpu(host)
    if cores:
        panels.append((_Row("Process CPU (cores)", ()), cores))
    machine = {label: _series(host, metric) for label, metric in (("host CPU", m.HOST_CPU),
                                                                  ("iowait", m.HOST_IOWAIT))}
    machine = {k: v for k, v in machine.items() if not v.empty}
    if machine:
        panels.append((_Row("Host CPU / iowait", (), percent=True), machine))
    io = {label: _series(host, metric, total=True) / _MB for label, metric in
          (("read", m.PROC_READ_BYTES_PER_S), ("write", m.PROC_WRITE_BYTES_PER_S))}
    io = {k: v for k, v in io.items() if not v.empty}
    if io:
        panels.append((_Row("Process I/O (MB/s)", ()), io))
    if not panels:
        return Absent("no host samples in this run (the host collector did not run)")
    fig = _panels([row for row, _ in panels])
    for i, (row, lines) in enumerate(panels, 1):
        for j, (label, s) in enumerate(lines.items()):
            x, y = downsample(s.index.to_numpy(), s.to_numpy(), buckets=buckets)
            fig.add_trace(_line(x, y, color=gpu_color(j + 3 * (i - 1)), name=label, group=label, legend=True,
                                percent=row.percent), row=i, col=1)
    return _side_legend(styled(fig, title="Host CPU and I/O", height=170 + 170 * len(panels)))


def _process_cpu(host: pd.DataFrame) -> dict[str, pd.Series]:
    """CPU cores of the target's main process(es) and of its DataLoader workers, summed per tick."""
    cpu = host[host["code"] == _HOST_CODE[m.PROC_CPU_CORES]]
    if cpu.empty:
        return {}
    flags = host[host["code"] == _HOST_CODE[m.PROC_IS_WORKER]]
    workers = set(flags.loc[flags["value"] >= 0.5, "pid"].tolist())
    is_worker = cpu["pid"].isin(workers)
    out = {"main process": cpu[~is_worker].groupby("ts_ns")["value"].sum()}
    if is_worker.any():
        out[f"workers ({len(workers)})"] = cpu[is_worker].groupby("ts_ns")["value"].sum()
    return {k: v for k, v in out.items() if not v.empty}


def _series(host: pd.DataFrame, metric: str, *, total: bool = False) -> pd.Series:
    rows = host[host["code"] == _HOST_CODE[metric]]
    if total:
        return rows.groupby("ts_ns")["value"].sum()
    return rows.groupby("ts_ns")["value"].mean()


def _codes(column: pd.Series, metrics: tuple[str, ...]) -> np.ndarray:
    """Each row's metric as its index in ``metrics``, -1 for any other metric.

    A categorical column (what the dashboard caches) maps its few categories, not its rows.
    """
    wanted = pd.Index(list(metrics))
    if isinstance(column.dtype, pd.CategoricalDtype):
        lookup = np.r_[wanted.get_indexer(column.cat.categories), -1]  # code -1 (missing) maps to -1
        return np.asarray(lookup[column.cat.codes.to_numpy()])
    return np.asarray(wanted.get_indexer(column))


def _select(samples: pd.DataFrame, metrics: tuple[str, ...]) -> pd.DataFrame:
    """The rows of ``metrics`` only, with the metric as an integer code into ``metrics``.

    One categorical pass over the metric column, then integer filters and group-bys: string
    comparisons on millions of rows are what made a day-long run slow to draw.
    """
    codes = _codes(samples["metric"], metrics)
    keep = codes >= 0
    return pd.DataFrame({"ts_ns": samples["ts_ns"].to_numpy()[keep], "gpu": samples["gpu"].to_numpy()[keep],
                         "pid": samples["pid"].to_numpy()[keep], "code": codes[keep],
                         "value": samples["value"].to_numpy()[keep]})


_MAX_GPUS = 2048


def _gpu_series(samples: pd.DataFrame) -> dict[tuple[str, int], tuple[np.ndarray, np.ndarray]]:
    """(metric, gpu) -> (ts_ns, value) of the device-wide GPU rows, each in stored (time) order.

    A stable sort on a 16-bit key (metric code x GPU index: numpy sorts it by radix) puts each
    series in one contiguous slice: a handful of passes over millions of rows, where a pandas
    group-by or a mask per series takes dozens.
    """
    codes = _codes(samples["metric"], GPU_TIMELINE_METRICS)
    gpu, pid = samples["gpu"].to_numpy(), samples["pid"].to_numpy()
    rows = np.flatnonzero((codes >= 0) & (gpu >= 0) & (gpu < _MAX_GPUS) & (pid == m.NO_PID))
    if not len(rows):
        return {}
    key = (codes[rows] * _MAX_GPUS + gpu[rows]).astype(np.int16)
    order = np.argsort(key, kind="stable")
    key, rows = key[order], rows[order]
    ts, value = samples["ts_ns"].to_numpy()[rows], samples["value"].to_numpy()[rows]
    starts = np.r_[0, np.flatnonzero(np.diff(key)) + 1]
    ends = np.r_[starts[1:], len(key)]
    return {(GPU_TIMELINE_METRICS[int(key[s]) // _MAX_GPUS], int(key[s]) % _MAX_GPUS): (ts[s:e], value[s:e])
            for s, e in zip(starts.tolist(), ends.tolist(), strict=True)}


def _panels(rows: list[_Row]) -> go.Figure:
    fig = make_subplots(rows=len(rows), cols=1, shared_xaxes=True, vertical_spacing=0.07,
                        subplot_titles=[row.title for row in rows])
    for i, row in enumerate(rows, 1):
        if row.percent:
            fig.update_yaxes(tickformat=".0%", rangemode="tozero", row=i, col=1)
        else:
            fig.update_yaxes(rangemode="tozero", row=i, col=1)
    fig.update_xaxes(type="date")
    fig.update_xaxes(title_text="time (UTC)", row=len(rows), col=1)
    fig.update_layout(hovermode="x unified")
    return fig


def _side_legend(fig: go.Figure) -> go.Figure:
    """Legend down the right edge: above the plot it would cover the first panel's title."""
    fig.update_layout(legend={"orientation": "v", "x": 1.01, "xanchor": "left", "y": 1.0, "yanchor": "top"},
                      margin={"r": 130})
    return fig


def _line(x_ns: np.ndarray, y: np.ndarray, *, color: str, name: str, group: str, legend: bool,
          dash: str = "solid", percent: bool = False) -> go.Scatter:
    value = "%{y:.1%}" if percent else "%{y:.3~f}"
    # float32 halves what travels for y; x stays float64 (ms since the epoch need 41 bits).
    return go.Scatter(x=x_ns / 1e6, y=y.astype(np.float32), mode="lines", name=name, legendgroup=group,
                      showlegend=legend, line={"color": color, "width": 1.2, "dash": dash},
                      hovertemplate=f"{name}: {value}<extra></extra>", connectgaps=False)
