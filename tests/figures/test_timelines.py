from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from gpuscope.figures import Absent, gpu_timelines, host_timelines
from gpuscope.model import schema as m
from tests.figures.fixtures import sample_rows, samples_frame


def _traces(fig: object) -> list[go.Scatter]:
    assert isinstance(fig, go.Figure)
    return list(fig.data)


def test_one_line_per_gpu_and_metric_one_legend_entry_per_gpu() -> None:
    traces = _traces(gpu_timelines(samples_frame(sample_rows(gpus=3))))
    assert len(traces) == 3 * 4
    assert sorted(t.name for t in traces if t.showlegend) == ["GPU 0", "GPU 1", "GPU 2"]
    assert {t.legendgroup for t in traces} == {"GPU 0", "GPU 1", "GPU 2"}


def test_the_spike_is_still_there_after_downsampling() -> None:
    traces = _traces(gpu_timelines(samples_frame(sample_rows(gpus=1, seconds=600)), buckets=20))
    util = next(t for t in traces if "util" in t.hovertemplate)
    assert len(util.y) <= 42
    assert float(np.nanmax(util.y)) == 1.0


def test_units_memory_in_gib_power_in_w_dates_in_ms() -> None:
    traces = _traces(gpu_timelines(samples_frame(sample_rows(gpus=1, seconds=10))))
    memory = next(t for t in traces if "memory" in t.hovertemplate)
    assert 10.0 <= float(memory.y[0]) < 10.01
    assert traces[0].x[0] == sample_rows(gpus=1, seconds=1)[0][0] / 1e6


def test_panel_without_data_is_left_out() -> None:
    only_util = samples_frame([r for r in sample_rows(dcgm=False, host=False) if r[4] == m.GPU_UTIL])
    fig = gpu_timelines(only_util)
    assert isinstance(fig, go.Figure)
    assert [a.text for a in fig.layout.annotations] == ["Utilization / SM active"]
    assert all("SM active" not in t.hovertemplate for t in fig.data)


def test_no_samples_or_no_gpu_samples_give_a_reason() -> None:
    assert isinstance(gpu_timelines(None), Absent)
    host_only = samples_frame([r for r in sample_rows() if r[2] == m.NO_GPU])
    result = gpu_timelines(host_only)
    assert isinstance(result, Absent) and "no GPU samples" in result.reason


def test_host_cpu_splits_main_process_and_workers() -> None:
    traces = _traces(host_timelines(samples_frame(sample_rows(seconds=5))))
    by_name = {t.name: t for t in traces}
    assert set(by_name) == {"main process", "workers (2)", "host CPU", "iowait", "read"}
    assert float(by_name["workers (2)"].y[0]) == np.float32(1.8)
    assert float(by_name["read"].y[0]) == 12.0  # MB/s, the whole tree


def test_host_timelines_absent_without_host_samples() -> None:
    gpu_only = samples_frame(sample_rows(host=False))
    result = host_timelines(gpu_only)
    assert isinstance(result, Absent) and "host" in result.reason


def test_categorical_and_string_metric_columns_draw_the_same() -> None:
    frame = samples_frame(sample_rows(gpus=2, seconds=30))
    as_category = frame.assign(metric=frame["metric"].astype("category"))
    for build in (gpu_timelines, host_timelines):
        plain, fast = build(frame), build(as_category)
        assert isinstance(plain, go.Figure) and isinstance(fast, go.Figure)
        assert [list(t.y) for t in plain.data] == [list(t.y) for t in fast.data]
