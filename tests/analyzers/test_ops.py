"""The operator table: hand counts on a trace built here, and the TensorBoard plugin's own operator view and
table for the two ResNet-50 samples (sample_traces/expected, one JSON document per line)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

from gpuscope.analyzers.trace.ops import OpStat, OpTable, is_operator, operator_table, sort_ops
from gpuscope.traces import read_trace
from tests import builders as b
from tests.conftest import SAMPLES

EXPECTED = SAMPLES / "expected" / "tb_plugin_result_check_file.txt"
# Each sample's lines in the file (0-based): the operator view's four top lists, then the operator table.
PLUGIN = {"resnet50_dataloader_bound": (1, 2), "resnet50_workers4": (6, 7)}
OTHER_THREAD_OP_EXT = 77


def hand_built() -> list[b.Event]:
    """One profiler step of 1000 µs; the expected figures are counted by hand in the tests below."""
    return [
        b.step(1, 0, 1000),
        b.cpu_op("aten::linear", 10, 300, ext=11),
        b.cpu_op("aten::addmm", 20, 200, ext=12),
        b.launch(30, 10, 501, ext=12),  # Kineto before PyTorch 2: the runtime call carries its op's id
        b.kernel("gemm_a", 100, 150, 501),
        # PyTorch 2: an id of its own, here one that names an op on another thread: found by time instead.
        b.launch(50, 5, 502, ext=OTHER_THREAD_OP_EXT),
        b.kernel("gemm_b", 260, 40, 502),
        b.launch(250, 10, 503),  # in aten::linear, after aten::addmm ended
        b.memcpy(320, 30, 503),
        b.cpu_op("aten::to", 400, 100),
        b.cpu_op("aten::to", 410, 80),  # the only child, of the same name: one call with its parent
        b.cpu_op("aten::copy_", 420, 50),
        b.launch(430, 5, 504),
        b.kernel("copy_kernel", 440, 20, 504),
        b.cpu_op("record_param_comms", 600, 100),
        b.cpu_op("nccl:all_reduce", 610, 60, cat="user_annotation"),
        b.launch(620, 10, 505),
        b.kernel("ncclKernel_AllReduce_RING_LL_Sum_float", 630, 200, 505),
        b.launch(800, 10, 506),  # in the profiler step, outside any operator
        b.kernel("stray_kernel", 820, 30, 506),
        b.kernel("orphan_kernel", 900, 10, 999),  # no runtime call joins it
        b.cpu_op("aten::crossing", 950, 100),  # starts in the step and ends after it: not in the tree
        b.cpu_op("aten::mul", 10, 300, tid=2, ext=OTHER_THREAD_OP_EXT),
    ]


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> OpTable:
    path = b.write(tmp_path_factory.mktemp("ops") / "t.json", b.trace(hand_built()))
    return operator_table(read_trace(path))


def op(table: OpTable, name: str) -> OpStat:
    return next(o for o in table.ops if o.name == name)


def figures(o: OpStat) -> tuple[int, float, float, float, float]:
    return o.calls, o.cpu_self_us, o.cpu_total_us, o.gpu_self_us, o.gpu_total_us


def test_self_and_total_by_hand(table: OpTable) -> None:
    # linear: 300 less addmm (200) and its own launch (10); its own copy 30, with addmm's kernels 220 in all.
    assert figures(op(table, "aten::linear")) == (1, 90, 300, 30, 220)
    # addmm: both launches are its own (one by External id, one by time), so both kernels.
    assert figures(op(table, "aten::addmm")) == (1, 185, 200, 190, 190)
    assert [(k.name, k.calls, k.total_us) for k in op(table, "aten::addmm").kernels] == [
        ("gemm_a", 1, 150), ("gemm_b", 1, 40)]
    assert figures(op(table, "aten::to")) == (1, 50, 100, 0, 20)
    assert figures(op(table, "aten::copy_")) == (1, 45, 50, 20, 20)
    # The nccl:all_reduce annotation inside it is part of the op: its launch and kernel are the op's own.
    assert figures(op(table, "record_param_comms")) == (1, 90, 100, 200, 200)
    assert figures(op(table, "aten::mul")) == (1, 300, 300, 0, 0)


def test_what_is_not_an_operator(table: OpTable) -> None:
    names = {o.name for o in table.ops}
    assert names == {"aten::linear", "aten::addmm", "aten::to", "aten::copy_", "record_param_comms", "aten::mul"}
    assert not is_operator("ProfilerStep#3") and not is_operator("Optimizer.step#SGD.step")
    assert not is_operator("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__")
    assert not is_operator("DistributedDataParallel.forward") and is_operator("aten::mm")


def test_gpu_time_outside_operators_and_shares(table: OpTable) -> None:
    assert table.gpu_us == 150 + 40 + 30 + 20 + 200 + 30 + 10
    assert table.no_operator_gpu_us == 30 + 10  # the stray kernel and the orphan
    assert table.steps == 1 and table.steps_us == 1000
    assert op(table, "aten::linear").gpu_share == pytest.approx(0.22)
    assert op(table, "aten::linear").cpu_share == pytest.approx(0.3)


def test_sorting(table: OpTable) -> None:
    assert [o.name for o in table.ops[:2]] == ["record_param_comms", "aten::addmm"]  # the plugin's order
    assert [o.name for o in sort_ops(table.ops, "gpu_total")[:2]] == ["aten::linear", "record_param_comms"]
    assert sort_ops(table.ops, "cpu_self")[0].name == "aten::mul"
    assert [o.name for o in sort_ops(table.ops, "name")][:2] == ["aten::addmm", "aten::copy_"]


def test_old_traces_runtime_ids_name_their_op_at_a_shared_boundary(tmp_path: Path) -> None:
    # Kineto before PyTorch 2: each runtime call carries its op's id. A zero-length call at the instant one op
    # ends and the next begins belongs, by time alone, to either; its id says aten::add.
    events = [b.cpu_op("aten::add", 0, 20, ext=1), b.launch(5, 5, 10, ext=1), b.kernel("add_k", 30, 7, 10),
              b.launch(20, 0, 11, ext=1), b.kernel("add_k2", 40, 3, 11),
              b.cpu_op("aten::mul", 20, 20, ext=2), b.launch(25, 5, 12, ext=2), b.kernel("mul_k", 50, 11, 12)]
    got = operator_table(read_trace(b.write(tmp_path / "t.json", b.trace(events))))
    assert {o.name: o.gpu_self_us for o in got.ops} == {"aten::add": 10, "aten::mul": 11}
    # Without the convention (ids of their own, as PyTorch 2 writes them) the same call goes by time: the
    # op that starts at its instant.
    for e in events:
        if e["cat"] == "cuda_runtime":
            e["args"]["External id"] = e["args"]["correlation"]
    got = operator_table(read_trace(b.write(tmp_path / "t2.json", b.trace(events))))
    assert {o.name: o.gpu_self_us for o in got.ops} == {"aten::add": 7, "aten::mul": 14}


def test_without_profiler_steps_the_host_span_is_the_step(tmp_path: Path) -> None:
    events = [b.cpu_op("aten::mm", 0, 50), b.launch(10, 5, 1), b.kernel("k", 20, 30, 1)]
    got = operator_table(read_trace(b.write(tmp_path / "t.json", b.trace(events))))
    assert got.steps == 0 and got.steps_us == 50  # no profiler step: the host span is what shares are of
    assert figures(got.ops[0]) == (1, 45, 50, 30, 30)


def test_runtime_calls_without_any_host_op_leave_all_gpu_work_outside_operators(tmp_path: Path) -> None:
    # A trace of runtime calls and GPU work only (TraceLens' mi210 gpu_only_trace, HTA's trace_file_list):
    # no operator owns the launches.
    events = [b.launch(0, 5, 1), b.kernel("k1", 10, 30, 1), b.launch(50, 5, 2), b.kernel("k2", 60, 20, 2)]
    got = operator_table(read_trace(b.write(tmp_path / "t.json", b.trace(events))))
    assert got.ops == () and got.steps == 0
    assert got.gpu_us == 50 and got.no_operator_gpu_us == 50


@cache
def plugin(line: int) -> dict[str, object]:
    return json.loads(EXPECTED.read_text().splitlines()[line])  # type: ignore[no-any-return]


@cache
def ours(sample: str) -> dict[str, OpStat]:
    return {o.name: o for o in operator_table(read_trace(next((SAMPLES / sample).glob("*.json.gz")))).ops}


@pytest.mark.parametrize("sample", PLUGIN)
def test_every_operator_equals_the_plugins_table(sample: str) -> None:
    rows = plugin(PLUGIN[sample][1])["data"]
    got = ours(sample)
    assert sorted(got) == sorted(r["name"] for r in rows)  # type: ignore[index, union-attr]
    for row in rows:  # type: ignore[union-attr]
        o = got[row["name"]]  # type: ignore[index]
        # The plugin's figures are whole microseconds (the trace's own unit).
        assert (o.calls, o.cpu_self_us, o.cpu_total_us, o.gpu_self_us, o.gpu_total_us) == (
            row["calls"], row["host_self_duration"], row["host_total_duration"],  # type: ignore[index]
            row["device_self_duration"], row["device_total_duration"]), o.name  # type: ignore[index]


@pytest.mark.parametrize("sample", PLUGIN)
def test_the_plugins_four_top_lists(sample: str) -> None:
    view = plugin(PLUGIN[sample][0])
    field = {"device_total_time": "gpu_total_us", "device_self_time": "gpu_self_us",
             "host_total_time": "cpu_total_us", "host_self_time": "cpu_self_us"}
    got = ours(sample)
    for key, attr in field.items():
        rows = view[key]["rows"]  # type: ignore[index]
        assert rows, key
        for name, value in rows:
            assert getattr(got[name], attr) == value, (key, name)


def test_a_trace_without_operators_lists_its_annotated_ranges(tmp_path: Path) -> None:
    """An Nsight Systems profile without emit_nvtx, a program that is not PyTorch: its own ranges are the rows."""
    events = [
        b.cpu_op("forward", 0, 500, cat="user_annotation"),
        b.cpu_op("attention", 100, 200, cat="user_annotation"),
        b.launch(120, 10, 601),
        b.kernel("gemm", 150, 80, 601),
        b.launch(400, 10, 602),  # in forward, after attention ended
        b.kernel("add", 420, 30, 602),
        b.launch(700, 10, 603),  # in no range
        b.kernel("stray", 720, 5, 603),
    ]
    table = operator_table(read_trace(b.write(tmp_path / "t.json", b.trace(events))))
    assert table.by_range
    assert figures(op(table, "attention")) == (1, 190, 200, 80, 80)
    assert figures(op(table, "forward")) == (1, 290, 500, 30, 110)
    assert table.no_operator_gpu_us == 5
    with_an_op = b.trace([*events, b.cpu_op("aten::mm", 800, 10)])
    with_op = operator_table(read_trace(b.write(tmp_path / "o.json", with_an_op)))
    assert not with_op.by_range and [o.name for o in with_op.ops] == ["aten::mm"]
