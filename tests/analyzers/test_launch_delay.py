"""Launch delay: a kernel's start after the end of the call that launched it, never below zero."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gpuscope.analyzers.trace.kernels import launch_stats
from gpuscope.traces import read_trace
from tests import builders as b


def test_a_kernel_that_starts_before_its_launch_call_returns_waited_zero(tmp_path: Path) -> None:
    # As in HTA's triton_example: the kernel starts 2 µs before cuLaunchKernel returns. Delays by hand:
    # 8 - 10 -> 0, 29 - 30 -> 0, 51 - 45 = 6.
    events = [b.cpu_op("aten::add", 0, 60),
              b.launch(0, 10, 1), b.kernel("k1", 8, 1, 1),
              b.launch(20, 10, 2), b.kernel("k2", 29, 1, 2),
              b.launch(40, 5, 3), b.kernel("k3", 51, 1, 3)]
    stats = launch_stats(read_trace(b.write(tmp_path / "t.json", b.trace(events))))
    assert stats is not None
    assert stats.launch_delay_median_us == 0.0
    assert stats.launch_delay_p95_us == float(np.percentile([0.0, 0.0, 6.0], 95))
