"""Pure plotly figure builders over a Report or a Run's samples: one chart, one look, in every view.

Each builder returns a ``plotly.graph_objects.Figure``, or an ``Absent`` with the one-line reason
the run has no data for it, so a view leaves the chart out instead of drawing it empty.
"""

from gpuscope.figures.arrivals import arrival_chart
from gpuscope.figures.base import Absent, ChartResult, safe_text
from gpuscope.figures.cost import CostCard, cost_card, waste_breakdown
from gpuscope.figures.diff import waterfall
from gpuscope.figures.downsample import downsample
from gpuscope.figures.efficiency import EfficiencyCard, efficiency_card, roofline
from gpuscope.figures.kernels import merge_kernels, top_kernels
from gpuscope.figures.stacks import frame_tree, stack_icicle
from gpuscope.figures.steps import compare_breakdown, outlier_names, rank_comparison, step_breakdown
from gpuscope.figures.summary import Delta, compare
from gpuscope.figures.timelines import GPU_TIMELINE_METRICS, HOST_TIMELINE_METRICS, gpu_timelines, host_timelines

__all__ = [
    "GPU_TIMELINE_METRICS", "HOST_TIMELINE_METRICS", "Absent", "ChartResult", "CostCard", "Delta", "EfficiencyCard",
    "arrival_chart", "compare", "compare_breakdown", "cost_card", "downsample", "efficiency_card", "frame_tree",
    "gpu_timelines", "host_timelines", "merge_kernels", "outlier_names", "rank_comparison", "roofline", "safe_text",
    "stack_icicle", "step_breakdown", "top_kernels", "waste_breakdown", "waterfall",
]
