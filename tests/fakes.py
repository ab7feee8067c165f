"""Fakes the tests share: a clock that moves only when the sampling loop sleeps."""

from __future__ import annotations


class FakeClock:
    """Time that moves only when the loop sleeps: tests run a minute of sampling in no time."""

    def __init__(self, start_ns: int = 1_800_000_000_000_000_000) -> None:
        self.t_ns = start_ns
        self.sleeps: list[float] = []

    def now_ns(self) -> int:
        return self.t_ns

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.t_ns += max(0, int(seconds * 1e9))

    def advance(self, seconds: float) -> None:
        self.t_ns += int(seconds * 1e9)

    def wake(self) -> None:
        pass
