"""The collective a hung job is stuck in, from its ranks' flight-recorder dumps.

Every rank numbers its collectives in each process group (``collective_seq_id``), in the order it calls them, so the
same number on two ranks is the same collective. A rank's last completed collective in a group is read from its own
entries that are not point-to-point (``pg_status`` is not used: NCCL counts a group's sends and receives in the same
"last completed" number, so a point-to-point number there would pass for a collective's). In each group, the first
collective some member has not completed is ``1 +`` the smallest "last completed" among the members. Members whose
dump shows they enqueued it and have not completed it wait in it; members whose dump ends before it never joined
it: they are what the others wait for. A member without a dump is neither: whether it joined cannot be told. When
several groups are stuck, the one whose stuck collective was created first is named (the others may wait on it).

Point-to-point ops are numbered per group on each rank (``p2p_seq_id``), so the numbers of a send and of its
receive differ; they are matched by their peers instead (``nccl:send 0->1`` on rank 0, ``nccl:recv 1<-0`` on rank
1): of the ops a pair has not completed, the k-th send meets the k-th receive, and what is left over on one side
has no counterpart on the other (``point_to_point``).

The other classic hang: every member joined, but not with the same collective, or with different sizes or dtypes
(a rank that skipped a tensor, a shape that depends on the data). Each number entered by two or more ranks is
compared; sizes are not compared for all-to-all, whose splits may differ by rank.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from gpuscope.analyzers.across.point_to_point import unmatched_p2p
from gpuscope.model.hang import (
    HANG_SCHEMA,
    FrEntry,
    HangReport,
    HungCollective,
    Mismatch,
    RankDump,
    RankState,
    UnmatchedP2P,
)

MISMATCHES_SHOWN = 20
_FIELDS = ("op", "input_sizes", "input_dtypes", "output_sizes", "output_dtypes")
_UNEVEN = ("all_to_all", "alltoall", "alltoall_base", "all_to_all_single")
DEFAULT_GROUP = "0"
"""The default (world) process group's name: all ranks are its members."""


@dataclass(frozen=True)
class _Group:
    name: str
    desc: str
    members: tuple[int, ...]
    entries: dict[int, dict[int, FrEntry]]
    """rank -> seq -> its entry (collectives only)."""
    completed: dict[int, int]
    """rank -> the last seq it completed (0 when none)."""
    p2p: dict[int, list[FrEntry]]
    """rank -> its point-to-point entries in the group, oldest first."""


def find_hang(dumps: Sequence[RankDump]) -> HangReport:
    """What the dumps say: the hung collective, who never joined it, who waits in it, mismatches, and sends or
    receives with no counterpart."""
    groups = _groups(dumps)
    dumped = {d.rank for d in dumps}
    mismatches = tuple(m for g in groups for m in _mismatches(g))[:MISMATCHES_SHOWN]
    unmatched = tuple(u for g in groups for u in unmatched_p2p(g.name, g.members, g.p2p, dumped))[:MISMATCHES_SHOWN]
    stuck = [(g, seq) for g in groups if (seq := _stuck_seq(g)) is not None]
    files = tuple(d.source for d in dumps)
    forms = tuple(sorted({d.form for d in dumps}))
    warned = tuple(w for d in dumps for w in d.warnings)
    if not stuck:
        return HangReport(schema=HANG_SCHEMA, summary=_none_stuck(groups, mismatches, unmatched), hung_collective=None,
                          missing_ranks=(), waiting_ranks=(), mismatches=mismatches, dumps=files, forms=forms,
                          unmatched_p2p=unmatched, warnings=warned)
    group, seq = min(stuck, key=lambda gs: _created(gs[0], gs[1]))
    states = tuple(_state(group, r, seq) for r in group.members if r in dumped)
    missing = tuple(s.rank for s in states if not s.entered)
    waiting = tuple(s.rank for s in states if s.entered and s.state != "completed")
    undumped = tuple(r for r in group.members if r not in dumped)
    ops = Counter(group.entries[r][seq].op for r in waiting if seq in group.entries[r])
    hung = HungCollective(process_group=group.name, seq=seq, op=ops.most_common(1)[0][0] if ops else "")
    at_hang = tuple(m for m in mismatches if m.process_group == group.name and m.seq == seq)
    held = [u for u in unmatched if u.rank in missing]
    return HangReport(schema=HANG_SCHEMA, summary=_sentence(group, hung, states, undumped, at_hang, held),
                      hung_collective=hung, missing_ranks=missing, waiting_ranks=waiting, undumped_ranks=undumped,
                      ranks=states, mismatches=mismatches, dumps=files, forms=forms, unmatched_p2p=unmatched,
                      warnings=warned)


def _groups(dumps: Sequence[RankDump]) -> list[_Group]:
    entries: dict[str, dict[int, dict[int, FrEntry]]] = {}
    p2p: dict[str, dict[int, list[FrEntry]]] = {}
    desc: dict[str, str] = {}
    for d in dumps:
        for e in d.entries:
            if e.is_p2p:
                p2p.setdefault(e.group, {}).setdefault(d.rank, []).append(e)
            elif e.seq > 0:
                entries.setdefault(e.group, {}).setdefault(d.rank, {})[e.seq] = e
            else:
                continue
            desc.setdefault(e.group, e.group_desc)
    out = []
    for name in sorted(entries.keys() | p2p.keys()):
        members = _members(name, dumps, set(entries.get(name, {})) | set(p2p.get(name, {})))
        by_rank = {r: entries.get(name, {}).get(r, {}) for r in members}
        completed = {d.rank: _last_completed(d, by_rank[d.rank], name) for d in dumps if d.rank in by_rank}
        out.append(_Group(name=name, desc=desc.get(name, ""), members=members, entries=by_rank, completed=completed,
                          p2p=p2p.get(name, {})))
    return out


def _members(name: str, dumps: Sequence[RankDump], seen: set[int]) -> tuple[int, ...]:
    """The group's ranks: as ``pg_config`` lists them (a dump whose config names one unnamed group means its
    only group); the default group: the world, every rank from 0 to the highest with a dump; else the ranks with
    entries in it."""
    for d in dumps:
        listed = d.group_ranks.get(name)
        if listed is None and len(d.group_ranks) == 1 and "" in d.group_ranks:
            listed = d.group_ranks[""]
        if listed is not None:
            return tuple(sorted(set(listed) | seen))
    if name == DEFAULT_GROUP:  # the world: its ranks are numbered from 0 without a gap
        return tuple(range(max({d.rank for d in dumps} | seen) + 1))
    return tuple(sorted(seen))


def _last_completed(dump: RankDump, entries: dict[int, FrEntry], group: str) -> int:
    """The last collective the rank completed in the group, from its entries that are not point-to-point: the
    newest completed one, or one before the oldest it holds when it holds none completed (the earlier ones fell
    out of its ring buffer, or out of what the reader kept)."""
    done = max((seq for seq, e in entries.items() if e.completed), default=0)
    done = max(done, dump.completed_before.get(group, 0))
    if not done and entries:
        done = min(entries) - 1
    return done


def _stuck_seq(g: _Group) -> int | None:
    """The first collective of the group some dumped member has not completed, when some member entered it."""
    if not g.completed:
        return None
    seq = min(g.completed.values()) + 1
    return seq if any(seq in g.entries.get(r, {}) for r in g.completed) else None


def _created(g: _Group, seq: int) -> int:
    times = [e[seq].time_created_ns for e in g.entries.values() if seq in e and e[seq].time_created_ns]
    return min(t for t in times if t is not None) if times else 2**63


def _state(g: _Group, rank: int, seq: int) -> RankState:
    entries = g.entries.get(rank, {})
    mine = entries.get(seq)
    last = g.completed.get(rank, 0)
    done = entries.get(last)
    return RankState(rank=rank, entered=mine is not None or max(entries, default=0) >= seq,
                     state=("completed" if mine.completed else mine.state or "scheduled") if mine is not None else None,
                     last_completed_seq=last or None, last_completed_op=done.op if done is not None else None,
                     last_enqueued_seq=max(entries, default=0) or None)


def _mismatches(g: _Group) -> list[Mismatch]:
    out = []
    for seq in sorted({s for e in g.entries.values() for s in e}):
        there = {r: e[seq] for r, e in g.entries.items() if seq in e}
        if len(there) < 2:
            continue
        uneven = any(e.op in _UNEVEN for e in there.values())
        for field in _FIELDS:
            if uneven and field.endswith("_sizes"):
                continue
            values: dict[str, list[int]] = {}
            for r, e in sorted(there.items()):
                values.setdefault(_text(getattr(e, field)), []).append(r)
            if len(values) > 1:
                out.append(Mismatch(process_group=g.name, seq=seq, field=field,  # type: ignore[arg-type]
                                    values={k: tuple(v) for k, v in values.items()}))
                break
    return out


def _text(value: object) -> str:
    """A field's value as JSON text ("all_reduce", [[1024, 1024]], ["Float"])."""
    def plain(v: object) -> object:
        return [plain(x) for x in v] if isinstance(v, tuple) else v
    return value if isinstance(value, str) else json.dumps(plain(value))


def _ranks(ranks: Sequence[int]) -> str:
    items = [str(r) for r in ranks]
    if len(items) > 12:
        items = [*items[:10], f"... ({len(items)} in all)"]
    return f"rank{'s' if len(ranks) != 1 else ''} {', '.join(items)}"


def _name(g: _Group) -> str:
    return f"process group {g.name}" + (f" ({g.desc})" if g.desc else "")


def _sentence(g: _Group, hung: HungCollective, states: Sequence[RankState], undumped: Sequence[int],
              mismatches: Sequence[Mismatch], held: Sequence[UnmatchedP2P]) -> str:
    what = f"{hung.op or 'collective'} #{hung.seq} of {_name(g)}"
    missing = [s for s in states if not s.entered]
    waiting = [s for s in states if s.entered and s.state != "completed"]
    verb = "waits" if len(waiting) == 1 else "wait"
    waits = f"{_ranks([s.rank for s in waiting])} entered it and {verb}" if waiting else "no rank waits in it"
    if mismatches:
        m = mismatches[0]
        seen = "; ".join(f"{v} on {_ranks(r)}" for v, r in m.values.items())
        text = f"The ranks entered {what} with different {m.field.replace('_', ' ')} ({seen}): it cannot complete"
    elif missing:
        lasts = "; ".join(f"rank {s.rank} last completed {s.last_completed_op or 'collective'} "
                          f"#{s.last_completed_seq}" if s.last_completed_seq else f"rank {s.rank} completed none"
                          for s in missing[:4])
        text = f"{_ranks([s.rank for s in missing]).capitalize()} never joined {what}: {waits} ({lasts})"
    elif undumped:
        text = f"{what[:1].upper()}{what[1:]} is stuck: {waits}"
    else:
        text = (f"Every rank entered {what} and none completed it: the collective itself is stuck (the network, "
                "the communication library or a GPU), not a rank that stayed away")
    if held:
        text += "; " + "; ".join(p2p_words(u) for u in held[:2])
    if undumped:
        text += f"; {_ranks(undumped)} left no dump, so whether they joined cannot be told"
    return text + "."


def p2p_words(u: UnmatchedP2P) -> str:
    """"rank 0's send #3 to rank 1 in process group 0 has no receive: rank 1's dump shows none posted"."""
    to, other = ("to", "receive") if u.op == "send" else ("from", "send")
    return (f"rank {u.rank}'s {u.op} #{u.seq} {to} rank {u.peer} in process group {u.process_group} has no "
            f"{other}: rank {u.peer}'s dump shows none posted")


def _none_stuck(groups: Sequence[_Group], mismatches: Sequence[Mismatch], unmatched: Sequence[UnmatchedP2P]) -> str:
    if unmatched:
        first = p2p_words(unmatched[0])
        more = f" ({len(unmatched)} such ops in all)" if len(unmatched) > 1 else ""
        return f"No collective is stuck, but {first}{more}."
    if mismatches:
        m = mismatches[0]
        return (f"No collective is stuck, but the ranks entered collective #{m.seq} of process group "
                f"{m.process_group} with different {m.field.replace('_', ' ')}.")
    if not groups:
        return "The dumps hold no collectives."
    return "No collective is stuck: in every process group each rank completed the same collectives."
