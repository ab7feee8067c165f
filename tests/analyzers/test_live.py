"""The live summary from runs built in code: GPUs, the host process tree, and stack samples."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscope.analyzers.live import summarize
from gpuscope.model import schema as m
from gpuscope.model.gpu import GpuInfo
from gpuscope.model.run import Run, RunMeta, StackSamples

S = 1_000_000_000
T0 = 1_800_000_000 * S
MAIN, W1, W2 = 100, 101, 102

LOADER_WAIT = ("<module> (train.py:80)", "_BaseDataLoaderIter.__next__ (torch/utils/data/dataloader.py:725)",
               "Queue.get (multiprocessing/queues.py:113)", "wait (multiprocessing/connection.py:947)")
FORWARD = ("<module> (train.py:82)", "Module._call_impl (torch/nn/modules/module.py:1750)",
           "Linear.forward (torch/nn/modules/linear.py:125)")
ITEM = ("<module> (train.py:90)", "Tensor.item (<native>:0)")
SYNC = ("<module> (train.py:91)", "synchronize (torch/cuda/__init__.py:1040)")
ALLREDUCE = ("<module> (train.py:92)", "all_reduce (torch/distributed/distributed_c10d.py:2800)")
PLAIN = ("<module> (train.py:93)", "log_metrics (train.py:40)")
IMPORT = ("<module> (train.py:1)", "_find_and_load (<frozen importlib._bootstrap>:1176)",
          "<module> (torch/__init__.py:9)")
WORKER_READ = ("_worker_loop (torch/utils/data/_utils/worker.py:351)",
               "_MapDatasetFetcher.fetch (torch/utils/data/_utils/fetch.py:54)", "Images.__getitem__ (data.py:20)",
               "open (PIL/Image.py:3400)")
WORKER_WAIT = ("_worker_loop (torch/utils/data/_utils/worker.py:320)", "Queue.get (multiprocessing/queues.py:113)")
STACKS = {1: LOADER_WAIT, 2: FORWARD, 3: ITEM, 4: SYNC, 5: ALLREDUCE, 6: PLAIN, 7: WORKER_READ, 8: WORKER_WAIT,
          9: IMPORT}


def meta(pid: int | None = MAIN, duration_s: float | None = 10.0) -> RunMeta:
    return RunMeta(id="r", name="r", kind="attach", status="complete", started_ns=T0, pid=pid,
                   ended_ns=None if duration_s is None else T0 + int(duration_s * S))


def samples(rows: list[tuple[int, str, int, int, str, float]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=list(m.SAMPLE_COLUMNS))


def stacks(rows: list[tuple[int, int, int, str, int]]) -> StackSamples:
    return StackSamples(samples=pd.DataFrame(rows, columns=["ts_ns", "pid", "tid", "state", "stack_id"]), stacks=STACKS)


def host_rows() -> list[tuple[int, str, int, int, str, float]]:
    rows = []
    for i in range(4):
        ts = T0 + i * S
        rows += [(ts, "host", -1, MAIN, m.PROC_IS_WORKER, 0.0), (ts, "host", -1, MAIN, m.PROC_CPU_CORES, 0.2),
                 (ts, "host", -1, MAIN, m.PROC_RSS_BYTES, 1000.0), (ts, "host", -1, MAIN, m.PROC_READ_BYTES_PER_S, 0.0),
                 (ts, "host", -1, -1, m.HOST_IOWAIT, 0.1 * i), (ts, "host", -1, -1, m.HOST_CPU_COUNT, 8.0),
                 (ts, "host", -1, -1, m.HOST_CPU, 0.5)]
        for w in (W1, W2):
            rows += [(ts, "host", -1, w, m.PROC_IS_WORKER, 1.0), (ts, "host", -1, w, m.PROC_CPU_CORES, 0.9),
                     (ts, "host", -1, w, m.PROC_RSS_BYTES, 500.0), (ts, "host", -1, w, m.PROC_READ_BYTES_PER_S, 1e6),
                     (ts, "host", -1, w, m.PROC_THREADS_DISK_WAIT, 1.0 if i % 2 else 0.0)]
    return rows


def test_a_trace_run_has_no_live_summary() -> None:
    assert summarize(Run(meta=meta())) is None


def test_host_tree_main_and_workers() -> None:
    live = summarize(Run(meta=meta(), samples=samples(host_rows())))
    assert live is not None and live.host is not None
    h = live.host
    assert h.main_cpu_mean == pytest.approx(0.2)
    assert h.workers == 2
    assert h.workers_cpu_mean == pytest.approx(1.8)  # both workers together, per tick
    assert h.iowait_mean == pytest.approx(0.15)
    assert h.read_bytes_per_s == pytest.approx(2e6)
    assert h.rss_peak_bytes == 2000
    assert h.cpu_count == 8
    assert h.disk_wait_threads_mean == pytest.approx(1.0)
    assert h.workers_per_tick_mean == pytest.approx(2.0)
    assert h.read_chars_per_s is None  # never sampled: unknown, not 0
    assert live.sources == ("host",)
    assert live.stacks is None and live.gpus == ()
    assert live.duration_s == pytest.approx(10.0)


def test_gpu_summary_and_unknowns() -> None:
    rows = []
    for i, util in enumerate((0.0, 0.02, 0.9, 0.8)):
        ts = T0 + i * S
        rows += [(ts, "nvml", 0, -1, m.GPU_UTIL, util), (ts, "nvml", 0, -1, m.GPU_POWER_W, 100.0 + 100 * i),
                 (ts, "nvml", 0, -1, m.GPU_ENERGY_J, 5000.0 + 150.0 * i),
                 (ts, "nvml", 0, -1, m.GPU_MEMORY_USED_BYTES, 1e9 * (i + 1)),
                 (ts, "nvml", 0, -1, m.GPU_THROTTLE_REASONS, float(0x1 | (0x4 if i == 2 else 0))),
                 (ts, "nvml", 1, -1, m.GPU_UTIL, 0.5),
                 (ts, "nvml", 0, MAIN, m.PROC_GPU_MEMORY_BYTES, 1e9)]  # per-process row: not a device row
    live = summarize(Run(meta=meta(), samples=samples(rows)))
    assert live is not None
    g0, g1 = live.gpus
    assert (g0.gpu, g0.samples) == (0, 4)
    assert g0.util_mean == pytest.approx(0.43)
    assert g0.idle_share == pytest.approx(0.5)
    assert g0.power_mean_w == pytest.approx(250.0)
    assert g0.energy_j == pytest.approx(450.0)  # the counter's rise
    assert g0.memory_used_peak_bytes == 4_000_000_000
    assert g0.throttle_reasons == ("sw_power_cap",)  # idle (0x1) is not a slowdown
    assert g0.sm_active_mean is None and g0.memory_total_bytes is None
    assert g1.power_mean_w is None and g1.energy_j is None and g1.throttle_reasons == ()
    assert live.host is None


def test_only_the_runs_gpus_are_summarised() -> None:
    rows = [(T0, "nvml", g, -1, m.GPU_UTIL, 0.1 * g) for g in range(4)]
    run = Run(meta=replace(meta(), gpus=(GpuInfo(index=2),)), samples=samples(rows))
    live = summarize(run)
    assert live is not None and [g.gpu for g in live.gpus] == [2]


def test_one_source_per_gpu_metric_nvml_first_then_dcgm() -> None:
    rows = []
    for i in range(4):
        ts, half = T0 + i * S, T0 + i * S + S // 2  # DCGM scrapes land between NVML ticks
        rows += [(ts, "nvml", 0, -1, m.GPU_UTIL, 0.8), (half, "dcgm", 0, -1, m.GPU_UTIL, 0.2),
                 (ts, "nvml", 0, -1, m.GPU_POWER_W, 300.0), (half, "dcgm", 0, -1, m.GPU_POWER_W, 100.0),
                 # Two counters with different zeros: interleaved, they would zigzag or jump by millions.
                 (ts, "nvml", 0, -1, m.GPU_ENERGY_J, 5000.0 + 300.0 * i),
                 (half, "dcgm", 0, -1, m.GPU_ENERGY_J, 2_000_000.0 + 100.0 * i),
                 (half, "dcgm", 0, -1, m.GPU_SM_ACTIVE, 0.4), (half, "dcgm", 0, -1, m.GPU_TENSOR_ACTIVE, 0.1),
                 (half, "dcgm", 0, -1, m.GPU_MEMORY_USED_BYTES, 9e9),  # only DCGM reports memory here
                 (half, "dcgm", 1, -1, m.GPU_UTIL, 0.6), (half, "dcgm", 1, -1, m.GPU_ENERGY_J, 100.0 * i)]
    live = summarize(Run(meta=meta(), samples=samples(rows)))
    assert live is not None
    g0, g1 = live.gpus
    assert g0.util_mean == pytest.approx(0.8) and g0.idle_share == pytest.approx(0.0)
    assert g0.power_mean_w == pytest.approx(300.0)
    assert g0.energy_j == pytest.approx(900.0)  # NVML's counter alone
    assert g0.sm_active_mean == pytest.approx(0.4) and g0.tensor_active_mean == pytest.approx(0.1)
    assert g0.memory_used_peak_bytes == 9_000_000_000
    assert g1.util_mean == pytest.approx(0.6) and g1.energy_j == pytest.approx(300.0)  # DCGM when it is alone
    assert live.sources == ("dcgm", "nvml")


def test_other_sources_are_not_pooled_either() -> None:
    rows = [(T0 + i * S, src, 0, -1, m.GPU_UTIL, util) for i in range(3)
            for src, util in (("replay", 0.9), ("prometheus", 0.3))]
    live = summarize(Run(meta=meta(), samples=samples(rows)))
    assert live is not None
    assert live.gpus[0].util_mean in (pytest.approx(0.9), pytest.approx(0.3))
    assert live.gpus[0].samples == 3


def test_energy_falls_back_to_power_when_the_counter_goes_back() -> None:
    rows = [(T0, "nvml", 0, -1, m.GPU_ENERGY_J, 9000.0), (T0 + S, "nvml", 0, -1, m.GPU_ENERGY_J, 10.0),
            (T0, "nvml", 0, -1, m.GPU_POWER_W, 100.0), (T0 + 2 * S, "nvml", 0, -1, m.GPU_POWER_W, 300.0)]
    live = summarize(Run(meta=meta(), samples=samples(rows)))
    assert live is not None
    assert live.gpus[0].energy_j == pytest.approx(400.0)  # trapezoid: mean 200 W over 2 s


def test_main_thread_time_by_activity() -> None:
    rows = ([(T0 + i, MAIN, MAIN, "idle", 1) for i in range(10)]
            + [(T0 + 20 + i, MAIN, MAIN, "active", 2) for i in range(4)]
            + [(T0 + 30, MAIN, MAIN, "active", 3), (T0 + 31, MAIN, MAIN, "idle", 4),
               (T0 + 32, MAIN, MAIN, "idle", 5), (T0 + 33, MAIN, MAIN, "active", 6),
               (T0 + 34, MAIN, MAIN, "idle", 6)]
            + [(T0 + 40 + i, MAIN, 999, "idle", 6) for i in range(7)]  # another thread of the main process
            + [(T0 - 50 + i, MAIN, MAIN, "active", 9) for i in range(30)])  # importing torch at start-up
    live = summarize(Run(meta=meta(), stacks=stacks(rows)))
    assert live is not None and live.stacks is not None
    s = live.stacks
    assert s.samples == 56 and s.main_samples == 19 and s.main_startup_samples == 30
    assert s.main_dataloader_wait == pytest.approx(10 / 19)
    assert s.main_launch == pytest.approx(4 / 19)
    assert s.main_sync == pytest.approx(2 / 19)
    assert s.main_nccl_wait == pytest.approx(1 / 19)
    assert s.main_python == pytest.approx(1 / 19)
    assert s.main_idle == pytest.approx(1 / 19)
    assert s.top_stack == LOADER_WAIT
    assert s.workers_on_cpu is None and s.worker_samples == 0  # no workers: unknown
    assert live.host is None and live.sources == ("stacks",)


def test_workers_reading_versus_computing() -> None:
    rows = ([(T0 + i, W1, W1, "idle", 7) for i in range(6)] + [(T0 + i, W2, W2, "disk", 8) for i in range(2)]
            + [(T0 + 10 + i, W2, W2, "active", 7) for i in range(2)]
            + [(T0 + 20 + i, W1, W1, "idle", 8) for i in range(2)])
    live = summarize(Run(meta=meta(), stacks=stacks(rows)))
    assert live is not None and live.stacks is not None
    s = live.stacks
    assert s.worker_samples == 12
    assert s.workers_io == pytest.approx(8 / 12)  # blocked in __getitem__, or in disk wait
    assert s.workers_on_cpu == pytest.approx(2 / 12)
    assert s.workers_idle == pytest.approx(2 / 12)
    assert s.main_samples == 0 and s.main_dataloader_wait is None


def test_main_pid_guessed_from_host_rows_when_the_run_has_none() -> None:
    rows = [(T0, MAIN, MAIN, "idle", 1), (T0 + 1, MAIN, MAIN, "idle", 1)]
    live = summarize(Run(meta=meta(pid=None, duration_s=None), samples=samples(host_rows()), stacks=stacks(rows)))
    assert live is not None and live.stacks is not None
    assert live.stacks.main_dataloader_wait == 1.0
    assert live.duration_s == pytest.approx(3.0)  # from the samples' span when the run has no end


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(sorted(STACKS)), st.sampled_from(["active", "idle", "disk"]),
                          st.sampled_from([MAIN, W1])), min_size=1, max_size=60))
def test_shares_are_fractions_that_sum_to_one(picks: list[tuple[int, str, int]]) -> None:
    rows = [(T0 + i, pid, pid, state, sid) for i, (sid, state, pid) in enumerate(picks)]
    live = summarize(Run(meta=meta(), stacks=stacks(rows)))
    assert live is not None and live.stacks is not None
    s = live.stacks
    main = [s.main_dataloader_wait, s.main_sync, s.main_nccl_wait, s.main_launch, s.main_python, s.main_idle]
    workers = [s.workers_on_cpu, s.workers_io, s.workers_idle]
    for shares, n in ((main, s.main_samples), (workers, s.worker_samples)):
        if n:
            assert all(x is not None and 0.0 <= x <= 1.0 for x in shares)
            assert sum(x for x in shares if x is not None) == pytest.approx(1.0)
        else:
            assert all(x is None for x in shares)


def test_ranks_pool_their_main_threads_and_helpers_are_not_workers() -> None:
    from gpuscope.model.schema import PROC_RANK, PROC_ROLE, ROLE_CODES

    agent, r0, r1, worker, helper = 10, 20, 21, 30, 40
    rows = []
    for i in range(3):
        ts = T0 + i * S
        for pid, role, cpu in ((agent, "launcher", 0.1), (r0, "trainer", 0.5), (r1, "trainer", 0.7),
                               (worker, "loader_worker", 0.9), (helper, "helper", 0.3)):
            rows += [(ts, "host", -1, pid, PROC_ROLE, float(ROLE_CODES[role])),
                     (ts, "host", -1, pid, m.PROC_IS_WORKER, float(role == "loader_worker")),
                     (ts, "host", -1, pid, m.PROC_CPU_CORES, cpu)]
        rows += [(ts, "host", -1, r0, PROC_RANK, 0.0), (ts, "host", -1, r1, PROC_RANK, 1.0),
                 (ts, "nvml", 1, r1, m.PROC_GPU_MEMORY_BYTES, 2e9)]
    # The helper's role was not known at first: it looked like a forked worker until its stacks said otherwise.
    rows[1] = (T0, "host", -1, agent, m.PROC_IS_WORKER, 0.0)
    rows.insert(0, (T0 - S, "host", -1, helper, PROC_ROLE, float(ROLE_CODES["loader_worker"])))
    stack_rows = [(T0, r0, r0, "idle", 1), (T0, r1, r1, "idle", 1), (T0 + S, r0, r0, "active", 2),
                  (T0 + S, r1, r1, "idle", 1), (T0, agent, agent, "idle", 6), (T0, worker, worker, "idle", 7)]
    live = summarize(Run(meta=meta(pid=agent), samples=samples(rows), stacks=stacks(stack_rows)))
    assert live is not None and live.host is not None and live.stacks is not None
    assert live.host.trainers == 2 and live.host.workers == 1 and live.host.helpers == 1
    assert live.host.main_cpu_mean == pytest.approx(0.6)  # the ranks' mean, not the agent's
    assert live.host.workers_cpu_mean == pytest.approx(0.9) and live.host.helpers_cpu_mean == pytest.approx(0.3)
    assert live.stacks.main_samples == 4  # both ranks' main threads; the agent's stacks are not "the main thread"
    assert live.stacks.main_dataloader_wait == pytest.approx(0.75) and live.stacks.main_launch == pytest.approx(0.25)
    assert [(p.role, p.rank, p.gpu) for p in live.processes] == [
        ("trainer", 0, None), ("trainer", 1, 1), ("launcher", None, None), ("loader_worker", None, None),
        ("helper", None, None)]


def test_without_workers_in_process_loading_tells_io_from_cpu() -> None:
    read = ("<module> (train.py:80)", "_BaseDataLoaderIter.__next__ (torch/utils/data/dataloader.py:725)",
            "_MapDatasetFetcher.fetch (torch/utils/data/_utils/fetch.py:54)", "Samples.__getitem__ (data.py:20)")
    rows = [(T0 + i * S, MAIN, MAIN, "idle", 11) for i in range(3)] + [(T0 + 3 * S, MAIN, MAIN, "active", 2)]
    frame = StackSamples(samples=pd.DataFrame(rows, columns=["ts_ns", "pid", "tid", "state", "stack_id"]),
                         stacks={**STACKS, 11: read})
    live = summarize(Run(meta=meta(), stacks=frame))
    assert live is not None and live.stacks is not None
    assert live.stacks.main_dataloader_wait == pytest.approx(0.75)
    assert live.stacks.workers_io == pytest.approx(1.0) and live.stacks.worker_samples == 3
