"""What an export says of the machine it was recorded on: its GPUs, host name, driver, when the session started,
and what the launched program's environment and command line say of its rank.

GPU work carries the CUDA device as the process numbered it (``deviceId``); ``TARGET_INFO_CUDA_DEVICE`` maps a
process's CUDA device to nsys's GPU (``gpuId``), which ``TARGET_INFO_GPU`` describes (name, memory, SMs, compute
capability, UUID). An export without that map (older releases) matches ``TARGET_INFO_GPU.cuDevice``, then the GPU's
own id, and a single GPU is the one GPU.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from gpuscope.model.gpu import GpuInfo
from gpuscope.model.schema import RANK_ENV
from gpuscope.traces.nsys.database import Export

LOCAL_RANK_ENV = ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID")
_RANK_ARG = re.compile(r"^--(?:local[-_]rank|rank)=(\d+)$")
_CAPTURE_ENV = re.compile(r'^([A-Za-z_][A-Za-z0-9_]*)="?(.*?)"?$')


@dataclass(frozen=True)
class Machine:
    """The recording machine, as the export describes it."""

    gpus: tuple[GpuInfo, ...]
    """``TARGET_INFO_GPU``, indexed by nsys's GPU id."""
    device_map: dict[tuple[int, int], int]
    """(pid, CUDA device) -> nsys GPU id, from ``TARGET_INFO_CUDA_DEVICE``."""
    host_name: str | None = None
    session_start_ns: int | None = None
    """The epoch time (ns) the export's timestamps count from (``TARGET_INFO_SESSION_START_TIME.utcEpochNs``)."""
    attrs: dict[str, str] = field(default_factory=dict)
    """Driver and CUDA versions, the nsys release: as a Kineto trace's ``cuda_driver_version`` and the like."""
    launch_rank: int | None = None
    """The rank the launched program's environment (RANK, OMPI_COMM_WORLD_RANK, ...; else LOCAL_RANK ...) or
    command line (``--rank=N``, ``--local-rank=N``) names; None when neither does."""
    launch_world_size: int | None = None
    processes: dict[int, str] = field(default_factory=dict)
    """pid -> process name (``PROCESSES``)."""

    def gpu_for(self, pid: int, device: int) -> GpuInfo | None:
        """The GPU a process's CUDA device is, renumbered as that device (as a Kineto trace numbers it)."""
        gpu_id = self.device_map.get((pid, device), self.device_map.get((-1, device)))
        if gpu_id is None and len(self.gpus) != 1:
            gpu_id = device  # an export without a device map numbers its GPUs as CUDA does, for all it says
        found = next((g for g in self.gpus if g.index == gpu_id), None) if gpu_id is not None else self.gpus[0]
        if found is None:
            return None
        return GpuInfo(index=device, name=found.name, uuid=found.uuid, memory_bytes=found.memory_bytes,
                       sm_count=found.sm_count, compute_capability=found.compute_capability)


def read_machine(db: Export, version: str | None) -> Machine:
    gpus, by_cuda = _gpus(db)
    device_map = _device_map(db)
    if not device_map and by_cuda:
        device_map = {(-1, d): g for d, g in by_cuda.items()}
    env = _system_env(db)
    launch = _launch(db)
    attrs = {k: v for k, v in (("cuda_driver_version", env.get("CudaDriverVersion")),
                               ("nvidia_driver_version", env.get("NvDriverVersion")),
                               ("nsys_version", version)) if v}
    return Machine(gpus=gpus, device_map=device_map, host_name=env.get("Hostname") or None,
                   session_start_ns=_session_start(db), attrs=attrs, launch_rank=_rank(launch, RANK_ENV),
                   launch_world_size=_number(launch.get("WORLD_SIZE")), processes=_processes(db))


def _gpus(db: Export) -> tuple[tuple[GpuInfo, ...], dict[int, int]]:
    table = "TARGET_INFO_GPU"
    if not db.has(table, "id"):
        return (), {}
    cols = [c if db.has(table, c) else "NULL" for c in
            ("id", "name", "uuid", "totalMemory", "smCount", "computeMajor", "computeMinor", "cuDevice")]
    gpus: list[GpuInfo] = []
    by_cuda: dict[int, int] = {}
    for gid, name, uuid, memory, sms, major, minor, cu in db.rows(f"SELECT {', '.join(cols)} FROM {table}"):
        if gid is None:
            continue
        cc = f"{major}.{minor}" if major is not None and minor is not None else None
        gpus.append(GpuInfo(index=int(gid), name=str(name).strip() or None if name is not None else None,
                            uuid=str(uuid) if uuid else None, memory_bytes=_positive(memory),
                            sm_count=_positive(sms), compute_capability=cc))
        if cu is not None:
            by_cuda[int(cu)] = int(gid)
    return tuple(gpus), by_cuda


def _device_map(db: Export) -> dict[tuple[int, int], int]:
    table = "TARGET_INFO_CUDA_DEVICE"
    if not db.has(table, "gpuId", "cudaId", "pid"):
        return {}
    return {(int(pid), int(cuda)): int(gpu) for gpu, cuda, pid in db.rows(f"SELECT gpuId, cudaId, pid FROM {table}")
            if gpu is not None and cuda is not None and pid is not None}


def _system_env(db: Export) -> dict[str, str]:
    if not db.has("TARGET_INFO_SYSTEM_ENV", "name", "value"):
        return {}
    return {str(n): str(v) for n, v in db.rows("SELECT name, value FROM TARGET_INFO_SYSTEM_ENV "
                                               "WHERE name IN ('Hostname', 'CudaDriverVersion', 'NvDriverVersion')")
            if n is not None and v is not None}


def _launch(db: Export) -> dict[str, str]:
    """The environment nsys launched the program with (``PROCESS_0:ENVIRONMENT_VARIABLE``), and its rank
    arguments under the key ``--rank``."""
    if not db.has("META_DATA_CAPTURE", "name", "value"):
        return {}
    out: dict[str, str] = {}
    for name, value in db.rows("SELECT name, value FROM META_DATA_CAPTURE WHERE name LIKE 'PROCESS_0:%'"):
        if value is None:
            continue
        if name == "PROCESS_0:ENVIRONMENT_VARIABLE":
            match = _CAPTURE_ENV.match(str(value))
            if match:
                out.setdefault(match.group(1), match.group(2))
        elif str(name).startswith("PROCESS_0:ARGUMENT_"):
            for word in _words(str(value)):
                arg = _RANK_ARG.match(word)
                if arg:
                    out.setdefault("--rank", arg.group(1))
    return out


def _rank(launch: dict[str, str], keys: tuple[str, ...]) -> int | None:
    for key in (*keys, *LOCAL_RANK_ENV, "--rank"):
        number = _number(launch.get(key))
        if number is not None:
            return number
    return None


def _session_start(db: Export) -> int | None:
    if not db.has("TARGET_INFO_SESSION_START_TIME", "utcEpochNs"):
        return None
    row = db.rows("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()
    return _positive(row[0]) if row else None


def _processes(db: Export) -> dict[int, str]:
    if not db.has("PROCESSES", "pid", "name"):
        return {}
    return {int(p): str(n) for p, n in db.rows("SELECT pid, name FROM PROCESSES") if p is not None and n is not None}


def _number(text: str | None) -> int | None:
    return int(text) if text is not None and text.strip().isdigit() and len(text.strip()) < 10 else None


def _positive(value: object) -> int | None:
    return value if isinstance(value, int) and 0 < value < 2**63 else None


def _words(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()
