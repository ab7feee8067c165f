"""The top kernels of a rank: by total time, and kernels of equal total in the order the trace names them, so a
report is the same on every machine (numpy's default sort breaks ties by the CPU's vector instructions)."""

from __future__ import annotations

from pathlib import Path

from gpuscope.analyzers.trace.rank import analyze_rank
from gpuscope.traces import read_trace
from tests import builders as b


def test_kernels_of_equal_time_keep_the_order_the_trace_names_them(tmp_path: Path) -> None:
    names = [f"kernel_{i:02d}" for i in range(64)]
    # kernel_00 and kernel_01 take 20 us in all, every other 10 us: two ranks of ties, each 30+ wide.
    events: list[b.Event] = [b.step(0, 0.0, 5000.0)]
    corr = 0
    for i, name in enumerate(names):
        for _ in range(2 if i < 2 else 1):
            corr += 1
            ts = 10.0 + 60.0 * corr
            events += [b.launch(ts, 5.0, corr), b.kernel(name, ts + 10.0, 10.0, corr)]
    report = analyze_rank(read_trace(b.write(tmp_path / "t.json", b.trace(events))))

    assert [k.name for k in report.top_kernels] == names[:15]
    assert [k.total_us for k in report.top_kernels] == [20.0, 20.0] + [10.0] * 13
