"""Which price a run is charged at: the user's flag, environment, config file, then the shipped catalog."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from gpuscope.model.cost import GpuOffer, MigProfile, Price
from gpuscope.model.gpu_names import NameMatch, normalize
from gpuscope.model.run import RunMeta
from gpuscope.pricing.catalog import Catalog, CatalogEntry, load_catalog, lookup_model, match_model

ENV_PRICE = "GPUSCOPE_USD_PER_GPU_HOUR"
ENV_GRID = "GPUSCOPE_GRID_KG_CO2_PER_KWH"
CONFIG_NAME = "config.toml"
CLI_SOURCE = "--usd-per-gpu-hour"
MAX_USD_PER_GPU_HOUR = 1e6
"""The most a price may say: list prices are a few dollars; past this is a typo, and costs stay finite."""
MAX_GRID_KG_CO2_PER_KWH = 100.0
"""The dirtiest grids are about 1 kg per kWh; past this is a typo."""
MAX_CONFIG_BYTES = 1 << 20
"""config.toml is a few lines: a larger file is not read."""


class PriceError(ValueError):
    """A price or grid intensity the user set cannot be used (not a number, negative, bad config file)."""


@dataclass(frozen=True)
class UserConfig:
    """The cost settings of ``$GPUSCOPE_HOME/config.toml``.

    ```toml
    [prices]
    usd_per_gpu_hour = 2.10          # every GPU
    [prices.gpus]
    "A100 80GB" = 1.80               # a catalog model, or a device name as NVML spells it
    [energy]
    grid_kg_co2_per_kwh = 0.25
    ```
    """

    path: Path
    usd_per_gpu_hour: float | None = None
    gpu_prices: dict[str, float] = field(default_factory=dict)
    grid_kg_co2_per_kwh: float | None = None


@dataclass(frozen=True)
class GridIntensity:
    """Carbon intensity of the electricity a run used, and where the number came from."""

    kg_co2_per_kwh: float
    source: str


def home_dir(home: Path | None = None) -> Path:
    """``home``, else ``GPUSCOPE_HOME``, else ``~/.gpuscope`` (the run store's folder)."""
    if home is not None:
        return home
    return Path(os.environ.get("GPUSCOPE_HOME") or Path.home() / ".gpuscope")


def read_config(home: Path | None = None) -> UserConfig:
    """The cost settings in ``config.toml`` under the home folder; empty when there is no such file."""
    path = home_dir(home) / CONFIG_NAME
    doc = load_toml(path)
    if doc is None:
        return UserConfig(path=path)
    prices = _table(doc, "prices", path)
    energy = _table(doc, "energy", path)
    gpus = _table(prices, "gpus", path)
    return UserConfig(
        path=path,
        usd_per_gpu_hour=_number(prices.get("usd_per_gpu_hour"), f"{path} [prices] usd_per_gpu_hour"),
        gpu_prices={str(k): _checked(v, f"{path} [prices.gpus] {_shown(k)}") for k, v in gpus.items()},
        grid_kg_co2_per_kwh=_number(energy.get("grid_kg_co2_per_kwh"), f"{path} [energy] grid_kg_co2_per_kwh",
                                    most=MAX_GRID_KG_CO2_PER_KWH),
    )


def load_toml(path: Path) -> dict[str, object] | None:
    """The TOML document at ``path``; None when there is no such file; PriceError when it cannot be used."""
    if not path.exists():
        return None
    if not path.is_file():  # a named pipe would block the read, a device never end
        raise PriceError(f"cannot read {path}: not a regular file")
    try:
        with path.open("rb") as f:
            data = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise PriceError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if len(data) > MAX_CONFIG_BYTES:
        raise PriceError(f"cannot read {path}: more than {MAX_CONFIG_BYTES // 1024} KiB, too large for settings")
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise PriceError(f"cannot read {path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise PriceError(f"cannot read {path}: {exc}") from None
    except RecursionError:
        raise PriceError(f"cannot read {path}: arrays or tables nested too deeply") from None


def resolve_price(gpu_model: str | None, *, cli_usd_per_gpu_hour: float | None = None, home: Path | None = None,
                  env: Mapping[str, str] | None = None, catalog: Catalog | None = None) -> Price:
    """The price per GPU-hour for ``gpu_model``, by precedence: ``--usd-per-gpu-hour``, then the
    ``GPUSCOPE_USD_PER_GPU_HOUR`` environment variable, then ``config.toml`` in ``home``
    (a per-model price before the config's global one), then the shipped catalog.

    An unknown GPU with no user price gets ``usd_per_gpu_hour=None`` and a note saying how to set one; so does a
    name that could be more than one catalog GPU ("NVIDIA H100"): no price is guessed for it.
    """
    env = os.environ if env is None else env
    catalog = catalog or load_catalog()
    config = read_config(home)
    matched = lookup_model(gpu_model, catalog)
    entry = matched.found
    base = Price(usd_per_gpu_hour=None, source=None, gpu_model=gpu_model,
                 catalog_model=entry.model if entry else None, offers=_offers(catalog, config),
                 mig_profiles=tuple(p for p in map(MigProfile.parse, entry.mig_profiles if entry else ())
                                    if p is not None))
    if cli_usd_per_gpu_hour is not None:
        return replace(base, usd_per_gpu_hour=_checked(cli_usd_per_gpu_hour, CLI_SOURCE), source=CLI_SOURCE)
    if env.get(ENV_PRICE, "").strip():
        return replace(base, usd_per_gpu_hour=_parse(env[ENV_PRICE], ENV_PRICE), source=f"env {ENV_PRICE}")
    own = _config_model_price(config, gpu_model, entry, catalog)
    if own is not None:
        return replace(base, usd_per_gpu_hour=own[1], source=f"config {config.path} [prices.gpus] {own[0]!r}")
    if config.usd_per_gpu_hour is not None:
        return replace(base, usd_per_gpu_hour=config.usd_per_gpu_hour, source=f"config {config.path} [prices]")
    if entry is not None and entry.usd_per_gpu_hour is not None:
        return replace(base, usd_per_gpu_hour=entry.usd_per_gpu_hour, source=catalog_source(entry))
    return replace(base, note=unknown_price_note(gpu_model, entry, config.path, matched))


def resolve_grid(*, home: Path | None = None, env: Mapping[str, str] | None = None,
                 catalog: Catalog | None = None) -> GridIntensity:
    """kg CO2 per kWh: ``GPUSCOPE_GRID_KG_CO2_PER_KWH``, then ``[energy]`` in config.toml, then the
    catalog's published world average."""
    env = os.environ if env is None else env
    if env.get(ENV_GRID, "").strip():
        return GridIntensity(_parse(env[ENV_GRID], ENV_GRID, most=MAX_GRID_KG_CO2_PER_KWH), f"env {ENV_GRID}")
    config = read_config(home)
    if config.grid_kg_co2_per_kwh is not None:
        return GridIntensity(config.grid_kg_co2_per_kwh, f"config {config.path} [energy]")
    grid = (catalog or load_catalog()).grid
    return GridIntensity(grid.kg_co2_per_kwh, grid.source)


def catalog_source(entry: CatalogEntry) -> str:
    """How a catalog price is cited: "catalog: <source> (<date>)"."""
    date = f" ({entry.date})" if entry.date else ""
    return f"catalog: {entry.source}{date}"


def unknown_price_note(gpu_model: str | None, entry: CatalogEntry | None, config_path: Path,
                       matched: NameMatch[CatalogEntry] | None = None) -> str:
    """The one line that tells a user how to price a GPU the catalog cannot."""
    if not gpu_model:
        what = "The run recorded no GPU model, so it has no catalog price"
    elif matched is not None and matched.ambiguous:
        what = (f"{gpu_model!r} could be any of {matched.choices_text()} in the price catalog, which differ in "
                "price, so none is guessed")
    elif entry is not None:
        what = f"The catalog has no public list price for {entry.model} ({gpu_model!r})"
    else:
        what = f"{gpu_model!r} is not in the price catalog"
    return (f"{what}: set one with --usd-per-gpu-hour, the {ENV_PRICE} environment variable, or "
            f"[prices] usd_per_gpu_hour in {config_path} (see `gpuscope prices`).")


def _config_model_price(config: UserConfig, gpu_model: str | None, entry: CatalogEntry | None,
                        catalog: Catalog) -> tuple[str, float] | None:
    if not gpu_model:
        return None
    for key, value in config.gpu_prices.items():
        if normalize(key) == normalize(gpu_model):
            return key, value
    if entry is None:
        return None
    for key, value in config.gpu_prices.items():
        if match_model(key, catalog) == entry:
            return key, value
    return None


def _offers(catalog: Catalog, config: UserConfig) -> tuple[GpuOffer, ...]:
    offers = []
    for entry in catalog.gpus:
        own = _config_model_price(config, entry.model, entry, catalog)
        if own is not None:
            offers.append(GpuOffer(entry.model, own[1], entry.memory_bytes, f"config {config.path}"))
        elif entry.usd_per_gpu_hour is not None:
            offers.append(GpuOffer(entry.model, entry.usd_per_gpu_hour, entry.memory_bytes, catalog_source(entry)))
    return tuple(offers)


def _table(doc: Mapping[str, object], key: str, path: Path) -> Mapping[str, object]:
    value = doc.get(key, {})
    if not isinstance(value, Mapping):
        raise PriceError(f"{path}: [{key}] must be a table")
    return value


def _number(value: object, where: str, *, most: float = MAX_USD_PER_GPU_HOUR) -> float | None:
    return None if value is None else _checked(value, where, most=most)


def _checked(value: object, where: str, *, most: float = MAX_USD_PER_GPU_HOUR) -> float:
    # Compared before any conversion: float() of a 400-digit integer raises, and NaN passes every comparison.
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= most:
        raise PriceError(f"{where}: expected a number from 0 to {most:,.0f}, got {_shown(value)}")
    return float(value)


def _parse(text: str, where: str, *, most: float = MAX_USD_PER_GPU_HOUR) -> float:
    try:
        value = float(text)
    except ValueError:
        raise PriceError(f"{where}: expected a number from 0 to {most:,.0f}, got {_shown(text)}") from None
    return _checked(value, where, most=most)


def _shown(value: object) -> str:
    """A value for a one-line message: its repr, cut short (a bad setting may be megabytes, or a 10,000-digit int)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**30:
        return "an integer of more than 30 digits"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def first_gpu_model(meta: RunMeta) -> str | None:
    """The model a run is priced by: its first GPU with a name (``RunMeta.gpu_model``)."""
    return meta.gpu_model
