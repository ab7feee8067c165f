"""GPU datasheet figures: the shipped spec table (gpuscope/data/gpu_specs.json) and the user's additions to it."""

from gpuscope.specs.table import SpecError, SpecTable, load_specs, match_spec, parse_table, shipped_specs, spec_for

__all__ = ["SpecError", "SpecTable", "load_specs", "match_spec", "parse_table", "shipped_specs", "spec_for"]
