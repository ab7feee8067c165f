"""Sends and receives with no counterpart, from flight-recorder entries.

A rank numbers its point-to-point ops per process group (``p2p_seq_id``), sends and receives to every peer in one
count, so a send's number and its receive's differ. The op's name gives the pair instead, in the group's own rank
numbers: ``nccl:send 0->1`` on rank 0, ``nccl:recv 1<-0`` on rank 1. A completed op found its counterpart; of the
ops a pair has not completed, the k-th send from a rank to a peer meets the k-th receive the peer posted from it
(NCCL requires a pair's ops in the same order on both sides), so what is left over on one side has none on the
other. Where the peer left no dump, nothing can be said of its side, and nothing is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gpuscope.model.hang import FrEntry, UnmatchedP2P

_KINDS = ("send", "recv")


def unmatched_p2p(group: str, members: Sequence[int], p2p: Mapping[int, Sequence[FrEntry]],
                  dumped: set[int]) -> list[UnmatchedP2P]:
    """The group's sends with no receive posted for them and receives with no send, where the peer left a dump.
    ``members``: the group's ranks, whose sorted order maps the names' group ranks to global ones."""
    order = sorted(members)
    pending: dict[tuple[str, int, int], list[FrEntry]] = {}
    for rank, entries in p2p.items():
        for e in entries:
            kind = e.op.split(" ", 1)[0]
            if e.completed or e.peer is None or kind not in _KINDS or not 0 <= e.peer < len(order):
                continue
            pending.setdefault((kind, rank, order[e.peer]), []).append(e)
    out: list[UnmatchedP2P] = []
    for (kind, rank, peer), mine in sorted(pending.items(), key=lambda kv: kv[0]):
        if peer not in dumped:
            continue
        theirs = pending.get(("recv" if kind == "send" else "send", peer, rank), [])
        out.extend(UnmatchedP2P(process_group=group, op="send" if kind == "send" else "recv", rank=rank, peer=peer,
                                seq=e.seq, state=e.state or "scheduled")
                   for e in mine[len(theirs):])
    return sorted(out, key=lambda u: (u.rank, u.seq))
