"""The GPU spec table: the shipped one (gpuscope/data/gpu_specs.json) with the user's entries from
``$GPUSCOPE_HOME/config.toml`` over it, and the lookup of a device name in it.

```toml
[gpu_specs."H100 SXM"]          # a shipped model (or a device name that matches one): the fields given replace its own
peak_tflops = { bf16 = 900 }    # e.g. a clock-limited part; the other rates stay the datasheet's

[gpu_specs."RTX 6000 Ada"]      # a model the table lacks
match = ["rtx 6000 ada"]        # regexes over the normalized device name (as in the price catalog)
vendor = "nvidia"
memory_gb = 48
memory_bandwidth_gb_s = 960
peak_tflops = { fp32 = 91.1, tf32 = 182.1, bf16 = 364.2, fp16 = 364.2, fp8 = 728.5 }
source = "NVIDIA RTX 6000 Ada datasheet"
```

The lookup happens here, where files may be read: the API resolves a run's spec and passes it to the analyzers, as
it does the price, so analyzers stay pure functions of what they are given.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Literal, TypeVar

import msgspec

from gpuscope.model.gpu_names import NameMatch, match_name, normalize
from gpuscope.model.gpu_spec import DTYPES, GpuSpec, PeakTflops
from gpuscope.pricing.catalog import load_catalog
from gpuscope.pricing.resolve import CONFIG_NAME, PriceError, home_dir, load_toml

T = TypeVar("T")
SCHEMA = "gpuscope.gpu_specs/1"
MAX_TFLOPS = 1e6
"""The largest peak an entry may give: today's GPUs reach about 10,000 TFLOP/s; past this is a typo."""


class SpecError(ValueError):
    """The spec table, or a [gpu_specs] entry in config.toml, cannot be used (one line for the user)."""


@dataclass(frozen=True)
class SpecTable:
    """The spec table in force: shipped entries, with the user's config entries before them."""

    schema: str
    version: str
    gpus: tuple[GpuSpec, ...]
    notes: str = ""
    config_path: Path | None = None
    """The config.toml whose [gpu_specs] were read in; None for the shipped table alone."""
    own: tuple[str, ...] = ()
    """The models of the config's entries: where a name matches one of them and shipped ones, the user's wins."""


class _Doc(msgspec.Struct, frozen=True):
    schema: str
    version: str
    gpus: tuple[GpuSpec, ...]
    notes: str = ""


class _UserPeaks(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    fp64: float | None = None
    fp32: float | None = None
    tf32: float | None = None
    bf16: float | None = None
    fp16: float | None = None
    fp8: float | None = None
    int8: float | None = None


class _UserEntry(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A [gpu_specs."NAME"] table: every field optional; a new model needs ``memory_gb``."""

    match: tuple[str, ...] | None = None
    vendor: Literal["nvidia", "amd"] | None = None
    arch: str | None = None
    compute_capability: str | None = None
    form_factor: str | None = None
    interconnect: Literal["NVLink", "PCIe", "Infinity Fabric"] | None = None
    memory_gb: float | None = None
    device_bytes: int | None = None
    memory_bandwidth_gb_s: float | None = None
    peak_tflops: _UserPeaks | None = None
    source: str | None = None
    url: str | None = None
    read: str | None = None
    note: str | None = None


def parse_table(data: bytes) -> SpecTable:
    """Decode and check a spec table document (the shipped file's format)."""
    try:
        doc = msgspec.json.decode(data, type=_Doc)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise SpecError(f"the GPU spec table is not valid: {exc}") from exc
    if doc.schema != SCHEMA:
        raise SpecError(f"the GPU spec table has schema {doc.schema!r}, expected {SCHEMA!r}")
    for spec in doc.gpus:
        _check(spec, f"GPU spec {spec.model!r}")
    return SpecTable(schema=doc.schema, version=doc.version, gpus=doc.gpus, notes=doc.notes)


@lru_cache(maxsize=1)
def shipped_specs() -> SpecTable:
    """The table shipped with gpuscope (read once per process)."""
    return parse_table(resources.files("gpuscope").joinpath("data/gpu_specs.json").read_bytes())


def load_specs(home: Path | None = None, *, table: SpecTable | None = None) -> SpecTable:
    """The shipped table (or ``table``) with the [gpu_specs] entries of ``config.toml`` under the home folder
    (``GPUSCOPE_HOME``, else ``~/.gpuscope``) before its own; raises SpecError for an entry that cannot be used."""
    base = table or shipped_specs()
    path = home_dir(home) / CONFIG_NAME
    try:
        doc = load_toml(path)
    except PriceError as exc:
        raise SpecError(str(exc)) from None
    raw = (doc or {}).get("gpu_specs", {})
    if not isinstance(raw, Mapping):
        raise SpecError(f"{path}: [gpu_specs] must be a table of GPU models")
    if not raw:
        return base
    own = tuple(_user_spec(str(key), value, base, path) for key, value in raw.items())
    replaced = {o.model for o in own}
    return replace(base, gpus=(*own, *(g for g in base.gpus if g.model not in replaced)), config_path=path,
                   own=tuple(o.model for o in own))


def lookup_spec(name: str | None, table: SpecTable | None = None) -> NameMatch[GpuSpec]:
    """What a device name (as NVML, ROCm or a trace's deviceProperties spell it) stands for in the table: one
    entry, several (ambiguous: "NVIDIA H100" is an SXM, PCIe or NVL card), or none (``gpuscope.model.gpu_names``).
    Where the user's config entries and shipped ones both match, the user's are matched alone."""
    table = table or shipped_specs()
    found = match_name(name, table.gpus, _model, _patterns)
    if found.ambiguous and table.own:
        mine = match_name(name, [g for g in table.gpus if g.model in table.own], _model, _patterns)
        if mine.found is not None:
            return mine
    return found


def lookup_gpu(name: str | None, table: SpecTable | None = None) -> NameMatch[GpuSpec]:
    """A GPU as a user names it on the command line: a device name or spec-table model ("NVIDIA H100 80GB HBM3",
    "H100 SXM"), or a price-catalog model as ``gpuscope prices`` lists it ("A100 80GB": the catalog entry's
    spec-table model)."""
    found = lookup_spec(name, table)
    if found.found is not None or not name:
        return found
    key = normalize(name)
    entry = next((e for e in load_catalog().gpus if normalize(e.model) == key and e.spec), None)
    spec = lookup_spec(entry.spec, table).found if entry is not None else None
    return NameMatch(spec) if spec is not None else found


def match_spec(name: str | None, table: SpecTable | None = None) -> GpuSpec | None:
    """The one entry a device name stands for; None when it matches none, or more than one (``lookup_spec`` says
    which: nothing falls back to another GPU's figures)."""
    return lookup_spec(name, table).found


def _model(spec: GpuSpec) -> str:
    return spec.model


def _patterns(spec: GpuSpec) -> tuple[str, ...]:
    return spec.match


def spec_for(name: str | None, *, home: Path | None = None) -> GpuSpec | None:
    """The spec for a GPU name, from the shipped table and the user's config.toml; None when the table has none."""
    return match_spec(name, load_specs(home))


def _user_spec(key: str, value: object, base: SpecTable, path: Path) -> GpuSpec:
    where = f"{path} [gpu_specs] {key!r}"
    try:
        entry = msgspec.convert(value, type=_UserEntry)
    except msgspec.ValidationError as exc:
        raise SpecError(f"{where}: {exc}") from None
    shipped = match_spec(key, base)
    if shipped is None and entry.memory_gb is None:
        raise SpecError(f"{where}: a GPU model the table lacks needs memory_gb (and its peak_tflops)")
    own_source = entry.source or f"config {path} [gpu_specs] {key!r}"
    old = shipped or GpuSpec(model=key, vendor="nvidia", arch="unknown", compute_capability=None,
                             form_factor="unknown", interconnect="PCIe", memory_gb=entry.memory_gb or 1.0,
                             memory_bandwidth_gb_s=None, peak_tflops=PeakTflops(), source=own_source, url=None,
                             read=None)
    peaks = entry.peak_tflops or _UserPeaks()
    reported = _device_bytes(entry, old, own_source)
    spec = GpuSpec(
        model=old.model, vendor=entry.vendor or old.vendor, arch=entry.arch or old.arch,
        compute_capability=_either(entry.compute_capability, old.compute_capability),
        form_factor=entry.form_factor or old.form_factor, interconnect=entry.interconnect or old.interconnect,
        memory_gb=_either(entry.memory_gb, old.memory_gb),
        memory_bandwidth_gb_s=_either(entry.memory_bandwidth_gb_s, old.memory_bandwidth_gb_s),
        peak_tflops=PeakTflops(*(_either(getattr(peaks, d), old.peak_tflops.get(d)) for d in DTYPES)),
        source=own_source if shipped is None or entry.source else f"{own_source} over {shipped.source}",
        url=_either(entry.url, old.url), read=_either(entry.read, old.read),
        match=entry.match if entry.match is not None else old.match, checked=old.checked,
        note=_either(entry.note, old.note), unrated_dtypes=old.unrated_dtypes,
        device_bytes=reported[0], device_bytes_source=reported[1])
    _check(spec, where)
    return spec


def _device_bytes(entry: _UserEntry, old: GpuSpec, source: str) -> tuple[int | None, str | None]:
    """The user's ``device_bytes``; else the shipped one, unless the user gave another ``memory_gb`` (then it no
    longer describes the entry)."""
    if entry.device_bytes is not None:
        return entry.device_bytes, source
    if entry.memory_gb is not None:
        return None, None
    return old.device_bytes, old.device_bytes_source


def _either(given: T | None, old: T) -> T:
    return old if given is None else given


def _check(spec: GpuSpec, where: str) -> None:
    for pattern in spec.match:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise SpecError(f"{where}: the pattern {pattern!r} is not a regular expression ({exc})") from None
    if not 0 < spec.memory_gb < 1e5:
        raise SpecError(f"{where}: memory_gb must be a positive number of GB, got {spec.memory_gb!r}")
    if spec.device_bytes is not None and not 0 < spec.device_bytes < spec.memory_gb * 2e9:
        raise SpecError(f"{where}: device_bytes must be a positive number of bytes near memory_gb, got "
                        f"{spec.device_bytes!r}")
    if spec.memory_bandwidth_gb_s is not None and not 0 < spec.memory_bandwidth_gb_s < 1e6:
        raise SpecError(f"{where}: memory_bandwidth_gb_s must be a positive number, got {spec.memory_bandwidth_gb_s!r}")
    for dtype, tflops in spec.peak_tflops.known():
        if not 0 < tflops <= MAX_TFLOPS:
            raise SpecError(f"{where}: peak_tflops.{dtype} must be from 0 to {MAX_TFLOPS:,.0f}, got {tflops!r}")
