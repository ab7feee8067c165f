"""The data model: frozen dataclasses every stage of gpuscope passes to the next."""

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
