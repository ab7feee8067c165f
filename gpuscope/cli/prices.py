"""`gpuscope prices`: the price catalog, the user's overrides, and which price a GPU would be charged."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import msgspec
import typer
from rich.table import Table
from rich.text import Text

from gpuscope.cli.common import fail, open_store, stdout, write_json
from gpuscope.model.cost import Price
from gpuscope.model.run import RunMeta
from gpuscope.pricing import (
    ENV_GRID,
    ENV_PRICE,
    Catalog,
    CatalogError,
    PriceError,
    first_gpu_model,
    load_catalog,
    lookup_model,
    read_config,
    resolve_grid,
)
from gpuscope.pricing import resolve_price as _resolve_price

if TYPE_CHECKING:  # for the commands that analyse a run (show, report, gate, ops), not for the catalog's listing
    from gpuscope.analyzers.report import AnalysisOptions


def register(app: typer.Typer) -> None:
    app.command("prices")(prices)


def prices(
    run_arg: str | None = typer.Argument(None, metavar="RUN_ID", help="A saved run: show which price it would use."),
    json_out: bool = typer.Option(False, "--json", help="Print the catalog, overrides and resolved price as JSON."),
    gpu: str | None = typer.Option(None, "--gpu", help="A GPU name as NVML spells it, e.g. 'NVIDIA H100 80GB HBM3': "
                                                      "show which price a run on it would use."),
    run_opt: str | None = typer.Option(None, "--run", hidden=True, help="Same as the RUN_ID argument."),
) -> None:
    """Show the GPU price catalog (with sources), the overrides in effect, and the price a GPU or run would get."""
    run_id = run_arg or run_opt
    if gpu is not None and run_id is not None:
        fail("give --gpu or a RUN_ID, not both")
    if run_id is not None:
        with open_store() as store:
            gpu = first_gpu_model(store.get_meta(store.resolve(run_id)))
    elif gpu is not None:
        refuse_ambiguous(gpu)
    try:
        catalog = load_catalog()
        config = read_config()
        grid = resolve_grid()
        resolved = _resolve_price(gpu)  # also checks the env and config settings
    except (PriceError, CatalogError) as exc:
        fail(str(exc))
    asked = gpu is not None or run_id is not None
    env_price = os.environ.get(ENV_PRICE) or None
    if json_out:
        doc: dict[str, Any] = {
            "schema": catalog.schema, "version": catalog.version, "gpus": msgspec.to_builtins(catalog.gpus),
            "grid_default": msgspec.to_builtins(catalog.grid),
            "grid": {"kg_co2_per_kwh": grid.kg_co2_per_kwh, "source": grid.source},
            "overrides": {"env": {ENV_PRICE: env_price, ENV_GRID: os.environ.get(ENV_GRID) or None},
                          "config": str(config.path), "config_exists": config.path.is_file(),
                          "config_usd_per_gpu_hour": config.usd_per_gpu_hour, "config_gpus": config.gpu_prices},
            "resolved": _resolved_json(resolved) if asked else None,
        }
        write_json(msgspec.json.encode(doc))
        return
    if asked:
        stdout.print(_resolved_line(resolved), markup=False)
    else:
        stdout.print(_catalog_table(catalog))
        stdout.print(f"CO2: {grid.kg_co2_per_kwh:g} kg/kWh ({grid.source})", markup=False)
    stdout.print(_overrides_line(env_price, config.path.is_file(), str(config.path)), markup=False, style="dim")


def refuse_ambiguous(gpu: str) -> None:
    """A ``--gpu`` that could be more than one catalog GPU ("H100": SXM, PCIe or NVL) ends the command with the
    choices (exit 2): their prices differ, and none is guessed."""
    try:
        matched = lookup_model(gpu)
    except CatalogError as exc:
        fail(str(exc))
    if matched.ambiguous:
        fail(f"--gpu {gpu!r} could be any of {matched.choices_text()}: name one (e.g. --gpu "
             f"{matched.choices[0]!r})")


def _catalog_table(catalog: Catalog) -> Table:
    table = Table(title=f"GPU prices (catalog {catalog.version}, on-demand list prices)", header_style="bold",
                  box=None)
    for col in ("model", "memory", "USD/GPU-h", "source", "read"):
        table.add_column(col, justify="right" if col in ("memory", "USD/GPU-h") else "left", overflow="fold")
    for e in catalog.gpus:
        table.add_row(e.model, f"{e.memory_gb:g} GB", price_text(e.usd_per_gpu_hour),
                      Text(e.source or "no public list price"), e.date or "")
    return table


def analysis_options(meta: RunMeta, *, usd_per_gpu_hour: float | None = None, job_hours: float | None = None,
                     job_steps: int | None = None, samples_per_step: int | None = None,
                     target_mfu: float | None = None) -> AnalysisOptions:
    """The price (from the run's first named GPU), MFU target and job spec an analysis runs with (the API's); a bad
    setting is a ``GpuscopeError``, one line and exit code 2 from the command line."""
    from gpuscope.api.analysis import options_for

    return options_for(meta, usd_per_gpu_hour=usd_per_gpu_hour, job_hours=job_hours, job_steps=job_steps,
                       samples_per_step=samples_per_step, target_mfu=target_mfu)


def _resolved_json(price: Price) -> dict[str, Any]:
    return {"gpu": price.gpu_model, "catalog_model": price.catalog_model,
            "usd_per_gpu_hour": price.usd_per_gpu_hour, "source": price.source, "note": price.note}


def _overrides_line(env_price: str | None, config_exists: bool, config_path: str) -> str:
    order = f"Precedence: --usd-per-gpu-hour > {ENV_PRICE} > {config_path} > catalog."
    active = []
    if env_price:
        active.append(f"{ENV_PRICE}={env_price} applies to every GPU")
    if config_exists:
        active.append(f"{config_path} is read")
    return order + (" In effect: " + "; ".join(active) + "." if active else " No override in effect.")


def _resolved_line(price: Price) -> str:
    matched = f" (catalog: {price.catalog_model})" if price.catalog_model else " (not in the catalog)"
    name = price.gpu_model or "no GPU model recorded"
    if price.usd_per_gpu_hour is None:
        return f"{name}{matched}: no price. {price.note or ''}"
    return f"{name}{matched}: {price_text(price.usd_per_gpu_hour)}/GPU-h from {price.source}"


def price_text(usd_per_gpu_hour: float | None) -> str:
    """A catalog price to the tenth of a cent, as list prices are quoted ($0.526, not $0.53)."""
    return "n/a" if usd_per_gpu_hour is None else f"${usd_per_gpu_hour:,.3f}"
