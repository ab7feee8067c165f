"""Two readings of one trace compared field by field, every column and table: the relation a second way of reading
a file must keep (chunks, stretches in several processes) is that nothing at all changes."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np


def assert_same(a: Any, b: Any, where: str = "trace") -> None:
    """``a`` and ``b`` equal all the way down: dataclasses field by field, arrays by dtype, shape and value (NaN
    equal to NaN), sequences and mappings item by item."""
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        assert type(a) is type(b), where
        for f in dataclasses.fields(a):
            assert_same(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and (a.dtype, a.shape) == (b.dtype, b.shape), where
        assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), where
    elif isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), where
        for key in a:
            assert_same(a[key], b[key], f"{where}[{key!r}]")
    else:
        assert type(a) is type(b) and (a == b or (a != a and b != b)), f"{where}: {a!r} != {b!r}"
