"""The seam every live collector implements, and the unsupported-counter bookkeeping they share."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from gpuscope.model.schema import SampleRow


@runtime_checkable
class Sampler(Protocol):
    """One source of live samples, called once per tick by the sampler loop.

    ``sample`` returns long-format rows (ts_ns, source, gpu, pid, metric, value) with metric names
    from ``gpuscope.model.schema``. A counter the device cannot report is left out, never sent as 0.
    It must not raise for a transient fault (an endpoint timing out): it returns what it has.
    """

    name: str

    def sample(self, now_ns: int) -> list[SampleRow]: ...

    def close(self) -> None: ...
