"""How much of a device a job may plan to fill, and how large a batch fits in it: decided here once, for
``gpuscope analyze``'s advice (from the peak alone) and ``gpuscope memory``'s (from what the peak held).

A batch k times larger needs the memory that does not grow with the batch (parameters, gradients, optimizer state)
plus k times what does (activations, temporaries), with the allocator's reserve per allocated byte, within
``USABLE_SHARE`` of the device. Where only the peak is known (a trace's analysis), every byte of it is taken to grow
with the batch: the batch that surely fits, which the makeup can only raise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy loads with the first fit computed: the diagnosis's constants are read without it
    import numpy.typing as npt

USABLE_SHARE = 0.95
"""Of the device's memory, what a job may plan to fill: the rest is for the CUDA context, library workspaces
(cuBLAS, NCCL) and what the allocator's rounding and fragmentation cannot hand out."""
MIN_MULTIPLIER = 1.25
"""A larger batch is advised only when at least this multiple of the current one fits."""
MAX_MULTIPLIER = 8.0
"""Past this multiple the estimate is not taken further (said as "8x or more"): activations stop growing in step
with the batch (kernels change, the optimizer's behaviour with it), so the estimate and its saving stop at 8x."""
DOUBLED = 2.0
"""The batch ``gpuscope analyze`` suggests when it fits: twice the current one."""
DOUBLING_SHARE = USABLE_SHARE / DOUBLED
"""The largest peak, as a share of the device, at which a doubled batch surely fits (every byte of the peak
doubling): 47.5%."""


def fitting_multiplier(device_bytes: float, fixed_bytes: npt.ArrayLike, growing_bytes: npt.ArrayLike,
                       reserve_ratio: float = 1.0) -> float | None:
    """The largest k with ``(fixed(t) + k x growing(t)) x reserve_ratio <= USABLE_SHARE x device`` at every moment
    t given (one moment, or a recording's every event: the tightest sets it); None where nothing grows with the
    batch, 0 where even the current batch does not fit."""
    import numpy as np

    fixed = np.atleast_1d(np.asarray(fixed_bytes, dtype=np.float64))
    growing = np.atleast_1d(np.asarray(growing_bytes, dtype=np.float64))
    grows = growing > 0
    if not grows.any():
        return None
    room = device_bytes * USABLE_SHARE / max(reserve_ratio, 1.0) - fixed[grows]
    return max(float(np.min(room / growing[grows])), 0.0)


def surely_fitting_multiplier(peak_share: float) -> float | None:
    """The batch that fits when all of a peak of ``peak_share`` of the device grows with it (the most it can):
    what the peak alone allows; None for a peak of nothing."""
    return fitting_multiplier(1.0, 0.0, peak_share)


def advised(multiplier: float | None) -> bool:
    """Whether a batch ``multiplier`` times larger is worth advising."""
    return multiplier is not None and multiplier >= MIN_MULTIPLIER
