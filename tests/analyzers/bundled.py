"""Every real trace shipped in sample_traces/, analysed once per test session: the cases a rule change must hold on."""

from __future__ import annotations

import tempfile
from functools import cache
from pathlib import Path

from gpuscope.analyzers.report import AnalysisOptions, build_report
from gpuscope.api.analysis import trace_run_meta
from gpuscope.api.capabilities import gpu_capabilities
from gpuscope.model.report import Report
from gpuscope.model.run import Run
from gpuscope.pricing.resolve import first_gpu_model, resolve_price
from gpuscope.traces import load
from tests.conftest import SAMPLES

FOLDERS = ("resnet50_dataloader_bound", "resnet50_workers4", "resnet50_old_schema", "dlrm_8rank",
           "torch_compile_cpu", "cpu_mlp_aa/run_a", "cpu_mlp_aa/run_b", "cpu_checkpoint_outlier")
H200 = tuple(f"h200/{p.name}" for p in sorted((SAMPLES / "h200").iterdir())
             if p.is_dir() and any(p.glob("*.json.gz")))
DEV = tuple(f"dev/{p.name}" for p in sorted((SAMPLES / "dev").glob("*.json.gz")))
ALL = FOLDERS + H200 + DEV
"""Paths under sample_traces/ of every bundled trace (a folder of ranks, or one file)."""


@cache
def bundled_report(name: str) -> Report:
    """The report of one bundled trace, as ``gpuscope analyze`` builds it, priced from the shipped catalog and the
    shipped GPU spec table alone (no config or environment of the machine running the tests)."""
    path: Path = SAMPLES / name
    loaded = load(path)
    meta = trace_run_meta(loaded.traces, name=name)
    home = Path(tempfile.mkdtemp())
    price = resolve_price(first_gpu_model(meta), home=home, env={})
    options = AnalysisOptions(price=price, capabilities=gpu_capabilities(home))
    return build_report(Run(meta=meta, traces=loaded.traces), options, warnings=loaded.warnings)
