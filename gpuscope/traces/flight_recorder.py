"""Read PyTorch flight-recorder dumps, one per rank, in either form PyTorch writes: JSON
(``_dump_fr_trace_json``) or pickle (``_dump_fr_trace``, what the NCCL watchdog writes to
``TORCH_NCCL_DEBUG_INFO_TEMP_FILE`` + rank).

A dump says nothing of its rank: like PyTorch's own reader (``torch.distributed.flight_recorder``), the rank is
the number the file's name ends in (``nccl_trace_rank_3``, ``rank_3.json``). The form is told by the content (a
pickle starts with its protocol byte, JSON with ``{``). Pickles are read as plain data only (``plain_pickle``):
nothing in them is run. Limits: ``MAX_DUMP_BYTES`` per file, ``MAX_ENTRIES`` entries per dump, ``MAX_DUMPS`` files.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Literal

import msgspec

from gpuscope.model.hang import FrEntry, RankDump
from gpuscope.traces.errors import TraceError
from gpuscope.traces.limits import not_regular, size_words
from gpuscope.traces.plain_pickle import NotPlainData, loads_plain

MAX_DUMP_BYTES = 256 * 2**20
"""A dump of the default 2,000 entries is a few MB with stack frames; 256 MiB leaves room for big buffers."""
MAX_ENTRIES = 1_000_000
MAX_DUMPS = 100_000
_RANK = re.compile(r"(\d+)(?:\.(?:json|pkl|pickle))?$")
_BACKEND = re.compile(r"^[a-z]+:")


class _Entry(msgspec.Struct):
    process_group: list[str] = []
    pg_id: int | None = None
    collective_seq_id: int = -1
    p2p_seq_id: int = -1
    profiling_name: str = ""
    state: str = ""
    retired: bool = False
    is_p2p: bool = False
    input_sizes: list[list[int]] = []
    input_dtypes: list[str] = []
    output_sizes: list[list[int]] = []
    output_dtypes: list[str] = []
    time_created_ns: int | None = None


class _Dump(msgspec.Struct):
    entries: list[_Entry]
    version: str = ""
    pg_config: dict[str, dict[str, Any]] = {}
    pg_status: dict[str, dict[str, int]] = {}


def read_dumps(path: Path | str) -> tuple[RankDump, ...]:
    """Every rank's dump under ``path`` (a folder of them, or one file), by rank; a TraceError naming the file and
    what is wrong with it, in one line, for anything that is not a readable dump."""
    root = Path(path)
    if not root.exists():
        raise TraceError(root, "no such file or folder")
    try:
        files = sorted(p for p in root.iterdir() if not p.name.startswith(".") and not p.is_dir()) \
            if root.is_dir() else [root]
    except OSError as exc:
        raise TraceError(root, f"cannot read: {exc.strerror or exc}") from None
    ranked = [(int(m.group(1)), p) for p in files if (m := _RANK.search(p.name)) is not None]
    if not ranked:
        raise TraceError(root, "no flight-recorder dumps here (files whose names end in their rank, as "
                               "TORCH_NCCL_DEBUG_INFO_TEMP_FILE names them)")
    if len(ranked) > MAX_DUMPS:
        raise TraceError(root, f"{len(ranked)} dump files, over the limit of {MAX_DUMPS}")
    dumps: dict[int, RankDump] = {}
    for rank, file in sorted(ranked):
        if rank in dumps:
            raise TraceError(file, f"a second dump for rank {rank} (the first is {dumps[rank].source}): keep one "
                                   "dump per rank in the folder")
        dumps[rank] = read_dump(file, rank)
    return tuple(dumps.values())


def read_dump(path: Path, rank: int) -> RankDump:
    data = _read_regular(path)
    form: Literal["json", "pickle"] = "json" if data.lstrip()[:1] == b"{" else "pickle"
    try:
        plain = msgspec.json.decode(data) if form == "json" else loads_plain(data)
        raw = msgspec.convert(plain, _Dump, strict=False)
    except NotPlainData as exc:
        if exc.refused:
            raise TraceError(path, f"refused: {exc}") from None
        if data[:1] != b"\x80":
            raise TraceError(path, "not a flight-recorder dump (neither its JSON nor its pickle form)") from None
        raise TraceError(path, str(exc)) from None
    except msgspec.ValidationError as exc:  # before DecodeError, its base class
        raise TraceError(path, f"not a flight-recorder dump ({exc})") from None
    except (msgspec.DecodeError, RecursionError) as exc:
        raise TraceError(path, f"not valid JSON ({exc})") from None
    if len(raw.entries) > MAX_ENTRIES:
        raise TraceError(path, f"{len(raw.entries)} entries, over the limit of {MAX_ENTRIES}")
    return RankDump(rank=rank, source=str(path), form=form, version=raw.version,
                    entries=tuple(_entry(e) for e in raw.entries), group_ranks=_group_ranks(raw.pg_config),
                    last_completed={k: int(v["last_completed_collective"]) for k, v in raw.pg_status.items()
                                    if "last_completed_collective" in v})


def _read_regular(path: Path) -> bytes:
    """The bytes of a regular file of at most ``MAX_DUMP_BYTES``, opened without blocking (a named pipe is refused
    at once)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise TraceError(path, f"cannot read: {exc.strerror or exc}") from None
    info = os.fstat(fd)
    kind = not_regular(info.st_mode)
    if kind is not None:  # before fdopen, which raises IsADirectoryError for a folder
        os.close(fd)
        raise TraceError(path, f"{kind}, not a dump file")
    with os.fdopen(fd, "rb") as f:
        if info.st_size > MAX_DUMP_BYTES:
            raise TraceError(path, f"{size_words(info.st_size)}, over the limit of {size_words(MAX_DUMP_BYTES)} "
                                   "per dump")
        try:
            data = f.read(MAX_DUMP_BYTES + 1)
        except OSError as exc:
            raise TraceError(path, f"cannot read: {exc.strerror or exc}") from None
    if not data.strip():
        raise TraceError(path, "the file is empty")
    return data


def _entry(e: _Entry) -> FrEntry:
    group = e.process_group
    return FrEntry(
        group=group[0] if group else str(e.pg_id if e.pg_id is not None else ""),
        group_desc=group[1] if len(group) > 1 else "", seq=e.p2p_seq_id if e.is_p2p else e.collective_seq_id,
        op=_BACKEND.sub("", e.profiling_name), profiling_name=e.profiling_name, state=e.state, retired=e.retired,
        is_p2p=e.is_p2p, input_sizes=tuple(tuple(s) for s in e.input_sizes), input_dtypes=tuple(e.input_dtypes),
        output_sizes=tuple(tuple(s) for s in e.output_sizes), output_dtypes=tuple(e.output_dtypes),
        time_created_ns=e.time_created_ns, pg_id=e.pg_id)


def _group_ranks(config: dict[str, dict[str, Any]]) -> dict[str, tuple[int, ...]]:
    """``pg_config``'s member ranks per group: a list, or its text ("[0, 1, 2, 3]"); groups it cannot read are left
    out."""
    out: dict[str, tuple[int, ...]] = {}
    for name, entry in config.items():
        ranks = entry.get("ranks") if isinstance(entry, dict) else None
        if isinstance(ranks, str):
            try:
                ranks = json.loads(ranks)
            except ValueError:
                continue
        if isinstance(ranks, list) and all(isinstance(r, int) and not isinstance(r, bool) for r in ranks):
            out[str(entry.get("name") or name)] = tuple(ranks)
    return out
