"""How an SQLite database file begins, apart from the reader of exports: telling a folder's profiles from its
Kineto traces needs these bytes alone, not the reader (nor sqlite3)."""

from __future__ import annotations

SQLITE_MAGIC = b"SQLite format 3\x00"
"""The first bytes of every SQLite database file."""
