"""What a platform team can do about a fleet's waste: give idle GPUs back, share lightly used ones, right-size.

Pure. Each recommendation carries the dollars it would have saved over the window, from the same prices as the
groups' cost (None where a price is unknown), and its reasoning.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

from gpuscope.analyzers.advice import gpu_swap
from gpuscope.analyzers.advice.gpu_swap import HEADROOM as RIGHT_SIZE_HEADROOM
from gpuscope.analyzers.advice.gpu_swap import Capabilities, unknown_capabilities
from gpuscope.analyzers.efficiency.pipes import TENSOR_ADVICE, pipe_use, tensor_cores_idle
from gpuscope.analyzers.slices import SLICE_TARGET_BUSY, slice_recommendation, smallest_slice
from gpuscope.format import pct, usd
from gpuscope.model.cost import Price
from gpuscope.model.diagnosis import Recommendation
from gpuscope.model.fleet import GpuUsage, GroupReport, IdleGpu, Thresholds
from gpuscope.model.schema import MIG_GPU_BASE

SHARE_TARGET_BUSY = SLICE_TARGET_BUSY
"""Lightly used GPUs are packed onto as many GPUs as this busy share each needs (headroom for bursts): the same
headroom a MIG slice is sized with."""
MAX_LISTED = 5
MAX_RIGHT_SIZE = 3


def advise(usages: Sequence[GpuUsage], groups: Sequence[GroupReport], idle: Sequence[IdleGpu],
           prices: Mapping[str | None, Price], thresholds: Thresholds, *,
           capabilities: Capabilities = unknown_capabilities) -> tuple[Recommendation, ...]:
    """Give back idle GPUs, then share lightly used ones, then right-size groups to a cheaper GPU (one that
    supports everything their GPU does: a fleet does not say which types its jobs use; ``advice.gpu_swap``)."""
    out: list[Recommendation] = []
    if idle:
        out.append(_give_back(idle, thresholds))
    out.extend(_share(usages, thresholds))
    out.extend(_right_size(groups, prices, capabilities))
    out.extend(_slices(groups, prices))
    out.extend(_tensor_cores(groups))
    return tuple(out)


def _tensor_cores(groups: Sequence[GroupReport]) -> list[Recommendation]:
    """Groups whose SMs were busy while their tensor pipes sat idle (DCGM profiling counters), by the rule a live
    run is judged by (``analyzers.efficiency.pipes``); groups without the counters are not judged."""
    idle = [g for g in groups if tensor_cores_idle(pipe_use(g.sm_active, g.tensor_active, g.sm_occupancy,
                                                            g.dram_active))]
    if not idle:
        return []
    idle.sort(key=lambda g: -g.gpu_hours * (g.sm_active or 0.0))
    listed = "; ".join(f"{g.name} (SM active {pct(g.sm_active, 0)}, tensor pipes {pct(g.tensor_active, 0)}, "
                       f"{g.gpu_hours:.4g} GPU-h)" for g in idle[:MAX_LISTED])
    more = f"; and {len(idle) - MAX_LISTED} more" if len(idle) > MAX_LISTED else ""
    return [Recommendation(
        code="tensor_cores", title=f"{len(idle)} group{'s' if len(idle) != 1 else ''} left the tensor cores idle "
                                   "while the SMs worked",
        detail=f"{listed}{more}. {TENSOR_ADVICE}", est_step_saving=None, est_saving_usd=None,
        reasoning=("DCGM counters say the tensor pipes were busy under a tenth of the SM-active time; they do not say "
                   "how much of that time is matrix work, so no saving is claimed: profile a step with "
                   "record_shapes=True (gpuscope analyze) to size it."))]


def _slices(groups: Sequence[GroupReport], prices: Mapping[str | None, Price]) -> list[Recommendation]:
    """A group on whole GPUs that could be MIG-partitioned, using a small part of them: the smallest slice that
    carries it (the rule runs get, ``analyzers.slices``). Not for groups already on slices or sharing GPUs."""
    found = []
    for group in groups:
        price = _one_price(group, prices)
        if (price is None or price.usd_per_gpu_hour is None or group.busy is None or group.peak_memory_bytes is None
                or group.mig_profiles or group.split is not None or group.name.startswith("(")):
            continue
        profile = smallest_slice(group.busy, group.peak_memory_bytes, price, headroom=RIGHT_SIZE_HEADROOM)
        if profile is not None:
            found.append(replace(slice_recommendation(
                profile, price, busy=group.busy, peak_memory_bytes=group.peak_memory_bytes, gpus=group.gpus,
                hours=group.gpu_hours, what=group.name), title=f"{group.name}: fits on a MIG {profile.name} slice "
                f"(or MPS), saves ${price.usd_per_gpu_hour * (1 - (price.slice_share(profile.name) or 1.0)):.2f}/h "
                f"per GPU"))
    found.sort(key=lambda r: -(r.est_saving_usd or 0.0))
    return found[:MAX_RIGHT_SIZE]


def _give_back(idle: Sequence[IdleGpu], thresholds: Thresholds) -> Recommendation:
    costs = [i.cost_usd for i in idle]
    saving = None if None in costs else sum(c for c in costs if c is not None)
    listed = "; ".join(f"{i.group} on {i.host or '?'} GPU {i.gpu} ({pct(i.busy)} busy, {usd(i.cost_usd)})"
                       for i in idle[:MAX_LISTED])
    more = f"; and {len(idle) - MAX_LISTED} more" if len(idle) > MAX_LISTED else ""
    return Recommendation(
        code="release_idle_gpus", title=f"Give back {len(idle)} idle GPU{'s' if len(idle) != 1 else ''}",
        detail=(f"These GPUs were held but under {pct(thresholds.idle_below, 0)} busy for at least "
                f"{pct(thresholds.idle_share, 0)} of the time they reported: {listed}{more}. Scale the pods down, "
                f"end the jobs, or lower their GPU requests."),
        est_step_saving=None, est_saving_usd=saving,
        reasoning="the whole cost of each idle GPU over the window (price x its GPU-hours)")


def _share(usages: Sequence[GpuUsage], thresholds: Thresholds) -> list[Recommendation]:
    """Per GPU model: allocated GPUs busy between idle and ``share_below`` could be packed onto fewer GPUs."""
    light = [u for u in usages if u.allocated and u.busy is not None and u.hours > 0 and u.info.mig_profile is None
             and u.info.gpu < MIG_GPU_BASE
             and thresholds.idle_below <= u.busy < thresholds.share_below
             and u.idle_hours / u.hours < thresholds.idle_share]
    by_model: dict[str | None, list[GpuUsage]] = {}
    for u in light:
        by_model.setdefault(u.info.model, []).append(u)
    out = []
    for model, members in by_model.items():
        gpus = {(u.info.host, u.info.gpu) for u in members}
        need = max(1, math.ceil(sum(u.busy or 0.0 for u in members) / SHARE_TARGET_BUSY - 1e-9))
        if len(gpus) < 2 or need >= len(gpus):
            continue
        hours = sum(u.hours for u in members)
        priced = all(u.usd_per_gpu_hour is not None for u in members)
        cost = sum(u.hours * (u.usd_per_gpu_hour or 0.0) for u in members) if priced else None
        saving = None if cost is None else cost * (len(gpus) - need) / len(gpus)
        names = sorted({u.group for u in members})
        shown = ", ".join(names[:MAX_LISTED]) + (f" and {len(names) - MAX_LISTED} more" if len(names) > MAX_LISTED
                                                 else "")
        out.append(Recommendation(
            code="share_gpus", title=f"Share {len(gpus)} lightly used {model or 'GPU'}s: {need} would do",
            detail=(f"{shown} used their GPUs under {pct(thresholds.share_below, 0)} on average. Inference services "
                    f"of this kind can share a GPU: MIG partitions (A100, H100, H200), MPS, or time-slicing in the "
                    f"NVIDIA device plugin. Packed to {pct(SHARE_TARGET_BUSY, 0)} busy, {need} GPU"
                    f"{'s' if need != 1 else ''} would carry the load of {len(gpus)}."),
            est_step_saving=None, est_saving_usd=saving,
            reasoning=(f"sum of busy shares / {SHARE_TARGET_BUSY:g} = {need} GPUs; saving = their cost "
                       f"({hours:.4g} GPU-h) x {len(gpus) - need}/{len(gpus)}, at equal total work")))
    return out


def _right_size(groups: Sequence[GroupReport], prices: Mapping[str | None, Price],
                capabilities: Capabilities) -> list[Recommendation]:
    """A cheaper catalog GPU for a group busy under half the time, decided as for runs (``advice.gpu_swap``)."""
    found = []
    for group in groups:
        if group.name.startswith("(") or group.mig_profiles:
            continue
        swap = gpu_swap.cheaper_gpu(_one_price(group, prices), peak_memory_bytes=group.peak_memory_bytes,
                                    busy=group.busy, needs=None, capabilities=capabilities)
        if swap is not None:
            found.append(((swap.usd_per_gpu_hour - swap.offer.usd_per_gpu_hour) * group.gpu_hours, group, swap))
    found.sort(key=lambda f: -f[0])
    return [Recommendation(
        code="right_size", title=f"{group.name}: try a {swap.offer.model} at ${swap.offer.usd_per_gpu_hour:.2f}/GPU-h",
        detail=(f"Peak memory {(group.peak_memory_bytes or 0) / 2**30:.1f} GiB fits the {swap.offer.model}'s "
                f"{swap.offer.memory_bytes / 1e9:.0f} GB with {RIGHT_SIZE_HEADROOM - 1:.0%} headroom, {swap.checked}, "
                f"and its GPUs were busy {pct(group.busy, 0)}. Throughput differs between models: time it on the "
                f"{swap.offer.model} first."),
        est_step_saving=None, est_saving_usd=saving,
        reasoning=(f"({swap.usd_per_gpu_hour:.4g} - {swap.offer.usd_per_gpu_hour:.4g}) USD/GPU-h x "
                   f"{group.gpu_hours:.4g} GPU-h, assuming the same run time. Price: {swap.offer.source}."))
        for saving, group, swap in found[:MAX_RIGHT_SIZE]]


def _one_price(group: GroupReport, prices: Mapping[str | None, Price]) -> Price | None:
    """The group's price when all its GPUs are one model."""
    if len(group.models) != 1:
        return None
    return prices.get(group.models[0])
