"""The embedded run store (SQLite in WAL mode) and its on-disk artifacts."""

from gpuscope.store.catalog import Listing
from gpuscope.store.errors import RecordDamaged, StoreDamaged, StoreError, StoreWriteError
from gpuscope.store.sqlite import Store, default_home, new_run_id

__all__ = ["Listing", "RecordDamaged", "Store", "StoreDamaged", "StoreError", "StoreWriteError", "default_home",
           "new_run_id"]
