"""A trace file's location: a local path or an fsspec URL, and how large it is. (A URL is shown, named and kept
as ``gpuscope.model.redact.bare_url`` has it: without its user, password, query or fragment.)"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


@dataclass(frozen=True)
class SourceFile:
    """One trace file to read: where it is and how large it is (as listed, before reading)."""

    location: str
    """A local path, or the URL a worker reads it from (credentials in it, if any, stay out of every message)."""
    size_bytes: int

    @property
    def name(self) -> str:
        return PurePosixPath(self.location.split("?", 1)[0]).name if is_url(self.location) else Path(
            self.location).name


def is_url(target: str | Path) -> bool:
    """``scheme://...``: read through fsspec. A plain path (and a Path object) is local."""
    return isinstance(target, str) and _URL.match(target) is not None
