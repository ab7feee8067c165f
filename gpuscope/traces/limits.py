"""The trace reader's stated limits: how much JSON one trace file may hold, which files it opens at all, and the
budget of reading an untrusted pickle (a memory snapshot, a flight-recorder dump).

A trace file is read whole into memory (gunzipped first when it is gzip), so its JSON text has a cap, 2 GiB
unless ``GPUSCOPE_MAX_TRACE_GIB`` says otherwise: a 3 MB .json.gz that would inflate to 3 GB is stopped at the
cap instead of filling memory. Only regular files are opened, without blocking: a named pipe among rank files
would otherwise hang the reader, and a link to /dev/zero would never end. A pickle's budget (``PickleBudget``)
scales with this machine's memory and the pickle's size, so a real snapshot of several GB is read and a bomb is not.
"""

from __future__ import annotations

import io
import math
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gpuscope.traces.errors import TraceError

ENV_MAX_TRACE_GIB = "GPUSCOPE_MAX_TRACE_GIB"
DEFAULT_MAX_TRACE_GIB = 2.0
GIB = 2**30


class LimitSettingError(ValueError):
    """A limit's environment variable (``setting``) is not a usable number; one line, without the variable's
    name."""

    def __init__(self, message: str, setting: str = ENV_MAX_TRACE_GIB) -> None:
        super().__init__(message)
        self.setting = setting


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


def open_regular(path: Path, *, what: str, max_bytes: int | None = None, per: str = "") -> io.BufferedReader:
    """``path`` opened for reading when it is a regular file of at most ``max_bytes``; else a TraceError in one line
    ("a named pipe (FIFO), not a trace file"; "3 GiB on disk, over the limit of 2 GiB per trace file ...", ``per``
    saying what the limit is counted on). Opened without blocking: a named pipe is refused at once instead of
    waiting for a writer."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise TraceError(path, f"cannot read: {exc.strerror or exc}") from None
    info = os.fstat(fd)
    kind = not_regular(info.st_mode)
    too_large = max_bytes is not None and info.st_size > max_bytes
    if kind is not None or too_large:  # before fdopen, which raises IsADirectoryError for a folder
        os.close(fd)
        if kind is not None:
            raise TraceError(path, f"{kind}, not {what}")
        raise TraceError(path, f"{size_words(info.st_size)} on disk, over the limit of {size_words(max_bytes or 0)} "
                               f"{per}".rstrip())
    return os.fdopen(fd, "rb")


def size_words(n_bytes: float) -> str:
    """A size for a message, in GiB, MiB or KiB."""
    if n_bytes >= GIB:
        return f"{n_bytes / GIB:.3g} GiB"
    return f"{n_bytes / 2**20:.3g} MiB" if n_bytes >= 2**20 else f"{n_bytes / 2**10:.3g} KiB"


# --- untrusted pickles: memory snapshots and flight-recorder dumps ---------------------------------------------

ENV_MAX_PICKLE_GIB = "GPUSCOPE_MAX_PICKLE_GIB"
ENV_PICKLE_MEMORY_GIB = "GPUSCOPE_PICKLE_MEMORY_GIB"
MIN_MAX_PICKLE_BYTES = 4 * GIB
MAX_INFLATION = 100
"""By default a gzipped pickle may inflate to at most this many times its size: PyTorch's snapshots gzip 8-18x; a
gzip bomb inflates up to 1,032x."""
MIN_MEMORY_BYTES = GIB


@dataclass(frozen=True)
class PickleBudget:
    """What reading one untrusted pickle may cost (docs/reliability.md, "Pickles"); spending any of it ends the
    reading with one line naming the budget."""

    inflated_bytes: int
    """The most bytes of pickle read, after gunzip: ``GPUSCOPE_MAX_PICKLE_GIB``, else this machine's memory (at
    least 4 GiB)."""
    inflation: int | None
    """A gzip stream may inflate to at most this many times its size (None: only ``inflated_bytes`` counts, as when
    ``GPUSCOPE_MAX_PICKLE_GIB`` is set)."""
    memory_bytes: int
    """The most memory the reading process may take on top of what it held: ``GPUSCOPE_PICKLE_MEMORY_GIB``, else
    three quarters of the memory available when the reading starts (at least 1 GiB)."""
    cpu_s_base: float = 10.0
    cpu_s_per_mib: float = 0.5
    """CPU seconds: ``cpu_s_base`` plus this per MiB of pickle (the slowest reader needs 0.125 s a MiB)."""
    min_rows: int = 100_000
    bytes_per_row: int = 16
    """Rows (a snapshot's allocator actions, segments and blocks): at most one per this many bytes of pickle, or
    ``min_rows``, so shared references cannot multiply a small file into many rows."""
    nesting: int = 1_000
    """Levels of nesting in what a plain-data pickle gives back (a snapshot is never walked past its known
    fields)."""
    in_process_bytes: int = 64 * 2**10
    """A pickle up to this size is read in the calling process by the streaming reader, whose memo and time are
    bounded by the size itself; a larger one in a child process under the OS's limits."""
    memory_per_byte: int = 12
    memory_floor_bytes: int = 256 * 2**20
    """The C unpickler's memory for a pickle of n bytes is held to ``memory_per_byte`` n + ``memory_floor_bytes``
    (a plain ``pickle.load`` of a snapshot holds 4-7 bytes per byte of pickle), within ``memory_bytes``."""

    def cpu_s(self, size: int) -> float:
        return self.cpu_s_base + self.cpu_s_per_mib * size / 2**20

    def rows(self, size: int) -> int:
        return max(self.min_rows, size // self.bytes_per_row)

    def c_memory_bytes(self, size: int) -> int:
        """What the C unpickler may hold for a pickle of ``size`` bytes."""
        return self.memory_per_byte * size + self.memory_floor_bytes

    def inflated_cap(self, stored_bytes: int) -> tuple[int, str]:
        """The most a gzip stream of ``stored_bytes`` may inflate to, and the words for that limit."""
        if self.inflation is not None and self.inflation * stored_bytes < self.inflated_bytes:
            return (self.inflation * stored_bytes,
                    f"{self.inflation} times its size, the reader's limit for a gzip stream (a gzip bomb?); set "
                    f"{ENV_MAX_PICKLE_GIB} to read it")
        return self.inflated_bytes, self.inflated_words()

    def inflated_words(self) -> str:
        return f"{size_words(self.inflated_bytes)}, the reader's limit (set {ENV_MAX_PICKLE_GIB} to raise it)"


def pickle_budget(env: Mapping[str, str] | None = None) -> PickleBudget:
    """The budget from the environment and this machine's memory; ``LimitSettingError`` for a setting that is not
    a number of GiB."""
    env = os.environ if env is None else env
    inflated = _gib_setting(env, ENV_MAX_PICKLE_GIB)
    memory = _gib_setting(env, ENV_PICKLE_MEMORY_GIB)
    total, available = memory_bytes()
    return PickleBudget(
        inflated_bytes=inflated if inflated is not None else max(MIN_MAX_PICKLE_BYTES, total),
        inflation=None if inflated is not None else MAX_INFLATION,
        memory_bytes=memory if memory is not None else max(MIN_MEMORY_BYTES, available * 3 // 4))


def memory_bytes() -> tuple[int, int]:
    """This machine's memory and the memory available now (Linux's MemAvailable: free, and what the page cache
    would give back); 0 where the system does not say."""
    try:
        with open("/proc/meminfo", "rb") as f:
            info = {line.split(b":")[0]: int(line.split()[1]) * 1024 for line in f if line.strip().endswith(b"kB")}
        return info[b"MemTotal"], info.get(b"MemAvailable", info[b"MemFree"])
    except (OSError, ValueError, KeyError, IndexError):
        pass
    try:
        page = os.sysconf("SC_PAGE_SIZE")
        return page * os.sysconf("SC_PHYS_PAGES"), page * os.sysconf("SC_AVPHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return 0, 0


def _gib_setting(env: Mapping[str, str], name: str) -> int | None:
    text = env.get(name, "").strip()
    if not text:
        return None
    try:
        gib = float(text)
    except ValueError:
        gib = math.nan
    if not math.isfinite(gib) or gib <= 0 or gib * GIB > 2**62:
        raise LimitSettingError(f"expected a number of GiB above 0, got {text!r}", name)
    return max(1, int(gib * GIB))
