"""Files of one rank: a profiler with a repeating schedule writes one file per cycle, and they are not extra ranks.

``torch.profiler.tensorboard_trace_handler`` names each cycle's file ``<worker>.<ms since epoch>.pt.trace.json[.gz]``,
where ``<worker>`` is the worker name given to it or ``<host>_<pid>`` by default. Files are grouped by who wrote
them: the rank (distributedInfo's, else the one in the file name, else the worker part of the name) and the
process id; of several files in a group, the latest cycle is analysed (earlier ones hold warm-up; the latest
is the steadiest).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuscope.model.trace import RankFile

_HANDLER_NAME = re.compile(r"^(?P<worker>.+)\.\d+\.pt\.trace\.json(?:\.gz)?$")
_RANK_IN_NAME = re.compile(r"(?:rank|worker)[_\-]?(\d+)", re.IGNORECASE)

Pair = tuple[RankFile, Any]


@dataclass(frozen=True)
class Cycles:
    """One rank recorded in several files: the one kept, and how many there were."""

    kept: str
    """The source of the analysed (latest) cycle."""
    files: int


def writer(file: RankFile) -> tuple[str, int | None]:
    """Who wrote a file: its rank, or what its name says of the worker, and its process id."""
    name = Path(file.source).name
    if file.rank_given:
        who = f"rank {file.rank}"
    elif match := _RANK_IN_NAME.search(name):
        who = f"rank {int(match.group(1))}"
    elif match := _HANDLER_NAME.match(name):
        who = match.group("worker")
    else:
        who = name
    return who, file.pid


def latest_cycles(pairs: Sequence[Pair]) -> tuple[list[Pair], list[Cycles]]:
    """Of each writer's files, the latest cycle (by its first event, then by name), and the groups of several."""
    groups: dict[tuple[str, int | None], list[Pair]] = {}
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
