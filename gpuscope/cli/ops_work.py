"""The useful-work side of `gpuscope ops`: each operator's FLOPs and roofline, each rank's kernel families, and the
run's MFU, from the same report `gpuscope analyze` (or the saved run) gives, so the figures agree to the digit."""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpuscope.analyzers.efficiency.ceiling import peak_suspected
from gpuscope.analyzers.efficiency.opwork import op_work
from gpuscope.analyzers.efficiency.run import family_roofline
from gpuscope.analyzers.ranks import summarize_rank
from gpuscope.analyzers.report import build_report
from gpuscope.analyzers.trace.ops import OpTable, operator_table
from gpuscope.analyzers.trace.optree import call_tree
from gpuscope.api.analysis import trace_run_meta
from gpuscope.api.errors import GpuscopeError
from gpuscope.cli.common import fail, open_store
from gpuscope.cli.prices import analysis_options
from gpuscope.cli.trace_target import Target
from gpuscope.model.efficiency import Efficiency
from gpuscope.model.gpu_spec import GpuSpec
from gpuscope.model.rank import RankReport
from gpuscope.model.run import Run


@dataclass(frozen=True)
class RunWork:
    """What the operator tables are measured against: the run's efficiency (MFU, peak, or why there is none),
    its GPU's spec, and each rank's report (its kernel families)."""

    efficiency: Efficiency | None
    spec: GpuSpec | None
    ranks: dict[int, RankReport]


def run_work(target: Target) -> RunWork:
    """The saved run's report (analysed now when it has none), or the trace analysed as `gpuscope analyze` would
    (not saved)."""
    try:
        if target.run_id is not None:
            with open_store() as store:
                meta = store.get_meta(target.run_id)
                options = analysis_options(meta)
                report = store.load_report(target.run_id)
                if report is None or report.efficiency is None:
                    report = build_report(store.load_run(target.run_id), options)
        else:
            meta = trace_run_meta(target.every_rank, name=target.label)
            options = analysis_options(meta)
            report = build_report(Run(meta=meta), options, ranks=[summarize_rank(t) for t in target.every_rank])
    except GpuscopeError as exc:
        fail(str(exc))
    return RunWork(efficiency=report.efficiency, spec=options.spec, ranks={r.rank: r for r in report.ranks})


def rank_tables(target: Target, work: RunWork) -> list[OpTable]:
    """Each chosen rank's operator table, each operator with its counted work, the rank with its families."""
    tables = []
    eff = work.efficiency
    for trace in target.traces:
        tree = call_tree(trace)
        table = operator_table(trace, tree=tree)
        suspect = eff is not None and peak_suspected(eff.above_ceiling)
        per_op = op_work(trace, tree, work.spec, suspect_peak=suspect)
        rank = work.ranks.get(trace.rank)
        families = (family_roofline([rank.efficiency], work.spec, eff.peak_dtype, max(rank.gpu_count, 1),
                                    suspect_peak=suspect)
                    if eff is not None and rank is not None and rank.efficiency is not None else ())
        tables.append(replace(table, families=families,
                              ops=tuple(replace(o, efficiency=per_op.get(o.name)) for o in table.ops)))
    return tables
