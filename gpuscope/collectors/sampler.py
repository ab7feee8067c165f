"""The sampling loop: ticks every ``interval_s``, asks every collector for rows, and flushes to the store.

One loop drives every source (NVML, DCGM, host, replay through the ``Sampler`` seam; py-spy stacks
through ``StackSampler``). Rows are buffered and written in one transaction at least once a second,
so ``kill -9`` of gpuscope loses at most the last second and readers (``gpuscope runs``, the
dashboard) see the run grow. The loop ends at the duration, on ``stop()`` (Ctrl-C), or when the
target exits, and closes the run with the matching status (or leaves that to its caller, who saves it with
the report). A flush the store refuses (disk full, damaged file) ends the loop: what was flushed before stays,
and ``LoopResult.save_error`` says what was not saved.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from gpuscope.collectors.base import Sampler
from gpuscope.collectors.stacks import StackBatch, StackSampler
from gpuscope.model.run import RunStatus
from gpuscope.model.schema import SampleRow
from gpuscope.store import Store, StoreError

DEFAULT_INTERVAL_S = 0.5
FLUSH_EVERY_S = 1.0
"""The most a ``kill -9`` of gpuscope may lose."""


class Clock(Protocol):
    """Where the loop gets its time: the system's, or a fake one in tests."""

    def now_ns(self) -> int: ...

    def sleep(self, seconds: float) -> None: ...

    def wake(self) -> None:
        """Cut a sleep short (``stop()`` from another thread or a signal handler)."""


class SystemClock:
    """Wall-clock time; sleeps that ``wake()`` cuts short."""

    def __init__(self) -> None:
        self._wake = threading.Event()

    def now_ns(self) -> int:
        return time.time_ns()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._wake.wait(seconds)

    def wake(self) -> None:
        self._wake.set()


@dataclass(frozen=True)
class Tick:
    """What one tick collected, handed to the live view."""

    ts_ns: int
    rows: list[SampleRow]
    stacks: StackBatch = field(default_factory=StackBatch)


@dataclass(frozen=True)
class LoopResult:
    status: RunStatus
    ended_ns: int
    ticks: int
    flushes: int
    rows: int
    errors: tuple[str, ...] = ()
    save_error: str | None = None
    """Why a flush was refused by the store (then the run is left ``running``, found ``interrupted`` later)."""


class SamplingLoop:
    """Runs the collectors into one run of the store until the duration, ``stop()`` or the target's exit."""

    def __init__(self, store: Store, run_id: str, samplers: Sequence[Sampler], *,
                 stacks: StackSampler | None = None, interval_s: float = DEFAULT_INTERVAL_S,
                 duration_s: float | None = None, target_alive: Callable[[], bool] = lambda: True,
                 clock: Clock | None = None, flush_every_s: float = FLUSH_EVERY_S,
                 on_tick: Callable[[Tick], None] | None = None,
                 on_error: Callable[[str], None] | None = None, close_run: bool = True) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be positive")
        self.store, self.run_id = store, run_id
        self.samplers = tuple(samplers)
        self.stacks = stacks
        self.interval_ns = int(interval_s * 1e9)
        self.duration_ns = None if duration_s is None else int(duration_s * 1e9)
        self.target_alive = target_alive
        self.clock: Clock = clock or SystemClock()
        self.flush_every_ns = int(min(flush_every_s, FLUSH_EVERY_S) * 1e9)
        self.on_tick, self.on_error = on_tick, on_error
        self.close_run = close_run
        """False: the run's status is left to the caller (saved with its report), its end time is saved here."""
        self._save_error: StoreError | None = None
        self._stop = threading.Event()
        self._rows: list[SampleRow] = []
        self._stack_batch = StackBatch()
        self._errors: dict[str, str] = {}
        self._flushes = self._total_rows = 0

    def stop(self) -> None:
        """Ask the loop to end after the current tick (safe from a signal handler or another thread)."""
        self._stop.set()
        self.clock.wake()

    def run(self) -> LoopResult:
        """Sample until told to stop; flush; close the run with its status; close the collectors."""
        status: RunStatus = "failed"
        ticks = 0
        try:
            with self._stop_on_signals():
                status, ticks = self._loop()
        finally:
            ended_ns = self.clock.now_ns()
            try:
                self._close_run(status, ended_ns)
            finally:
                self._close_all()
        return LoopResult(status=status, ended_ns=ended_ns, ticks=ticks, flushes=self._flushes,
                          rows=self._total_rows, errors=tuple(self._errors.values()),
                          save_error=str(self._save_error) if self._save_error is not None else None)

    def _close_run(self, status: RunStatus, ended_ns: int) -> None:
        """The last flush and the run's end; nothing more once the store has refused a write."""
        if self._save_error is not None or not self._flushed(ended_ns):
            return
        try:
            if self.close_run:
                self.store.update_run(self.run_id, status=status, ended_ns=ended_ns)
            else:
                self.store.update_run(self.run_id, ended_ns=ended_ns)
        except StoreError as exc:
            self._save_error = exc

    def _flushed(self, now_ns: int) -> bool:
        """Flush; False (and the reason kept) when the store refuses it."""
        try:
            self._flush(now_ns)
        except StoreError as exc:
            self._save_error = exc
            return False
        return True

    def _loop(self) -> tuple[RunStatus, int]:
        start_ns = self.clock.now_ns()
        last_flush_ns = start_ns
        next_ns = start_ns
        ticks = 0
        while True:
            now_ns = self.clock.now_ns()
            self._tick(now_ns)
            ticks += 1
            if now_ns - last_flush_ns >= self.flush_every_ns:
                if not self._flushed(now_ns):
                    return "failed", ticks  # the store takes nothing more: sampling on would only lose it
                last_flush_ns = now_ns
            if not self.target_alive():
                return "target_exited", ticks
            if self._stop.is_set():
                return "complete", ticks
            now_ns = self.clock.now_ns()
            if self.duration_ns is not None and now_ns - start_ns >= self.duration_ns:
                return "complete", ticks
            next_ns += self.interval_ns
            if next_ns <= now_ns:  # a slow tick: skip the missed ones rather than burst to catch up
                next_ns = now_ns + self.interval_ns
            if self.duration_ns is not None:
                next_ns = min(next_ns, start_ns + self.duration_ns)
            self.clock.sleep((next_ns - now_ns) / 1e9)
            if self._stop.is_set():
                return "complete", ticks

    def _tick(self, now_ns: int) -> None:
        rows: list[SampleRow] = []
        for sampler in self.samplers:
            try:
                rows += sampler.sample(now_ns)
            except Exception as exc:  # noqa: BLE001 - one broken source must not end the recording
                self._error(sampler.name, f"{sampler.name} sampling failed: {type(exc).__name__}: {exc}")
        batch = StackBatch()
        if self.stacks is not None:
            try:
                batch = self.stacks.sample(now_ns)
            except Exception as exc:  # noqa: BLE001
                self._error("stacks", f"stack sampling failed: {type(exc).__name__}: {exc}")
        self._rows += rows
        self._stack_batch.extend(batch)
        if self.on_tick is not None:
            self.on_tick(Tick(ts_ns=now_ns, rows=rows, stacks=batch))

    def _flush(self, now_ns: int) -> None:
        rows, self._rows = self._rows, []
        batch, self._stack_batch = self._stack_batch, StackBatch()
        if batch.rows or batch.stacks:
            self.store.add_stacks(self.run_id, batch.rows, batch.stacks)
        self.store.add_samples(self.run_id, rows, heartbeat_ns=now_ns)
        self._flushes += 1
        self._total_rows += len(rows)

    def _error(self, key: str, message: str) -> None:
        if key not in self._errors:
            self._errors[key] = message
            if self.on_error is not None:
                self.on_error(message)

    def _close_all(self) -> None:
        closeables: list[Sampler | StackSampler] = [*self.samplers, *([self.stacks] if self.stacks else [])]
        for closeable in closeables:
            try:
                closeable.close()
            except Exception as exc:  # noqa: BLE001 - closing is best effort; the data is saved
                self._error(f"close:{closeable.name}", f"closing {closeable.name} failed: {exc}")

    @contextmanager
    def _stop_on_signals(self) -> Iterator[None]:
        """Ctrl-C and SIGTERM end the loop cleanly (flush, status) instead of cutting it mid-write.
        A second Ctrl-C falls back to the default and interrupts at once. A handler installed before the loop's
        (``gpuscope run`` passing the signal on to its command) is called first."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def handler(signum: int, frame: Any) -> None:
            before = previous[signal.Signals(signum)]
            if callable(before) and before is not signal.default_int_handler:
                before(signum, frame)
            if self._stop.is_set() and signum == signal.SIGINT:
                raise KeyboardInterrupt
            self.stop()

        previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, old in previous.items():
                signal.signal(sig, old)
