"""A trace file's events into columns, a chunk at a time: in this process, or, for a large file read where cores
are free, in stretches read side by side by several processes and joined in order.

Each process reads a stretch of the file's events (its share of ``traceEvents``, whole chunks of it) into a
``ColumnBuilder`` of its own, and the builders are joined in file order (``ColumnBuilder.join``), which gives the
columns one process reading every event gives: the same codes for names, categories and threads, the same first
layer call, the same collectives. Workers are forked, so they see the file's text and its raw events without a copy;
what comes back from each is its columns and its tables of interned values, a few MB, never the text. Where no
process can be forked (no ``fork`` start method, or a daemonic process), a file is read in this process alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import msgspec

from gpuscope.traces.chunks import chunks
from gpuscope.traces.columns import ColumnBuilder
from gpuscope.traces.events import Event
from gpuscope.traces.gunzip import Text
from gpuscope.traces.lenient import Tally, decode_each

if TYPE_CHECKING:
    from concurrent.futures import Future

CHUNK_EVENTS = 2_000
"""Events decoded at once: small enough that a chunk's decoded events stay in the CPU's caches."""
STRETCH_MIN_EVENTS = 50_000
"""The fewest events a process is given: below that, starting it and sending its columns back costs more than
the ~0.1 s of decoding it saves."""

_events_decoder = msgspec.json.Decoder(list[Event])
_shared: tuple[Text, Sequence[msgspec.Raw]] | None = None
"""In a worker: the file's text and its raw events, as the process that read them held them when it forked this
one."""


def read_events(text: Text, raws: Sequence[msgspec.Raw], builder: ColumnBuilder, tally: Tally, *,
                jobs: int = 1) -> None:
    """Decode ``raws`` (the file's events, as views into ``text``) into ``builder``, in up to ``jobs`` processes;
    a chunk that fails the typed decode is decoded event by event, leniently, and ``tally`` says what that changed.
    ``text`` is written into (see ``chunks``)."""
    bounds = stretches(len(raws), jobs)
    if len(bounds) == 1:
        _read(text, raws, builder, tally)
        return
    from gpuscope.traces.workers import forked_pool  # multiprocessing only where workers start

    pool = forked_pool(len(bounds) - 1, _keep, text, raws)
    try:
        futures = [pool.submit(_read_stretch, lo, hi) for lo, hi in bounds[1:]]
        lo, hi = bounds[0]
        _read(text, raws[lo:hi], builder, tally)
        for (lo, hi), future in zip(bounds[1:], futures):
            later, their_tally = _result(future, text, raws, lo, hi)
            builder.join(later)
            tally.join(their_tally)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def stretches(events: int, jobs: int) -> list[tuple[int, int]]:
    """The stretches of ``events`` events that up to ``jobs`` processes read, as (first, past the last) in file
    order: one process unless each gets ``STRETCH_MIN_EVENTS`` and this process may fork workers; whole chunks
    each."""
    count = min(jobs, events // STRETCH_MIN_EVENTS)
    if count < 2:
        return [(0, events)]
    from gpuscope.traces.workers import can_fork, may_start_workers

    if not (can_fork() and may_start_workers()):
        return [(0, events)]
    chunks_each = -(-events // CHUNK_EVENTS) / count
    cuts = [min(events, round(k * chunks_each) * CHUNK_EVENTS) for k in range(count + 1)]
    cuts[-1] = events
    return [(lo, hi) for lo, hi in zip(cuts, cuts[1:]) if hi > lo]


def _read(text: Text, raws: Sequence[msgspec.Raw], builder: ColumnBuilder, tally: Tally) -> None:
    for part_text, part in chunks(text, raws, CHUNK_EVENTS):
        try:
            builder.add(_events_decoder.decode(part_text))
        except msgspec.DecodeError:  # a wrong type, or a string that is not UTF-8 (which the raw decode lets by)
            builder.add(decode_each(part, tally))


def _keep(text: Text, raws: Sequence[msgspec.Raw]) -> None:
    """A worker's first step: keep the text and events it was forked with."""
    global _shared
    _shared = (text, raws)


def _read_stretch(lo: int, hi: int) -> tuple[ColumnBuilder, Tally]:
    """In a worker: ``_stretch`` of the file it was forked with."""
    assert _shared is not None, "a stretch is read in a worker started by read_events"
    return _stretch(*_shared, lo, hi)


def _stretch(text: Text, raws: Sequence[msgspec.Raw], lo: int, hi: int) -> tuple[ColumnBuilder, Tally]:
    """Events ``lo`` to ``hi`` of the file read into a builder that starts at ``lo``."""
    builder, tally = ColumnBuilder(offset=lo), Tally()
    _read(text, raws[lo:hi], builder, tally)
    return builder, tally


def _result(future: Future[tuple[ColumnBuilder, Tally]], text: Text, raws: Sequence[msgspec.Raw], lo: int,
            hi: int) -> tuple[ColumnBuilder, Tally]:
    """A worker's stretch; read here instead when its worker died (killed, or out of memory) before it answered."""
    from concurrent.futures.process import BrokenProcessPool

    try:
        return future.result()
    except BrokenProcessPool:
        return _stretch(text, raws, lo, hi)
