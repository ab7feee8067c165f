from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from gpuscope.figures.downsample import downsample, gap_mask, minmax_indices
from tests.figures.fixtures import series


def test_short_series_is_returned_whole() -> None:
    x, y = series(np.array([1.0, 2.0, 3.0]))
    xo, yo = downsample(x, y, buckets=10)
    assert yo.tolist() == [1.0, 2.0, 3.0]
    assert xo.tolist() == x.astype(float).tolist()


def test_a_one_sample_spike_survives_a_day_at_1hz() -> None:
    values = np.full(86_400, 0.3)
    values[51_234] = 1.0
    values[70_000] = 0.0
    x, y = series(values)
    xo, yo = downsample(x, y, buckets=500)
    assert len(yo) <= 2 * 500 + 2
    assert yo.max() == 1.0 and yo.min() == 0.0
    assert xo[np.argmax(yo)] == float(x[51_234])


def test_recording_gap_becomes_a_break_in_the_line() -> None:
    x = np.r_[np.arange(100), np.arange(500, 600)].astype(np.int64) * 1_000_000_000
    xo, yo = downsample(x, np.ones(200), buckets=20)
    assert np.isnan(yo).sum() == 1
    gap_at = int(np.flatnonzero(np.isnan(yo))[0])
    assert xo[gap_at - 1] <= 99e9 and xo[gap_at + 1] >= 500e9


def test_missing_values_are_dropped_not_drawn() -> None:
    x, y = series(np.array([1.0, np.nan, 3.0, 4.0]))
    _, yo = downsample(x, y, buckets=10)
    assert yo.tolist() == [1.0, 3.0, 4.0]


def test_datetime_x_is_accepted() -> None:
    x, y = series(np.arange(10.0))
    xo, _ = downsample(x.astype("datetime64[ns]"), y, buckets=100)
    assert xo[0] == float(x[0])


def test_gap_mask_needs_three_points() -> None:
    assert gap_mask(np.array([0, 10])).tolist() == [False]


@settings(max_examples=60, deadline=None)
@given(arrays(np.float64, st.integers(3, 3000), elements=st.floats(-1e6, 1e6)), st.integers(1, 50))
def test_extremes_kept_and_points_are_real(values: np.ndarray, buckets: int) -> None:
    x, y = series(values)
    keep = minmax_indices(x, y, buckets=buckets)
    assert len(keep) <= 2 * buckets + 2
    assert np.all(np.diff(keep) > 0)
    assert y[keep].max() == y.max() and y[keep].min() == y.min()
    xo, yo = downsample(x, y, buckets=buckets)
    assert set(zip(xo.tolist(), yo.tolist(), strict=True)) <= set(zip(x.astype(float).tolist(), y.tolist(),
                                                                       strict=True))
