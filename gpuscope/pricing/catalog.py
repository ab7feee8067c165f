"""The shipped price catalog (gpuscope/data/prices.json) and the matching of device names to its entries."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import msgspec

from gpuscope.model.cost import MigProfile

GB = 10**9
"""Catalog memory is the vendor's nominal size, in decimal gigabytes."""
_VENDOR_WORDS = frozenset({"nvidia", "tesla", "amd", "instinct", "radeon"})


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
    """Regular expressions over the normalized device name (see :func:`normalize`)."""
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


@dataclass(frozen=True)
class _Compiled:
    entry: CatalogEntry
    patterns: tuple[re.Pattern[str], ...]


def normalize(name: str) -> str:
    """Lower-case a device name, split on '-', '_' and '/', and drop vendor words.

    "NVIDIA A100-SXM4-80GB" -> "a100 sxm4 80gb"; "Tesla V100-DGXS-32GB" -> "v100 dgxs 32gb".
    """
    words = re.split(r"[\s\-_/]+", name.strip().lower())
    return " ".join(w for w in words if w and w not in _VENDOR_WORDS)


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


def _compiled(catalog: Catalog) -> tuple[_Compiled, ...]:
    return tuple(_Compiled(e, tuple(re.compile(p) for p in e.match)) for e in catalog.gpus)


def match_model(name: str | None, catalog: Catalog | None = None) -> CatalogEntry | None:
    """The catalog entry a device name (as NVML or a trace's deviceProperties spell it) stands for.

    The entry's own name matches first ("A10G", "h100 sxm 80gb"); then its patterns, in catalog
    order, so that more specific entries (A100 80GB) are tried before broader ones (A100 40GB).
    """
    if not name or not name.strip():
        return None
    catalog = catalog or load_catalog()
    key = normalize(name)
    for entry in catalog.gpus:
        if normalize(entry.model) == key:
            return entry
    for compiled in _compiled(catalog):
        if any(p.search(key) for p in compiled.patterns):
            return compiled.entry
    return None
