"""The verdict names the straggler when waiting for it is the job's largest waste.

The others' wait for a straggler is part of the communication stage (on a GPU, their NCCL kernels spin while they
wait). So the verdict names the worst straggler when the verdict is communication and the share of the job's time
spent waiting for that rank is at least every other stall's share; and when no stage could be named at all (a CPU
job over gloo has no GPU stage shares) but a straggler stands out.
"""

from __future__ import annotations

from dataclasses import replace

from gpuscope.analyzers.diagnosis.stages import STALLS, StageShares
from gpuscope.model.across import StragglerRank
from gpuscope.model.diagnosis import Verdict


def waste_share(s: StragglerRank, ranks: int) -> float:
    """The share of the job's rank-time spent waiting for ``s``: each of the other ranks waits ``score`` of its
    step, the straggler itself none."""
    return s.score * (ranks - 1) / ranks if ranks > 1 else 0.0


def named_straggler(verdict: Verdict, shares: StageShares | None, stragglers: tuple[StragglerRank, ...],
                    ranks: int) -> Verdict:
    """``verdict``, naming the worst straggler where waiting for it is the largest waste."""
    if not stragglers:
        return verdict
    top = stragglers[0]
    waste = waste_share(top, ranks)
    if verdict.primary is not None:
        others = [shares.get(st) for st in STALLS if st != "communication"] if shares is not None else []
        if verdict.primary != "communication" or any(x > waste for x in others):
            return verdict
    p = top.p_value if top.p_value is not None else 1.0
    evidence = {**verdict.evidence, "straggler_rank": top.rank, "straggler_wait_caused_us": top.wait_caused_us,
                "straggler_step_share": top.score, "straggler_late_share": top.late_share}
    return replace(verdict, primary="communication", resource="nccl",
                   confidence=max(verdict.confidence, min(1.0, max(0.0, 1.0 - p * ranks))),
                   evidence=evidence, summary=sentence(top, ranks))


def sentence(s: StragglerRank, ranks: int) -> str:
    """The straggler in one sentence: who, how long the others wait, how consistently, and why."""
    wait = f"{s.wait_caused_us / 1000:.1f} ms" if s.wait_caused_us >= 1000 else f"{s.wait_caused_us:.0f} µs"
    units = f"{s.consistency_unit}{'s' if s.consistency_units != 1 else ''}"
    return (f"Rank {s.rank} holds the job back: the other {ranks - 1} ranks wait for it {wait} per step "
            f"({s.score:.0%} of their step), in {s.consistent_in} of {s.consistency_units} {units}, at the "
            f"collectives it reaches last ({s.last_in} of {s.collectives}); the cause: {s.cause}.")
