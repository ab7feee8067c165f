"""Per-rank measurements of a profiler trace: steps, breakdowns, GPU time, kernels, memory, start-up,
collectives and workload. Pure functions of a RankTrace; ``rank.analyze_rank`` gathers them into a RankReport."""
