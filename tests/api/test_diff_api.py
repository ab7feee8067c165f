"""`gpuscope.diff` from Python: any way of naming a run, the gate's settings, and one error type."""

from __future__ import annotations

from pathlib import Path

import pytest

import gpuscope
from gpuscope.gate.config import GateConfig, MetricConfig
from gpuscope.model.codec import to_json
from tests.conftest import SAMPLES

BEFORE, AFTER = SAMPLES / "resnet50_workers4", SAMPLES / "resnet50_dataloader_bound"


def test_reports_in_hand_and_paths_give_one_answer(gpuscope_home: Path) -> None:
    a, c = gpuscope.analyze(BEFORE), gpuscope.analyze(AFTER)
    from_reports = gpuscope.diff(a, c)
    from_paths = gpuscope.diff(str(BEFORE), AFTER)
    assert isinstance(from_reports, gpuscope.Diff)
    assert to_json(from_reports.parts) == to_json(from_paths.parts)
    assert from_reports.baseline.name == "resnet50_workers4" and from_reports.candidate.steady_steps == 6
    facts = c.analysis.facts
    assert facts is not None
    assert (from_reports.candidate.gpu_busy, from_reports.candidate.peak_memory_bytes) == \
        (facts.gpu_busy, facts.peak_memory_bytes)  # the facts every view quotes


def test_the_gates_settings_decide_what_is_beyond_noise(gpuscope_home: Path, tmp_path: Path) -> None:
    # Six steady steps a side: past the default min_steps of 5, short of 7.
    assert gpuscope.diff(BEFORE, AFTER).significant is True
    assert gpuscope.diff(BEFORE, AFTER, config=GateConfig(min_steps=7)).significant is None  # too few to test
    four = GateConfig(min_steps=4)
    lenient = GateConfig(min_steps=4, metrics={**GateConfig().metrics, "step_time": MetricConfig(threshold=0.5)})
    d = gpuscope.diff(BEFORE, AFTER, config=lenient)  # +34%, under a 50% threshold
    assert d.significant is False and not [p for p in d.parts if p.significant]
    toml = tmp_path / "gate.toml"
    toml.write_text("min_steps = 4\n[metrics.step_time]\nthreshold = 0.5\n")
    assert gpuscope.diff(BEFORE, AFTER, config=toml).significant is False
    assert gpuscope.diff(BEFORE, AFTER, config=four).significant is True


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"usd_per_gpu_hour": -1.0}, "usd_per_gpu_hour must be 0 or more"),
    ({"hours_per_month": 0.0}, "hours_per_month must be more than 0"),
    ({"config": "no/such/gate.toml"}, "cannot be read"),
])
def test_bad_settings_raise_the_api_error(gpuscope_home: Path, kwargs: dict[str, object], words: str) -> None:
    with pytest.raises(gpuscope.GpuscopeError, match=words):
        gpuscope.diff(BEFORE, AFTER, **kwargs)  # type: ignore[arg-type]


def test_an_unknown_run_raises_the_api_error(gpuscope_home: Path) -> None:
    with pytest.raises(gpuscope.GpuscopeError, match="no/such/run: no such file or folder"):
        gpuscope.diff(BEFORE, "no/such/run")
