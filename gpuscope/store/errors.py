"""What can go wrong with the run store, as errors a user can act on: each message is one line that names
the file and what to do."""

from __future__ import annotations


class StoreError(Exception):
    """A store problem a user can act on (bad home folder, unknown run id, ...)."""


class StoreDamaged(StoreError):
    """The store's database file is damaged (truncated, emptied, overwritten): what can still be read is read,
    and nothing more is written to it."""


class RecordDamaged(StoreError):
    """One saved record (a catalog row, a report, a block of samples, a saved trace) cannot be read; the rest of
    the store can."""


class StoreWriteError(StoreError):
    """A write did not reach the disk (disk full, a file size limit, an I/O error): the message says what was not
    saved; everything saved before is kept."""
