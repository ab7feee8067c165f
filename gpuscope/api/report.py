"""The report the Python API returns: the analysis, plus pandas views and a Jupyter display."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

import msgspec

from gpuscope.model.across import Arrivals, StragglerRank
from gpuscope.model.codec import to_json
from gpuscope.model.cost import CostReport
from gpuscope.model.diagnosis import Finding, OutlierStep, Recommendation, Stage, Verdict, resource_word
from gpuscope.model.live import LiveSummary
from gpuscope.model.rank import RankReport
from gpuscope.model.report import Report as Analysis
from gpuscope.model.report import RunSummary

if TYPE_CHECKING:
    import pandas as pd


class Report:
    """One run's analysis: what held the GPUs back, what it cost, and what to change.

    The fields are those of ``gpuscope analyze --json`` (``analysis`` is that object, a frozen
    ``gpuscope.model.Report``); the ``*_frame`` methods give the same numbers as pandas tables.
    In Jupyter the report shows its verdict, cost, top recommendations and a step-time bar.
    """

    __slots__ = ("_analysis", "_samples")

    def __init__(self, analysis: Analysis, *, samples: pd.DataFrame | None = None) -> None:
        self._analysis = analysis
        self._samples = samples

    @property
    def analysis(self) -> Analysis:
        """The whole analysis as the frozen model dataclass the store and ``--json`` use."""
        return self._analysis

    @property
    def run(self) -> RunSummary:
        """Which run this is: id, kind (trace | attach | run), name, status, GPUs."""
        return self._analysis.run

    @property
    def verdict(self) -> Verdict:
        """The primary bottleneck stage, its resource, confidence, evidence and a one-sentence summary."""
        return self._analysis.verdict

    @property
    def findings(self) -> tuple[Finding, ...]:
        """Everything the analysis noticed, each with a stable code and the numbers behind it."""
        return self._analysis.findings

    @property
    def recommendations(self) -> tuple[Recommendation, ...]:
        """What to change, largest expected saving first."""
        return self._analysis.recommendations

    @property
    def cost(self) -> CostReport | None:
        """GPU-hours, price, total and wasted dollars (None where no price or GPU-hours are known)."""
        return self._analysis.cost

    @property
    def ranks(self) -> tuple[RankReport, ...]:
        """Per rank of a trace: window, steps, GPU busy, breakdowns, communication, memory, kernels."""
        return self._analysis.ranks

    @property
    def stragglers(self) -> tuple[StragglerRank, ...]:
        """Ranks the others wait for at their collectives, worst first, with cause and price; empty when none
        stands out."""
        return self._analysis.stragglers

    @property
    def arrivals(self) -> Arrivals | None:
        """How the ranks' collectives were matched and when each rank reached them (None for one rank)."""
        return self._analysis.arrivals

    @property
    def live(self) -> LiveSummary | None:
        """What live sampling saw (None for a trace run)."""
        return self._analysis.live

    @property
    def warnings(self) -> tuple[str, ...]:
        """What could not be read or analysed, one line each."""
        return self._analysis.warnings

    @property
    def failed_checks(self) -> tuple[str, ...]:
        """The consistency checks the report failed, by name; their weaker claims are withdrawn (``warnings``)."""
        return self._analysis.failed_checks

    @property
    def stage_shares(self) -> dict[Stage, float | None]:
        """Share of the steady step each stage accounts for, 0..1."""
        return self._analysis.stage_shares

    @property
    def outlier_steps(self) -> tuple[OutlierStep, ...]:
        """The steady steps far longer than the typical one (rank, step, time, stage, cause, extra time and its
        dollars), left out of the step time and the verdict."""
        return self._analysis.outlier_steps

    def to_json(self) -> str:
        """The report as ``gpuscope analyze --json`` prints it (schema ``gpuscope.report/1``)."""
        return to_json(self._analysis).decode()

    def to_dict(self) -> dict[str, Any]:
        """The report as plain dicts and lists, exactly what ``to_json`` encodes."""
        data: dict[str, Any] = msgspec.json.decode(to_json(self._analysis))
        return data

    def steps_frame(self) -> pd.DataFrame:
        """One row per rank and profiler step: ``rank, step, start_us, duration_us``, the step-time breakdown
        (``kernel_us`` ... ``other_us``, which add up to the step), ``gpu_busy`` (0..1) and ``warmup``."""
        from gpuscope.api.frames import steps_frame

        return steps_frame(self._analysis)

    def kernels_frame(self) -> pd.DataFrame:
        """Each rank's top kernels by total time: ``rank, name, category, count, total_us, mean_us, share,
        tensor_core``."""
        from gpuscope.api.frames import kernels_frame

        return kernels_frame(self._analysis)

    def samples_frame(self) -> pd.DataFrame:
        """The live samples in long format (``ts_ns, source, gpu, pid, metric, value``); no rows for a
        trace run. A counter the device could not report is a missing row, never 0."""
        from gpuscope.api.frames import empty_samples

        return empty_samples() if self._samples is None else self._samples.copy()

    def _repr_html_(self) -> str:
        try:
            from gpuscope.api.display import report_html
        except ImportError:  # no plotly (the dashboard extra): the verdict alone
            return f"<p>{html.escape(self.verdict.summary or 'No verdict.')}</p>"
        return report_html(self._analysis)

    def __repr__(self) -> str:
        v = self.verdict
        primary = v.primary or "no verdict"
        return (f"<gpuscope.Report {self.run.kind} run {self.run.id}: {primary} ({resource_word(v)}), "
                f"{len(self.findings)} findings, {len(self.recommendations)} recommendations>")
