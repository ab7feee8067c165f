"""Files of one rank: a profiler with a repeating schedule writes one file per cycle, and they are not extra ranks.

The one rule for it, shared by ``gpuscope analyze`` (a directory of trace files) and live recording (the files
``gpuscope.torch`` writes into the run's folder): files are grouped by who wrote them (``Writer``: the rank, the
host and the process), and of several files in a group the latest cycle is analysed (earlier ones hold warm-up;
the latest is the steadiest), latest by its first event, then by name.

``torch.profiler.tensorboard_trace_handler`` names each cycle's file ``<worker>.<time>.pt.trace.json[.gz]``,
where ``<worker>`` is the worker name given to it (``gpuscope.torch`` gives ``rank<N>``) or ``<host>_<pid>`` by
default: the host comes from there, when the pid in the name is the trace's own.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuscope.model.trace import RankFile

_HANDLER_NAME = re.compile(r"^(?P<worker>.+)\.\d+\.pt\.trace\.json(?:\.gz)?$")
_HOST_PID = re.compile(r"^(?P<host>.+)_(?P<pid>\d+)$")
_RANK_IN_NAME = re.compile(r"(?:rank|worker)[_\-]?(\d+)", re.IGNORECASE)

Pair = tuple[RankFile, Any]
"""A rank file's identity and what was made of it where it was read (its per-rank result, or the trace)."""


@dataclass(frozen=True)
class Writer:
    """Who wrote a trace file, as far as the file tells."""

    who: str
    """``rank N`` when distributedInfo or the file name gives the rank, else the handler's worker name, else the
    file name."""
    host: str | None
    """From a ``<host>_<pid>.<time>.pt.trace.json`` name whose pid is the trace's."""
    pid: int | None
    """The process of the trace's host events."""


@dataclass(frozen=True)
class Cycles:
    """One rank recorded in several files: the one kept, and how many there were."""

    kept: str
    """The source of the analysed (latest) cycle."""
    files: int


def claimed_rank(trace: RankFile) -> int | None:
    """The rank the file claims: its distributedInfo's, else one its name gives (``rank3``, ``worker_3``); None
    when it says none (``RankFile.rank`` is then 0 by default, which is no claim)."""
    if trace.rank_given or _RANK_IN_NAME.search(Path(trace.source).name):
        return trace.rank
    return None


def host_of(trace: RankFile) -> str | None:
    """The host a trace file's name gives (the handler's default ``<host>_<pid>`` worker), None when it gives none."""
    handler = _HANDLER_NAME.match(Path(trace.source).name)
    parts = _HOST_PID.match(handler.group("worker")) if handler else None
    return parts.group("host") if parts and trace.pid is not None and int(parts.group("pid")) == trace.pid else None


def writer(trace: RankFile) -> Writer:
    """Who wrote a file: its rank (or what its name says of the worker), its host and its process id."""
    name = Path(trace.source).name
    rank = claimed_rank(trace)
    if rank is not None:
        who = f"rank {rank}"
    elif match := _HANDLER_NAME.match(name):
        who = match.group("worker")
    else:
        who = name
    return Writer(who=who, host=host_of(trace), pid=trace.pid)


def latest_cycles(pairs: Sequence[Pair]) -> tuple[list[Pair], list[Cycles]]:
    """Of each writer's files, the latest cycle (by its first event, then by name), and the groups of several."""
    groups: dict[Writer, list[Pair]] = {}
    for pair in pairs:
        groups.setdefault(writer(pair[0]), []).append(pair)
    kept: list[Pair] = []
    cycles: list[Cycles] = []
    for group in groups.values():
        latest = max(group, key=lambda p: (p[0].start_ns, Path(p[0].source).name))
        kept.append(latest)
        if len(group) > 1:
            cycles.append(Cycles(kept=latest[0].source, files=len(group)))
    return kept, cycles
