"""Names shared by every collector, the store and every view: sample sources and metric names.

Samples are long-format rows (run_id, ts_ns, source, gpu, pid, metric, value). Units are in the
metric names; fractions are 0..1 (NVML's and DCGM's percentages are divided by 100 on the way in).
A counter a device cannot report is a missing row, never a 0.
"""

from __future__ import annotations

import re
from typing import Final, Literal

# Sources
NVML: Final = "nvml"
DCGM: Final = "dcgm"
HOST: Final = "host"
REPLAY: Final = "replay"
PROMETHEUS: Final = "prometheus"
SERVING: Final = "serving"
"""An inference server's own metrics endpoint (vLLM, SGLang, TGI), scraped by ``collectors.serving``."""
SOURCES: Final = frozenset({NVML, DCGM, HOST, REPLAY, PROMETHEUS, SERVING})
"""Every source a sample row can name."""

# Sample table columns
SAMPLE_COLUMNS: Final = ("ts_ns", "source", "gpu", "pid", "metric", "value")
NO_GPU: Final = -1
"""``gpu`` column for host rows."""
NO_PID: Final = -1
"""``pid`` column for device-wide rows."""
MIG_GPU_BASE: Final = 1000
"""A MIG instance is a GPU of its own in the ``gpu`` column: ``MIG_GPU_BASE * (parent + 1) + gpu_instance_id``
(GPU 0's instance 3 is 1003), so instances never collide with physical indices; see ``mig_gpu``/``split_gpu``."""


def mig_gpu(parent: int, gpu_instance_id: int) -> int:
    """The ``gpu`` column value of MIG instance ``gpu_instance_id`` (DCGM's GPU_I_ID) on physical GPU ``parent``."""
    if parent < 0 or not 0 <= gpu_instance_id < MIG_GPU_BASE:
        raise ValueError(f"no MIG instance {gpu_instance_id} on GPU {parent}")
    return MIG_GPU_BASE * (parent + 1) + gpu_instance_id


def split_gpu(gpu: int) -> tuple[int, int | None]:
    """(physical GPU index, MIG GPU instance id or None) of a ``gpu`` column value."""
    if gpu < MIG_GPU_BASE:
        return gpu, None
    return gpu // MIG_GPU_BASE - 1, gpu % MIG_GPU_BASE

# Per GPU (nvidia-smi equivalents in comments so a user can check a number)
GPU_UTIL: Final = "gpu.util"  # utilization.gpu / 100: share of time a kernel ran
GPU_MEM_UTIL: Final = "gpu.mem_util"  # utilization.memory / 100: share of time memory was read or written
GPU_MEMORY_USED_BYTES: Final = "gpu.memory_used_bytes"  # memory.used
GPU_MEMORY_TOTAL_BYTES: Final = "gpu.memory_total_bytes"  # memory.total
GPU_MEMORY_FREE_BYTES: Final = "gpu.memory_free_bytes"  # memory.free (DCGM FB_FREE; used + free + reserved = total)
GPU_POWER_W: Final = "gpu.power_w"  # power.draw
GPU_POWER_LIMIT_W: Final = "gpu.power_limit_w"  # enforced.power.limit
GPU_ENERGY_J: Final = "gpu.energy_j"  # cumulative since driver load; difference it
GPU_SM_CLOCK_MHZ: Final = "gpu.sm_clock_mhz"  # clocks.sm
GPU_MEM_CLOCK_MHZ: Final = "gpu.mem_clock_mhz"  # clocks.mem
GPU_TEMPERATURE_C: Final = "gpu.temperature_c"  # temperature.gpu
GPU_MEMORY_TEMPERATURE_C: Final = "gpu.memory_temperature_c"  # temperature.memory (HBM)
GPU_THROTTLE_REASONS: Final = "gpu.throttle_reasons"  # clocks_event_reasons.active, a bitmask
GPU_PCIE_TX_BYTES_PER_S: Final = "gpu.pcie_tx_bytes_per_s"
GPU_PCIE_RX_BYTES_PER_S: Final = "gpu.pcie_rx_bytes_per_s"
GPU_NVLINK_TX_BYTES_PER_S: Final = "gpu.nvlink_tx_bytes_per_s"
GPU_NVLINK_RX_BYTES_PER_S: Final = "gpu.nvlink_rx_bytes_per_s"
# DCGM profiling fields (0..1)
GPU_SM_ACTIVE: Final = "gpu.sm_active"
GPU_SM_OCCUPANCY: Final = "gpu.sm_occupancy"
GPU_TENSOR_ACTIVE: Final = "gpu.tensor_active"
GPU_DRAM_ACTIVE: Final = "gpu.dram_active"
GPU_GR_ENGINE_ACTIVE: Final = "gpu.gr_engine_active"

# Per process on a GPU (gpu and pid set)
PROC_GPU_MEMORY_BYTES: Final = "proc.gpu_memory_bytes"
PROC_GPU_SM_UTIL: Final = "proc.gpu_sm_util"  # nvidia-smi pmon "sm" / 100
PROC_GPU_MEM_UTIL: Final = "proc.gpu_mem_util"  # nvidia-smi pmon "mem" / 100: its share of memory read/write time
# The target's neighbours on a GPU it holds (device rows, pid = NO_PID): time-slicing, MPS, or just two jobs
GPU_OTHER_PROCESSES: Final = "gpu.other_processes"  # compute processes outside the target's tree
GPU_OTHERS_SM_UTIL: Final = "gpu.others_sm_util"  # their SM shares together, as proc.gpu_sm_util is measured

# Host, per process of the target's tree (pid set, gpu = NO_GPU)
PROC_CPU_CORES: Final = "proc.cpu_cores"  # 1.0 = one core busy
PROC_RSS_BYTES: Final = "proc.rss_bytes"
PROC_READ_BYTES_PER_S: Final = "proc.read_bytes_per_s"
PROC_WRITE_BYTES_PER_S: Final = "proc.write_bytes_per_s"
PROC_READ_CHARS_PER_S: Final = "proc.read_chars_per_s"  # all read()/recv() bytes, page cache and sockets included
PROC_THREADS: Final = "proc.threads"
PROC_THREADS_RUNNING: Final = "proc.threads_running"
PROC_THREADS_DISK_WAIT: Final = "proc.threads_disk_wait"  # threads in state D
PROC_IS_WORKER: Final = "proc.is_worker"  # 1 for a child of the target (DataLoader worker)
# Host, machine-wide (pid = NO_PID)
HOST_CPU: Final = "host.cpu"  # 0..1 of all cores
HOST_IOWAIT: Final = "host.iowait"  # 0..1 of all cores' time
HOST_CPU_COUNT: Final = "host.cpu_count"  # logical cores, so a CPU share can be judged against the machine
# An inference server, source SERVING (gpu = NO_GPU, pid = NO_PID): engine metrics in engine-neutral names
SERVING_OUTPUT_TOKENS: Final = "serving.output_tokens"  # counter: generated tokens since the server started
SERVING_PROMPT_TOKENS: Final = "serving.prompt_tokens"  # counter: prompt tokens read
SERVING_REQUESTS_RUNNING: Final = "serving.requests_running"
SERVING_REQUESTS_WAITING: Final = "serving.requests_waiting"
SERVING_KV_CACHE_USAGE: Final = "serving.kv_cache_usage"  # 0..1
SERVING_HISTOGRAMS: Final = ("serving.ttft_s", "serving.itl_s", "serving.e2e_s")
"""Latency histograms, kept as Prometheus keeps them: ``NAME.sum``, ``NAME.count`` and one ``NAME.le=BOUND`` row a
bucket (cumulative counts; ``le=+Inf`` the last)."""
SERVING_SERIES: Final = "@"
"""Counters and histograms are kept series by series (each engine, each model of the server), the series named by
a hash of its labels after this mark: ``serving.output_tokens@3f2a9c01b7de``, ``serving.ttft_s.le=0.5@3f2a9c01b7de``;
each series' increase is taken on its own before they are added up. A row without it is a whole server's."""


def serving_row(metric: str, series: str) -> str:
    """The row name of one series of a serving counter or histogram part."""
    return f"{metric}{SERVING_SERIES}{series}"


def serving_row_parts(name: str) -> tuple[str, str]:
    """(metric, series) of a serving row's name; the series is "" for a row of a whole server."""
    metric, _, series = name.partition(SERVING_SERIES)
    return metric, series


# A counter that stopped answering mid-run: one row, at the tick it stopped, on its GPU (pid NO_PID).
STOPPED_PREFIX: Final = "stopped."
"""The metric is this prefix and the counter's name (``stopped.power``; ``stopped.gpu`` for every counter of a
GPU); the value is a code of ``STOP_REASONS``. The counter's rows end there: unknown from then on, never 0."""
STOP_NOT_SUPPORTED, STOP_GPU_LOST, STOP_FAILING = 1, 2, 3
STOP_REASONS: Final[dict[int, str]] = {STOP_NOT_SUPPORTED: "not_supported", STOP_GPU_LOST: "gpu_lost",
                                        STOP_FAILING: "failing"}
"""not_supported: the driver said so mid-run; gpu_lost: the GPU fell off the bus; failing: errors (unknown,
timeout) on every read for a while, so it is no longer asked."""

# Rows as collectors hand them to the store
SampleRow = tuple[int, str, int, int, str, float]
"""(ts_ns, source, gpu, pid, metric, value)."""
StackRow = tuple[int, int, int, str, int]
"""(ts_ns, pid, tid, state, stack_id)."""

# Stack samples: thread states, and the frames a collector adds for native calls the analysis reads
STATE_ACTIVE, STATE_IDLE, STATE_DISK = "active", "idle", "disk"
NATIVE_FILE: Final = "<native>"
"""File of a frame a collector adds for a blocking C call on the innermost Python line ("Tensor.item (<native>:0)")."""
NON_BLOCKING_COPY: Final = "Tensor.to(non_blocking)"
"""A copy queued on the device, not waited for: launching work, not a host-device sync."""

# Process roles of a live run's tree, one row per process and tick
ProcessRole = Literal["launcher", "trainer", "loader_worker", "helper"]
ROLE_CODES: Final[dict[ProcessRole, int]] = {"launcher": 0, "trainer": 1, "loader_worker": 2, "helper": 3}
ROLES_BY_CODE: Final[dict[int, ProcessRole]] = {code: role for role, code in ROLE_CODES.items()}
PROC_ROLE: Final = "proc.role"
"""Per process of the tree, each tick: its role's code in ``ROLE_CODES``."""
PROC_RANK: Final = "proc.rank"
"""Per process whose environment names its rank (RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID)."""
RANK_ENV: Final = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID")
"""The environment variables that name a process's rank, as launchers set them (torchrun, Open MPI, MPICH, PMIx,
Slurm), in the order they are looked at."""


METRICS: Final = frozenset(value for name, value in dict(globals()).items()
                           if name.isupper() and isinstance(value, str)
                           and value.startswith(("gpu.", "proc.", "host.", "serving.")))
"""Every metric name this module defines."""


def known_metric(name: str) -> bool:
    """A metric this schema defines, or a counter's stop row (``STOPPED_PREFIX`` and a lowercase counter key)."""
    return name in METRICS or (name.startswith(STOPPED_PREFIX)
                                and re.fullmatch(r"[a-z0-9_]+", name.removeprefix(STOPPED_PREFIX)) is not None) \
        or _SERVING_ROW.fullmatch(name) is not None


_SERVING_ROW = re.compile(
    "(?:(?:" + "|".join(re.escape(h) for h in SERVING_HISTOGRAMS) + r")\.(?:sum|count|le=(?:\+Inf|[0-9.eE+-]+))"
    f"|{re.escape(SERVING_OUTPUT_TOKENS)}|{re.escape(SERVING_PROMPT_TOKENS)})"
    f"(?:{re.escape(SERVING_SERIES)}[0-9a-f]{{1,32}})?")

