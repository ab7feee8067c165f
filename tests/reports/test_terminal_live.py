"""The terminal view's Live panel, rendered from Reports built in code."""

from __future__ import annotations

from dataclasses import replace

from rich.console import Console

from gpuscope.model.diagnosis import Verdict
from gpuscope.model.live import GpuLive, HostLive, LiveSummary, StackLive
from gpuscope.model.report import Report, RunSummary
from gpuscope.reports.terminal import sections

GIB = 2**30
FULL = LiveSummary(
    duration_s=12.0,
    gpus=(GpuLive(gpu=0, samples=12, util_mean=0.42, sm_active_mean=0.31, memory_used_peak_bytes=20 * GIB,
                  memory_total_bytes=80 * GIB, power_mean_w=250.0, energy_j=3000.0, idle_share=0.5,
                  throttle_reasons=("sw_power_cap", "hw_thermal")),),
    host=HostLive(main_cpu_mean=0.95, workers=4, workers_cpu_mean=3.2, iowait_mean=0.12,
                  read_bytes_per_s=25e6, rss_peak_bytes=3 * GIB),
    stacks=StackLive(samples=500, main_dataloader_wait=0.6, main_sync=0.1, main_nccl_wait=0.0, main_launch=0.2,
                     main_python=0.05, main_idle=0.05, workers_on_cpu=0.25, workers_io=0.7, workers_idle=0.05,
                     top_stack=("<module> (train.py:80)", "_BaseDataLoaderIter.__next__ (dataloader.py:725)",
                                "Queue.get (queues.py:113)"),
                     main_samples=200, worker_samples=300),
    sources=("nvml", "dcgm", "host", "stacks"),
)


def report(live: LiveSummary | None) -> Report:
    return Report(run=RunSummary(id="r1", kind="attach", name="train"), ranks=(),
                  verdict=Verdict(primary=None, resource="unknown", summary="nothing to say"), live=live)


def text(r: Report) -> str:
    console = Console(record=True, width=120)
    for part in sections(r):
        console.print(part)
    return console.export_text()


def test_live_panel_shows_gpus_host_and_stacks_after_the_verdict() -> None:
    out = text(report(FULL))
    assert out.index("Verdict") < out.index("Live")
    assert "sampled 12.0 s from nvml, dcgm, host, stacks" in out
    gpu_row = next(line for line in out.splitlines() if line.strip(" │").startswith("0 "))
    for value in ("42.0%", "31.0%", "20.0 GiB of 80.0 GiB (25%)", "250 W", "3.00 kJ", "50.0%",
                  "sw power cap, hw thermal"):
        assert value in gpu_row, value
    assert "host main process 0.95 cores · 4 DataLoader workers using 3.20 cores" in out
    assert "iowait 12.0% · reads 25.0 MB/s · RSS peak 3.0 GiB" in out
    assert ("DataLoader wait 60.0% · sync 10.0% · NCCL wait 0.0% · launch 20.0% · Python 5.0% · idle 5.0%"
            in out)
    assert "on CPU 25.0% · blocked on reads 70.0%" in out
    assert "top stack: Queue.get (queues.py:113) <- _BaseDataLoaderIter.__next__" in out


def test_unknown_values_print_na_not_zero() -> None:
    live = LiveSummary(duration_s=3.0, gpus=(GpuLive(gpu=1, samples=3, util_mean=0.9),),
                       host=HostLive(workers=0), stacks=StackLive(samples=0), sources=("nvml", "host", "stacks"))
    out = text(report(live))
    gpu_row = next(line for line in out.splitlines() if line.strip(" │").startswith("1 "))
    assert "90.0%" in gpu_row
    assert gpu_row.count("n/a") == 6  # SM active, tensor pipes, peak memory, power, energy, idle
    assert "none seen" in gpu_row
    assert "main process n/a · 0 DataLoader workers " in out and "workers using" not in out
    assert "iowait n/a · reads n/a · RSS peak n/a" in out
    assert "DataLoader wait n/a · sync n/a" in out
    assert "workers on CPU" not in out and "top stack" not in out


def test_no_gpu_samples_is_said() -> None:
    out = text(report(replace(FULL, gpus=())))
    assert "no GPU samples" in out


def test_no_live_panel_for_a_trace_report() -> None:
    out = text(report(None))
    assert "Live" not in out and "sampled" not in out
