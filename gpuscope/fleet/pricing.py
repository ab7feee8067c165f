"""Prices for a fleet's GPUs: one per GPU model label, resolved with the precedence runs use."""

from __future__ import annotations

from gpuscope.model.cost import Price
from gpuscope.model.fleet import FleetData
from gpuscope.pricing import resolve_price


def fleet_prices(data: FleetData, usd_per_gpu_hour: float | None = None) -> dict[str | None, Price]:
    """Each model label's price (``--usd-per-gpu-hour``, env, config.toml, catalog); raises PriceError or
    CatalogError on a bad setting."""
    models = {g.model for g in data.gpus}
    return {model: resolve_price(model, cli_usd_per_gpu_hour=usd_per_gpu_hour) for model in models}
