"""A live run of a CPU-only target: host and stack findings, a verdict that says no GPU was seen, no GPU advice."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from gpuscope.analyzers.diagnosis.verdict import HOST_RECOMMENDATIONS, diagnose
from gpuscope.analyzers.live import summarize
from gpuscope.model import schema as m
from gpuscope.model.gpu import GpuInfo
from gpuscope.model.live import GpuLive, HostLive, LiveSummary, StackLive
from gpuscope.model.run import Run, RunMeta, StackSamples

GPU_ADVICE = {"larger_batch", "cuda_graphs", "fuse_kernels", "remove_syncs", "fused_optimizer", "amp", "tf32",
              "release_idle_gpu", "gpu_decode", "pin_memory", "async_copies", "activation_checkpointing"}
HOST_BUSY = StackLive(samples=600, main_launch=0.5, main_python=0.4, main_sync=0.1, main_samples=600)
LOADER_IO = StackLive(samples=900, main_dataloader_wait=0.7, main_launch=0.2, main_python=0.1, workers_io=0.8,
                      workers_on_cpu=0.15, workers_idle=0.05, main_samples=300, worker_samples=600)
LOADER_CPU = StackLive(samples=900, main_dataloader_wait=0.6, main_python=0.4, workers_on_cpu=0.9, workers_io=0.1,
                       main_samples=300, worker_samples=600)
HOST = HostLive(main_cpu_mean=0.9, workers=4, workers_cpu_mean=0.5, iowait_mean=0.3, cpu_count=8)


def run(*gpus: GpuInfo) -> Run:
    return Run(meta=RunMeta(id="cpu", name="cpu", kind="attach", status="complete", started_ns=0,
                            ended_ns=60 * 10**9, pid=100, gpus=gpus))


def cpu_live(stacks: StackLive | None, host: HostLive | None = HOST) -> LiveSummary:
    return LiveSummary(duration_s=60.0, host=host, stacks=stacks, sources=("host", "stacks"))


def test_host_bound_cpu_target_gets_host_findings_and_no_gpu_advice() -> None:
    d = diagnose(run(), [], cpu_live(HOST_BUSY))
    assert d.verdict.primary == "host_overhead"
    assert d.verdict.summary.startswith("No GPU was seen in this run")
    assert "busy 100% of the time" in d.verdict.summary
    host = next(f for f in d.findings if f.code == "host_wait_idle")
    assert "GPU waits" not in host.title and host.evidence["main_python_share"] == 0.4
    assert {r.code for r in d.recommendations} & GPU_ADVICE == set()
    assert all(f.recommendations == () for f in d.findings)


def test_the_same_evidence_with_a_gpu_gets_gpu_advice() -> None:
    """The contrast: GPU samples beside the same stacks bring the host-overhead advice back (the larger batch as its
    memory, 2 of 16 GB, has room for it)."""
    gpu = GpuLive(gpu=0, samples=60, util_mean=0.3, idle_share=0.6, memory_used_peak_bytes=2 * 10**9,
                  memory_total_bytes=16 * 10**9)
    d = diagnose(run(GpuInfo(index=0)), [], replace(cpu_live(HOST_BUSY), gpus=(gpu,)))
    assert d.verdict.primary == "host_overhead" and "No GPU" not in d.verdict.summary
    assert {"larger_batch", "cuda_graphs"} <= {r.code for r in d.recommendations}


def test_io_bound_loader_on_a_cpu_target_keeps_its_verdict_and_loader_advice() -> None:
    d = diagnose(run(), [], cpu_live(LOADER_IO))
    assert (d.verdict.primary, d.verdict.resource) == ("data_loading", "io")
    assert "No GPU was seen" in d.verdict.summary and "waiting on the DataLoader" in d.verdict.summary
    codes = {r.code for r in d.recommendations}
    assert "storage_format" in codes and codes <= HOST_RECOMMENDATIONS
    assert {"dataloader_share_high", "loader_io_wait"} <= {f.code for f in d.findings}
    assert all("the GPU" not in r.detail for r in d.recommendations)


def test_cpu_bound_loader_is_not_told_to_decode_on_a_gpu() -> None:
    d = diagnose(run(), [], cpu_live(LOADER_CPU, HostLive(main_cpu_mean=1.0, workers=4, workers_cpu_mean=3.8)))
    assert (d.verdict.primary, d.verdict.resource) == ("data_loading", "cpu")
    assert "gpu_decode" not in {r.code for r in d.recommendations}
    assert "loader_cpu_bound" in {f.code for f in d.findings}


def test_an_idle_main_thread_is_not_an_idle_gpu() -> None:
    """No GPU stage and no GPU resource for a run without a GPU: the verdict is where the host's time went."""
    d = diagnose(run(), [], cpu_live(StackLive(samples=100, main_idle=0.9, main_python=0.1, main_samples=100)))
    assert d.verdict.primary is None and d.verdict.resource != "gpu" and d.verdict.confidence == 0.0
    assert "No GPU was seen" in d.verdict.summary and "main thread sleeps or waits off CPU 90%" in d.verdict.summary
    assert not any(f.code.startswith("gpu_") for f in d.findings)
    assert "release_idle_gpu" not in {r.code for r in d.recommendations}


def test_host_samples_alone_say_no_gpu_and_no_verdict() -> None:
    d = diagnose(run(), [], cpu_live(None))
    assert d.verdict.primary is None
    assert d.verdict.summary.startswith("No GPU was seen") and "Not enough evidence" in d.verdict.summary


def test_from_samples_and_stacks_of_a_cpu_target() -> None:
    """Through the live summary: host rows and stack samples only, as attach records on a machine without GPUs."""
    rows = [(i * 10**9, m.HOST, m.NO_GPU, 100, metric, value) for i in range(5)
            for metric, value in ((m.PROC_IS_WORKER, 0.0), (m.PROC_CPU_CORES, 1.0))]
    frames = {1: ("<module> (train.py:10)", "Linear.forward (torch/nn/modules/linear.py:125)"),
              2: ("<module> (train.py:12)", "log_metrics (train.py:40)")}
    stack_rows = [(i * 10**8, 100, 100, "active", 1 + i % 2) for i in range(50)]
    r = replace(run(), samples=pd.DataFrame(rows, columns=list(m.SAMPLE_COLUMNS)),
                stacks=StackSamples(samples=pd.DataFrame(stack_rows, columns=["ts_ns", "pid", "tid", "state",
                                                                              "stack_id"]), stacks=frames))
    live = summarize(r)
    assert live is not None and live.gpus == () and live.stacks is not None
    d = diagnose(r, [], live)
    assert d.verdict.primary == "host_overhead" and "No GPU was seen" in d.verdict.summary
    assert {rec.code for rec in d.recommendations} & GPU_ADVICE == set()


def test_a_trace_run_is_never_called_gpu_less() -> None:
    d = diagnose(run(), [], None)
    assert "No GPU" not in d.verdict.summary
