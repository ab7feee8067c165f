"""The trace reader's stated limits: how much JSON one trace file may hold, and which files it opens at all.

A trace file is read whole into memory (gunzipped first when it is gzip), so its JSON text has a cap, 2 GiB
unless ``GPUSCOPE_MAX_TRACE_GIB`` says otherwise: a 3 MB .json.gz that would inflate to 3 GB is stopped at the
cap instead of filling memory. Only regular files are opened, without blocking: a named pipe among rank files
would otherwise hang the reader, and a link to /dev/zero would never end.
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Mapping

ENV_MAX_TRACE_GIB = "GPUSCOPE_MAX_TRACE_GIB"
DEFAULT_MAX_TRACE_GIB = 2.0
GIB = 2**30


class LimitSettingError(ValueError):
    """``GPUSCOPE_MAX_TRACE_GIB`` is not a usable number; one line, without the variable's name."""


def max_trace_bytes(env: Mapping[str, str] | None = None) -> int:
    """The most bytes of JSON text one trace file may hold: ``GPUSCOPE_MAX_TRACE_GIB`` GiB, else 2 GiB."""
    text = (os.environ if env is None else env).get(ENV_MAX_TRACE_GIB, "").strip()
    if not text:
        return int(DEFAULT_MAX_TRACE_GIB * GIB)
    try:
        gib = float(text)
    except ValueError:
        gib = math.nan
    if not math.isfinite(gib) or gib <= 0 or gib * GIB > 2**62:
        raise LimitSettingError(f"expected a number of GiB above 0, got {text!r}")
    return max(1, int(gib * GIB))


def not_regular(mode: int) -> str | None:
    """What a file of this mode is when it is not a regular file ("a named pipe (FIFO)", ...); None when it is."""
    if stat.S_ISREG(mode):
        return None
    kinds = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))
    return next((words for test, words in kinds if test(mode)), "not a regular file")


def size_words(n_bytes: float) -> str:
    """A size for a message, in GiB or MiB."""
    return f"{n_bytes / GIB:.3g} GiB" if n_bytes >= GIB else f"{n_bytes / 2**20:.3g} MiB"
