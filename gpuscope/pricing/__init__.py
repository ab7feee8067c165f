"""GPU prices: the shipped catalog (gpuscope/data/prices.json) and the user's overrides."""

from gpuscope.model.gpu_names import normalize
from gpuscope.pricing.catalog import (
    Catalog,
    CatalogEntry,
    CatalogError,
    load_catalog,
    lookup_model,
    match_model,
)
from gpuscope.pricing.resolve import (
    CONFIG_NAME,
    ENV_GRID,
    ENV_PRICE,
    GridIntensity,
    PriceError,
    UserConfig,
    first_gpu_model,
    read_config,
    resolve_grid,
    resolve_price,
)

__all__ = [
    "CONFIG_NAME", "ENV_GRID", "ENV_PRICE", "Catalog", "CatalogEntry", "CatalogError", "GridIntensity", "PriceError",
    "UserConfig", "first_gpu_model", "load_catalog", "lookup_model", "match_model", "normalize", "read_config",
    "resolve_grid", "resolve_price",
]
