"""Reading Nsight Systems exports built in code: every figure is the rows the test wrote."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from gpuscope.analyzers.trace.steps import find_steps
from gpuscope.model.trace import Kind, RankTrace
from gpuscope.traces import TraceError
from gpuscope.traces.loader import load, read_traces
from tests.traces.nsys.exports import EPOCH_NS, START_END, ExportBuilder, training_job


def read(builder: ExportBuilder, tmp_path: Path, *, drop: tuple[str, ...] = ()) -> tuple[RankTrace, ...]:
    return read_traces(str(builder.write(tmp_path / "job.sqlite", drop=drop)))


def names_of(trace: RankTrace, kind: Kind) -> list[str]:
    ev = trace.events
    return [trace.names[i] for i in ev.name_id[ev.kind == kind].tolist()]


def test_one_rank_per_process_and_gpu_numbered_by_nccls_communicator(tmp_path: Path) -> None:
    traces = read(training_job(ranks=3), tmp_path)
    assert [(t.rank, t.pid, t.main_device, t.rank_given, t.world_size, t.backend) for t in traces] == [
        (0, 100, 0, True, 3, "nccl"), (1, 101, 1, True, 3, "nccl"), (2, 102, 2, True, 3, "nccl")]
    for t in traces:
        assert [g.name for g in t.gpus] == ["NVIDIA H100 80GB HBM3"]
        assert t.gpus[0].index == t.main_device and t.gpus[0].sm_count == 132
        assert t.base_time_ns == EPOCH_NS and t.host_name == "node-1"


def test_each_rank_holds_its_own_gpu_work_calls_and_ranges(tmp_path: Path) -> None:
    traces = read(training_job(ranks=2, steps=3), tmp_path)
    for t in traces:
        ev = t.events
        assert int((ev.kind == Kind.KERNEL).sum()) == 3 * 3  # GEMM, elementwise, all-reduce a step
        assert int((ev.kind == Kind.MEMCPY).sum()) == 3 and int((ev.kind == Kind.MEMSET).sum()) == 3
        assert int((ev.kind == Kind.STEP).sum()) == 3
        assert set(ev.device[ev.mask(Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)].tolist()) == {t.main_device}
        assert (np.diff(ev.ts_ns) >= 0).all(), "in time order"
        assert (ev.tid[ev.kind == Kind.RUNTIME] == t.pid).all()


def test_names_are_kinetos(tmp_path: Path) -> None:
    b = training_job(ranks=1, steps=1, nccl=False)
    b.memcpy(100, 0, 50_000_000, 1_000, 64, kind=2, src=2, dst=1)
    (t,) = read(b, tmp_path)
    assert sorted(set(names_of(t, Kind.MEMCPY))) == ["Memcpy DtoH (Device -> Pinned)",
                                                     "Memcpy HtoD (Pageable -> Device)"]
    assert set(names_of(t, Kind.MEMSET)) == {"Memset (Device)"}
    assert set(names_of(t, Kind.RUNTIME)) == {"cudaLaunchKernel", "cudaMemcpyAsync", "cudaMemsetAsync",
                                              "cudaStreamSynchronize"}
    assert set(names_of(t, Kind.OTHER)) == {"Stream Sync"}
    assert set(names_of(t, Kind.STEP)) == {"ProfilerStep#0"}


def test_kernels_join_their_launches_and_carry_blocks_and_warps_per_sm(tmp_path: Path) -> None:
    b = ExportBuilder()
    b.gpu(0, sms=100, pids=(7,))
    corr = b.launch(7, 0, 1_000_000, 5_000, "k", grid=(50, 2, 1), block=(256, 1, 1))
    (t,) = read(b, tmp_path)
    ev = t.events
    k = np.flatnonzero(ev.kind == Kind.KERNEL)[0]
    r = np.flatnonzero(ev.kind == Kind.RUNTIME)[0]
    assert ev.correlation[k] == ev.correlation[r] == corr
    assert ev.blocks_per_sm[k] == pytest.approx(100 / 100)
    assert ev.warps_per_sm[k] == pytest.approx(1.0 * 256 / 32)
    assert (ev.dur_ns[k], ev.stream[k]) == (5_000, 7)


def test_nccl_ranges_are_collectives_joined_to_their_kernels(tmp_path: Path) -> None:
    traces = read(training_job(ranks=2, steps=3), tmp_path)
    for t in traces:
        ops = t.collectives
        assert len(ops) == 3 and set(ops.op) == {"ncclAllReduce"}
        assert (ops.in_nelems == 4 << 20).all() and set(ops.dtype) == {"Byte"} and (ops.group_size == 2).all()
        ev = t.events
        comm = np.flatnonzero(np.isin(ev.name_id, [i for i, n in enumerate(t.names) if n.startswith("ncclDev")]))
        assert sorted(ev.external_id[comm].tolist()) == sorted(ops.external_id.tolist())
        assert set(names_of(t, Kind.USER_ANNOTATION)) == {"NCCL:ncclAllReduce", "NCCL:ncclCommInitRankConfig"}


def test_step_range_names_the_steps(tmp_path: Path) -> None:
    path = training_job(ranks=1, steps=4, step_names="train_step", nccl=False).write(tmp_path / "s.sqlite")
    (plain,) = read_traces(str(path))
    assert not (plain.events.kind == Kind.STEP).any()
    assert set(names_of(plain, Kind.USER_ANNOTATION)) == {"train_step"}
    assert find_steps(plain).source == "span"  # without steps, the whole capture
    stepped = find_steps(replace(plain, step_range="train"))  # as --step-range takes it: the name or its start
    assert (len(stepped), stepped.source) == (4, "range train")


def test_a_step_range_of_a_named_domain_is_found_by_its_text_too(tmp_path: Path) -> None:
    b = ExportBuilder()
    b.gpu(0, pids=(7,))
    b.domain(7, 3, "mylib")
    b.nvtx(7, 1_000, 400_000, "train_step", domain=3)
    b.nvtx(7, 500_000, 900_000, "train_step", domain=3)
    b.launch(7, 0, 100_000, 10_000, "gemm", launch_at=50_000)
    b.launch(7, 0, 600_000, 10_000, "gemm", launch_at=550_000)
    (t,) = read(b, tmp_path)
    assert names_of(t, Kind.USER_ANNOTATION) == ["mylib:train_step", "mylib:train_step"]
    for name in ("train_step", "mylib:train_step"):
        assert len(find_steps(replace(t, step_range=name))) == 2


def test_emit_nvtx_ops_are_operators_and_other_ranges_annotations(tmp_path: Path) -> None:
    b = ExportBuilder()
    b.gpu(0, pids=(7,))
    b.nvtx(7, 1_000, 900_000, "aten::linear, seq = 3, sizes = [[8, 16], [32, 16], [32]]")
    b.nvtx(7, 2_000, 800_000, "aten::addmm, seq = 4", registered=True)
    b.nvtx(7, 950_000, 990_000, "ExpressionEvaluator::evaluate")
    b.nvtx(7, 1_000_000, 1_500_000, "forward", event_type=START_END)
    b.nvtx(7, 1_600_000, None, "never ended")
    b.launch(7, 0, 500_000, 10_000, "gemm", launch_at=100_000)
    (t,) = read(b, tmp_path)
    assert names_of(t, Kind.CPU_OP) == ["aten::linear", "aten::addmm"]
    assert names_of(t, Kind.USER_ANNOTATION) == ["ExpressionEvaluator::evaluate", "forward"]


def test_ranks_without_a_recorded_number_are_numbered_by_gpu_then_process(tmp_path: Path) -> None:
    traces = read(training_job(ranks=2, nccl=False), tmp_path)
    assert [(t.rank, t.pid, t.rank_given) for t in traces] == [(0, 100, True), (1, 101, True)]
    (line,) = traces[0].warnings  # said once, on the file's first rank
    assert "process 100 on GPU 0 as rank 0, process 101 on GPU 1 as rank 1" in line and not traces[1].warnings


def test_the_launch_environment_names_a_lone_ranks_number(tmp_path: Path) -> None:
    b = training_job(ranks=1, nccl=False)
    b.launch_env(RANK="5", WORLD_SIZE="8", LOCAL_RANK="1")
    (t,) = read(b, tmp_path)
    assert (t.rank, t.rank_given, t.world_size) == (5, True, 8)


def test_a_lone_rank_without_a_number_claims_none(tmp_path: Path) -> None:
    (t,) = read(training_job(ranks=1, nccl=False), tmp_path)
    assert (t.rank, t.rank_given, t.warnings) == (0, False, ())


def test_one_process_driving_two_gpus_is_two_ranks_each_with_its_launches(tmp_path: Path) -> None:
    b = ExportBuilder()
    b.gpu(0, pids=(9,))
    b.gpu(1, pids=(9,))
    for device in (0, 1):
        b.launch(9, device, 1_000_000 + device * 10_000, 5_000, f"k{device}")
    b.sync(9, 1, 2_000_000, 1_000)
    traces = read(b, tmp_path)
    assert [(t.rank, t.main_device) for t in traces] == [(0, 0), (1, 1)]
    for t in traces:
        assert names_of(t, Kind.KERNEL) == [f"k{t.main_device}"]
        assert names_of(t, Kind.RUNTIME).count("cudaLaunchKernel") == 1
        assert names_of(t, Kind.RUNTIME).count("cudaStreamSynchronize") == 1  # launched nothing: both GPUs'
    assert names_of(traces[0], Kind.OTHER) == [] and names_of(traces[1], Kind.OTHER) == ["Stream Sync"]


def test_an_older_schema_reads_alike(tmp_path: Path) -> None:
    new = read(training_job(ranks=1, steps=2, nccl=False), tmp_path)
    (old,) = read_traces(str(training_job(ranks=1, steps=2, nccl=False).write(tmp_path / "old.sqlite", legacy=True)))
    assert old.names == new[0].names and (old.events.kind == new[0].events.kind).all()
    assert old.attrs["nsys_version"] == "2026.3.1.157" and old.gpus == new[0].gpus and not old.warnings


def test_a_process_gpu_is_the_one_its_cuda_device_maps_to(tmp_path: Path) -> None:
    b = ExportBuilder()
    b.gpu(0, "GPU zero", cuda=1, pids=(7,))  # CUDA_DEVICE_ORDER / CUDA_VISIBLE_DEVICES: nsys's GPU 0 is cuda:1
    b.gpu(1, "GPU one", cuda=0, pids=(7,))
    b.launch(7, 0, 1_000_000, 5_000, "k")
    (t,) = read(b, tmp_path)
    assert [(g.index, g.name, g.uuid) for g in t.gpus] == [(0, "GPU one", "uuid-1")]


def test_per_rank_profiles_in_a_folder_are_one_job(tmp_path: Path) -> None:
    for rank in (1, 0):
        b = training_job(ranks=1, steps=1, nccl=False)
        b.launch_env(RANK=str(rank), WORLD_SIZE="2")
        b.write(tmp_path / f"rank{rank}.sqlite")
    loaded = load(tmp_path)
    assert [(t.rank, Path(t.source).name, t.world_size) for t in loaded.traces] == [
        (0, "rank0.sqlite", 2), (1, "rank1.sqlite", 2)] and not loaded.warnings


def test_tables_an_export_lacks_are_named_in_one_line(tmp_path: Path) -> None:
    b = training_job(ranks=1, steps=1, nccl=False)
    (t,) = read(b, tmp_path, drop=("CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS", "TARGET_INFO_GPU"))
    (line,) = t.warnings
    assert "no CUPTI_ACTIVITY_KIND_RUNTIME" in line and "no NVTX_EVENTS" in line and "no TARGET_INFO_GPU" in line
    assert t.gpus == () and int((t.events.kind == Kind.KERNEL).sum()) == 2


def test_an_export_with_no_gpu_work_or_none_at_all_is_one_error(tmp_path: Path) -> None:
    b = ExportBuilder()
    b.nvtx(1, 0, 10, "only a range")
    with pytest.raises(TraceError, match="no GPU work"):
        read(b, tmp_path)
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    with pytest.raises(TraceError, match="not an Nsight Systems export") as info:
        read_traces(str(other))
    assert info.value.not_a_trace


def test_a_folder_reads_an_export_once_beside_its_report(tmp_path: Path) -> None:
    training_job(ranks=2).write(tmp_path / "job.sqlite")
    (tmp_path / "job.nsys-rep").write_bytes(b"a report nsys writes beside its export")
    loaded = load(tmp_path)
    assert [t.rank for t in loaded.traces] == [0, 1] and not loaded.errors
    assert loaded.files == (str(tmp_path / "job.sqlite"),)


@pytest.mark.parametrize("value", ["'soon'", "x'00ff'", "1e30"])
def test_a_value_of_the_wrong_type_is_one_error_naming_its_table(tmp_path: Path, value: str) -> None:
    path = training_job(ranks=1, steps=1, nccl=False).write(tmp_path / "job.sqlite")
    with sqlite3.connect(path) as conn:
        conn.execute(f"UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = {value} WHERE rowid = 1")
    with pytest.raises(TraceError, match="CUPTI_ACTIVITY_KIND_KERNEL holds a value that is not a whole number"):
        read_traces(str(path))
