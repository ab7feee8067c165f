"""Pure functions of a Run: per-rank measurements, the verdict and advice, the cost.

- ``trace/``: one rank's trace measured (steps, breakdown, GPU time, kernels, memory, start-up, collectives,
  workload); ``trace.rank.analyze_rank`` gathers them into a RankReport.
- ``diagnosis/``: stage shares, the rules (``rules/``, one module per stage), savings, codes, the verdict.
- ``live.py`` and ``stacks.py``: live samples summarised; ``energy.py`` and ``cost.py``: what the run cost;
  ``report.py``: the Report of a Run, from all of them.

Analyzers never print, plot, read files or call NVML.
"""
