"""The embedded run store (SQLite in WAL mode) and its on-disk artifacts.

Each name is imported from its module on first use, so a command that only tells a ``StoreError`` apart does not
open the store's modules."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuscope.model.lazy import lazy_names

if TYPE_CHECKING:
    from gpuscope.store.catalog import Listing
    from gpuscope.store.errors import RecordDamaged, StoreDamaged, StoreError, StoreWriteError
    from gpuscope.store.sqlite import Store, default_home, new_run_id

__all__ = ["Listing", "RecordDamaged", "Store", "StoreDamaged", "StoreError", "StoreWriteError", "default_home",
           "new_run_id"]

_MODULES: dict[str, str] = {
    "Listing": "gpuscope.store.catalog",
    "RecordDamaged": "gpuscope.store.errors",
    "Store": "gpuscope.store.sqlite",
    "StoreDamaged": "gpuscope.store.errors",
    "StoreError": "gpuscope.store.errors",
    "StoreWriteError": "gpuscope.store.errors",
    "default_home": "gpuscope.store.sqlite",
    "new_run_id": "gpuscope.store.sqlite",
}
"""Where each name of ``__all__`` lives."""


__getattr__ = lazy_names(__name__, _MODULES)
