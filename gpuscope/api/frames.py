"""The report as pandas tables: one row per rank and step, per rank and kernel, and the live samples."""

from __future__ import annotations

from dataclasses import fields

import pandas as pd

from gpuscope.model.rank import StepBreakdown
from gpuscope.model.report import Report
from gpuscope.model.schema import SAMPLE_COLUMNS

BREAKDOWN_KEYS = tuple(f.name for f in fields(StepBreakdown))
STEP_COLUMNS = ("rank", "step", "start_us", "duration_us", *(f"{k}_us" for k in BREAKDOWN_KEYS), "gpu_busy",
                "warmup")
KERNEL_COLUMNS = ("rank", "name", "category", "count", "total_us", "mean_us", "share", "tensor_core")
SAMPLE_DTYPES = {"ts_ns": "int64", "source": "object", "gpu": "int64", "pid": "int64", "metric": "object",
                 "value": "float64"}


def steps_frame(report: Report) -> pd.DataFrame:
    """One row per rank and profiler step: its start (µs from the rank's window start), duration and the
    TensorBoard plugin's breakdown in µs, GPU busy (0..1, NaN where unknown) and the warm-up flag."""
    rows = [(rank.rank, s.name, s.start_us, s.duration_us,
             *(getattr(s.breakdown_us, k) for k in BREAKDOWN_KEYS), s.gpu_busy, s.warmup)
            for rank in report.ranks for s in rank.per_step]
    frame = pd.DataFrame.from_records(rows, columns=list(STEP_COLUMNS))
    dtypes = {c: "float64" for c in STEP_COLUMNS[2:-1]}
    return frame.astype({"rank": "int64", "step": "object", **dtypes, "warmup": "bool"})


def kernels_frame(report: Report) -> pd.DataFrame:
    """One row per rank and kernel name among each rank's top kernels by total time (µs); ``share`` is of all
    kernel time on the rank; ``tensor_core`` is NA where the trace cannot tell."""
    rows = [(rank.rank, k.name, k.category, k.count, k.total_us, k.mean_us, k.share, k.tensor_core)
            for rank in report.ranks for k in rank.top_kernels]
    frame = pd.DataFrame.from_records(rows, columns=list(KERNEL_COLUMNS))
    return frame.astype({"rank": "int64", "name": "object", "category": "object", "count": "int64",
                         "total_us": "float64", "mean_us": "float64", "share": "float64", "tensor_core": "boolean"})


def empty_samples() -> pd.DataFrame:
    """The long-format sample table with no rows, typed as the store types it."""
    return pd.DataFrame({c: pd.Series([], dtype=SAMPLE_DTYPES[c]) for c in SAMPLE_COLUMNS})
