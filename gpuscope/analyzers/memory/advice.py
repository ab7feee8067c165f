"""What to change about a device's memory, with the bytes each change frees and what that buys, priced.

Every batch figure is an estimate from the makeup over the whole recording: activations and temporaries grow with
the batch, parameters, gradients, optimizer state and what was allocated before the recording do not, so a batch k
times larger needs fixed(t) + k x growing(t) at every moment t, and the largest k is set by the tightest moment
(often not the peak: the peak of a training step is often in the optimizer step, its tightest moment at the end of
forward). The allocator keeps its reserve per allocated byte (reserved / allocated at the peak), and the device's
usable share, the advised multiples and their cap are ``gpuscope.analyzers.advice.headroom``'s, as ``gpuscope
analyze`` uses them.

A larger batch saves GPU-hours only through what a step spends whatever its batch: launch and host overhead and
exposed communication (a gradient all-reduce moves the same bytes at any batch), the share f of the step. The rest
(GPU compute, copies, waiting for input) grows with the batch. So k times the batch takes (1 - f) + f / k of the
time per sample, a saving of f (1 - 1/k).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpuscope.analyzers.advice.headroom import MAX_MULTIPLIER, USABLE_SHARE, advised, fitting_multiplier
from gpuscope.model.memory import Category, MemoryAdvice

I64 = npt.NDArray[np.int64]

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
    fixed_step_share: float | None = None
    compute_share: float | None = None
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
    return fitting_multiplier(x.device_bytes, fixed, growing, ratio)


@dataclass(frozen=True)
class _Batch:
    """What a change buys: the batch that then fits (capped at ``MAX_MULTIPLIER``) and its price."""

    k: float | None
    capped: bool
    fraction: float | None
    usd: float | None
    basis: str

    @property
    def size(self) -> str:
        """"about 2.3x", or "8x or more" past the cap."""
        return "" if self.k is None else f"{self.k:.0f}x or more" if self.capped else f"about {self.k:.1f}x"

    def fits(self, then: str = "") -> str:
        """"; a batch about 2.3x larger would (then) fit", or "" where no larger batch fits."""
        return f"; a batch {self.size} larger would {then}fit" if self.k is not None and self.k >= 1 else ""


def _bought(x: AdviceInputs, found: float | None, how: str, *, extra_compute: float = 0.0) -> _Batch:
    """The batch multiple ``found`` fits, as advised (capped) and priced: f (1 - 1/k), less ``extra_compute`` of
    the compute share (1 - f where the analysis does not give it). Not priced where most of the peak was made
    before the recording (what grows with the batch cannot be told), nor without f."""
    k = None if found is None else min(found, MAX_MULTIPLIER)
    capped = found is not None and found >= MAX_MULTIPLIER
    before = x.before_bytes / x.peak_allocated_bytes if x.peak_allocated_bytes else 0.0
    if before > MOSTLY_BEFORE:
        return _Batch(k, capped, None, None, f"{before:.0%} of the peak was allocated before the recording began "
                      "and is counted as fixed; if some of it grows with the batch, less fits. Record the history "
                      "from before the model is built to price it")
    f = x.fixed_step_share
    if f is None or k is None or k < 1:
        why = ("the saving needs the share of the step that does not grow with the batch, from a trace of the job "
               "(gpuscope analyze; --fixed-step-share for a snapshot)") if f is None else "no larger batch fits"
        return _Batch(k, capped, None, None, f"{how}; {why}")
    compute = x.compute_share if x.compute_share is not None else 1.0 - f
    fraction = f * (1.0 - 1.0 / k) - extra_compute * compute
    usd = None if x.usd_per_gpu_hour is None or x.gpu_hours is None else fraction * x.usd_per_gpu_hour * x.gpu_hours
    return _Batch(k, capped, fraction, usd, how + ("" if usd is not None else "; in dollars with a price and "
                                                                             "--job-hours"))


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
    if found is None or not advised(found):
        return None
    b = _bought(x, found, "f x (1 - 1/k) of the GPU-hours, f the share of the step that does not grow with the batch")
    size = b.size
    return MemoryAdvice(
        code="larger_batch", title=f"A batch {size} larger would fit (an estimate)",
        detail=f"Activations and temporaries ({_gib(_scaling(x))} at the peak) grow with the batch; the rest "
               f"({_gib(_fixed(x))} at the peak) does not. Checked at every moment of the recording, with the "
               f"allocator's reserve as it is and {1 - USABLE_SHARE:.0%} of the device kept free, a batch {size} "
               "the current one fits. Raise the learning rate with it (or keep the global batch and use fewer "
               "gradient-accumulation steps).", frees_bytes=None, batch_multiplier=b.k,
        est_saving_fraction=b.fraction, est_saving_usd=b.usd, basis=b.basis)


def _checkpointing(x: AdviceInputs) -> MemoryAdvice | None:
    act = x.by_category.get("activations", 0)
    if act < 0.3 * x.peak_allocated_bytes or act < max(v for c, v in x.by_category.items() if c != "activations"):
        return None
    n = x.layers if x.layers and x.layers >= 2 else None
    frees = int(act * (1 - 1 / math.sqrt(n))) if n else None
    how = ("checkpointing every block keeps about 1/sqrt(n) of the activations (Chen et al., 2016), n = "
           f"{n} layers counted at the peak; it costs a third more compute per step, priced in" if n else
           "it costs a third more compute per step")
    b = _bought(x, batch_multiplier(x, activation_keep=1 / math.sqrt(n)) if n else None, how,
                extra_compute=RECOMPUTE_SHARE)
    fits = b.fits("then ")
    return MemoryAdvice(
        code="activation_checkpointing",
        title=f"Activations are {act / x.peak_allocated_bytes:.0%} of the peak: checkpoint them",
        detail=f"{_gib(act)} of activations are held for backward at the peak. torch.utils.checkpoint around each "
               f"block frees {'about ' + _gib(frees) if frees is not None else 'most of them'}{fits}.",
        frees_bytes=frees, batch_multiplier=b.k, est_saving_fraction=b.fraction, est_saving_usd=b.usd,
        basis=b.basis)


def _expandable(x: AdviceInputs) -> MemoryAdvice | None:
    r = x.reserved_at_peak_bytes
    if r is None or x.expandable_segments is True:
        return None
    idle = r - x.peak_allocated_bytes
    if idle < FRAGMENTED_SHARE * r or idle <= 0:
        return None
    b = _bought(x, batch_multiplier(x, reserve_ratio=1.0),
                "the batch that fits with no reserve held idle, priced as a larger batch")
    return MemoryAdvice(
        code="expandable_segments",
        title=f"{_gib(idle)} reserved but not allocated at the peak ({idle / r:.0%} of reserved)",
        detail="Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: segments then grow in place instead of "
               f"leaving gaps between fixed-size ones, which frees up to {_gib(idle)}{b.fits()}.",
        frees_bytes=idle, batch_multiplier=b.k, est_saving_fraction=b.fraction, est_saving_usd=b.usd, basis=b.basis)


def _optimizer_heavy(x: AdviceInputs) -> int | None:
    opt = x.by_category.get("optimizer_state", 0)
    return opt if opt >= 0.25 * x.peak_allocated_bytes else None


def _sharding(x: AdviceInputs) -> MemoryAdvice | None:
    opt = _optimizer_heavy(x)
    n = x.world_size
    if opt is None or n is None or n < 2:
        return None
    frees = int(opt * (1 - 1 / n))
    b = _bought(x, batch_multiplier(x, optimizer_keep=1 / n),
                f"optimizer state split over {n} ranks, priced as the larger batch it allows")
    return MemoryAdvice(
        code="optimizer_sharding", title=f"Optimizer state is {opt / x.peak_allocated_bytes:.0%} of the peak: shard it",
        detail=f"Each of {n} ranks holds all {_gib(opt)} of optimizer state. ZeroRedundancyOptimizer or FSDP "
               f"(ZeRO-1 and up) keep 1/{n} of it per rank, freeing {_gib(frees)}{b.fits()}.",
        frees_bytes=frees, batch_multiplier=b.k, est_saving_fraction=b.fraction, est_saving_usd=b.usd, basis=b.basis)


def _eight_bit(x: AdviceInputs) -> MemoryAdvice | None:
    opt = _optimizer_heavy(x)
    if opt is None:
        return None
    frees = int(opt * EIGHT_BIT_FREED)
    b = _bought(x, batch_multiplier(x, optimizer_keep=1 - EIGHT_BIT_FREED),
                "Adam's moments in 8 bits, priced as the larger batch it allows")
    return MemoryAdvice(
        code="eight_bit_optimizer",
        title=f"Optimizer state is {opt / x.peak_allocated_bytes:.0%} of the peak: keep it in 8 bits",
        detail=f"An 8-bit optimizer (bitsandbytes' AdamW8bit) keeps Adam's two moments in 2 bytes per parameter "
               f"instead of 8, freeing about {_gib(frees)} of {_gib(opt)}{b.fits()}.",
        frees_bytes=frees, batch_multiplier=b.k, est_saving_fraction=b.fraction, est_saving_usd=b.usd, basis=b.basis)
