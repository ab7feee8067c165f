"""MIG instances priced as slices of their GPU: a GPU of its own, charged its compute slices over its parent's
(``Price.slice_share``: 1g = 1/7 of an A100's, H100's, H200's or B200's price, 1/4 of an A30's).

Compute slices are the rule because they are what an instance takes from everyone else: its SMs (and the L2 and
copy engines that go with them) are its alone. The memory slices would give other shares (NVIDIA's eighths:
1g.10gb is 1/8 of an H100's memory, 3g.40gb is 4/8), and an instance's price could be argued either way; one rule,
stated, keeps every view and the fleet on one number (docs/cost.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from fractions import Fraction

from gpuscope.model.cost import MigProfile, Price
from gpuscope.model.gpu import GpuInfo
from gpuscope.model.schema import split_gpu


def is_mig(gpu: GpuInfo) -> bool:
    return gpu.mig_profile is not None or split_gpu(gpu.index)[1] is not None


def run_price(price: Price, gpus: Sequence[GpuInfo]) -> Price:
    """The price per GPU-hour of a run's GPUs: the whole GPU's, or where they are MIG instances, each one's share of
    it (the mean over the run's GPUs, which all ran for the run's length). Unknown when an instance's share is."""
    if not any(is_mig(g) for g in gpus) or price.usd_per_gpu_hour is None:
        return price
    shares = [price.slice_share(g.mig_profile) if is_mig(g) else 1.0 for g in gpus]
    whole = price.catalog_model or price.gpu_model or "GPU"
    if None in shares:
        unknown = sorted({g.mig_profile or "unknown profile" for g, s in zip(gpus, shares) if s is None})
        return replace(price, usd_per_gpu_hour=None, whole_usd_per_gpu_hour=price.usd_per_gpu_hour,
                       note=(f"This run used a MIG instance ({', '.join(unknown)}) whose share of the {whole}'s "
                             f"compute slices is not known, so its cost is not either: set a price for the instance "
                             f"with --usd-per-gpu-hour x its share of the GPU."))
    share = sum(s for s in shares if s is not None) / len(shares)
    return replace(price, usd_per_gpu_hour=price.usd_per_gpu_hour * share, gpu_share=share,
                   whole_usd_per_gpu_hour=price.usd_per_gpu_hour, share_basis=_basis(gpus, price, whole))


def _basis(gpus: Sequence[GpuInfo], price: Price, whole: str) -> str:
    slices = price.mig_compute_slices
    parts = []
    for g in gpus:
        profile = MigProfile.parse(g.mig_profile) if is_mig(g) else None
        parts.append(f"MIG {g.mig_profile}: {profile.compute_slices} of the {whole}'s {slices} compute slices"
                     if profile is not None else f"a whole {whole}")
    unique = list(dict.fromkeys(parts))
    if len(unique) == 1:
        return unique[0]
    fractions = [str(Fraction(s).limit_denominator(8)) for s in
                 (price.slice_share(g.mig_profile) or 0.0 if is_mig(g) else 1.0 for g in gpus)]
    return f"mean over the run's {len(gpus)} GPUs ({', '.join(fractions)} of a whole {whole})"
