"""Price overrides from config.toml, the environment and --usd-per-gpu-hour: any value ends as a price in range or
one PriceError line, and what fuzzing found to end in a traceback is one line now."""

from __future__ import annotations

import math
import os
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuscope.pricing import ENV_GRID, ENV_PRICE, PriceError, resolve_grid, resolve_price
from gpuscope.pricing.resolve import MAX_GRID_KG_CO2_PER_KWH, MAX_USD_PER_GPU_HOUR
from tests.conftest import load_benchmark

fi = load_benchmark("fuzz_inputs")
H100 = "NVIDIA H100 80GB HBM3"
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                              HealthCheck.function_scoped_fixture])


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUSCOPE_HOME", str(tmp_path))
    monkeypatch.delenv(ENV_PRICE, raising=False)
    monkeypatch.delenv(ENV_GRID, raising=False)
    return tmp_path


@pytest.mark.parametrize(("config", "words"), [
    (b'[prices]\nusd_per_gpu_hour = "\xff"\n', "not UTF-8 text"),  # UnicodeDecodeError before
    (b"x = " + b"[" * 5000 + b"]" * 5000 + b"\n", "nested too deeply"),  # RecursionError before
    (b"[prices]\nusd_per_gpu_hour = " + b"9" * 400 + b"\n", "more than 30 digits"),  # OverflowError before
    (b"[prices.gpus]\n\"A100\" = 1e300\n", "from 0 to 1,000,000"),
    (b"[energy]\ngrid_kg_co2_per_kwh = 1000\n", "from 0 to 100"),
])
def test_what_was_a_traceback_is_one_line(home: Path, config: bytes, words: str) -> None:
    (home / "config.toml").write_bytes(config)
    with pytest.raises(PriceError, match=words) as info:
        resolve_price(H100)
        resolve_grid()
    assert "\n" not in str(info.value) and str(home / "config.toml") in str(info.value)


def test_a_huge_environment_value_is_shown_cut_short(home: Path) -> None:
    with pytest.raises(PriceError) as info:
        resolve_price(H100, env={ENV_PRICE: "9" * 100_000})
    assert len(str(info.value)) < 200


def test_a_config_that_is_a_named_pipe_is_refused_without_blocking(home: Path) -> None:
    os.mkfifo(home / "config.toml")
    with pytest.raises(PriceError, match="not a regular file"):
        resolve_price(H100)


def resolved_or_line(**kwargs: object) -> float | None | str:
    try:
        price = resolve_price(H100, **kwargs).usd_per_gpu_hour  # type: ignore[arg-type]
    except PriceError as exc:
        assert str(exc) and "\n" not in str(exc)
        return str(exc)
    assert price is not None and math.isfinite(price) and 0 <= price <= MAX_USD_PER_GPU_HOUR
    return price


@SETTINGS
@given(value=st.floats() | st.integers(min_value=-(10**400), max_value=10**400))
def test_any_flag_price(home: Path, value: float) -> None:
    outcome = resolved_or_line(cli_usd_per_gpu_hour=value)
    if isinstance(value, float) and math.isfinite(value) and 0 <= value <= MAX_USD_PER_GPU_HOUR:
        assert outcome == value


@SETTINGS
@given(text=st.text(max_size=40) | st.from_regex(r"\A[-+ ]?[0-9]{0,400}(\.[0-9]*)?(e[-+]?[0-9]{1,4})?\Z"))
def test_any_environment_price_and_grid(home: Path, text: str) -> None:
    resolved_or_line(env={ENV_PRICE: text})
    try:
        grid = resolve_grid(env={ENV_GRID: text}).kg_co2_per_kwh
    except PriceError as exc:
        assert "\n" not in str(exc)
    else:
        assert math.isfinite(grid) and 0 <= grid <= MAX_GRID_KG_CO2_PER_KWH


@SETTINGS
@given(rng=st.randoms(use_true_random=False))
def test_any_config_file(home: Path, rng: random.Random) -> None:
    (home / "config.toml").write_bytes(fi.mutated_toml(rng, fi.PRICE_CONFIG))
    resolved_or_line()
    try:
        resolve_grid()
    except PriceError as exc:
        assert "\n" not in str(exc)
