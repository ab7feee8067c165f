"""The shipped price catalog (gpuscope/data/prices.json) and the matching of device names to its entries."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

import msgspec

from gpuscope.model.cost import MigProfile
from gpuscope.model.gpu_names import NameMatch, match_name

GB = 10**9
"""Catalog memory is the vendor's nominal size, in decimal gigabytes."""


class CatalogError(ValueError):
    """The price catalog cannot be read (a broken install, or a broken file under test)."""


class AlternativePrice(msgspec.Struct, frozen=True):
    """Another public list price for the same GPU, kept for reference."""

    usd_per_gpu_hour: float
    source: str
    instance: str | None = None


class CatalogEntry(msgspec.Struct, frozen=True):
    """One GPU model and its on-demand USD per GPU-hour, with where and when the price was read."""

    model: str
    match: tuple[str, ...]
    """Regular expressions over the normalized device name (``gpuscope.model.gpu_names.normalize``): the patterns
    of its spec-table model, so that a name stands for the same GPU in both tables."""
    memory_gb: float
    usd_per_gpu_hour: float | None
    """None: no public list price on record; the cost stays unknown unless the user sets one."""
    source: str | None
    instance: str | None = None
    gpus_per_instance: int | None = None
    date: str | None = None
    url: str | None = None
    checked: str | None = None
    alternatives: tuple[AlternativePrice, ...] = ()
    mig_profiles: tuple[str, ...] = ()
    """The MIG GPU instance profiles NVIDIA lists for this model ("1g.10gb", ..., "7g.80gb"); empty without MIG."""
    spec: str | None = None
    """The GPU spec table's model this entry is (gpuscope/data/gpu_specs.json): what the GPU supports is read
    there, never kept twice."""

    @property
    def memory_bytes(self) -> int:
        return int(self.memory_gb * GB)


class GridDefault(msgspec.Struct, frozen=True):
    """The default carbon intensity of electricity and the publication it comes from."""

    kg_co2_per_kwh: float
    source: str
    url: str | None = None
    date: str | None = None


class Catalog(msgspec.Struct, frozen=True):
    """The whole price catalog, versioned."""

    schema: str
    version: str
    gpus: tuple[CatalogEntry, ...]
    grid: GridDefault
    notes: str = ""
    mig: str = ""
    """Where the MIG profiles come from, and the rule that prices an instance."""


def parse_catalog(data: bytes) -> Catalog:
    """Decode and check a catalog document."""
    try:
        catalog = msgspec.json.decode(data, type=Catalog)
    except msgspec.ValidationError as exc:
        raise CatalogError(f"the price catalog is not valid: {exc}") from exc
    for entry in catalog.gpus:
        if entry.usd_per_gpu_hour is not None and (entry.usd_per_gpu_hour <= 0 or not entry.source):
            raise CatalogError(f"catalog entry {entry.model!r}: a price needs a positive value and a source")
        if any(MigProfile.parse(p) is None for p in entry.mig_profiles):
            raise CatalogError(f"catalog entry {entry.model!r}: a MIG profile is not <slices>g.<GB>gb")
    return catalog


@lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    """The catalog shipped with gpuscope (read once per process)."""
    data = resources.files("gpuscope").joinpath("data/prices.json").read_bytes()
    return parse_catalog(data)


def lookup_model(name: str | None, catalog: Catalog | None = None) -> NameMatch[CatalogEntry]:
    """What a device name (as NVML or a trace's deviceProperties spell it) stands for in the catalog: the entry's
    own name ("A10G", "H100 SXM 80GB"), else the one entry whose patterns match; several where the name could be
    more than one GPU ("NVIDIA H100": SXM, PCIe or NVL), which is never priced as one of them
    (``gpuscope.model.gpu_names``)."""
    return match_name(name, (catalog or load_catalog()).gpus, _model, _patterns)


def match_model(name: str | None, catalog: Catalog | None = None) -> CatalogEntry | None:
    """The one catalog entry a device name stands for; None when it matches none or more than one."""
    return lookup_model(name, catalog).found


def _model(entry: CatalogEntry) -> str:
    return entry.model


def _patterns(entry: CatalogEntry) -> tuple[str, ...]:
    return entry.match
