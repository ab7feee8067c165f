"""The embedded run store (SQLite in WAL mode) and its on-disk artifacts."""

from gpuscope.store.sqlite import SampleRow, StackRow, Store, StoreError, default_home, new_run_id

__all__ = ["SampleRow", "StackRow", "Store", "StoreError", "default_home", "new_run_id"]
