"""Pure functions of a Run: per-rank breakdowns, findings, the verdict and the cost.

Analyzers never print, plot, read files or call NVML.
"""
