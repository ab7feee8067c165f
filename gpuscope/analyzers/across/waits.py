"""Who waits for whom at each matched collective: the last rank to arrive holds the others, and the part of each
other rank's wait that the last rank's longer lead-in accounts for is its wait for that rank (docs/ranks.md
section 3; ``stragglers`` says why the lead-in bounds it)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpuscope.analyzers.across.match import Matched

US_PER_NS = 1e-3


@dataclass(frozen=True)
class Waits:
    last: npt.NDArray[np.intp]
    """Per collective, the row of the rank that reached it last."""
    wait_us: npt.NDArray[np.float64]
    """[rank, collective]: its wait there, from its arrival to the last rank's (at most its time in it)."""
    blamed_us: npt.NDArray[np.float64]
    """[rank, collective]: the part of its wait there that the last rank's longer lead-in accounts for (its wait
    for the last rank); 0 for the last rank itself and where a rank has no part."""
    wait_for_us: npt.NDArray[np.float64]
    """[r, s]: r's wait for s, summed over the collectives s reached last."""


def waits(m: Matched) -> Waits:
    """Each rank's wait at each matched collective, and the part of it that is its wait for the last rank."""
    present = m.present
    last = np.argmax(np.where(present, m.arrival_ns, -np.inf), axis=0)
    cols = np.arange(len(m))
    with np.errstate(invalid="ignore"):
        wait = np.where(present, np.clip(m.arrival_ns[last, cols][None, :] - m.arrival_ns, 0.0,
                                         np.maximum(m.end_ns - m.arrival_ns, 0.0)), 0.0)
        leadin = m.arrival_ns - m.release_ns
        longer = leadin[last, cols][None, :] - leadin  # the last rank's lead-in less each rank's
        blamed = np.where(present, np.clip(np.minimum(wait, longer), 0.0, None), 0.0)
    onehot = np.zeros((len(m), len(m.ranks)))
    onehot[cols, last] = 1.0
    blamed_us = blamed * US_PER_NS
    return Waits(last=last, wait_us=wait * US_PER_NS, blamed_us=blamed_us, wait_for_us=blamed_us @ onehot)
