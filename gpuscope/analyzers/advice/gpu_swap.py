"""A cheaper GPU, decided once for a run (``cost.right_size``) and a fleet's groups (``fleet.advice``).

A job may move to a cheaper catalog GPU when all of these hold:
- its GPUs were busy under ``MAX_BUSY`` of the time (the slack a slower GPU needs) and the worst rank's peak memory
  is known exactly, and fits the cheaper GPU's memory with ``HEADROOM``;
- the cheaper GPU is the same vendor's (a CUDA job does not move to ROCm by changing the instance type);
- it supports what the job uses: the element types and kernels of its traces (``RankSetup.gpu_needs``: bf16,
  fp16, fp8, TF32, FlashAttention 2 or 3). A job whose traces do not say (a fleet, a live run without a profiler
  trace) is held to everything its own GPU supports but TF32, which only changes speed. A GPU the capability table
  does not know supports nothing that needs checking: it is offered only to a job in fp32 alone.
Of the cheaper GPUs that pass, the dearest is picked: the smallest step down in price, and so usually in speed.
A cheaper GPU saves dollars, not step time: ``diagnosis.verdict.ordered`` ranks it below every measured stall.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpuscope.analyzers.trace.needs import FEATURES
from gpuscope.analyzers.trace.vendor import name_vendor
from gpuscope.model.cost import GpuOffer, Price
from gpuscope.model.gpu import Vendor
from gpuscope.model.gpu_spec import Dtype, GpuSpec
from gpuscope.model.rank import RankReport

Capabilities = Callable[[str], frozenset[str] | None]
"""What a GPU model supports, by its name (a device name or a catalog model): the features of
``analyzers.trace.needs.FEATURES`` it has; None for a model it does not know."""
MAX_BUSY = 0.5
"""Only suggest a cheaper GPU when the GPUs were busy less than half the time: the slack a slower GPU needs."""
HEADROOM = 1.25
"""Peak memory x this must fit the cheaper GPU's nominal memory (allocator slack, usable < nominal)."""
SPEED_ONLY = frozenset({"tf32"})
"""Features without which a job still runs, only slower (PyTorch runs fp32 matmuls in fp32): a job that does not
say what it uses is not held to them."""
WORDS = {"bf16": "bf16", "fp16": "fp16", "fp8": "fp8", "tf32": "TF32", "flash_attention_2": "FlashAttention 2",
         "flash_attention_3": "FlashAttention 3"}


SpecLookup = Callable[[str], GpuSpec | None]
"""A GPU's spec-table entry by its name (``gpuscope.specs``); None for a GPU the table lacks."""
_ELEMENT_TYPES: tuple[Dtype, ...] = ("bf16", "fp16", "fp8", "tf32")


def unknown_capabilities(model: str) -> frozenset[str] | None:
    """The capability table that knows no GPU: every GPU's support unknown."""
    return None


def features_of(spec: GpuSpec) -> frozenset[str]:
    """What a GPU supports, from its spec-table entry: the element types it runs natively (``GpuSpec.supports``),
    FlashAttention 2 on NVIDIA compute capability 8.0 or newer (Ampere on; the library refuses older GPUs) and on
    AMD CDNA 2 or newer (MI200, MI300: composable_kernel's and Triton's FlashAttention), FlashAttention 3 on
    Hopper (compute capability 9.x: it is built on Hopper's wgmma and TMA)."""
    found: set[str] = {d for d in _ELEMENT_TYPES if spec.supports(d)}
    cc = _cuda_capability(spec.compute_capability) if spec.vendor == "nvidia" else None
    if (cc is not None and cc >= 8.0) or (spec.vendor == "amd" and spec.arch.startswith("CDNA")
                                          and spec.arch not in ("CDNA", "CDNA 1")):
        found.add("flash_attention_2")
    if cc is not None and 9.0 <= cc < 10.0:
        found.add("flash_attention_3")
    return frozenset(found)


def capabilities_from(lookup: SpecLookup) -> Capabilities:
    """The capabilities of every GPU the spec table knows, through ``lookup``."""
    def capabilities(model: str) -> frozenset[str] | None:
        spec = lookup(model)
        return features_of(spec) if spec is not None else None
    return capabilities


def _cuda_capability(text: str | None) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None


@dataclass(frozen=True)
class Swap:
    """The cheaper GPU a job may move to, and what it was checked for."""

    offer: GpuOffer
    usd_per_gpu_hour: float
    """Today's price per GPU-hour."""
    required: frozenset[str]
    """The features the cheaper GPU was checked to support."""
    needs_known: bool
    """``required`` is what the job's traces use (else what its own GPU supports)."""

    @property
    def checked(self) -> str:
        """What the cheaper GPU was checked for, as a clause of the recommendation."""
        listed = ", ".join(WORDS[f] for f in FEATURES if f in self.required)
        if self.needs_known:
            return f"it supports what the job uses ({listed})" if listed else \
                "the job computes in fp32 alone, which every GPU runs"
        return (f"the job's traces do not say which types it uses, so it was held to everything today's GPU "
                f"supports ({listed or 'fp32'})")


def job_needs(ranks: Sequence[RankReport]) -> frozenset[str] | None:
    """What the job's GPU work uses (every rank's ``RankSetup.gpu_needs``); None when any rank with GPU work does
    not say (no trace, or a report saved before it was recorded)."""
    gpu_ranks = [r for r in ranks if r.gpu_busy is not None]
    needs = [r.profile.setup.gpu_needs if r.profile is not None else None for r in gpu_ranks]
    if not gpu_ranks or any(n is None for n in needs):
        return None
    return frozenset(f for n in needs for f in n or ())


def cheaper_gpu(price: Price | None, *, peak_memory_bytes: int | None, busy: float | None,
                needs: frozenset[str] | None, capabilities: Capabilities, vendor: Vendor | None = None) -> Swap | None:
    """The cheaper GPU the job may move to (see the module's rules); None when none may.

    ``peak_memory_bytes``: the worst rank's peak, known exactly (None: unknown or only a lower bound);
    ``busy``: the share of time the GPUs were busy; ``needs``: ``job_needs``, None when unknown; ``vendor``: the
    job's, when its traces say (else read from the price's GPU name)."""
    current = price.usd_per_gpu_hour if price is not None else None
    if price is None or current is None or peak_memory_bytes is None or busy is None or busy >= MAX_BUSY:
        return None
    required = _required(price, needs, capabilities)
    if required is None:
        return None
    vendor = vendor or name_vendor(price.catalog_model or price.gpu_model)
    need_bytes = peak_memory_bytes * HEADROOM
    fits = [o for o in price.offers
            if o.usd_per_gpu_hour < current and o.memory_bytes >= need_bytes and o.model != price.catalog_model
            and (vendor is None or name_vendor(o.model) == vendor) and _runs(o.model, required, capabilities)]
    if not fits:
        return None
    pick = max(fits, key=lambda o: (o.usd_per_gpu_hour, o.memory_bytes))
    return Swap(pick, current, required, needs is not None)


def _required(price: Price, needs: frozenset[str] | None, capabilities: Capabilities) -> frozenset[str] | None:
    if needs is not None:
        return needs
    own = next((c for c in (capabilities(n) for n in (price.gpu_model, price.catalog_model) if n) if c is not None),
               None)
    return None if own is None else own - SPEED_ONLY


def _runs(model: str, required: frozenset[str], capabilities: Capabilities) -> bool:
    has = capabilities(model)
    return not required if has is None else required <= has
