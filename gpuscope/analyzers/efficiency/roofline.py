"""Where a piece of work sits under the roofline: achieved FLOP/s and bytes/s over its GPU time, its arithmetic
intensity, the ceiling the GPU allows at that intensity (min(peak, intensity x bandwidth)) and the share of it
achieved. One function, so a kernel family, an operator and the charts place work the same way."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class RooflinePoint:
    """One piece of work against the roofline; None where a figure cannot be known (no time, no bytes, no spec)."""

    achieved_tflops: float | None
    achieved_tb_s: float | None
    intensity: float | None
    """FLOPs per byte moved."""
    roofline_tflops: float | None
    roofline_share: float | None
    bound: Literal["compute", "memory"] | None


def roofline_point(flops: float, moved_bytes: float, gpu_us: float, peak_flops: float | None,
                   bandwidth_bytes_per_s: float | None) -> RooflinePoint:
    """``flops`` and ``moved_bytes`` done in ``gpu_us`` of GPU time, on a GPU of ``peak_flops`` (FLOP/s, for the
    work's type) and ``bandwidth_bytes_per_s``."""
    seconds = gpu_us / 1e6
    achieved = flops / seconds / 1e12 if seconds > 0 else None
    tb_s = moved_bytes / seconds / 1e12 if seconds > 0 else None
    intensity = flops / moved_bytes if moved_bytes > 0 else None
    ceiling: float | None = None
    bound: Literal["compute", "memory"] | None = None
    if peak_flops and bandwidth_bytes_per_s and intensity is not None:
        ceiling = min(peak_flops, intensity * bandwidth_bytes_per_s) / 1e12
        bound = "compute" if intensity * bandwidth_bytes_per_s >= peak_flops else "memory"
    share = achieved / ceiling if achieved is not None and ceiling else None
    return RooflinePoint(achieved, tb_s, intensity, ceiling, share, bound)
