"""What NCCL's own NVTX ranges say (NCCL 2.x annotates its API in the ``NCCL`` domain, with a JSON payload):

- ``ncclCommInitRank*``: the communicator's id, its number of ranks, this process's rank in it and its CUDA
  device. The largest communicator a process's device joined is the job's world: its rank there is the rank.
- ``ncclAllReduce``, ``ncclBroadcast``, ``ncclAllGather``, ...: the communicator and the message size in bytes.
  Each is a collective of the model (``CollectiveOps``) with its bytes and group size, and the NCCL kernel its call
  launched carries the range's id (``external_id``), as a Kineto trace joins a collective op to its kernel.

NCCL's payload gives bytes, not element counts: the model's counts are kept in bytes (dtype "Byte"), with the
sizes nccl-tests counts: an all-gather's message is the gathered output (NCCL names the send buffer), a
reduce-scatter's the whole input (NCCL names the receive buffer).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import msgspec
import numpy as np
import numpy.typing as npt

from gpuscope.traces.nsys.nvtx import Ranges

I64 = npt.NDArray[np.int64]
DOMAIN = "NCCL"
SIZE_KEY = "Message size [bytes]"
EXTERNAL_ID_BASE = 1 << 40
"""NCCL ranges' ids as ``external_id``, far from any id a Kineto trace gives."""
_decoder = msgspec.json.Decoder()


@dataclass(frozen=True)
class Membership:
    """One process's device in one communicator."""

    comm: int
    ranks: int
    rank: int
    device: int


@dataclass(frozen=True)
class Collective:
    """One NCCL collective call: its range (row of ``Ranges``), the op, its message and the communicator's size."""

    row: int
    op: str
    in_bytes: int
    out_bytes: int
    group_size: int


@dataclass(frozen=True)
class Nccl:
    """What NCCL's ranges of an export say."""

    members: dict[int, list[Membership]]
    """pid -> the communicators its devices joined."""
    collectives: list[Collective]
    """Every collective call with a message size, in row order."""


def read_nccl(ranges: Ranges) -> Nccl:
    """NCCL's ranges' payloads, each decoded once."""
    payloads = {row: _payload(body) for row, body in sorted(ranges.payloads.items())
                if ranges.labels[int(ranges.label[row])].domain == DOMAIN}
    members = memberships(ranges, payloads)
    return Nccl(members=members, collectives=collectives(ranges, members, payloads))


def memberships(ranges: Ranges, payloads: dict[int, dict[str, object]]) -> dict[int, list[Membership]]:
    """pid -> the communicators its devices joined (from every NCCL range whose payload names a rank)."""
    out: dict[int, list[Membership]] = {}
    for row, data in payloads.items():
        if "Rank" not in data:
            continue
        comm, ranks, rank, device = (_int(data.get(k)) for k in ("NCCL communicator ID", "No. of ranks", "Rank",
                                                                 "CUDA device"))
        if comm is None or ranks is None or rank is None or device is None or not 0 <= rank < ranks:
            continue
        found = Membership(comm=comm, ranks=ranks, rank=rank, device=device)
        mine = out.setdefault(int(ranges.pid[row]), [])
        if found not in mine:
            mine.append(found)
    return out


def world_rank(members: list[Membership], device: int) -> tuple[int, int] | None:
    """(rank, world size) of a process's device: its rank in the largest communicator it joined (the lowest
    communicator id among equals); None when it joined none."""
    mine = [m for m in members if m.device == device]
    if not mine:
        return None
    best = max(mine, key=lambda m: (m.ranks, -m.comm))
    return best.rank, best.ranks


def collectives(ranges: Ranges, members: dict[int, list[Membership]],
                payloads: dict[int, dict[str, object]]) -> list[Collective]:
    """Every NCCL collective call with a message size, in row order."""
    sizes = {m.comm: m.ranks for mine in members.values() for m in mine}
    out = []
    for row, data in payloads.items():
        label = ranges.labels[int(ranges.label[row])]
        size = _int(data.get(SIZE_KEY))
        if size is None:
            continue
        comm = _int(data.get("NCCL communicator ID"))
        n = sizes.get(comm, -1) if comm is not None else -1
        op = label.name.removeprefix(f"{DOMAIN}:")
        flat = op.lower()
        in_bytes = size * n if "reducescatter" in flat and n > 0 else size
        out_bytes = size * n if "allgather" in flat and n > 0 else size
        out.append(Collective(row=row, op=op, in_bytes=in_bytes, out_bytes=out_bytes, group_size=n))
    return out


def _payload(body: str) -> dict[str, object]:
    try:
        data = _decoder.decode(body)
    except (msgspec.DecodeError, RecursionError):
        try:
            data = json.loads(body)  # an integer past 64 bits, which msgspec does not take
        except (ValueError, RecursionError):
            return {}
    return data if isinstance(data, dict) else {}


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**64 else None
