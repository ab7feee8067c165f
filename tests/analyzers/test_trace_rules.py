"""The diagnosis on small traces written as Kineto writes them and read back by the reader: start-up and warm-up,
work already done (graphs, fused optimizers, low precision), wrapper names, several GPUs in one process,
old memory events and clocks that disagree."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuscope.analyzers.diagnosis.evidence import _COLLECTIVE_WAIT, _DATA_PARALLEL
from gpuscope.analyzers.report import AnalysisOptions, build_report
from gpuscope.api.analysis import trace_run_meta
from gpuscope.model.cost import Price
from gpuscope.model.report import Report
from gpuscope.model.run import Run
from gpuscope.reports.terminal import render
from gpuscope.traces import load
from tests import builders as b


def analyse(tmp_path: Path, events: list[b.Event], *, price: float | None = None, **doc: object) -> Report:
    path = b.write(tmp_path / "t.json", b.trace(events, **doc))
    loaded = load(path)
    options = AnalysisOptions(price=Price(usd_per_gpu_hour=price, source="test") if price else None)
    return build_report(Run(meta=trace_run_meta(loaded.traces, name="t"), traces=loaded.traces), options)


def codes(r: Report) -> set[str]:
    return {x.code for x in r.recommendations} | {f.code for f in r.findings}


def host_bound_steps(steps: int, *, t0: float = 0.0, launch: str = "cudaLaunchKernel", step_us: float = 10_000.0,
                     first: int = 0) -> list[b.Event]:
    """Steps of 100 tiny kernels, each launched by a 90 µs op: the GPU waits on the host."""
    events: list[b.Event] = []
    for i in range(steps):
        start = t0 + i * step_us
        events.append(b.step(first + i, start, step_us))
        for k in range(100):
            t = start + k * 100
            corr = int(start) + k + 1
            events.append(b.cpu_op("aten::add", t, 90))
            events.append(b.launch(t + 80, 5, corr, name=launch))
            events.append(b.kernel("void at::native::vectorized_elementwise_kernel<4, AddFunctor>", t + 86, 3, corr))
    return events


def test_a_first_step_inside_lazy_cuda_initialisation_is_warm_up(tmp_path: Path) -> None:
    # Step 0 spends 900 ms in the first cudaFree (context creation), the GPU idle meanwhile.
    events = [b.step(0, 0, 910_000), b.launch(0, 900_000, 1, name="cudaFree")]
    events += host_bound_steps(3, t0=910_000, first=1)
    r = analyse(tmp_path, events)
    rank = r.ranks[0]
    assert [s.warmup for s in rank.per_step] == [True, False, False, False]
    assert rank.steps == 3 and rank.step_time_us == pytest.approx(10_000, rel=0.01)
    assert rank.startup is not None and rank.startup.steady and rank.startup.warmup_steps == 1
    assert rank.startup.parts_us == {"CUDA/HIP initialisation": pytest.approx(900_000)}
    assert rank.startup.calls == ("cudaFree",)
    assert r.verdict.primary == "host_overhead" and r.stage_shares["idle"] == pytest.approx(0.0)
    (f,) = [f for f in r.findings if f.code == "startup_in_trace"]
    assert "1 warm-up step left out" in f.title and "profiler_schedule" in f.recommendations


def test_a_long_gpu_gap_while_the_host_is_inside_an_operator_is_not_idle(tmp_path: Path) -> None:
    events = host_bound_steps(1) + [b.step(1, 10_000, 700_000), b.cpu_op("aten::nonzero", 10_000, 699_000)]
    events += host_bound_steps(1, t0=710_000, first=2)
    r = analyse(tmp_path, events)
    assert r.stage_shares["idle"] == pytest.approx(0.0, abs=0.002)  # the 1 ms with no operator open
    assert r.verdict.primary == "host_overhead"
    assert any(f.code == "gpu_gap_long" for f in r.findings)  # the gap is still reported, as Nsight does


def test_graph_launched_kernels_get_no_cuda_graph_advice(tmp_path: Path) -> None:
    plain = analyse(tmp_path, host_bound_steps(3))
    assert "cuda_graphs" in codes(plain)
    graphed = analyse(tmp_path, host_bound_steps(3, launch="cudaGraphLaunch"))
    assert graphed.verdict.primary == "host_overhead" and "cuda_graphs" not in codes(graphed)


@pytest.mark.parametrize(("optimizer", "ops", "expected"), [
    ("Adam", ["aten::add_"], "fused_optimizer"),
    ("AdamW", ["aten::_foreach_add_"], "fused_optimizer"),
    ("RMSprop", ["aten::add_"], "foreach_optimizer"),
    ("RMSprop", ["aten::_foreach_add_"], None),  # foreach already, and no fused version exists
    ("Adam", ["aten::_fused_adam_"], None),  # fused already
    ("Shampoo", ["aten::_foreach_mul_"], None),  # not torch.optim: no fused=True to offer
])
def test_optimizer_advice_only_where_a_faster_version_exists(tmp_path: Path, optimizer: str, ops: list[str],
                                                             expected: str | None) -> None:
    events = host_bound_steps(3)
    for i in range(3):
        t = i * 10_000.0 + 9_000
        events.append(b.cpu_op(f"Optimizer.step#{optimizer}.step", t, 950, cat="user_annotation"))
        events += [b.cpu_op(op, t + 10 + j * 90, 80) for j, op in enumerate(ops * 5)]
    got = codes(analyse(tmp_path, events)) & {"fused_optimizer", "foreach_optimizer"}
    assert got == ({expected} if expected else set())


def test_fsdp_is_not_dataparallel_and_only_named_waits_are_waits() -> None:
    assert _DATA_PARALLEL.search("DataParallel.forward")
    for name in ("FullyShardedDataParallel.forward", "DistributedDataParallel.forward"):
        assert not _DATA_PARALLEL.search(name)
    waits = ["## KJTListAwaitable wait() ##", "## PooledEmbeddingsAwaitable wait() ##", "## Request wait() ##",
             "All2All_Pooled_Wait", "ReduceScatter_Wait", "## wait_sparse_data_dist ##",
             "_c10d_functional::wait_tensor", "c10d_functional::wait_tensor", "c10d::wait"]
    not_waits = ["## NoWait wait() ##", "All2All_Pooled_Req", "## all2all_data:recat_permute_gen ##",
                 "## alltoall_fwd_single ##", "c10d::alltoall_base_", "## wait_for_batch ##",
                 "All2All_Pooled_ReqBackward"]
    assert [n for n in waits if not _COLLECTIVE_WAIT.search(n)] == []
    assert [n for n in not_waits if _COLLECTIVE_WAIT.search(n)] == []


def _gemm_steps(input_type: str, kernel: str = "gemm_kernel_generic") -> list[b.Event]:
    events: list[b.Event] = []
    for i in range(3):
        t = i * 10_000.0
        events.append(b.step(i, t, 10_000))
        op = b.cpu_op("aten::mm", t + 10, 100)
        op["args"]["Input type"] = [input_type, input_type]
        events += [op, b.launch(t + 50, 5, i + 1), b.kernel(kernel, t + 60, 9_500, i + 1)]
    return events


def test_amp_only_for_eligible_work_still_in_fp32(tmp_path: Path) -> None:
    fp32 = analyse(tmp_path, _gemm_steps("float"))
    assert {"amp", "tf32"} <= codes(fp32)
    for dtype in ("c10::BFloat16", "c10::Half", "c10::Float8_e4m3fn"):
        assert not codes(analyse(tmp_path, _gemm_steps(dtype))) & {"amp", "tf32", "tensor_cores_unused"}
    for name in ("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT", "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128",
                 "void cutlass::device_kernel<cutlass3x_sm90_tensorop_gemm_bf16>",
                 "flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::half_t>>"):
        assert not codes(analyse(tmp_path, _gemm_steps("float", name))) & {"amp", "tf32"}, name


def test_one_process_on_two_gpus_is_two_gpus(tmp_path: Path) -> None:
    events: list[b.Event] = []
    for i in range(2):
        t = i * 10_000.0
        events.append(b.step(i, t, 10_000))
        events += [b.launch(t + 10, 5, 10 * i + 1), b.kernel("gemm_a", t + 20, 8_000, 10 * i + 1, device=0)]
        events += [b.launch(t + 30, 5, 10 * i + 2), b.kernel("gemm_b", t + 40, 2_000, 10 * i + 2, device=1)]
    r = analyse(tmp_path, events, price=1.0)
    rank = r.ranks[0]
    assert [(d.device, round(d.busy or 0, 3)) for d in rank.devices] == [(0, 0.8), (1, 0.2)]
    assert rank.gpu_busy == pytest.approx(0.5)
    assert r.cost is not None and r.cost.gpu_count == 2 and len(r.run.gpus) == 2
    assert r.cost.gpu_hours == pytest.approx(2 * rank.window_us / 3.6e9)


def test_peak_memory_of_an_old_trace_is_a_lower_bound_and_never_right_sizes(tmp_path: Path) -> None:
    events = _gemm_steps("float")
    old = [b.memory(100 + i, 2**30, 0) for i in range(3)]
    for m in old:
        del m["args"]["Total Allocated"]
    r = analyse(tmp_path, events + old, price=30.0)
    assert r.ranks[0].memory.lower_bound and r.ranks[0].memory.peak_allocated_bytes == 3 * 2**30
    assert "right_size" not in codes(r)
    from rich.console import Console
    console = Console(record=True, width=160)
    render(r, console)
    assert "at least 3.0 GiB" in console.export_text()


def test_clocks_that_disagree_are_named_and_not_joined(tmp_path: Path) -> None:
    events: list[b.Event] = []
    for i in range(3):
        t = i * 10_000.0
        events.append(b.step(i, t, 10_000))
        events += [b.launch(t + 500, 5, i + 1), b.kernel("gemm", t + 100, 5_000, i + 1)]  # starts 400 µs early
    r = analyse(tmp_path, events)
    rank = r.ranks[0]
    assert rank.clock_skew_us == pytest.approx(400)
    assert rank.idle_breakdown_us is None and rank.launch is not None and rank.launch.launch_delay_median_us is None
    (f,) = [f for f in r.findings if f.code == "clock_skew"]
    assert "400 µs" in f.title


def test_rocms_blocking_copy_is_a_host_device_sync(tmp_path: Path) -> None:
    # PyTorch's ROCm build copies for .item() with hipMemcpyWithStream (copy and stream sync in one call), as in
    # TraceLens' SGLang decode trace. Each step: a kernel, then the blocking copy, then nothing on the GPU until the
    # next step's kernel. By hand: the copy ends at 2000 µs into a step, the next kernel starts at 4020 µs: 2020 µs
    # of drain after each of the first 3 copies (the last has no GPU work after it), over 4 steps of 4000 µs.
    events: list[b.Event] = []
    for i in range(4):
        t = i * 4000.0
        events += [b.step(i, t, 4000), b.cpu_op("aten::mm", t, 100),
                   b.launch(t + 10, 5, 10 + i, name="hipLaunchKernel"),
                   b.kernel("Cijk_Ailk_Bljk_SB_MT64x64x16_MI16x16x4", t + 20, 1000, 10 + i),
                   b.cpu_op("aten::item", t + 100, 1900),
                   b.launch(t + 110, 1890, 20 + i, name="hipMemcpyWithStream")]
    r = analyse(tmp_path, events)
    (sync,) = [f for f in r.findings if f.code == "sync_calls"]
    assert "hipMemcpyWithStream x4" in sync.title
    assert sync.evidence["sync_drain_share"] == pytest.approx(3 * 2020 / 4 / 4000)
    assert "sync_memcpy" not in codes(r)  # .item()'s copy, not a cudaMemcpy-style synchronous copy


def test_a_small_peak_memory_share_is_not_rounded_to_nothing(tmp_path: Path) -> None:
    # 48 MiB of a 16 GiB GPU: 0.29%, shown as 0.3%, never as "only 0%".
    events = [*host_bound_steps(3), b.memory(1, 48 * 2**20, 48 * 2**20)]
    r = analyse(tmp_path, events)
    (headroom,) = [f for f in r.findings if f.code == "memory_headroom"]
    assert "only 0.3% of the GPU's memory" in headroom.title


def test_exposed_communication_beyond_the_collective_kernels_is_named_as_host_calls(tmp_path: Path) -> None:
    # Each 1000 µs step: a 300 µs GEMM, then the host 100 µs inside nccl:all_reduce with nothing on the GPU, then
    # its 200 µs kernel under no compute. By hand: exposed communication 300 µs a step, of which the kernel 200 and
    # the host's collective call 100, as HTA's df_index_resolver trace shows (86.5 ms exposed, 71.5 ms of kernels).
    events: list[b.Event] = []
    for i in range(4):
        t = i * 1000.0
        events += [b.step(i, t, 1000), b.cpu_op("aten::mm", t, 50, ext=100 + i),
                   b.launch(t + 10, 5, 10 + i, ext=100 + i),
                   b.kernel("sm80_xmma_gemm_f32f32", t + 20, 300, 10 + i, ext=100 + i),
                   b.cpu_op("nccl:all_reduce", t + 400, 100, ext=200 + i), b.launch(t + 480, 5, 20 + i, ext=200 + i),
                   b.kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", t + 500, 200, 20 + i, stream=9, ext=200 + i)]
    r = analyse(tmp_path, events, rank=0)
    (f,) = [f for f in r.findings if f.code == "comm_exposed_high"]
    assert f.evidence["comm_kernels_per_step_us"] == pytest.approx(200)
    assert f.evidence["comm_exposed_per_step_us"] == pytest.approx(300)
    assert f.evidence["comm_host_calls_per_step_us"] == pytest.approx(100)
