"""The gate's TOML settings: defaults, overrides, and one clear line for a bad file."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuscope.gate.config import DEFAULT_THRESHOLDS, METRIC_KEYS, ConfigError, GateConfig, parse_config, read_config


def test_defaults_cover_every_metric() -> None:
    config = GateConfig()
    assert set(config.metrics) == set(METRIC_KEYS) == set(DEFAULT_THRESHOLDS)
    assert config.alpha == 0.01 and config.min_steps == 5 and config.weak == "pass"


def test_overrides_change_only_what_they_name() -> None:
    config = parse_config('alpha = 0.05\nweak = "fail"\n[metrics.step_time]\nthreshold = 0.2\n'
                          '[metrics.gpu_busy]\nenabled = false\n')
    assert config.alpha == 0.05 and config.weak == "fail"
    assert config.metric("step_time").threshold == 0.2 and config.metric("step_time").enabled
    assert not config.metric("gpu_busy").enabled
    assert config.metric("gpu_busy").threshold == DEFAULT_THRESHOLDS["gpu_busy"]


@pytest.mark.parametrize(("text", "words"), [
    ("alpha = 2", "alpha"),
    ("min_steps = 1", "min_steps"),
    ('weak = "maybe"', "weak"),
    ("[metrics.latency]\nthreshold = 0.1", "latency"),
    ("[metrics.step_time]\nthreshold = -0.1", "threshold"),
    ("[metrics.step_time]\nlimit = 0.1", "limit"),
    ("speed = 1", "speed"),
    ("alpha = ", "not valid TOML"),
])
def test_bad_settings_are_refused_by_name(text: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words) as info:
        parse_config(text, source="gate.toml")
    assert "\n" not in str(info.value) and str(info.value).startswith("gate.toml")


def test_the_default_file_is_read_from_the_working_directory(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert read_config(None) == GateConfig()
    (tmp_path / "gpuscope-gate.toml").write_text("min_steps = 8\n")
    assert read_config(None).min_steps == 8
    with pytest.raises(ConfigError, match="cannot be read"):
        read_config(tmp_path / "missing.toml")
