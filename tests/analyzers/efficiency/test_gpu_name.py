"""One GPU model for the whole report: the price, the spec table's peak and MFU's note all take the run's first named
GPU (``RunMeta.gpu_model``), the one the report's run header shows, whatever the trace's device list holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuscope.api.analysis import analyze_path, options_for
from gpuscope.model.gpu import GpuInfo
from gpuscope.model.run import RunMeta
from gpuscope.specs import spec_for
from tests.conftest import SAMPLES

DEV = sorted((SAMPLES / "dev").glob("*.json.gz"))


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUSCOPE_HOME", str(tmp_path / "home"))


def test_the_price_and_the_peak_are_for_the_runs_first_named_gpu() -> None:
    # A pinned device first with no name (what a reader may give for HIP_VISIBLE_DEVICES=9), the named one after.
    meta = RunMeta(id="x", name="x", kind="trace", status="complete", started_ns=0,
                   gpus=(GpuInfo(index=9, name=None), GpuInfo(index=0, name="AMD Instinct MI300X")))
    options = options_for(meta, usd_per_gpu_hour=None, job_hours=None, job_steps=None)
    assert meta.gpu_model == "AMD Instinct MI300X"
    assert options.price is not None and options.price.gpu_model == meta.gpu_model
    assert options.spec is not None and options.spec.model == "MI300X"


@pytest.mark.parametrize("path", DEV, ids=[p.name for p in DEV])
def test_mfu_names_the_gpu_the_report_names(path: Path) -> None:
    report, _ = analyze_path(path, save=False)
    eff = report.efficiency
    if eff is None:
        return  # no host ops to count (a GPU-only trace)
    shown = next((g.model for g in report.run.gpus if g.model), None)
    spec = spec_for(shown)
    note = eff.mfu_note or ""
    if spec is not None:
        assert eff.gpu_model == spec.model and eff.peak_source == spec.source_line
    elif shown is None:
        assert eff.gpu_model is None and (eff.mfu is None) and (
            "names no GPU model" in note or not eff.model_flops_per_step or "record_shapes" in note)
    else:
        assert eff.gpu_model == shown and eff.mfu is None
