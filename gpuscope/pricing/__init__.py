"""GPU prices: the shipped catalog and the user's overrides (placeholder until the cost model lands)."""

from __future__ import annotations

from pathlib import Path

from gpuscope.model.cost import Price


def resolve_price(gpu_model: str | None, *, cli_usd_per_gpu_hour: float | None = None,
                  home: Path | None = None) -> Price:
    if cli_usd_per_gpu_hour is not None:
        return Price(usd_per_gpu_hour=cli_usd_per_gpu_hour, source="--usd-per-gpu-hour", gpu_model=gpu_model)
    return Price(usd_per_gpu_hour=None, source=None, gpu_model=gpu_model)
