"""Which price a run gets: --usd-per-gpu-hour > GPUSCOPE_USD_PER_GPU_HOUR > config.toml > catalog."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuscope.pricing import ENV_GRID, ENV_PRICE, PriceError, load_catalog, resolve_grid, resolve_price

H100 = "NVIDIA H100 80GB HBM3"


def write_config(home: Path, text: str) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "config.toml"
    path.write_text(text)
    return path


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A GPUSCOPE_HOME of the test's own, and no price in the environment."""
    home = tmp_path / "home"
    monkeypatch.setenv("GPUSCOPE_HOME", str(home))
    monkeypatch.delenv(ENV_PRICE, raising=False)
    monkeypatch.delenv(ENV_GRID, raising=False)
    return home


def test_catalog_price_when_nothing_overrides_it(home: Path) -> None:
    price = resolve_price(H100)
    assert price.usd_per_gpu_hour == 6.88
    assert price.source is not None and price.source.startswith("catalog: AWS p5.48xlarge")
    assert price.catalog_model == "H100 SXM 80GB" and price.note is None


def test_each_source_overrides_the_ones_below_it(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = write_config(home, '[prices]\nusd_per_gpu_hour = 2.5\n')
    assert (resolve_price(H100).usd_per_gpu_hour, resolve_price(H100).source) == (2.5, f"config {config} [prices]")

    write_config(home, '[prices]\nusd_per_gpu_hour = 2.5\n[prices.gpus]\n"H100 SXM 80GB" = 3.25\n')
    price = resolve_price(H100)
    assert price.usd_per_gpu_hour == 3.25 and "[prices.gpus] 'H100 SXM 80GB'" in (price.source or "")
    assert resolve_price("Tesla T4").usd_per_gpu_hour == 2.5  # the per-model entry is for H100s only

    monkeypatch.setenv(ENV_PRICE, "4.75")
    price = resolve_price(H100)
    assert (price.usd_per_gpu_hour, price.source) == (4.75, f"env {ENV_PRICE}")

    price = resolve_price(H100, cli_usd_per_gpu_hour=1.0)
    assert (price.usd_per_gpu_hour, price.source) == (1.0, "--usd-per-gpu-hour")


def test_config_prices_a_gpu_by_its_nvml_name_too(home: Path) -> None:
    write_config(home, '[prices.gpus]\n"NVIDIA A100-SXM4-80GB" = 1.8\n')
    assert resolve_price("NVIDIA A100-SXM4-80GB").usd_per_gpu_hour == 1.8
    assert resolve_price("A100 80GB").usd_per_gpu_hour == 1.8  # same catalog entry
    assert resolve_price("NVIDIA A100 80GB PCIe").usd_per_gpu_hour == 3.67  # the PCIe card is an entry of its own
    assert resolve_price("NVIDIA A100-SXM4-40GB").usd_per_gpu_hour == 3.67


def test_explicit_home_and_env_arguments_win_over_the_process_environment(home: Path, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_PRICE, "9")
    other = tmp_path / "other"
    write_config(other, '[prices]\nusd_per_gpu_hour = 0.5\n')
    assert resolve_price(H100, home=other, env={}).usd_per_gpu_hour == 0.5
    assert resolve_price(H100, home=other).usd_per_gpu_hour == 9.0


def test_unknown_gpu_has_no_price_and_says_how_to_set_one(home: Path) -> None:
    price = resolve_price("NVIDIA GeForce RTX 4090")
    assert price.usd_per_gpu_hour is None and price.source is None and price.catalog_model is None
    assert price.note is not None
    for words in ("RTX 4090", "--usd-per-gpu-hour", ENV_PRICE, str(home / "config.toml")):
        assert words in price.note
    listed = resolve_price("NVIDIA H100 PCIe")
    assert listed.usd_per_gpu_hour is None and listed.catalog_model == "H100 PCIe"
    assert listed.note is not None and "no public list price" in listed.note
    nameless = resolve_price(None)
    assert nameless.usd_per_gpu_hour is None and nameless.note is not None and "no GPU model" in nameless.note


def test_a_user_price_prices_an_unknown_gpu(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_PRICE, "1.25")
    price = resolve_price("NVIDIA GeForce RTX 4090")
    assert price.usd_per_gpu_hour == 1.25 and price.note is None


@pytest.mark.parametrize("value", ["abc", "-1", "nan", "inf"])
def test_a_bad_environment_price_is_an_error(home: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(ENV_PRICE, value)
    with pytest.raises(PriceError, match=ENV_PRICE):
        resolve_price(H100)


@pytest.mark.parametrize("text", ['[prices]\nusd_per_gpu_hour = "cheap"\n', "[prices]\nusd_per_gpu_hour = -2\n",
                                  '[prices.gpus]\n"T4" = true\n', "prices = 3\n", "[prices\n"])
def test_a_bad_config_file_is_an_error_naming_the_file(home: Path, text: str) -> None:
    path = write_config(home, text)
    with pytest.raises(PriceError, match=str(path)):
        resolve_price(H100)


def test_a_negative_flag_price_is_an_error(home: Path) -> None:
    with pytest.raises(PriceError, match="--usd-per-gpu-hour"):
        resolve_price(H100, cli_usd_per_gpu_hour=-1.0)


def test_offers_are_the_priced_catalog_with_per_model_config_prices(home: Path) -> None:
    write_config(home, '[prices.gpus]\n"L4" = 0.5\n')
    offers = {o.model: o for o in resolve_price(H100).offers}
    priced = {e.model for e in load_catalog().gpus if e.usd_per_gpu_hour is not None}
    assert set(offers) == priced and "H100 PCIe" not in offers
    assert offers["L4"].usd_per_gpu_hour == 0.5 and offers["L4"].source.startswith("config")
    assert offers["T4"].usd_per_gpu_hour == 0.526 and offers["T4"].memory_bytes == 16 * 10**9


def test_grid_intensity_precedence(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    default = resolve_grid()
    assert default.kg_co2_per_kwh == load_catalog().grid.kg_co2_per_kwh and "Ember" in default.source
    config = write_config(home, "[energy]\ngrid_kg_co2_per_kwh = 0.05\n")
    assert resolve_grid() == type(default)(0.05, f"config {config} [energy]")
    monkeypatch.setenv(ENV_GRID, "0.8")
    assert resolve_grid().kg_co2_per_kwh == 0.8
    monkeypatch.setenv(ENV_GRID, "lots")
    with pytest.raises(PriceError, match=ENV_GRID):
        resolve_grid()
