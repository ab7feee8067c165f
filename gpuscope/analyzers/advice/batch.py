"""A larger batch, decided once: whether it fits, and the one recommendation every rule that suggests it gives.

A doubled batch roughly doubles the activations, so it is suggested only when the job's memory is known to have
room for it: every rank's peak memory known (``JobFacts.peak_memory_all_known``), none of them only a lower bound
(an old trace without "Total Allocated" sums the allocations it saw, missing what was allocated before), and the
worst rank's peak small enough that it fits doubled whatever it held: under ``BATCH_HEADROOM`` of its device, the
usable share of ``advice.headroom`` (the one ``gpuscope memory`` sizes a batch by) halved. A rank whose peak is
unknown may be the full one: then nothing is said about the batch. Training is told to double the batch; a server
to batch requests.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuscope.analyzers.advice.headroom import DOUBLING_SHARE, USABLE_SHARE
from gpuscope.analyzers.diagnosis import codes, savings
from gpuscope.analyzers.diagnosis.context import Context
from gpuscope.analyzers.diagnosis.rules import serving
from gpuscope.model.diagnosis import JobFacts, Recommendation

BATCH_HEADROOM = DOUBLING_SHARE
"""A doubled batch is only suggested while the worst rank's peak memory is under this share of its device (47.5%):
doubled, all of it would still be within the usable share."""


@dataclass(frozen=True)
class BatchRoom:
    """Whether a doubled batch fits, and why (a clause a recommendation or a note can quote)."""

    fits: bool
    why: str


def batch_room(facts: JobFacts) -> BatchRoom:
    """The decision, from the job's peak-memory facts alone."""
    share = facts.peak_memory_share
    if share is None or facts.peak_memory_bytes is None:
        return BatchRoom(False, "peak memory is unknown")
    if not facts.peak_memory_all_known:
        return BatchRoom(False, f"the peak memory of {'some ranks' if facts.ranks > 1 else 'the GPU'} is unknown")
    if facts.peak_memory_lower_bound:
        return BatchRoom(False, f"peak memory is only known to be at least {share:.0%} of the device")
    where = f" (rank {facts.peak_memory_rank})" if facts.ranks > 1 and facts.peak_memory_rank is not None else ""
    words = f"peak memory is {share:.0%} of the device{where}"
    if share >= BATCH_HEADROOM:
        return BatchRoom(False, f"{words}, at or above {BATCH_HEADROOM:.1%} (doubled it would pass the "
                                f"{USABLE_SHARE:.0%} of the device a job may fill)")
    return BatchRoom(True, words)


def larger_batch(ctx: Context, host_share: float) -> Recommendation | None:
    """Double the batch (training) or batch requests (serving) to spread the per-step host work, when it fits."""
    room = batch_room(ctx.facts)
    if not room.fits:
        return None
    s = savings.share_of(host_share, 0.5, "Per-step host time", "doubling the batch halves it per sample while the "
                        "GPU work per sample stays")
    if ctx.inference:
        return Recommendation(codes.DYNAMIC_BATCHING, "Batch requests (dynamic / continuous batching)",
                              f"{serving.BATCHING} {room.why[:1].upper()}{room.why[1:]}.", s.fraction, s.reasoning,
                              stage="host_overhead")
    return Recommendation(
        codes.LARGER_BATCH, "Use a larger batch",
        f"Double the batch size ({room.why}) so the fixed per-step host work (Python, launches, syncs) is spread over "
        "more samples; scale the learning rate with it.", s.fraction, s.reasoning, stage="host_overhead")
