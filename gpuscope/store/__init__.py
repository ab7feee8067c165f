"""The embedded run store (SQLite in WAL mode) and its on-disk artifacts."""

from gpuscope.store.sqlite import Store, StoreError, default_home, new_run_id

__all__ = ["Store", "StoreError", "default_home", "new_run_id"]
