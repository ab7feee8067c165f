"""The gate's TOML settings: defaults, overrides, and one clear line for a bad file."""

from __future__ import annotations

import math
import os
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuscope.gate.config import DEFAULT_THRESHOLDS, METRIC_KEYS, ConfigError, GateConfig, parse_config, read_config
from tests.conftest import load_benchmark

fi = load_benchmark("fuzz_inputs")


def test_defaults_cover_every_metric() -> None:
    config = GateConfig()
    assert set(config.metrics) == set(METRIC_KEYS) == set(DEFAULT_THRESHOLDS)
    assert config.alpha == 0.01 and config.min_steps == 5
    assert config.weak == "fail" and parse_config("").weak == "fail"  # too few steps to test fails closed


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
    ("[metrics.step_time]\nthreshold = inf", "threshold"),  # would turn the metric off without saying so
    ("[metrics.step_time]\nthreshold = 101", "threshold"),
    ("min_steps = 99999999999999999999", "min_steps"),
    ("x = " + "[" * 5000 + "]" * 5000, "nested too deeply"),  # a RecursionError traceback before
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


def test_a_file_that_is_not_utf8_text_or_too_large_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "gate.toml"
    bad.write_bytes(b'weak = "\xff\xfe"\n')
    with pytest.raises(ConfigError, match=r"gate.toml: cannot be read: 'utf-8' codec"):
        read_config(bad)
    bad.write_bytes(b"# padding\n" * 200_000)
    with pytest.raises(ConfigError, match="more than 1024 KiB"):
        read_config(bad)


def test_a_named_pipe_as_the_config_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "gate.toml"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="not a regular file"):
        read_config(fifo)  # an open() would wait for a writer forever


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rng=st.randoms(use_true_random=False))
def test_any_config_text_is_settings_in_range_or_one_line(rng: random.Random) -> None:
    """Mutated and generated TOML (benchmarks/fuzz_inputs.py): settings within their stated ranges, or one line."""
    try:
        config = parse_config(fi.mutated_toml(rng, fi.GATE_CONFIG).decode("utf-8", "replace"), source="gate.toml")
    except ConfigError as exc:
        assert str(exc).startswith("gate.toml: ") and "\n" not in str(exc)
        return
    assert 0 < config.alpha < 1 and 2 <= config.min_steps <= 1_000_000 and config.weak in ("pass", "fail")
    assert all(0 <= m.threshold <= 100 and math.isfinite(m.threshold) for m in config.metrics.values())
