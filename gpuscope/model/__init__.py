"""The data model: frozen dataclasses every stage of gpuscope passes to the next."""

from gpuscope.model.gpu import GpuInfo
from gpuscope.model.report import (
    SCHEMA,
    STAGES,
    Communication,
    CostReport,
    Finding,
    GpuLive,
    GpuSummary,
    HostLive,
    IdleBreakdown,
    KernelStat,
    LaunchStats,
    LiveSummary,
    Memory,
    RankReport,
    Recommendation,
    Report,
    Resource,
    RunSummary,
    Severity,
    StackLive,
    Stage,
    StepBreakdown,
    StepRecord,
    Temporal,
    Verdict,
    WasteSplit,
)
from gpuscope.model.run import Run, RunKind, RunMeta, RunStatus, StackSamples
from gpuscope.model.trace import Events, Kind, MemoryEvents, RankTrace

__all__ = [
    "SCHEMA", "STAGES", "Communication", "CostReport", "Events", "Finding", "GpuInfo", "GpuLive", "GpuSummary",
    "HostLive", "IdleBreakdown", "KernelStat", "Kind", "LaunchStats", "LiveSummary", "Memory", "MemoryEvents",
    "RankReport", "RankTrace", "Recommendation", "Report", "Resource", "Run", "RunKind", "RunMeta", "RunStatus",
    "RunSummary", "Severity", "StackLive", "StackSamples", "Stage", "StepBreakdown", "StepRecord", "Temporal",
    "Verdict", "WasteSplit",
]
