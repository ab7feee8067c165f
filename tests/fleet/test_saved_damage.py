"""A saved fleet run whose data file is damaged (not an archive, values of another shape than its header says, a
window of no length) is one line naming the file, as the store's other damage is; never a traceback."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.cli.helpers import gpuscope, one_clean_error_line


def _rewritten(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        with np.load(path) as data:
            arrays = dict(data)
        change(arrays)
        out = io.BytesIO()
        np.savez(out, **arrays)
        path.write_bytes(out.getvalue())
    return damage


def _values_of_another_shape(arrays: dict[str, Any]) -> None:
    arrays["values"] = arrays["values"][:, :, :3]


def _no_window(arrays: dict[str, Any]) -> None:
    header = json.loads(arrays["header"].tobytes())
    header["window"]["step_ns"] = 0
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)


DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "not an archive": (lambda path: path.write_bytes(b"PK\x03\x04 not a zip"), "BadZipFile"),
    "values of another shape": (_rewritten(_values_of_another_shape), "its values are float64"),
    "a window of no length": (_rewritten(_no_window), "buckets of 0 ns"),
}


@pytest.mark.parametrize("kind", DAMAGE)
def test_a_damaged_fleet_run_is_one_line(tmp_path: Path, kind: str) -> None:
    assert gpuscope("fleet", "--demo", home=tmp_path).returncode == 0
    (path,) = (tmp_path / "runs").glob("*/fleet.npz")
    damage, words = DAMAGE[kind]
    damage(path)
    result = gpuscope("show", path.parent.name, "--reanalyze", home=tmp_path)
    line = one_clean_error_line(result)
    assert result.returncode == 2 and f"has no readable data at {path}" in line and words in line, line
