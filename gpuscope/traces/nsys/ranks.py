"""The ranks of one export: one per process and GPU that ran GPU work, numbered by what the export records.

A rank's number is, in order: the rank the launched program's environment or command line names (RANK, ... or
``--rank=N``; only when the export holds one rank: the launch environment is the first process's), then the rank
NCCL's ``ncclCommInitRank`` range gives the process's device in its largest communicator, else a number by GPU
(CUDA device), then process id. Numbers the export records are kept; a rank without one, or whose number another
rank of the export holds already, takes the lowest free number, and a warning says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import count

from gpuscope.traces.nsys.machine import Machine
from gpuscope.traces.nsys.nccl import Membership, world_rank


@dataclass(frozen=True)
class RankKey:
    """One process's GPU as a rank."""

    pid: int
    device: int
    rank: int
    given: bool
    """The export records the rank (environment, command line, NCCL), or the export holds several ranks and this
    reader numbered them (so they are never taken for one rank's profiler cycles)."""
    world_size: int | None = None


def number_ranks(keys: list[tuple[int, int]], machine: Machine,
                 members: dict[int, list[Membership]]) -> tuple[list[RankKey], tuple[str, ...]]:
    """A rank for each (pid, CUDA device), by rank, and the lines that say how numbers were chosen where the
    export did not record them."""
    keys = sorted(keys, key=lambda k: (k[1], k[0]))
    claims: dict[tuple[int, int], tuple[int, int | None]] = {}
    if len(keys) == 1 and machine.launch_rank is not None:
        claims[keys[0]] = (machine.launch_rank, machine.launch_world_size)
    else:
        for pid, device in keys:
            found = world_rank(members.get(pid, []), device)
            if found is not None:
                claims[(pid, device)] = found
    taken: set[int] = set()
    out: list[RankKey] = []
    unclaimed: list[tuple[int, int]] = []
    for key in keys:
        claim = claims.get(key)
        if claim is None or claim[0] in taken:
            unclaimed.append(key)
            continue
        taken.add(claim[0])
        out.append(RankKey(pid=key[0], device=key[1], rank=claim[0], given=True, world_size=claim[1]))
    free = (n for n in count() if n not in taken)
    several = len(keys) > 1
    for pid, device in unclaimed:
        out.append(RankKey(pid=pid, device=device, rank=next(free), given=several,
                           world_size=machine.launch_world_size))
    lines: tuple[str, ...] = ()
    if unclaimed and several:
        listed = ", ".join(f"process {k.pid} on GPU {k.device} as rank {k.rank}" for k in out
                           if (k.pid, k.device) in set(unclaimed))
        lines = (f"{len(unclaimed)} of the {len(keys)} processes' GPUs record no rank (no RANK in the launch "
                 f"environment, no NCCL communicator, or one another holds): analysed {listed}",)
    return sorted(out, key=lambda k: k.rank), lines
