"""Live samples of a run summarised into the evidence the diagnosis reads: GPUs, host process tree, stacks.

Pure: a function of ``run.samples`` and ``run.stacks`` (and the target pid in ``run.meta``). Unknown
stays None: a GPU that never reported power has ``power_mean_w`` None, not 0.

Each process's role is the last one the host sampler recorded (``proc.role``). The ``main_*`` shares
pool the main threads of every trainer (each rank's samples weigh alike, as ranks do for traces);
``main_cpu_mean`` is the trainers' mean. A run recorded before roles existed has one trainer: the target.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import TYPE_CHECKING

from gpuscope.analyzers.energy import gpu_energy_j, one_source
from gpuscope.analyzers.sharing import gpu_shares
from gpuscope.analyzers.stacks import MainActivity, WorkerActivity, classify_main, classify_worker, is_loader_worker
from gpuscope.model import schema
from gpuscope.model.live import CounterStop, GpuLive, GpuShare, HostLive, LiveProcess, LiveSummary, StackLive
from gpuscope.model.run import Run, StackSamples
from gpuscope.model.schema import PROC_RANK, PROC_ROLE, ROLES_BY_CODE, ProcessRole

if TYPE_CHECKING:  # pandas is imported only when a run has samples: trace analyses start faster without it
    import pandas as pd

IDLE_UTIL = 0.05
"""A GPU sample under 5% utilization counts as idle."""

# NVML clocks-event (throttle) reason bits; 0x1 (GPU idle) is left out: it is not a slowdown.
THROTTLE_BITS = ((0x2, "applications_clocks"), (0x4, "sw_power_cap"), (0x8, "hw_slowdown"),
                 (0x10, "sync_boost"), (0x20, "sw_thermal"), (0x40, "hw_thermal"), (0x80, "hw_power_brake"))


def summarize(run: Run) -> LiveSummary | None:
    """What live sampling saw in ``run``; None for a run without samples or stacks (a trace)."""
    samples = run.samples if run.samples is not None and len(run.samples) else None
    stacks = run.stacks if run.stacks is not None and len(run.stacks.samples) else None
    if samples is None and stacks is None:
        return None
    main_pid = run.meta.pid if run.meta.pid is not None else _guess_main_pid(samples)
    roles = _roles(samples, main_pid)
    trainers = {pid for pid, role in roles.items() if role == "trainer"}
    sources = sorted(set(samples["source"])) if samples is not None else []
    if stacks is not None:
        sources.append("stacks")
    duration_s = _duration_s(run, samples, stacks)
    used = {g.index for g in run.meta.gpus}
    shares = gpu_shares(samples, used, duration_s) if samples is not None else ()
    return LiveSummary(
        duration_s=duration_s,
        gpus=_gpus(samples, used, {s.gpu: s for s in shares}, run.meta.started_ns) if samples is not None else (),
        shares=shares,
        host=_host(samples, roles) if samples is not None else None,
        stacks=_stacks(stacks, trainers) if stacks is not None else None,
        sources=tuple(sources),
        processes=_processes(samples, roles) if samples is not None else (),
    )


def _roles(samples: pd.DataFrame | None, main_pid: int | None) -> dict[int, ProcessRole]:
    """Each pid's last recorded role; without role rows, the target trains and its children are workers."""
    if samples is not None:
        rows = samples[samples["metric"] == PROC_ROLE].sort_values("ts_ns", kind="stable")
        if len(rows):
            last = rows.groupby("pid")["value"].last()
            return {int(pid): ROLES_BY_CODE.get(int(code), "helper") for pid, code in last.items()}
        flags = samples[samples["metric"] == schema.PROC_IS_WORKER].groupby("pid")["value"].max()
        roles: dict[int, ProcessRole] = {int(pid): "loader_worker" if v == 1 else "trainer" for pid, v in flags.items()}
        if roles:
            return roles
    return {main_pid: "trainer"} if main_pid is not None else {}


def _duration_s(run: Run, samples: pd.DataFrame | None, stacks: StackSamples | None) -> float:
    if run.meta.duration_ns is not None:
        return run.meta.duration_ns / 1e9
    frames = [f["ts_ns"] for f in (samples, stacks.samples if stacks else None) if f is not None]
    return float(max(f.max() for f in frames) - min(f.min() for f in frames)) / 1e9


def _guess_main_pid(samples: pd.DataFrame | None) -> int | None:
    if samples is None:
        return None
    mains = samples[(samples["metric"] == schema.PROC_IS_WORKER) & (samples["value"] == 0)]["pid"]
    return int(mains.mode().iloc[0]) if len(mains) else None


# -- GPUs --------------------------------------------------------------------------------------

def _gpus(samples: pd.DataFrame, used: set[int], shares: dict[int, GpuShare],
          started_ns: int) -> tuple[GpuLive, ...]:
    """The run's GPUs (``meta.gpus``: those the target held), or every GPU sampled when it names none."""
    device = samples[(samples["gpu"] >= 0) & (samples["pid"] == schema.NO_PID)]
    if used:
        device = device[device["gpu"].isin(used)]
    device = one_source(device)
    return tuple(_busy(_gpu(int(gpu), rows, started_ns), shares.get(int(gpu)))
                 for gpu, rows in device.groupby("gpu", sort=True))


def _busy(g: GpuLive, share: GpuShare | None) -> GpuLive:
    """The busy share the diagnosis reads: the target's own on a GPU it shared (``analyzers.sharing``), else the
    GPU's utilization, else (a MIG instance) its GR engine active (``GpuLive``'s own default)."""
    if share is not None and share.shared and share.own_sm_mean is not None:
        return replace(g, busy_mean=share.own_sm_mean, busy_source="own_sm", idle_share=share.own_idle_share)
    return g


def _stops(rows: pd.DataFrame, started_ns: int) -> tuple[CounterStop, ...]:
    """The counters of one GPU that stopped mid-run (``stopped.*`` rows), in the order they stopped."""
    stops = rows[rows["metric"].str.startswith(schema.STOPPED_PREFIX)].sort_values("ts_ns", kind="stable")
    return tuple(CounterStop(counter=str(metric).removeprefix(schema.STOPPED_PREFIX),
                             reason=schema.STOP_REASONS.get(int(code), "failing"), at_ns=int(ts),
                             after_s=(int(ts) - started_ns) / 1e9 if started_ns else None)
                 for ts, metric, code in zip(stops["ts_ns"], stops["metric"], stops["value"]))


def stop_lines(summary: LiveSummary | None) -> tuple[str, ...]:
    """One warning per counter that stopped mid-run: which, on which GPU, when, and why."""
    why = {"not_supported": "the driver no longer supports it", "gpu_lost": "the GPU was lost (off the bus)",
           "failing": "its reads kept failing (unknown errors or timeouts)"}
    return tuple(f"GPU {g.gpu}: {'every counter' if s.counter == 'gpu' else f'`{s.counter}`'} stopped "
                 f"{f'{s.after_s:.1f} s into the run' if s.after_s is not None else f'at {s.at_ns} ns'}: "
                 f"{why.get(s.reason, s.reason)}; unknown from then on"
                 for g in (summary.gpus if summary is not None else ()) for s in g.stopped)


def _gpu(gpu: int, rows: pd.DataFrame, started_ns: int) -> GpuLive:
    by = {metric: group.sort_values("ts_ns") for metric, group in rows.groupby("metric")}

    def mean(metric: str) -> float | None:
        return float(by[metric]["value"].mean()) if metric in by else None

    def peak(metric: str) -> int | None:
        return int(by[metric]["value"].max()) if metric in by else None

    util = by.get(schema.GPU_UTIL)
    if util is None:  # a MIG instance: no utilization, but the GR engine's activity (DCGM)
        util = by.get(schema.GPU_GR_ENGINE_ACTIVE)
    return GpuLive(
        gpu=gpu,
        samples=int(rows["ts_ns"].nunique()),
        util_mean=mean(schema.GPU_UTIL),
        sm_active_mean=mean(schema.GPU_SM_ACTIVE),
        tensor_active_mean=mean(schema.GPU_TENSOR_ACTIVE),
        dram_active_mean=mean(schema.GPU_DRAM_ACTIVE),
        memory_used_peak_bytes=peak(schema.GPU_MEMORY_USED_BYTES),
        memory_total_bytes=peak(schema.GPU_MEMORY_TOTAL_BYTES),
        power_mean_w=mean(schema.GPU_POWER_W),
        energy_j=gpu_energy_j(rows)[0],
        idle_share=float((util["value"] < IDLE_UTIL).mean()) if util is not None and len(util) else None,
        throttle_reasons=_throttle_reasons(by.get(schema.GPU_THROTTLE_REASONS)),
        gr_engine_active_mean=mean(schema.GPU_GR_ENGINE_ACTIVE),
        stopped=_stops(rows, started_ns),
        sm_occupancy_mean=mean(schema.GPU_SM_OCCUPANCY),
    )


def _throttle_reasons(rows: pd.DataFrame | None) -> tuple[str, ...]:
    if rows is None:
        return ()
    seen = 0
    for value in rows["value"]:
        seen |= int(value)
    return tuple(name for bit, name in THROTTLE_BITS if seen & bit)


# -- host --------------------------------------------------------------------------------------

def _host(samples: pd.DataFrame, roles: dict[int, ProcessRole]) -> HostLive | None:
    host = samples[samples["source"] == schema.HOST]
    if not len(host):
        return None
    procs = host[host["pid"] != schema.NO_PID]
    machine = host[host["pid"] == schema.NO_PID]

    def of(role: ProcessRole) -> set[int]:
        return {pid for pid, r in roles.items() if r == role}

    worker_pids, helper_pids, trainer_pids = of("loader_worker"), of("helper"), of("trainer")
    workers = procs[procs["pid"].isin(worker_pids)]

    def metric(frame: pd.DataFrame, name: str) -> pd.DataFrame:
        return frame[frame["metric"] == name]

    trainer_cpu = metric(procs[procs["pid"].isin(trainer_pids)], schema.PROC_CPU_CORES)
    per_trainer = trainer_cpu.groupby("pid")["value"].mean()
    cores = metric(machine, schema.HOST_CPU_COUNT)["value"]
    has_roles = bool(len(metric(procs, PROC_ROLE)))
    return HostLive(
        main_cpu_mean=_mean(per_trainer),
        trainers=len(trainer_pids) if has_roles else None,
        helpers=len(helper_pids),
        helpers_cpu_mean=_tick_sum_mean(metric(procs[procs["pid"].isin(helper_pids)], schema.PROC_CPU_CORES)),
        workers=len(worker_pids),
        workers_cpu_mean=_tick_sum_mean(metric(workers, schema.PROC_CPU_CORES)),
        iowait_mean=_mean(metric(machine, schema.HOST_IOWAIT)["value"]),
        read_bytes_per_s=_tick_sum_mean(metric(procs, schema.PROC_READ_BYTES_PER_S)),
        rss_peak_bytes=_tick_sum_peak(metric(procs, schema.PROC_RSS_BYTES)),
        cpu_count=int(cores.iloc[-1]) if len(cores) else None,
        host_cpu_mean=_mean(metric(machine, schema.HOST_CPU)["value"]),
        read_chars_per_s=_tick_sum_mean(metric(procs, schema.PROC_READ_CHARS_PER_S)),
        disk_wait_threads_mean=_tick_sum_mean(metric(procs, schema.PROC_THREADS_DISK_WAIT)),
        workers_per_tick_mean=_per_tick_count_mean(metric(workers, schema.PROC_IS_WORKER), procs),
    )


_ROLE_ORDER: dict[ProcessRole, int] = {"trainer": 0, "launcher": 1, "loader_worker": 2, "helper": 3}


def _processes(samples: pd.DataFrame, roles: dict[int, ProcessRole]) -> tuple[LiveProcess, ...]:
    procs = samples[samples["pid"].isin(list(roles))]
    cpu = procs[procs["metric"] == schema.PROC_CPU_CORES].groupby("pid")["value"].mean()
    ranks = procs[procs["metric"] == PROC_RANK].groupby("pid")["value"].last()
    memory = procs[(procs["metric"] == schema.PROC_GPU_MEMORY_BYTES) & (procs["gpu"] >= 0)]
    gpus = memory.groupby(["pid", "gpu"])["value"].max().reset_index()
    main_gpu = {int(r.pid): int(r.gpu) for r in gpus.sort_values("value").itertuples()}
    out = [LiveProcess(pid=pid, role=role, rank=int(ranks[pid]) if pid in ranks.index else None,
                       gpu=main_gpu.get(pid), cpu_mean=float(cpu[pid]) if pid in cpu.index else None)
           for pid, role in roles.items()]
    return tuple(sorted(out, key=lambda p: (_ROLE_ORDER[p.role], p.rank if p.rank is not None else 1 << 30, p.pid)))


def _mean(values: pd.Series) -> float | None:
    return float(values.mean()) if len(values) else None


def _tick_sum_mean(rows: pd.DataFrame) -> float | None:
    """Sum over processes at each tick, then the mean over the ticks that had any such row."""
    return float(rows.groupby("ts_ns")["value"].sum().mean()) if len(rows) else None


def _tick_sum_peak(rows: pd.DataFrame) -> int | None:
    return int(rows.groupby("ts_ns")["value"].sum().max()) if len(rows) else None


def _per_tick_count_mean(worker_rows: pd.DataFrame, procs: pd.DataFrame) -> float | None:
    ticks = procs["ts_ns"].nunique()
    return float(len(worker_rows) / ticks) if ticks else None


# -- stacks ------------------------------------------------------------------------------------

_IN_PROCESS_FETCH = "torch/utils/data/_utils/fetch.py"
"""The fetcher in the main thread's stack: it loads the batch itself (a worker's stack has it too)."""


def _stacks(stacks: StackSamples, trainers: set[int]) -> StackLive:
    frame = stacks.samples
    main = frame[frame["pid"].isin(list(trainers)) & (frame["tid"] == frame["pid"])]
    main_activity = [(int(sid), classify_main(stacks.stacks.get(int(sid), ()), str(state)))
                     for sid, state in zip(main["stack_id"], main["state"])]
    main_counts = Counter(activity for _, activity in main_activity)
    worker_counts: Counter[WorkerActivity] = Counter()
    for sid, state in zip(frame["stack_id"], frame["state"]):
        frames = stacks.stacks.get(int(sid), ())
        if is_loader_worker(frames):
            worker_counts[classify_worker(frames, str(state))] += 1
    if not worker_counts:  # num_workers=0: the trainers load in-process, and those samples tell io from cpu
        for sid, state in zip(main["stack_id"], main["state"]):
            frames = stacks.stacks.get(int(sid), ())
            if any(_IN_PROCESS_FETCH in frame for frame in frames):
                worker_counts[classify_worker(frames, str(state))] += 1
    startup = main_counts.pop("startup", 0)
    n_main, n_workers = sum(main_counts.values()), sum(worker_counts.values())

    def main_share(activity: MainActivity) -> float | None:
        return main_counts[activity] / n_main if n_main else None

    def worker_share(activity: WorkerActivity) -> float | None:
        return worker_counts[activity] / n_workers if n_workers else None

    top = Counter(sid for sid, activity in main_activity if activity != "startup").most_common(1)
    return StackLive(
        samples=len(frame),
        main_dataloader_wait=main_share("dataloader"),
        main_sync=main_share("sync"),
        main_nccl_wait=main_share("nccl"),
        main_launch=main_share("launch"),
        main_python=main_share("python"),
        main_idle=main_share("idle"),
        workers_on_cpu=worker_share("cpu"),
        workers_io=worker_share("io"),
        top_stack=stacks.stacks.get(top[0][0], ()) if top else (),
        main_samples=n_main,
        main_startup_samples=startup,
        worker_samples=n_workers,
        workers_idle=worker_share("idle"),
    )
