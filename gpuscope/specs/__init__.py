"""GPU datasheet figures: the shipped spec table (gpuscope/data/gpu_specs.json) and the user's additions to it, and the
MFU a run is held to (``--target-mfu``, config.toml)."""

from gpuscope.specs.table import (
    SpecError,
    SpecTable,
    load_specs,
    lookup_gpu,
    lookup_spec,
    match_spec,
    parse_table,
    shipped_specs,
    spec_for,
)
from gpuscope.specs.target import DEFAULT_TARGET_MFU, TargetMfu, resolve_target_mfu

__all__ = ["DEFAULT_TARGET_MFU", "SpecError", "SpecTable", "TargetMfu", "load_specs", "lookup_gpu", "lookup_spec",
           "match_spec", "parse_table", "resolve_target_mfu", "shipped_specs", "spec_for"]
