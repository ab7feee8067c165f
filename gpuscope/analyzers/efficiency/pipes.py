"""DCGM's profiling counters read one way for a live run and for the fleet: the tensor pipes' share of the time
beside the SMs' (is the matrix work on the tensor cores?), and when that says the tensor cores sit idle while the
SMs are busy. A counter dcgm-exporter does not give stays None (n/a), never 0."""

from __future__ import annotations

from collections.abc import Iterable

from gpuscope.model.efficiency import PipeUse

SM_BUSY_MIN = 0.5
"""SMs active at least half the time: computing is what the GPU spends its time on."""
TENSOR_IDLE_SHARE = 0.1
"""Tensor pipes busy under a tenth of the SM-active time: the matrix work (if any) is not on the tensor cores. A
well-fed bf16 GEMM keeps them busy most of it; DCGM's own guidance reads a low PIPE_TENSOR_ACTIVE beside a high
SM_ACTIVE as "not using tensor cores"."""


def pipe_use(sm_active: float | None, tensor_active: float | None, sm_occupancy: float | None = None,
             dram_active: float | None = None) -> PipeUse:
    """The counters of one GPU (or a group's weighted means)."""
    return PipeUse(sm_active=sm_active, tensor_active=tensor_active, sm_occupancy=sm_occupancy,
                   dram_active=dram_active)


def tensor_cores_idle(use: PipeUse) -> bool:
    """The SMs are busy and the tensor pipes are not: matrix work on CUDA cores (fp32 without TF32, or no
    autocast), or no matrix work at all. False where either counter is unknown."""
    share = use.tensor_share_of_sm
    return use.sm_active is not None and use.sm_active >= SM_BUSY_MIN and share is not None \
        and share < TENSOR_IDLE_SHARE


def mean_use(uses: Iterable[PipeUse]) -> PipeUse:
    """The mean of each counter over the GPUs that gave it."""
    rows = list(uses)

    def mean(values: list[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return sum(known) / len(known) if known else None

    return PipeUse(sm_active=mean([u.sm_active for u in rows]), tensor_active=mean([u.tensor_active for u in rows]),
                   sm_occupancy=mean([u.sm_occupancy for u in rows]), dram_active=mean([u.dram_active for u in rows]))


TENSOR_ADVICE = ("Put the matrix work on the tensor cores: run the model under torch.autocast(dtype=torch.bfloat16) "
                 "(float16 with a GradScaler on GPUs without bf16), or at least allow TF32 for fp32 matmuls "
                 "(torch.backends.cuda.matmul.allow_tf32 = True, torch.backends.cudnn.allow_tf32 = True).")
"""What to change when the tensor pipes sit idle while the SMs work: the same words for a run and for the fleet."""
