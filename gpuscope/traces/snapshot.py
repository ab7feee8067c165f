"""Read a PyTorch memory snapshot (``torch.cuda.memory._dump_snapshot``, a pickle, optionally gzipped) into
``model.snapshot.MemorySnapshot``, safely, at the C unpickler's speed, and within stated budgets.

A snapshot is a pickle, and a pickle can run code: it is read as plain data only, every global refused before it
is imported (``plain_data``). The file is opened (a regular file only) and measured against the budget of
inflated bytes (``limits.PickleBudget``: a gzip stream is inflated once to count it, holding nothing), then read:

- a pickle up to 64 KiB in this process, by the streaming reader (``snapshot_stream``);
- a larger one in a child process under the operating system's limits of memory and CPU time (``pickle_child``):
  by CPython's C unpickler restricted to plain data, its result folded into columns (``snapshot_fold``), where
  the C unpickler's memory (12 bytes per byte of pickle at most) fits the memory budget; else by the streaming
  reader, five to ten times slower, which holds about ``READ_BYTES_PER_ACTION`` per allocator action.

Where there is no fork the streaming reader runs in this process. Both readers give the same snapshot.
"""

from __future__ import annotations

import io
import os
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import IO

from gpuscope.model.snapshot import MemorySnapshot
from gpuscope.traces.errors import TraceError
from gpuscope.traces.gunzip import ERRORS, GZIP_MAGIC, GunzipReader, TooLarge, inflated_size
from gpuscope.traces.limits import LimitSettingError, PickleBudget, open_regular, pickle_budget, size_words
from gpuscope.traces.pickle_child import FORK, child_limits, decode, encode, run_limited
from gpuscope.traces.plain_data import BudgetSpent, NotPlainData, load_plain
from gpuscope.traces.snapshot_fold import fold
from gpuscope.traces.snapshot_layout import Rows
from gpuscope.traces.snapshot_stream import READ_BYTES_PER_ACTION, read_streaming

_READ_ERRORS: tuple[type[BaseException], ...] = (OSError, EOFError, zlib.error, *ERRORS)
ACTION_BYTES = 37
"""Kept per action: its code (1 byte), address, size, time and stream (8 each) and stack id (4)."""
__all__ = ["ACTION_BYTES", "READ_BYTES_PER_ACTION", "read_snapshot"]


def read_snapshot(path: Path | str, *, budget: PickleBudget | None = None) -> MemorySnapshot:
    """The snapshot in ``path``; a TraceError (one line naming the file) for anything that is not a readable
    snapshot, a pickle that would run code (refused before any of it runs) or one past a budget included."""
    path = Path(path)
    try:
        budget = budget or pickle_budget()
    except LimitSettingError as exc:
        raise TraceError(exc.setting, str(exc)) from None
    try:
        with _open(path) as (f, gz):
            size, cap = _measure(f, gz, budget)
            snap = _read(f, gz, size, cap, budget)
    except NotPlainData as exc:
        raise TraceError(path, f"refused: {exc}" if exc.refused else str(exc)) from None
    except _READ_ERRORS as exc:
        raise TraceError(path, f"cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    return replace(snap, source=str(path))


@contextmanager
def _open(path: Path) -> Iterator[tuple[IO[bytes], bool]]:
    """The file, and whether it is gzip; a TraceError for one that is not a regular file, or empty."""
    with open_regular(path, what="a memory snapshot") as f:
        head = f.peek(2)[:2]
        if not head:
            raise TraceError(path, "the file is empty")
        yield f, head == GZIP_MAGIC


def _measure(f: IO[bytes], gz: bool, budget: PickleBudget) -> tuple[int, int]:
    """The pickle's size (a gzip stream inflated to count it), and the most a gzip stream may inflate to;
    ``BudgetSpent`` past the budget."""
    stored = os.fstat(f.fileno()).st_size
    if not gz:
        if stored > budget.inflated_bytes:
            raise BudgetSpent(f"{size_words(stored)} of pickle: past {budget.inflated_words()}")
        return stored, stored
    cap, words = budget.inflated_cap(stored)
    try:
        return inflated_size(f, max_bytes=cap), cap
    except TooLarge:
        raise BudgetSpent(f"inflates past {size_words(cap)}: {words}") from None


def _read(f: IO[bytes], gz: bool, size: int, cap: int, budget: PickleBudget) -> MemorySnapshot:
    rows = Rows(budget.rows(size), size)
    if size <= budget.in_process_bytes or not FORK:
        return read_streaming(_stream(f, gz, cap), size_bytes=size, rows=rows)
    fast = budget.c_memory_bytes(size) <= budget.memory_bytes
    body, arrays = run_limited(lambda: encode(_in_child(f, gz, size, cap, rows, fast=fast)),
                               child_limits(budget, size, c_unpickler=fast))
    return decode(body, arrays, MemorySnapshot)


def _in_child(f: IO[bytes], gz: bool, size: int, cap: int, rows: Rows, *, fast: bool) -> MemorySnapshot:
    stream = _stream(f, gz, cap)
    try:
        if not fast:
            return read_streaming(stream, size_bytes=size, rows=rows)
        return fold(load_plain(stream), rows)
    except TooLarge:  # the file grew since it was measured
        raise BudgetSpent(f"inflates past {size_words(cap)}, the reader's limit") from None
    except _READ_ERRORS as exc:
        raise NotPlainData(f"cannot read: {getattr(exc, 'strerror', None) or exc}", refused=False) from None


def _stream(f: IO[bytes], gz: bool, cap: int) -> IO[bytes]:
    """The pickle from its start: the file, or its gzip stream inflated as it is read."""
    f.seek(0)
    return io.BufferedReader(GunzipReader(f, max_bytes=cap), 1 << 20) if gz else f
