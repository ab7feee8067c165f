"""Explain and price the change between two runs (``gpuscope diff``): the step time's change split into stages,
the kernels and operators that changed, the set-up, and what it costs."""

from gpuscope.changes.explain import DiffOptions, explain

__all__ = ["DiffOptions", "explain"]
