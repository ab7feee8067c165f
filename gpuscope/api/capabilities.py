"""What each GPU supports (bf16, fp8, TF32, FlashAttention), from the GPU spec table, for the advice that moves a
job to another GPU (``analyzers.advice.gpu_swap``). Read here, where files may be: the analyzers are handed the
function, as they are the price."""

from __future__ import annotations

from pathlib import Path

from gpuscope.analyzers.advice.gpu_swap import Capabilities, capabilities_from
from gpuscope.model.gpu_spec import GpuSpec
from gpuscope.pricing import load_catalog, match_model
from gpuscope.specs import load_specs, match_spec


def gpu_capabilities(home: Path | None = None) -> Capabilities:
    """Capabilities by device name ("NVIDIA A100 80GB PCIe") or price-catalog model ("A100 80GB", whose entry names
    its spec-table model); the user's [gpu_specs] in config.toml included. Raises SpecError for a bad entry."""
    table = load_specs(home)
    catalog = load_catalog()

    def lookup(name: str) -> GpuSpec | None:
        spec = match_spec(name, table)
        if spec is None:
            entry = match_model(name, catalog)
            spec = match_spec(entry.spec, table) if entry is not None and entry.spec else None
        return spec
    return capabilities_from(lookup)
