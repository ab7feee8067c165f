"""The fleet view, computed from what Prometheus answered: per group GPU-hours, busy share, cost and waste, and
the GPUs held but idle. Pure: prices come in resolved (by GPU model, as for runs), nothing is read or printed.

Definitions (docs/fleet.md): a bucket is one query step. A GPU's busy share in a bucket is its mean
DCGM_FI_DEV_GPU_UTIL / 100 (DCGM_FI_PROF_GR_ENGINE_ACTIVE where the GPU has no DEV utilisation, as on MIG).
GPU-hours count only buckets with a sample: a gap is neither busy nor idle. A bucket under ``idle_below`` is idle;
its whole cost is wasted. In the other buckets, (1 - busy) of the cost is wasted (under-used).
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np

from gpuscope.analyzers.advice.gpu_swap import Capabilities, unknown_capabilities
from gpuscope.analyzers.sharing import tenant_parts
from gpuscope.fleet.advice import advise
from gpuscope.fleet.serving import serving_advice, serving_pods, serving_warnings
from gpuscope.model.cost import Price
from gpuscope.model.fleet import (
    DRAM_ACTIVE,
    ENERGY_J,
    GR_ENGINE,
    MEMORY_USED_BYTES,
    POD_SM_UTIL,
    POWER_W,
    SM_ACTIVE,
    SM_OCCUPANCY,
    TENSOR_ACTIVE,
    UTIL,
    FleetData,
    FleetReport,
    GpuSeriesInfo,
    GpuUsage,
    GroupReport,
    IdleGpu,
    Thresholds,
)
from gpuscope.model.schema import split_gpu

J_PER_KWH = 3.6e6
NO_MODEL = "(no modelName label)"
GROUP_BYS = ("pod", "namespace", "job", "host", "gpu")
# Kubernetes names a Deployment's pods <name>-<replicaset hash>-<5 chars>, a Job's <name>-<5 chars> (or
# <name>-<index>-<5 chars>), a StatefulSet's <name>-<ordinal>: what is left is the workload's name.
_POD_SUFFIX = re.compile(r"(-[a-f0-9]{6,10})?-[bcdfghjklmnpqrstvwxz2456789]{5}$|(-\d+)+(-[a-z0-9]{5})?$")


def check_group_by(group_by: str) -> str | None:
    """None when ``group_by`` is valid, else why not (one line)."""
    if group_by in GROUP_BYS or (group_by.startswith("label=") and len(group_by) > len("label=")):
        return None
    return f"--group-by must be one of {', '.join(GROUP_BYS)} or label=NAME, not {group_by!r}"


def analyze_fleet(data: FleetData, *, group_by: str = "pod", prices: Mapping[str | None, Price],
                  thresholds: Thresholds | None = None,
                  capabilities: Capabilities = unknown_capabilities) -> FleetReport:
    """The fleet report of ``data``; ``prices`` maps each GPU model label (None: unlabelled) to its price;
    ``capabilities`` says what each GPU model supports (``fleet.pricing.fleet_capabilities``), for right-sizing."""
    thresholds = thresholds or Thresholds()
    usages = gpu_usages(data, group_by=group_by, prices=prices, thresholds=thresholds)
    groups = _groups(usages)
    idle = _idle_gpus(usages, thresholds)
    total = _aggregate(usages)
    busy = _busy(data)[0]
    with warnings.catch_warnings():  # a bucket no GPU reported in has no mean: None, on purpose
        warnings.simplefilter("ignore", RuntimeWarning)
        timeline = np.nanmean(busy, axis=0) if len(busy) else np.array([])
    models = sorted({u.info.model for u in usages}, key=lambda m: m or "")
    serving = serving_pods(data, usages, busy)
    return FleetReport(
        prometheus_url=data.prometheus_url, selector=data.selector, group_by=group_by,
        start_ns=data.window.start_ns, end_ns=data.window.end_ns, step_s=data.window.step_ns / 1e9,
        gpus=total.gpus, gpu_hours=total.gpu_hours, busy=total.busy, cost_usd=total.cost_usd,
        wasted_usd=total.wasted_usd, idle_usd=total.idle_usd, energy_kwh=total.energy_kwh,
        groups=groups, idle_gpus=idle,
        recommendations=(*advise(usages, groups, idle, prices, thresholds, capabilities=capabilities),
                         *serving_advice(serving)),
        prices={m or NO_MODEL: prices[m].usd_per_gpu_hour if m in prices else None for m in models},
        price_sources={m or NO_MODEL: prices[m].source if m in prices else None for m in models},
        thresholds=thresholds,
        busy_source={s: sum(1 for u in usages if u.source == s) for s in (UTIL, GR_ENGINE)},
        shared_gpus=len({(u.info.host, u.info.gpu, u.info.uuid) for u in usages if u.split is not None}),
        split=_joined(u.split for u in usages),
        timeline_ns=tuple(data.window.start_ns + (i + 1) * data.window.step_ns for i in range(len(timeline))),
        timeline_busy=tuple(None if math.isnan(v) else float(v) for v in timeline.tolist()),
        warnings=data.warnings + _price_warnings(usages, prices) + serving_warnings(serving),
        serving=serving,
    )


def gpu_usages(data: FleetData, *, group_by: str, prices: Mapping[str | None, Price],
               thresholds: Thresholds) -> list[GpuUsage]:
    """Each GPU series' hours, busy share, idle and under-used hours, energy and peak memory.

    Where several pods' series report the same GPU in one bucket (time-slicing, MPS), each gets its part of that
    bucket's hour and energy (``analyzers.sharing.tenant_parts``, the rule live runs use: its measured SM use over
    all of theirs where a per-pod series gives every pod's, else an equal part), so a shared GPU is paid for once.
    """
    busy, sources = _busy(data)
    step_h = data.window.step_hours
    covered = ~np.isnan(busy)
    holders = _holders(data, covered)
    use = np.where(covered, data.metric(POD_SM_UTIL), np.nan)
    parts, measured = tenant_parts(use, _per_gpu_total(data, use, covered), holders)
    part = np.where(covered, parts, 0.0)
    shared = covered & (holders > 1)
    with np.errstate(invalid="ignore"):
        idle = covered & (busy < thresholds.idle_below)
    busy0 = np.nan_to_num(busy)
    hours = part.sum(axis=1) * step_h
    underused = (part * np.where(idle, 0.0, 1.0 - busy0)).sum(axis=1) * step_h
    energy = _energy_kwh(data, np.where(covered, part, 1.0))
    has_pods = any(g.pod for g in data.gpus)
    out = []
    for g, info in enumerate(data.gpus):
        usd_per_hour, share = series_price(info, prices.get(info.model))
        weight = float(part[g].sum())
        out.append(GpuUsage(
            info=info, group=group_name(info, group_by), allocated=bool(info.pod) or not has_pods,
            hours=float(hours[g]), busy=float((part[g] * busy0[g]).sum()) / weight if weight else None,
            idle_hours=float((part[g] * idle[g]).sum()) * step_h, underused_hours=float(underused[g]),
            usd_per_gpu_hour=usd_per_hour, energy_kwh=energy[g],
            sm_active=_mean(data.metric(SM_ACTIVE)[g]), dram_active=_mean(data.metric(DRAM_ACTIVE)[g]),
            peak_memory_bytes=_max(data.metric(MEMORY_USED_BYTES)[g]), source=sources[g] if weight else None,
            price_share=share, shared_hours=float(part[g][shared[g]].sum()) * step_h,
            split=_split(measured[g][shared[g]]) if shared[g].any() else None,
            tensor_active=_mean(data.metric(TENSOR_ACTIVE)[g]), sm_occupancy=_mean(data.metric(SM_OCCUPANCY)[g])))
    return out


def _split(measured: np.ndarray) -> Literal["measured", "even", "mixed"]:
    return "measured" if measured.all() else "even" if not measured.any() else "mixed"


def _gpu_ids(data: FleetData) -> np.ndarray:
    """Each series' physical GPU (host, index, UUID) as a number: the series that share one have the same."""
    ids: dict[tuple[str | None, int, str | None], int] = {}
    out: np.ndarray = np.array([ids.setdefault((g.host, g.gpu, g.uuid), len(ids)) for g in data.gpus],
                               dtype=np.int64)
    return out


def _per_gpu_total(data: FleetData, use: np.ndarray, covered: np.ndarray) -> np.ndarray:
    """(gpus x buckets): every series' ``use`` on the same GPU summed; NaN where one that reported lacks it."""
    which = _gpu_ids(data)
    sums = np.zeros((int(which.max()) + 1 if len(which) else 0, covered.shape[1]))
    missing = np.zeros_like(sums)
    np.add.at(sums, which, np.nan_to_num(use))
    np.add.at(missing, which, covered & np.isnan(use))
    out: np.ndarray = np.where(missing[which] > 0, np.nan, sums[which])
    return out


def series_price(info: GpuSeriesInfo, price: Price | None) -> tuple[float | None, float | None]:
    """(USD per hour, share of the model's price) of one GPU series: a whole GPU's price, or for a MIG instance its
    compute slices' share of it (``Price.slice_share``: one rule with runs); None where either is unknown."""
    if price is None or price.usd_per_gpu_hour is None:
        return None, None
    if split_gpu(info.gpu)[1] is None:
        return price.usd_per_gpu_hour, 1.0
    share = price.slice_share(info.mig_profile)
    return (None, None) if share is None else (price.usd_per_gpu_hour * share, share)


def _holders(data: FleetData, covered: np.ndarray) -> np.ndarray:
    """(gpus x buckets): how many series report the same physical GPU (host, index, UUID) in each bucket."""
    which = _gpu_ids(data)
    per_gpu = np.zeros((int(which.max()) + 1 if len(which) else 0, covered.shape[1]))
    np.add.at(per_gpu, which, covered)
    out: np.ndarray = per_gpu[which]
    return out


def group_name(info: GpuSeriesInfo, group_by: str) -> str:
    """The group a GPU series belongs to; "(no pod)" and the like where its labels do not say."""
    if group_by == "pod":
        return f"{info.namespace}/{info.pod}" if info.pod and info.namespace else info.pod or "(no pod)"
    if group_by == "namespace":
        return info.namespace or "(no namespace)"
    if group_by == "host":
        return info.host or "(unknown host)"
    if group_by == "gpu":
        return f"{info.host or '?'}/gpu{info.gpu}"
    if group_by == "job":
        return _job(info)
    name = group_by.removeprefix("label=").lower()
    return info.labels.get(name) or f"(no {name})"


def _job(info: GpuSeriesInfo) -> str:
    """Slurm's job id where dcgm-exporter maps it (``hpc_job``), else the pod's workload name."""
    if info.labels.get("hpc_job"):
        return info.labels["hpc_job"]
    if info.pod:
        name = _POD_SUFFIX.sub("", info.pod) or info.pod
        return f"{info.namespace}/{name}" if info.namespace else name
    return "(no job)"


def _busy(data: FleetData) -> tuple[np.ndarray, list[str]]:
    """(gpus x buckets) busy share, one source per GPU: DEV utilisation where it has any, else GR engine active."""
    util, gr = data.metric(UTIL), data.metric(GR_ENGINE)
    use_util = ~np.isnan(util).all(axis=1)
    busy = np.where(use_util[:, None], util, gr)
    return busy, [UTIL if u else GR_ENGINE for u in use_util.tolist()]


def _energy_kwh(data: FleetData, part: np.ndarray) -> list[float | None]:
    """The energy counter's increase where a GPU has it, else mean power integrated over the buckets with power;
    ``part`` is each series' part of its GPU in each bucket."""
    counter, power = data.metric(ENERGY_J) * part, data.metric(POWER_W) * part
    out: list[float | None] = []
    for g in range(len(data.gpus)):
        if not np.isnan(counter[g]).all():
            out.append(float(np.nansum(counter[g])) / J_PER_KWH)
        elif not np.isnan(power[g]).all():
            out.append(float(np.nansum(power[g])) * data.window.step_ns / 1e9 / J_PER_KWH)
        else:
            out.append(None)
    return out


@dataclass(frozen=True)
class _Totals:
    gpus: int
    gpu_hours: float
    busy: float | None
    cost_usd: float | None
    wasted_usd: float | None
    idle_usd: float | None
    energy_kwh: float | None


def _aggregate(usages: list[GpuUsage]) -> _Totals:
    hours = sum(u.hours for u in usages)
    known = [u for u in usages if u.busy is not None]
    busy = sum(u.busy * u.hours for u in known if u.busy is not None) / hours if hours > 0 else None
    priced = all(u.usd_per_gpu_hour is not None for u in usages if u.hours > 0)

    def usd(attr: str) -> float | None:
        return sum(getattr(u, attr) * (u.usd_per_gpu_hour or 0.0) for u in usages) if priced else None

    cost, idle_usd, under_usd = usd("hours"), usd("idle_hours"), usd("underused_hours")
    energies = [u.energy_kwh for u in usages if u.hours > 0]
    return _Totals(
        gpus=len({(u.info.host, u.info.gpu) for u in usages}), gpu_hours=hours, busy=busy, cost_usd=cost,
        wasted_usd=None if idle_usd is None or under_usd is None else idle_usd + under_usd, idle_usd=idle_usd,
        energy_kwh=sum(e for e in energies if e is not None) if energies and None not in energies else None)


def _groups(usages: list[GpuUsage]) -> tuple[GroupReport, ...]:
    by: dict[str, list[GpuUsage]] = {}
    for u in usages:
        by.setdefault(u.group, []).append(u)
    out = []
    for name, members in by.items():
        t = _aggregate(members)
        under = None if t.wasted_usd is None or t.idle_usd is None else t.wasted_usd - t.idle_usd
        peaks = [u.peak_memory_bytes for u in members if u.peak_memory_bytes is not None]
        out.append(GroupReport(
            name=name, gpus=t.gpus, gpu_hours=t.gpu_hours, busy=t.busy,
            idle_gpu_hours=sum(u.idle_hours for u in members), cost_usd=t.cost_usd, wasted_usd=t.wasted_usd,
            idle_usd=t.idle_usd, underused_usd=under, energy_kwh=t.energy_kwh,
            sm_active=_weighted(members, "sm_active"), dram_active=_weighted(members, "dram_active"),
            peak_memory_bytes=int(max(peaks)) if peaks else None,
            models=tuple(sorted({u.info.model for u in members if u.info.model})),
            mig_profiles=tuple(sorted({u.info.mig_profile for u in members if u.info.mig_profile})),
            shared_gpu_hours=sum(u.shared_hours for u in members), split=_joined(u.split for u in members),
            tensor_active=_weighted(members, "tensor_active"), sm_occupancy=_weighted(members, "sm_occupancy")))
    return tuple(sorted(out, key=lambda g: (-(g.wasted_usd or 0.0), -g.gpu_hours * (1 - (g.busy or 0.0)), g.name)))


def _joined(splits: Iterable[str | None]) -> Literal["measured", "even", "mixed"] | None:
    known = {s for s in splits if s is not None}
    if not known:
        return None
    return "mixed" if len(known) > 1 or "mixed" in known else "measured" if "measured" in known else "even"


def _idle_gpus(usages: list[GpuUsage], thresholds: Thresholds) -> tuple[IdleGpu, ...]:
    out = []
    for u in usages:
        if not u.allocated or u.hours <= 0 or u.idle_hours / u.hours < thresholds.idle_share:
            continue
        out.append(IdleGpu(host=u.info.host, gpu=u.info.gpu, uuid=u.info.uuid, model=u.info.model, group=u.group,
                           busy=u.busy, idle_share=u.idle_hours / u.hours, gpu_hours=u.hours,
                           cost_usd=None if u.usd_per_gpu_hour is None else u.hours * u.usd_per_gpu_hour,
                           mig_profile=u.info.mig_profile))
    return tuple(sorted(out, key=lambda i: (-(i.cost_usd or 0.0), -i.gpu_hours, i.group, i.host or "", i.gpu)))


def _weighted(members: list[GpuUsage], attr: str) -> float | None:
    pairs = [(getattr(u, attr), u.hours) for u in members if getattr(u, attr) is not None and u.hours > 0]
    hours = sum(h for _, h in pairs)
    return sum(v * h for v, h in pairs) / hours if hours > 0 else None


def _price_warnings(usages: list[GpuUsage], prices: Mapping[str | None, Price]) -> tuple[str, ...]:
    unpriced = [u for u in usages if u.usd_per_gpu_hour is None]
    slices = sorted({f"{u.info.model or NO_MODEL} MIG {u.info.mig_profile or '(no profile label)'}" for u in unpriced
                     if split_gpu(u.info.gpu)[1] is not None and (p := prices.get(u.info.model)) is not None
                     and p.usd_per_gpu_hour is not None})
    unknown = sorted({u.info.model or NO_MODEL for u in unpriced} - {s.split(" MIG ")[0] for s in slices})
    out = []
    if unknown:
        out.append(f"no price for {', '.join(unknown)}: costs that include them are n/a; set one with "
                   f"--usd-per-gpu-hour or [prices.gpus] in config.toml (see `gpuscope prices`)")
    if slices:
        out.append(f"no share of its GPU's price is known for {', '.join(slices)} (the profile or the GPU's MIG "
                   f"compute slices are not in the price catalog): costs that include them are n/a")
    return tuple(out)


def _mean(row: np.ndarray) -> float | None:
    return None if np.isnan(row).all() else float(np.nanmean(row))


def _max(row: np.ndarray) -> float | None:
    return None if np.isnan(row).all() else float(np.nanmax(row))
