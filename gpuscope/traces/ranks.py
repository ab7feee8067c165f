"""One rank number per trace, never reassigned in silence.

A rank number a file claims (its distributedInfo's, or its name's: ``rank3``, ``worker_3``) is kept. Files that
claim the same number (two jobs' rank 0 in one folder, say) and files that claim none (no distributedInfo) are told
apart by what their traces say: the host (the profiler's ``<host>_<pid>`` file name), the process id, and the GPU
their work ran on. Each is then a rank of its own: the first (by host, process, GPU, name) keeps the claimed
number, the others take the lowest numbers no file claims, and a warning names every such file with the rank it is
analysed as and what told it apart. Files that nothing tells apart stop the analysis with one line naming them:
which one is meant cannot be guessed.

Several profiler cycles of one process are not told apart here: ``cycles.latest_cycles`` has already kept the
latest of them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, is_dataclass, replace
from itertools import combinations, count
from pathlib import Path
from typing import Any

from gpuscope.model.trace import RankFile
from gpuscope.traces.cycles import Pair, claimed_rank, host_of
from gpuscope.traces.errors import TraceError

FACTS = ("host", "pid", "GPU")


@dataclass(frozen=True)
class Numbered:
    pairs: tuple[Pair, ...]
    """Each trace (with the rank it is analysed as, set in its per-rank result too) and its per-rank result,
    by rank."""
    warnings: tuple[str, ...]


def number_ranks(pairs: Sequence[Pair], where: Path | str) -> Numbered:
    """Give every trace a rank of its own, keeping what each file claims; raise TraceError (naming the files) when
    two files share a rank id and nothing in them tells them apart."""
    groups: dict[int | None, list[Pair]] = {}
    for pair in pairs:
        groups.setdefault(claimed_rank(pair[0]), []).append(pair)
    free = _free(set(r for r in groups if r is not None))
    out: list[Pair] = []
    warnings: list[str] = []
    for rank, group in sorted(groups.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
        if len(group) == 1 and (rank is not None or len(groups) == 1):
            out.append(_renumbered(group[0], rank if rank is not None else next(free)))
            continue
        group = sorted(group, key=lambda p: _order(p[0]))
        _check_apart(group, rank, where)
        numbers = ([rank] if rank is not None else []) + [next(free) for _ in group[1 if rank is not None else 0:]]
        out += [_renumbered(p, n) for p, n in zip(group, numbers)]
        warnings.append(_told_apart(group, rank, numbers))
    return Numbered(tuple(sorted(out, key=lambda p: p[0].rank)), tuple(warnings))


def facts(trace: RankFile) -> tuple[str | None, int | None, int | None]:
    """What a trace says of where it ran: host, process id, GPU."""
    return host_of(trace), trace.pid, trace.main_device


def _free(claimed: set[int]) -> Iterator[int]:
    return (n for n in count() if n not in claimed)


def _order(trace: RankFile) -> tuple[str, int, int, str]:
    host, pid, gpu = facts(trace)
    return host or "", pid if pid is not None else -1, gpu if gpu is not None else -1, Path(trace.source).name


def _renumbered(pair: Pair, rank: int) -> Pair:
    trace, result = pair
    if trace.rank == rank:
        return pair
    # A per-rank result computed under the old number carries it: give it the new one too, never drop it.
    if is_dataclass(result) and not isinstance(result, type) and hasattr(result, "rank"):
        result = replace(result, rank=rank)
    return replace(trace, rank=rank), result


def _apart(a: RankFile, b: RankFile) -> bool:
    """Some fact both traces state differs."""
    return any(x is not None and y is not None and x != y for x, y in zip(facts(a), facts(b)))


def _check_apart(group: list[Pair], rank: int | None, where: Path | str) -> None:
    for (a, _), (b, _) in combinations(group, 2):
        if not _apart(a, b):
            claim = f"both claim rank {rank}" if rank is not None else "both say no rank"
            raise TraceError(where, f"{Path(a.source).name} and {Path(b.source).name} {claim}, and nothing in them "
                                    "(host, process id, GPU) tells them apart: analyse them one at a time, or "
                                    "move one out")


def _told_apart(group: list[Pair], rank: int | None, numbers: list[int]) -> str:
    stated = [facts(t) for t, _ in group]
    varying = [i for i in range(len(FACTS)) if len({f[i] for f in stated}) > 1]
    listed = ", ".join(f"{_described(t, f, varying)} as rank {n}" for (t, _), f, n in zip(group, stated, numbers))
    kinds = ", ".join(FACTS[i] for i in varying)
    if rank is not None:
        return f"rank {rank} is claimed by {len(group)} files, told apart by {kinds}: analysed {listed}"
    if len(group) == 1:
        return (f"{Path(group[0][0].source).name} says no rank (no distributedInfo, none in its name): analysed as "
                f"rank {numbers[0]}")
    return (f"{len(group)} trace files say no rank (no distributedInfo, none in the name), told apart by {kinds}: "
            f"analysed {listed}")


def _described(trace: RankFile, stated: tuple[Any, ...], varying: list[int]) -> str:
    said = ", ".join(f"{FACTS[i]} {stated[i] if stated[i] is not None else 'unknown'}" for i in varying)
    return f"{Path(trace.source).name}{f' ({said})' if said else ''}"
