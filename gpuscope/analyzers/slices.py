"""A job that uses a small part of a whole GPU: the smallest MIG slice it fits, and what that saves per hour.

Pure. A slice fits when the job's peak memory, with the right-sizing headroom, fits the profile's memory, and its
busy share of the whole GPU, scaled to the slice's compute slices, stays under ``SLICE_TARGET_BUSY`` (the same
headroom for bursts the fleet packs shared GPUs to). A slice is charged its compute slices over the GPU's
(``Price.slice_share``), so moving saves ``(1 - share) x the GPU's price`` per GPU-hour. MPS packs jobs the same
way without fixed slices; the advice names both.
"""

from __future__ import annotations

from gpuscope.analyzers.diagnosis import codes
from gpuscope.model.cost import MigProfile, Price, gpu_time
from gpuscope.model.diagnosis import Recommendation

SLICE_TARGET_BUSY = 0.6
"""A slice (or a shared GPU) is sized so the work keeps it at most this busy: headroom for bursts."""


def smallest_slice(busy: float, peak_memory_bytes: float, price: Price, *, headroom: float) -> MigProfile | None:
    """The cheapest MIG profile of ``price``'s GPU that carries a job of ``busy`` (share of the whole GPU) and
    ``peak_memory_bytes``; None when none smaller than the whole GPU does."""
    whole = price.mig_compute_slices
    if whole is None:
        return None
    fits = [p for p in price.mig_profiles
            if p.compute_slices < whole and "+" not in p.name and p.memory_bytes >= peak_memory_bytes * headroom
            and busy * whole / p.compute_slices <= SLICE_TARGET_BUSY]
    return min(fits, key=lambda p: (p.compute_slices, p.memory_gb), default=None)


def slice_recommendation(profile: MigProfile, price: Price, *, busy: float, peak_memory_bytes: float, gpus: int,
                         hours: float, what: str) -> Recommendation:
    """"Fits on a MIG <profile> slice (or MPS)", its saving over ``hours`` GPU-hours (the views say it per hour)."""
    usd, share = price.usd_per_gpu_hour or 0.0, price.slice_share(profile.name) or 1.0
    per_hour = usd * (1 - share) * gpus
    model = price.catalog_model or price.gpu_model or "GPU"
    return Recommendation(
        code=codes.MIG_SLICE, title=f"Fits on a MIG {profile.name} slice (or MPS)",
        detail=(f"{what} used {busy:.0%} of the {model}'s SM time and {peak_memory_bytes / 1e9:.1f} GB of its memory. "
                f"A MIG {profile.name} instance ({profile.compute_slices} of {price.mig_compute_slices} compute "
                f"slices, {profile.memory_gb:g} GB) would carry it at about {min(busy / share, 1.0):.0%} busy, "
                f"costs {share:.0%} of the GPU (${usd * share:.2f} instead of ${usd:.2f} per GPU-hour), and frees "
                f"the rest for other work; MPS shares a GPU the same way without fixed slices. Check that its "
                f"kernels still fit the slice's SMs: a job whose speed scales with SM count runs slower there."),
        est_step_saving=None, est_saving_usd=per_hour * hours / max(gpus, 1),
        reasoning=(f"{usd:.4g} USD/GPU-h x (1 - {profile.compute_slices}/{price.mig_compute_slices}) x {gpus} GPU"
                   f"{'s' if gpus != 1 else ''}; over {gpu_time(hours)}, assuming the same run time. The slice: "
                   f"busy {busy:.3f} x {price.mig_compute_slices}/{profile.compute_slices} <= {SLICE_TARGET_BUSY:g}, "
                   f"peak memory x headroom <= {profile.memory_gb:g} GB."))
