"""Recorded samples played back through the sampler loop: for tests, demos and machines without a GPU.

A replay maps the recording's first timestamp to the loop's first tick and then hands out, on each tick,
the rows whose mapped time has come (``speed`` 60 plays an hour in a minute). It reads no clock of its
own: time is what the loop passes in, so a replay is deterministic.
"""

from __future__ import annotations

import math
import tarfile
from pathlib import Path

import numpy as np
import pandas as pd

from gpuscope.model.gpu import GpuInfo
from gpuscope.model.schema import GPU_UTIL, NO_PID, REPLAY, SAMPLE_COLUMNS, SampleRow

DUTY_CYCLE_COLUMNS = ("value", "timestamp_anon", "container_ip")


class ReplaySampler:
    """Plays long-format samples (columns of ``schema.SAMPLE_COLUMNS``) back, tick by tick."""

    name = REPLAY

    def __init__(self, frame: pd.DataFrame, *, speed: float = 1.0, pods: dict[int, str] | None = None) -> None:
        """Use ``from_frame`` or ``from_duty_cycle_csv``."""
        if not (math.isfinite(speed) and speed > 0):
            raise ValueError(f"replay speed must be a positive number, not {speed}")
        missing = [c for c in SAMPLE_COLUMNS if c not in frame.columns]
        if missing:
            raise ValueError(f"recorded samples lack the column(s) {', '.join(missing)}")
        frame = frame.dropna(subset=["ts_ns"])
        origin = int(frame["ts_ns"].min()) if len(frame) else 0
        # Unknown is not zero: a row without a value is left out, as the collectors would have.
        frame = frame.dropna(subset=["value"]).sort_values("ts_ns", kind="stable")
        ts = frame["ts_ns"].to_numpy(dtype=np.int64)
        self._offset_ns = np.rint((ts - origin) / speed).astype(np.int64)
        self._source = frame["source"].astype(str).tolist()
        self._gpu = frame["gpu"].to_numpy(dtype=np.int64).tolist()
        self._pid = frame["pid"].to_numpy(dtype=np.int64).tolist()
        self._metric = frame["metric"].astype(str).tolist()
        self._value = frame["value"].to_numpy(dtype=np.float64).tolist()
        self._next = 0
        self._start_ns: int | None = None
        self.speed = speed
        self.pods: dict[int, str] = dict(pods or {})
        """GPU index -> the recording's name for it (the hashed pod address of the duty-cycle series)."""

    @classmethod
    def from_frame(cls, df: pd.DataFrame, *, speed: float = 1.0) -> ReplaySampler:
        """Replay long-format samples, e.g. ``Store.samples`` of an earlier run; each row keeps its source."""
        return cls(df, speed=speed)

    @classmethod
    def from_duty_cycle_csv(cls, path: str | Path, *, speed: float = 1.0) -> ReplaySampler:
        """Replay a per-pod GPU duty-cycle series (``value,timestamp_anon,container_ip``, value in %).

        Reads the CSV itself or a .tar.gz holding it (sample_traces/timeseries). Each pod becomes one
        GPU index, in order of its hashed address; the duty cycle becomes ``gpu.util`` as a fraction.
        """
        raw = _read_duty_cycle(Path(path))
        gpu, pods = pd.factorize(raw["container_ip"].astype(str), sort=True)
        percent = raw["value"].to_numpy(dtype=np.float64)
        keep = np.isfinite(percent) & (percent >= 0) & (percent <= 100)
        seconds = raw["timestamp_anon"].to_numpy(dtype=np.float64)[keep]
        frame = pd.DataFrame({
            "ts_ns": np.rint(seconds * 1e3).astype(np.int64) * 1_000_000,
            "source": REPLAY,
            "gpu": gpu[keep].astype(np.int64),
            "pid": NO_PID,
            "metric": GPU_UTIL,
            "value": percent[keep] / 100.0,
        })
        return cls(frame, speed=speed, pods=dict(enumerate(map(str, pods))))

    @property
    def done(self) -> bool:
        """True once every recorded row has been handed out."""
        return self._next >= len(self._offset_ns)

    @property
    def duration_ns(self) -> int:
        """How long the whole replay lasts at its speed."""
        return int(self._offset_ns[-1]) if len(self._offset_ns) else 0

    def gpus(self) -> tuple[GpuInfo, ...]:
        """The GPU indices the recording holds (device details are not part of a sample recording)."""
        return tuple(GpuInfo(index=g) for g in sorted({g for g in self._gpu if g >= 0}))

    def sample(self, now_ns: int) -> list[SampleRow]:
        """Rows whose mapped time is at or before ``now_ns`` and not handed out yet, stamped with that time.

        The first call fixes the replay's start: the recording's first row maps to that ``now_ns``.
        """
        if self._start_ns is None:
            self._start_ns = now_ns
        start, begin = self._start_ns, self._next
        end = int(np.searchsorted(self._offset_ns, now_ns - start, side="right"))
        if end <= begin:
            return []
        self._next = end
        stamps = (self._offset_ns[begin:end] + start).tolist()
        return list(zip(stamps, self._source[begin:end], self._gpu[begin:end], self._pid[begin:end],
                        self._metric[begin:end], self._value[begin:end], strict=True))

    def close(self) -> None:
        """Nothing to release."""


def _read_duty_cycle(path: Path) -> pd.DataFrame:
    if path.suffix == ".csv":
        frame = pd.read_csv(path)
    else:
        with tarfile.open(path) as archive:
            member = next((m for m in archive.getmembers() if m.isfile() and m.name.endswith(".csv")), None)
            if member is None:
                raise ValueError(f"{path}: no .csv inside the archive")
            handle = archive.extractfile(member)
            assert handle is not None  # a regular file member always has contents
            frame = pd.read_csv(handle)
    missing = [c for c in DUTY_CYCLE_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"{path}: not a duty-cycle series (no column {', '.join(missing)})")
    return frame
