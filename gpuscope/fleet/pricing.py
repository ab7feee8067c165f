"""Prices for a fleet's GPUs: one per GPU model label, resolved with the precedence runs use."""

from __future__ import annotations

from gpuscope.analyzers.advice.gpu_swap import Capabilities
from gpuscope.api.capabilities import gpu_capabilities
from gpuscope.model.cost import Price
from gpuscope.model.fleet import FleetData
from gpuscope.pricing import resolve_price


def fleet_prices(data: FleetData, usd_per_gpu_hour: float | None = None) -> dict[str | None, Price]:
    """Each model label's price (``--usd-per-gpu-hour``, env, config.toml, catalog); raises PriceError or
    CatalogError on a bad setting."""
    models = {g.model for g in data.gpus}
    return {model: resolve_price(model, cli_usd_per_gpu_hour=usd_per_gpu_hour) for model in models}


def fleet_capabilities() -> Capabilities:
    """What each GPU model supports, from the GPU spec table with config.toml's entries (as for runs); raises
    SpecError on a bad entry."""
    return gpu_capabilities()
