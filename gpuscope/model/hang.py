"""Flight-recorder dumps and what they say of a hung job (``gpuscope hang PATH``).

PyTorch's flight recorder keeps each rank's last collectives in a ring buffer (``TORCH_FR_BUFFER_SIZE`` entries)
and writes it out on a timeout (``TORCH_NCCL_DEBUG_INFO_TEMP_FILE`` + the rank) or when asked
(``torch._C._distributed_c10d._dump_fr_trace`` / ``_dump_fr_trace_json``). Field names follow the dump's own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

HANG_SCHEMA = "gpuscope.hang/1"


@dataclass(frozen=True, slots=True)
class FrEntry:
    """One collective (or point-to-point op) a rank enqueued, as its recorder kept it."""

    group: str
    """The process group's name (``process_group[0]``; "0" for the default group)."""
    group_desc: str
    seq: int
    """``collective_seq_id`` (``p2p_seq_id`` for a point-to-point op): the op's number in its group on this rank."""
    op: str
    """The collective, from ``profiling_name`` without its backend ("nccl:all_reduce" -> "all_reduce")."""
    profiling_name: str
    state: str
    """"scheduled", "started" or "completed", as the recorder last saw it."""
    retired: bool
    """The work finished and was let go (gloo records no start or completion: for it, this says it completed)."""
    is_p2p: bool = False
    input_sizes: tuple[tuple[int, ...], ...] = ()
    input_dtypes: tuple[str, ...] = ()
    output_sizes: tuple[tuple[int, ...], ...] = ()
    output_dtypes: tuple[str, ...] = ()
    time_created_ns: int | None = None
    pg_id: int | None = None
    """The process group's id on this rank."""
    peer: int | None = None
    """A send's destination or a receive's source, as the op's name gives it (``nccl:send 0->1``: 1; the group's
    own rank numbers); None for a collective, or where the name gives none."""

    @property
    def completed(self) -> bool:
        return self.state == "completed" or self.retired


@dataclass(frozen=True)
class RankDump:
    """One rank's dump."""

    rank: int
    """From the file's name (the digits it ends in), as PyTorch's own reader takes it."""
    source: str
    form: Literal["json", "pickle"]
    version: str
    entries: tuple[FrEntry, ...]
    """The newest entries the reader kept (``traces.flight_recorder`` says how many), oldest first."""
    group_ranks: dict[str, tuple[int, ...]]
    """Each process group's member ranks, where ``pg_config`` lists them (by group name)."""
    completed_before: dict[str, int] = field(default_factory=dict)
    """Per process group, the last collective (not point-to-point) the rank completed among the older entries
    the reader did not keep; absent where it kept them all."""
    warnings: tuple[str, ...] = ()
    """What was dropped or left out while reading, each in one line."""


@dataclass(frozen=True)
class HungCollective:
    process_group: str
    seq: int
    op: str


@dataclass(frozen=True)
class RankState:
    """Where one rank stands in the hung collective's process group."""

    rank: int
    entered: bool
    """It enqueued the hung collective."""
    state: str | None
    """Its entry's state for the hung collective ("scheduled", "started", "completed"); None when it has none."""
    last_completed_seq: int | None
    last_completed_op: str | None
    last_enqueued_seq: int | None


@dataclass(frozen=True)
class Mismatch:
    """Ranks that entered the same collective with different operations, sizes or dtypes: the other classic hang."""

    process_group: str
    seq: int
    field: Literal["op", "input_sizes", "input_dtypes", "output_sizes", "output_dtypes"]
    values: dict[str, tuple[int, ...]]
    """Each value seen (as text) -> the ranks that had it."""


@dataclass(frozen=True)
class UnmatchedP2P:
    """A point-to-point op whose peer's dump shows no counterpart: a send no receive was posted for, or the other
    way round. Sends and receives of a pair are matched in order, the ones not yet completed only (a completed one
    found its counterpart)."""

    process_group: str
    op: Literal["send", "recv"]
    rank: int
    """The rank that posted it."""
    peer: int
    """The rank it sends to or receives from."""
    seq: int
    """Its ``p2p_seq_id`` on ``rank``."""
    state: str


@dataclass(frozen=True)
class HangReport:
    """What a folder of flight-recorder dumps says (``gpuscope hang --json`` prints it)."""

    schema: str
    summary: str
    """One sentence."""
    hung_collective: HungCollective | None
    """The first collective some member of its group never completed; None when every rank completed the same."""
    missing_ranks: tuple[int, ...]
    """Ranks whose dump shows they never entered it (they are what the others wait for)."""
    waiting_ranks: tuple[int, ...]
    """Ranks that entered it and did not complete it."""
    undumped_ranks: tuple[int, ...] = ()
    """Members of its group with no dump in the folder: whether they entered it cannot be told."""
    ranks: tuple[RankState, ...] = ()
    mismatches: tuple[Mismatch, ...] = ()
    dumps: tuple[str, ...] = ()
    """The files read, one per rank."""
    forms: tuple[str, ...] = ()
    """"json", "pickle": the forms the dumps came in."""
    unmatched_p2p: tuple[UnmatchedP2P, ...] = ()
    """Sends with no receive posted for them and receives with no send, where the peer left a dump."""
    warnings: tuple[str, ...] = ()
    """What the reader dropped or left out (entries with impossible values, older entries past the budget)."""
