"""What to change about a device's memory, with the bytes each change frees and what that buys, priced.

Every batch figure is an estimate from the makeup over the whole recording: activations and temporaries grow with
the batch, parameters, gradients, optimizer state and what was allocated before the recording do not, so a batch k
times larger needs fixed(t) + k x growing(t) at every moment t, and the largest k is set by the tightest moment
(often not the peak: the peak of a training step is often in the optimizer step, its tightest moment at the end of
forward). The allocator keeps its reserve per allocated byte (reserved / allocated at the peak), and 5% of the
device is left for the CUDA context and what the allocator cannot use. A larger batch saves GPU-hours only where the
step is not already all GPU work: with GPU busy share g, the idle part of a step (1 - g) stays the same per step
while the busy part grows with the batch, so k times the batch takes g + (1 - g) / k of the time per sample, a
saving of (1 - g)(1 - 1/k).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpuscope.model.memory import Category, MemoryAdvice

I64 = npt.NDArray[np.int64]

USABLE_SHARE = 0.95
MIN_MULTIPLIER = 1.25
"""A larger batch is advised only when at least this multiple fits."""
MAX_MULTIPLIER = 8.0
"""Past this multiple the estimate is not taken further (said as "8x or more"): activations stop growing in step
with the batch (kernels change, the optimizer's behaviour with it), so the estimate and its saving stop at 8x."""
MOSTLY_BEFORE = 0.5
"""When more of the peak than this was allocated before the recording began, what grows with the batch cannot be
told from it (a KV cache or a prefetch buffer made then would grow too): the batch is estimated, not priced."""
RECOMPUTE_SHARE = 1 / 3
"""Activation checkpointing runs each checkpointed forward again in backward: about a third more compute per step
(backward costs about twice the forward's FLOPs, so the forward is a third of a training step)."""
EIGHT_BIT_FREED = 0.75
"""8-bit optimizer states (bitsandbytes' Adam8bit): 2 bytes per parameter for Adam's two moments instead of 8."""
FRAGMENTED_SHARE = 0.10


@dataclass(frozen=True)
class AdviceInputs:
    """What the advice is computed from: one device's figures at its peak, and the job's, where known."""

    peak_allocated_bytes: int
    reserved_at_peak_bytes: int | None
    device_bytes: int | None
    by_category: dict[Category, int]
    before_bytes: int
    """Of ``unknown``, what was allocated before the recording began (counted as fixed)."""
    expandable_segments: bool | None
    layers: int | None
    """How many times the largest activation was made at the peak (once per layer): n for sqrt(n) checkpointing."""
    curves: dict[str, I64] | None = None
    """Bytes live after each event: "allocated", and of it "activations", "temporaries", "optimizer_state"."""
    ooms: int = 0
    gpu_busy: float | None = None
    usd_per_gpu_hour: float | None = None
    gpu_hours: float | None = None
    world_size: int | None = None


def advise(x: AdviceInputs) -> tuple[MemoryAdvice, ...]:
    """The advice for one device, most pressing first."""
    found = [_headroom(x), _larger_batch(x), _checkpointing(x), _expandable(x), _sharding(x), _eight_bit(x)]
    return tuple(a for a in found if a is not None)


def _gib(n: float) -> str:
    """As ``gpuscope.format.gib`` writes memory (the views' rule; analyzers do not import the views' module)."""
    if 0 < abs(n) < 2**30 / 10:
        return f"{n / 2**20:.1f} MiB" if abs(n) >= 2**20 / 10 else "<0.1 MiB"
    return f"{n / 2**30:.1f} GiB"


def _fixed(x: AdviceInputs) -> int:
    c = x.by_category
    return c.get("parameters", 0) + c.get("gradients", 0) + c.get("optimizer_state", 0) + c.get("unknown", 0)


def _scaling(x: AdviceInputs) -> int:
    return x.by_category.get("activations", 0) + x.by_category.get("temporaries", 0)


def _reserve_ratio(x: AdviceInputs) -> float:
    r = x.reserved_at_peak_bytes
    return max(r / x.peak_allocated_bytes, 1.0) if r and x.peak_allocated_bytes else 1.0


def batch_multiplier(x: AdviceInputs, *, activation_keep: float = 1.0, optimizer_keep: float = 1.0,
                     reserve_ratio: float | None = None) -> float | None:
    """The largest batch that fits, as a multiple of the current one, with ``activation_keep`` of the activations
    and ``optimizer_keep`` of the optimizer state kept; None where the device's size or a growing part is
    unknown."""
    c = x.curves
    if x.device_bytes is None or c is None or not len(c["allocated"]):
        return None
    act, temp, opt = c["activations"], c["temporaries"], c["optimizer_state"]
    growing = act * activation_keep + temp
    fixed = c["allocated"] - act - temp - opt * (1.0 - optimizer_keep)
    ratio = _reserve_ratio(x) if reserve_ratio is None else reserve_ratio
    room = x.device_bytes * USABLE_SHARE / ratio - fixed
    grows = growing > 0
    if not grows.any():
        return None
    return max(float(np.min(room[grows] / growing[grows])), 0.0)


def _priced(x: AdviceInputs, fraction: float | None, how: str) -> tuple[float | None, float | None, str]:
    if fraction is None:
        return None, None, how + "; the saving needs the GPU busy share from a trace of the job (gpuscope analyze)"
    usd = None if x.usd_per_gpu_hour is None or x.gpu_hours is None else fraction * x.usd_per_gpu_hour * x.gpu_hours
    missing = "" if usd is not None else "; in dollars with a price and --job-hours"
    return fraction, usd, how + missing


def _batch_saving(x: AdviceInputs, k: float | None, extra_compute: float = 0.0) -> float | None:
    if k is None or x.gpu_busy is None or k <= 0:
        return None
    g = x.gpu_busy
    return 1.0 - ((1.0 - g) / k + g * (1.0 + extra_compute)) if k >= 1 else None


def _headroom(x: AdviceInputs) -> MemoryAdvice | None:
    if x.device_bytes is None:
        return None
    used = x.reserved_at_peak_bytes or x.peak_allocated_bytes
    left = x.device_bytes - used
    what = "reserved" if x.reserved_at_peak_bytes else "allocated"
    title = (f"{_gib(left)} of {_gib(x.device_bytes)} left at the peak ({left / x.device_bytes:.0%})" if left >= 0
             else f"the peak needs {_gib(-left)} more than the device has")
    oom = f" The device ran out of memory {x.ooms} time(s) in the recording." if x.ooms else ""
    return MemoryAdvice(code="headroom", title=f"Headroom: {title}",
                        detail=f"At the peak {_gib(x.peak_allocated_bytes)} was allocated and {_gib(used)} {what} of "
                               f"{_gib(x.device_bytes)}.{oom}", frees_bytes=None, batch_multiplier=None,
                        est_saving_fraction=None, est_saving_usd=None,
                        basis="headroom saves nothing by itself: what it buys is priced under the larger batch")


def _larger_batch(x: AdviceInputs) -> MemoryAdvice | None:
    found = batch_multiplier(x)
    if found is None or found < MIN_MULTIPLIER:
        return None
    k = min(found, MAX_MULTIPLIER)
    size = f"{k:.0f}x or more" if found >= MAX_MULTIPLIER else f"about {k:.1f}x"
    before = x.before_bytes / x.peak_allocated_bytes if x.peak_allocated_bytes else 0.0
    if before > MOSTLY_BEFORE:
        fraction, usd, basis = None, None, (f"{before:.0%} of the peak was allocated before the recording began and "
                                            "is counted as fixed; if some of it grows with the batch, less fits. "
                                            "Record the history from before the model is built to price it")
    else:
        fraction, usd, basis = _priced(x, _batch_saving(x, k), "(1 - GPU busy) x (1 - 1/k) of the GPU-hours")
    return MemoryAdvice(
        code="larger_batch", title=f"A batch {size} larger would fit (an estimate)",
        detail=f"Activations and temporaries ({_gib(_scaling(x))} at the peak) grow with the batch; the rest "
               f"({_gib(_fixed(x))} at the peak) does not. Checked at every moment of the recording, with the "
               f"allocator's reserve as it is and 5% of the device kept free, a batch {size} the current one "
               "fits. Raise the learning rate with it (or keep the global batch and use fewer gradient-accumulation "
               "steps).", frees_bytes=None, batch_multiplier=k,
        est_saving_fraction=fraction, est_saving_usd=usd, basis=basis)


def _checkpointing(x: AdviceInputs) -> MemoryAdvice | None:
    act = x.by_category.get("activations", 0)
    if act < 0.3 * x.peak_allocated_bytes or act < max(v for c, v in x.by_category.items() if c != "activations"):
        return None
    n = x.layers if x.layers and x.layers >= 2 else None
    frees = int(act * (1 - 1 / math.sqrt(n))) if n else None
    k = batch_multiplier(x, activation_keep=1 / math.sqrt(n)) if n else None
    how = ("checkpointing every block keeps about 1/sqrt(n) of the activations (Chen et al., 2016), n = "
           f"{n} layers counted at the peak; it costs a third more compute per step, priced in" if n else
           "it costs a third more compute per step")
    fraction, usd, basis = _priced(x, _batch_saving(x, k, RECOMPUTE_SHARE) if k is not None else None, how)
    fits = f"; a batch about {k:.1f}x larger would then fit" if k is not None and k >= 1 else ""
    return MemoryAdvice(
        code="activation_checkpointing",
        title=f"Activations are {act / x.peak_allocated_bytes:.0%} of the peak: checkpoint them",
        detail=f"{_gib(act)} of activations are held for backward at the peak. torch.utils.checkpoint around each "
               f"block frees {'about ' + _gib(frees) if frees is not None else 'most of them'}{fits}.",
        frees_bytes=frees, batch_multiplier=k, est_saving_fraction=fraction, est_saving_usd=usd, basis=basis)


def _expandable(x: AdviceInputs) -> MemoryAdvice | None:
    r = x.reserved_at_peak_bytes
    if r is None or x.expandable_segments is True:
        return None
    idle = r - x.peak_allocated_bytes
    if idle < FRAGMENTED_SHARE * r or idle <= 0:
        return None
    k = batch_multiplier(x, reserve_ratio=1.0)
    fraction, usd, basis = _priced(x, _batch_saving(x, k) if k is not None and k >= MIN_MULTIPLIER else None,
                                   "the batch that fits with no reserve held idle, priced as a larger batch")
    return MemoryAdvice(
        code="expandable_segments",
        title=f"{_gib(idle)} reserved but not allocated at the peak ({idle / r:.0%} of reserved)",
        detail="Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: segments then grow in place instead of "
               f"leaving gaps between fixed-size ones, which frees up to {_gib(idle)}"
               + (f"; a batch about {k:.1f}x larger would fit" if k is not None and k >= 1 else "") + ".",
        frees_bytes=idle, batch_multiplier=k, est_saving_fraction=fraction, est_saving_usd=usd, basis=basis)


def _optimizer_heavy(x: AdviceInputs) -> int | None:
    opt = x.by_category.get("optimizer_state", 0)
    return opt if opt >= 0.25 * x.peak_allocated_bytes else None


def _sharding(x: AdviceInputs) -> MemoryAdvice | None:
    opt = _optimizer_heavy(x)
    n = x.world_size
    if opt is None or n is None or n < 2:
        return None
    frees = int(opt * (1 - 1 / n))
    k = batch_multiplier(x, optimizer_keep=1 / n)
    fraction, usd, basis = _priced(x, _batch_saving(x, k) if k is not None and k >= 1 else None,
                                   f"optimizer state split over {n} ranks, priced as the larger batch it allows")
    return MemoryAdvice(
        code="optimizer_sharding", title=f"Optimizer state is {opt / x.peak_allocated_bytes:.0%} of the peak: shard it",
        detail=f"Each of {n} ranks holds all {_gib(opt)} of optimizer state. ZeroRedundancyOptimizer or FSDP "
               f"(ZeRO-1 and up) keep 1/{n} of it per rank, freeing {_gib(frees)}"
               + (f"; a batch about {k:.1f}x larger would fit" if k is not None and k >= 1 else "") + ".",
        frees_bytes=frees, batch_multiplier=k, est_saving_fraction=fraction, est_saving_usd=usd, basis=basis)


def _eight_bit(x: AdviceInputs) -> MemoryAdvice | None:
    opt = _optimizer_heavy(x)
    if opt is None:
        return None
    frees = int(opt * EIGHT_BIT_FREED)
    k = batch_multiplier(x, optimizer_keep=1 - EIGHT_BIT_FREED)
    fraction, usd, basis = _priced(x, _batch_saving(x, k) if k is not None and k >= 1 else None,
                                   "Adam's moments in 8 bits, priced as the larger batch it allows")
    return MemoryAdvice(
        code="eight_bit_optimizer",
        title=f"Optimizer state is {opt / x.peak_allocated_bytes:.0%} of the peak: keep it in 8 bits",
        detail=f"An 8-bit optimizer (bitsandbytes' AdamW8bit) keeps Adam's two moments in 2 bytes per parameter "
               f"instead of 8, freeing about {_gib(frees)} of {_gib(opt)}"
               + (f"; a batch about {k:.1f}x larger would fit" if k is not None and k >= 1 else "") + ".",
        frees_bytes=frees, batch_multiplier=k, est_saving_fraction=fraction, est_saving_usd=usd, basis=basis)
