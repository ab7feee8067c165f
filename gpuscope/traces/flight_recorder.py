"""Read PyTorch flight-recorder dumps, one per rank, in either form PyTorch writes: JSON
(``_dump_fr_trace_json``) or pickle (``_dump_fr_trace``, what the NCCL watchdog writes to
``TORCH_NCCL_DEBUG_INFO_TEMP_FILE`` + rank).

A dump says nothing of its rank: like PyTorch's own reader (``torch.distributed.flight_recorder``), the rank is
the number the file's name ends in (``nccl_trace_rank_3``, ``rank_3.json``); a name ending in a negative number
(``rank_-1``) or one past 2^31 - 1 is refused rather than read as another rank. The form is told by the content (a
pickle starts with its protocol byte, JSON with ``{``). Pickles are read as plain data only, streamed
(``pickle_stream``): nothing in them is run, and each entry is reduced as soon as it is read (``fr_entries``).

Budgets: ``MAX_DUMP_BYTES`` per file, ``MAX_ENTRIES`` entries read per dump, ``MAX_DUMPS`` files, and
``KEPT_ENTRIES`` entries kept over all the dumps (each dump keeps its newest ``KEPT_ENTRIES // dumps``, at least
``MAX_DUMPS``'s share; of the older ones only the last collective each group completed is remembered).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import IO, Any, Literal

import msgspec

from gpuscope.model.hang import RankDump
from gpuscope.traces.errors import TraceError
from gpuscope.traces.fr_entries import Fold
from gpuscope.traces.limits import open_regular, size_words
from gpuscope.traces.pickle_stream import DROP, load_stream
from gpuscope.traces.plain_data import NotPlainData

MAX_DUMP_BYTES = 256 * 2**20
"""A dump of the default 2,000 entries is a few MB with stack frames; 256 MiB leaves room for big buffers."""
MAX_ENTRIES = 1_000_000
"""Entries read per dump (``TORCH_FR_BUFFER_SIZE`` is 2,000 by default)."""
MAX_DUMPS = 8_192
KEPT_ENTRIES = 2**21
"""Entries held over all the dumps: each keeps its newest ``KEPT_ENTRIES // dumps`` (256 at ``MAX_DUMPS``); four
dumps that fill it peaked at 0.7 GB (docs/reliability.md has the measured figures)."""
MAX_RANK = 2**31 - 1
_RANK = re.compile(r"(?:(?<![A-Za-z0-9])(-))?(\d+)(?:\.(?:json|pkl|pickle))?$")
_ENTRY_KEYS = ("profiling_name", "collective_seq_id", "p2p_seq_id", "process_group")
_FRAME_KEYS = ("filename", "line")


class _JsonDump(msgspec.Struct):
    entries: list[msgspec.Raw]
    version: str = ""
    pg_config: dict[str, Any] = {}


class _PlainDump(msgspec.Struct):
    entries: list[Any]
    version: str = ""
    pg_config: dict[str, Any] = {}


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
    ranked = [(_rank_of(p, m), p) for p in files if (m := _RANK.search(p.name)) is not None]
    if not ranked:
        raise TraceError(root, "no flight-recorder dumps here (files whose names end in their rank, as "
                               "TORCH_NCCL_DEBUG_INFO_TEMP_FILE names them)")
    if len(ranked) > MAX_DUMPS:
        raise TraceError(root, f"{len(ranked):,} dump files, over the limit of {MAX_DUMPS:,}: point gpuscope hang "
                               "at the dumps of fewer ranks (those of the hung process group)")
    keep = max(1, min(MAX_ENTRIES, KEPT_ENTRIES // len(ranked)))
    shared: dict[object, object] = {}
    dumps: dict[int, RankDump] = {}
    for rank, file in sorted(ranked):
        if rank in dumps:
            raise TraceError(file, f"a second dump for rank {rank} (the first is {dumps[rank].source}): keep one "
                                   "dump per rank in the folder")
        dumps[rank] = read_dump(file, rank, keep=keep, shared=shared)
    return tuple(dumps.values())


def _rank_of(path: Path, m: re.Match[str]) -> int:
    """The rank a file's name ends in; a TraceError for a negative one or one past ``MAX_RANK``."""
    if m.group(1):
        raise TraceError(path, f"its name ends in -{m.group(2)}, and a rank is not negative: rename it after its "
                               "rank")
    if len(m.group(2)) > 10 or int(m.group(2)) > MAX_RANK:
        raise TraceError(path, f"its name ends in {m.group(2)[:20]}, past the largest rank (2^31 - 1): rename it "
                               "after its rank")
    return int(m.group(2))


def read_dump(path: Path, rank: int, *, keep: int = MAX_ENTRIES,
              shared: dict[object, object] | None = None) -> RankDump:
    """One rank's dump, its entries reduced as they are read and the newest ``keep`` of them held."""
    fold = Fold(path=path, keep=keep, max_entries=MAX_ENTRIES, shared={} if shared is None else shared)
    try:
        version, config, form = _read(path, fold)
    except OSError as exc:
        raise TraceError(path, f"cannot read: {exc.strerror or exc}") from None
    groups, unread = _group_ranks(path, config)
    return RankDump(rank=rank, source=str(path), form=form, version=version, entries=tuple(fold.kept),
                    group_ranks=groups, completed_before=dict(fold.completed_before),
                    warnings=fold.warnings() + unread)


def _read(path: Path, fold: Fold) -> tuple[str, dict[str, Any], Literal["json", "pickle"]]:
    with open_regular(path, what="a dump file", max_bytes=MAX_DUMP_BYTES, per="per dump") as f:
        head = f.read(64)
        if not head.strip():
            raise TraceError(path, "the file is empty")
        form: Literal["json", "pickle"] = "json" if head.lstrip()[:1] == b"{" else "pickle"
        f.seek(0)
        if form == "json":
            data = f.read(MAX_DUMP_BYTES + 1)
            if len(data) > MAX_DUMP_BYTES:  # it grew since it was opened
                raise TraceError(path, f"over the limit of {size_words(MAX_DUMP_BYTES)} per dump")
            version, config = _read_json(path, data, fold)
        else:
            version, config = _read_pickle(path, f, fold, protocol_byte=head[:1] == b"\x80")
    return version, config, form


def _read_json(path: Path, data: bytes, fold: Fold) -> tuple[str, dict[str, Any]]:
    try:
        raw = msgspec.json.decode(data, type=_JsonDump)
    except msgspec.ValidationError as exc:  # before DecodeError, its base class
        raise TraceError(path, f"not a flight-recorder dump ({exc})") from None
    except (msgspec.DecodeError, RecursionError) as exc:
        raise TraceError(path, f"not valid JSON ({exc})") from None
    for entry in raw.entries:  # each a view into the text: an entry is decoded only when its turn comes
        fold.add_json(entry)
    return raw.version, raw.pg_config


def _read_pickle(path: Path, f: IO[bytes], fold: Fold, *, protocol_byte: bool) -> tuple[str, dict[str, Any]]:
    """A dump's pickle form, streamed; ``protocol_byte``: it starts as pickles of protocol 2 and later do (else a
    damaged one is more likely no pickle at all)."""
    def reduce(container: list[Any] | dict[Any, Any], key: Any, item: Any) -> Any:
        if key is None and type(item) is dict:
            if all(k in item for k in _FRAME_KEYS):
                return DROP  # a stack frame: the analysis reads none
            if any(k in item for k in _ENTRY_KEYS):
                fold.add_plain(item)
                return DROP
        elif key == "frames" and type(container) is dict:
            return DROP
        return item

    try:
        top = msgspec.convert(load_stream(f, reduce=reduce), _PlainDump, strict=True)
    except NotPlainData as exc:
        if exc.refused:
            raise TraceError(path, f"refused: {exc}") from None
        if not protocol_byte:
            raise TraceError(path, "not a flight-recorder dump (neither its JSON nor its pickle form)") from None
        raise TraceError(path, str(exc)) from None
    except msgspec.ValidationError as exc:
        raise TraceError(path, f"not a flight-recorder dump ({exc})") from None
    for item in top.entries:  # entries the reducer did not take for one (no field it knows)
        fold.add_plain(item)
    return top.version, top.pg_config


def _group_ranks(path: Path, config: dict[str, Any]) -> tuple[dict[str, tuple[int, ...]], tuple[str, ...]]:
    """``pg_config``'s member ranks per group: a list, or its text ("[0, 1, 2, 3]"); a group whose ranks cannot be
    read, or hold a number no rank has, is left out with a warning (its members are then taken from the dumps)."""
    out: dict[str, tuple[int, ...]] = {}
    bad: list[str] = []
    for name, entry in config.items():
        ranks = entry.get("ranks") if isinstance(entry, dict) else None
        if isinstance(ranks, str):
            try:
                ranks = json.loads(ranks)
            except ValueError:
                pass
        if isinstance(ranks, list) and all(type(r) is int and 0 <= r <= MAX_RANK for r in ranks):
            out[str(entry.get("name") or name)] = tuple(ranks)
        elif ranks is not None or not isinstance(entry, dict):
            bad.append(name)
    if not bad:
        return out, ()
    shown = ", ".join(repr(b[:20]) for b in bad[:3]) + (f" ({len(bad)} in all)" if len(bad) > 3 else "")
    return out, (f"{path}: pg_config's ranks of group {shown} are not a list of ranks (0 to 2^31 - 1); its members "
                 "are taken from the dumps",)
