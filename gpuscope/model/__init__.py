"""The data model: frozen dataclasses every stage of gpuscope passes to the next.

Each name is imported from its module on first use, so importing one model module (``gpuscope.model.redact``,
say) does not load them all: a command starts with what it uses."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuscope.model.lazy import lazy_names

if TYPE_CHECKING:
    from gpuscope.model.cost import CostReport, WasteSplit
    from gpuscope.model.diagnosis import STAGES, Finding, Recommendation, Resource, Severity, Stage, Verdict
    from gpuscope.model.gpu import GpuInfo
    from gpuscope.model.live import GpuLive, HostLive, LiveSummary, StackLive
    from gpuscope.model.rank import (
        Communication,
        IdleBreakdown,
        KernelStat,
        LaunchStats,
        Memory,
        RankReport,
        StepBreakdown,
        StepRecord,
        Temporal,
    )
    from gpuscope.model.report import SCHEMA, GpuSummary, Report, RunSummary
    from gpuscope.model.run import Run, RunKind, RunMeta, RunStatus, StackSamples
    from gpuscope.model.trace import Events, Kind, MemoryEvents, RankTrace

__all__ = [
    "SCHEMA", "STAGES", "Communication", "CostReport", "Events", "Finding", "GpuInfo", "GpuLive", "GpuSummary",
    "HostLive", "IdleBreakdown", "KernelStat", "Kind", "LaunchStats", "LiveSummary", "Memory", "MemoryEvents",
    "RankReport", "RankTrace", "Recommendation", "Report", "Resource", "Run", "RunKind", "RunMeta", "RunStatus",
    "RunSummary", "Severity", "StackLive", "StackSamples", "Stage", "StepBreakdown", "StepRecord", "Temporal",
    "Verdict", "WasteSplit",
]

_MODULES: dict[str, str] = {
    "Communication": "gpuscope.model.rank",
    "CostReport": "gpuscope.model.cost",
    "Events": "gpuscope.model.trace",
    "Finding": "gpuscope.model.diagnosis",
    "GpuInfo": "gpuscope.model.gpu",
    "GpuLive": "gpuscope.model.live",
    "GpuSummary": "gpuscope.model.report",
    "HostLive": "gpuscope.model.live",
    "IdleBreakdown": "gpuscope.model.rank",
    "KernelStat": "gpuscope.model.rank",
    "Kind": "gpuscope.model.trace",
    "LaunchStats": "gpuscope.model.rank",
    "LiveSummary": "gpuscope.model.live",
    "Memory": "gpuscope.model.rank",
    "MemoryEvents": "gpuscope.model.trace",
    "RankReport": "gpuscope.model.rank",
    "RankTrace": "gpuscope.model.trace",
    "Recommendation": "gpuscope.model.diagnosis",
    "Report": "gpuscope.model.report",
    "Resource": "gpuscope.model.diagnosis",
    "Run": "gpuscope.model.run",
    "RunKind": "gpuscope.model.run",
    "RunMeta": "gpuscope.model.run",
    "RunStatus": "gpuscope.model.run",
    "RunSummary": "gpuscope.model.report",
    "SCHEMA": "gpuscope.model.report",
    "STAGES": "gpuscope.model.diagnosis",
    "Severity": "gpuscope.model.diagnosis",
    "StackLive": "gpuscope.model.live",
    "StackSamples": "gpuscope.model.run",
    "Stage": "gpuscope.model.diagnosis",
    "StepBreakdown": "gpuscope.model.rank",
    "StepRecord": "gpuscope.model.rank",
    "Temporal": "gpuscope.model.rank",
    "Verdict": "gpuscope.model.diagnosis",
    "WasteSplit": "gpuscope.model.cost",
}
"""Where each name of ``__all__`` lives."""


__getattr__ = lazy_names(__name__, _MODULES)
