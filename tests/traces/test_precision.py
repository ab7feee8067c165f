"""Input dtypes of host ops: the precision column, its classification, and the store's round trip."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpuscope.model.trace import Kind, Precision
from gpuscope.store.tracefile import load_traces, save_traces
from gpuscope.traces import read_trace
from gpuscope.traces.precision import classify
from tests import builders as b


@pytest.mark.parametrize(
    ("types", "expected"),
    [
        (["c10::BFloat16", "c10::BFloat16", ""], Precision.BF16),
        (["c10::BFloat16", "c10::Half"], Precision.BF16),
        (["c10::Half", "float", "Scalar"], Precision.FP16),
        (["float", "float"], Precision.FP32),
        (["double", "long int"], Precision.FP64),
        (["c10::Float8_e4m3fn", "c10::BFloat16"], Precision.FP8),
        (["c10::Float8_e5m2"], Precision.FP8),
        (["signed char", "signed char", "Scalar"], Precision.INT8),
        (["signed char", "float"], Precision.FP32),
        (["long int", "bool"], Precision.OTHER),
        (["ScalarList", "Scalar", ""], Precision.UNKNOWN),
        (["TensorList"], Precision.UNKNOWN),
        ([], Precision.UNKNOWN),
    ],
)
def test_lowest_floating_precision_among_inputs(types: list[str], expected: Precision) -> None:
    assert classify(types) is expected


def _op(name: str, ts: float, types: list[str] | None, *, cat: str = "cpu_op") -> b.Event:
    event = b.cpu_op(name, ts, 5, cat=cat)
    if types is not None:
        event["args"]["Input type"] = types
    return event


def test_each_cpu_op_gets_its_inputs_precision_and_other_kinds_stay_unknown(tmp_path: Path) -> None:
    events = [
        _op("aten::mm", 0, ["c10::BFloat16", "c10::BFloat16"]),
        _op("aten::mm", 10, ["float", "float"]),
        _op("aten::mm", 20, ["c10::BFloat16", "c10::BFloat16"]),  # the same list again: interned
        _op("aten::add", 30, None),  # no record_shapes
        _op("my_region", 40, ["c10::Half"], cat="user_annotation"),
        b.launch(50, 2, 1), b.kernel("sm90_xmma_gemm_bf16bf16", 55, 10, 1),
    ]
    t = read_trace(b.write(tmp_path / "t.json", b.trace(events)))
    by_ts = dict(zip((t.events.ts_ns // 1000).tolist(), t.events.precision.tolist()))
    assert by_ts == {0: Precision.BF16, 10: Precision.FP32, 20: Precision.BF16, 30: Precision.UNKNOWN,
                     40: Precision.UNKNOWN, 50: Precision.UNKNOWN, 55: Precision.UNKNOWN}
    assert t.events.precision.dtype == np.uint8 and len(t.events.precision) == len(t.events)


def test_odd_input_type_lists_do_not_reject_the_trace(tmp_path: Path) -> None:
    events = [_op("aten::mm", 0, ["c10::BFloat16", 3]), _op("aten::mm", 10, "float"),  # type: ignore[list-item, arg-type]
              _op("aten::mm", 20, ["c10::Half"])]
    t = read_trace(b.write(tmp_path / "t.json", b.trace(events)))
    assert len(t.events) == 3 and t.events.precision[-1] == Precision.FP16
    assert t.warnings and "Input type" in t.warnings[0]


def test_store_round_trips_precision_and_old_runs_load_as_unknown(tmp_path: Path) -> None:
    events = [_op("aten::mm", 0, ["c10::BFloat16"]), _op("aten::mm", 10, ["float"])]
    trace = read_trace(b.write(tmp_path / "t.json", b.trace(events)))
    folder = tmp_path / "run"
    folder.mkdir()
    save_traces(folder, [trace])
    (loaded,) = load_traces(folder)
    assert loaded.events.precision.tolist() == [Precision.BF16, Precision.FP32]

    npz = next(folder.glob("rank*.npz"))  # a run saved before the column existed
    with np.load(npz) as data:
        arrays = {k: data[k] for k in data.files if k != "e_precision"}
    np.savez(npz, **arrays)
    (old,) = load_traces(folder)
    assert old.events.precision.tolist() == [Precision.UNKNOWN, Precision.UNKNOWN]
    assert (old.events.kind == Kind.CPU_OP).all()
