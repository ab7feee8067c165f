"""Small Nsight Systems SQLite exports built in code, in the tables and columns nsys 2026.3 writes (a subset of each
table's columns, in nsys's names), so a test states the rows it needs and nothing else."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

SCHEMA = """
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE META_DATA_EXPORT (name TEXT NOT NULL, value TEXT);
CREATE TABLE META_DATA_CAPTURE (name TEXT NOT NULL, value TEXT);
CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);
CREATE TABLE TARGET_INFO_SYSTEM_ENV (globalVid INTEGER, devStateName TEXT, name TEXT, nameEnum INTEGER, value TEXT);
CREATE TABLE TARGET_INFO_GPU (vmId INTEGER, id INTEGER NOT NULL, name TEXT, busLocation TEXT, totalMemory INTEGER,
    smCount INTEGER, uuid TEXT, cuDevice INTEGER, computeMajor INTEGER, computeMinor INTEGER);
CREATE TABLE TARGET_INFO_CUDA_DEVICE (gpuId INTEGER, cudaId INTEGER, pid INTEGER, uuid TEXT,
    numMultiprocessors INTEGER);
CREATE TABLE TARGET_INFO_CUDA_CONTEXT_INFO (nullStreamId INTEGER, hwId INTEGER, vmId INTEGER, processId INTEGER,
    deviceId INTEGER, contextId INTEGER);
CREATE TABLE PROCESSES (globalPid INTEGER, pid INTEGER, name TEXT);
CREATE TABLE ENUM_NSYS_EVENT_TYPE (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_CUDA_MEM_KIND (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
    contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER,
    globalPid INTEGER, demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER,
    registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL,
    blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL, staticSharedMemory INTEGER NOT NULL,
    dynamicSharedMemory INTEGER NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
    contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
    bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, srcKind INTEGER, dstKind INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
    contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
    value INTEGER NOT NULL, bytes INTEGER NOT NULL, memKind INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start INTEGER NOT NULL, end INTEGER NOT NULL,
    deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER, correlationId INTEGER,
    globalPid INTEGER, syncType INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL,
    globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER,
    category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER,
    domainId INTEGER, jsonText TEXT);
"""
PUSH_POP, START_END, DOMAIN_CREATE, MARK = 59, 60, 75, 34
LEGACY_GONE = ("ENUM_NSYS_EVENT_TYPE", "ENUM_CUDA_MEM_KIND", "TARGET_INFO_CUDA_DEVICE", "TARGET_INFO_CUDA_CONTEXT_INFO")
EPOCH_NS = 1_782_443_088_187_783_637
"""The session's start (``TARGET_INFO_SESSION_START_TIME``) of every built export."""


def global_pid(pid: int) -> int:
    return (1 << 48) | (pid << 24)


def global_tid(pid: int, tid: int) -> int:
    return global_pid(pid) | tid


@dataclass
class ExportBuilder:
    """Rows of an export; ``write`` makes the file. Times are ns from the session's start."""

    strings: dict[str, int] = field(default_factory=dict)
    rows: dict[str, list[tuple[object, ...]]] = field(default_factory=dict)
    next_corr: int = 1000
    version: str = "2026.3.1.157"

    def string(self, text: str) -> int:
        return self.strings.setdefault(text, len(self.strings) + 1)

    def add(self, table: str, *row: object) -> None:
        self.rows.setdefault(table, []).append(row)

    def gpu(self, gpu_id: int, name: str = "NVIDIA H100 80GB HBM3", *, cuda: int | None = None, sms: int = 132,
            memory: int = 85_000_000_000, pids: tuple[int, ...] = ()) -> None:
        cuda = gpu_id if cuda is None else cuda
        self.add("TARGET_INFO_GPU", 1 << 48, gpu_id, name, f"0000:{gpu_id:02x}:00.0", memory, sms, f"uuid-{gpu_id}",
                 cuda, 9, 0)
        for pid in pids:
            self.add("TARGET_INFO_CUDA_DEVICE", gpu_id, cuda, pid, f"uuid-{gpu_id}", sms)
            self.add("TARGET_INFO_CUDA_CONTEXT_INFO", 7, 0, 1, pid, cuda, 1 + cuda)

    def process(self, pid: int, name: str = "python") -> None:
        self.add("PROCESSES", global_pid(pid), pid, name)

    def launch(self, pid: int, device: int, start: int, dur: int, name: str, *, tid: int | None = None,
               stream: int = 7, launch_at: int | None = None, grid: tuple[int, int, int] = (264, 1, 1),
               block: tuple[int, int, int] = (128, 1, 1)) -> int:
        """A kernel and the cudaLaunchKernel call (on ``tid``, default the main thread) that launched it."""
        corr = self.call(pid, tid if tid is not None else pid, launch_at if launch_at is not None else start - 5_000,
                         3_000, "cudaLaunchKernel_v7000")
        sid = self.string(name)
        self.add("CUPTI_ACTIVITY_KIND_KERNEL", start, start + dur, device, 1 + device, 0, stream, corr,
                 global_pid(pid), sid, sid, None, 32, *grid, *block, 0, 0)
        return corr

    def call(self, pid: int, tid: int, start: int, dur: int, name: str) -> int:
        self.next_corr += 1
        self.add("CUPTI_ACTIVITY_KIND_RUNTIME", start, start + dur, 1, global_tid(pid, tid), self.next_corr,
                 self.string(name), 0)
        return self.next_corr

    def memcpy(self, pid: int, device: int, start: int, dur: int, nbytes: int, *, kind: int = 1, src: int = 0,
               dst: int = 2, stream: int = 7) -> None:
        corr = self.call(pid, pid, start - 4_000, 2_000, "cudaMemcpyAsync_v3020")
        self.add("CUPTI_ACTIVITY_KIND_MEMCPY", start, start + dur, device, 1 + device, stream, corr, global_pid(pid),
                 nbytes, kind, src, dst)

    def memset(self, pid: int, device: int, start: int, dur: int, nbytes: int, *, stream: int = 7) -> None:
        corr = self.call(pid, pid, start - 4_000, 2_000, "cudaMemsetAsync_v3020")
        self.add("CUPTI_ACTIVITY_KIND_MEMSET", start, start + dur, device, 1 + device, stream, corr, global_pid(pid),
                 0, nbytes, 2)

    def sync(self, pid: int, device: int, start: int, dur: int, *, sync_type: int = 3) -> None:
        corr = self.call(pid, pid, start, dur, "cudaStreamSynchronize_v3020")
        self.add("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", start, start + dur, 0, 1 + device, 7, corr, global_pid(pid),
                 sync_type)

    def nvtx(self, pid: int, start: int, end: int | None, text: str, *, tid: int | None = None, domain: int = 0,
             payload: dict[str, object] | None = None, registered: bool = False, event_type: int = PUSH_POP) -> None:
        gtid = global_tid(pid, tid if tid is not None else pid)
        body = json.dumps(payload) if payload is not None else None
        text_id = self.string(text) if registered else None
        self.add("NVTX_EVENTS", start, end, event_type, None, None, None, None if registered else text, gtid, None,
                 text_id, domain, body)

    def domain(self, pid: int, domain_id: int, name: str) -> None:
        self.add("NVTX_EVENTS", 1, None, DOMAIN_CREATE, None, None, None, name, global_tid(pid, pid), None, None,
                 domain_id, None)

    def launch_env(self, **env: str) -> None:
        self.add("META_DATA_CAPTURE", "PROCESS_0:COMMAND", "python")
        for key, value in env.items():
            self.add("META_DATA_CAPTURE", "PROCESS_0:ENVIRONMENT_VARIABLE", f'{key}="{value}"')

    def write(self, path: Path, *, drop: tuple[str, ...] = (), legacy: bool = False) -> Path:
        """The export at ``path``; ``drop``: tables to leave out, as an older or narrower recording would;
        ``legacy``: as nsys 2022.1 writes it (``EXPORT_META_DATA``, no enum tables, no CUDA device or context map,
        no NVTX JSON payloads)."""
        conn = sqlite3.connect(path)
        try:
            conn.executescript(SCHEMA)
            conn.executemany("INSERT INTO StringIds VALUES (?, ?)", [(i, s) for s, i in self.strings.items()])
            conn.executemany("INSERT INTO META_DATA_EXPORT VALUES (?, ?)",
                             [("EXPORT_PRODUCT_NAME", "NVIDIA Nsight Systems"),
                              ("EXPORT_PRODUCT_VERSION", self.version)])
            conn.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (?, ?, ?)",
                         (EPOCH_NS, "2026-06-26T03:04:48", "2026-06-25T20:04:48"))
            conn.executemany("INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (?, ?, ?, ?, ?)",
                             [(1 << 48, "Local (CLI)", "Hostname", 0, "node-1"),
                              (1 << 48, "Local (CLI)", "CudaDriverVersion", 0, "12080")])
            conn.executemany("INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (?, ?, ?)",
                             [(MARK, "NvtxMark", "NvtxMark"), (PUSH_POP, "NvtxPushPopRange", "NvtxPushPopRange"),
                              (START_END, "NvtxStartEndRange", "NvtxStartEndRange"),
                              (DOMAIN_CREATE, "NvtxDomainCreate", "NvtxDomainCreate")])
            conn.executemany("INSERT INTO ENUM_CUDA_MEM_KIND VALUES (?, ?, ?)",
                             [(0, "CUDA_MEMOPR_MEMORY_KIND_PAGEABLE", "Pageable"),
                              (1, "CUDA_MEMOPR_MEMORY_KIND_PINNED", "Pinned"),
                              (2, "CUDA_MEMOPR_MEMORY_KIND_DEVICE", "Device")])
            for table, rows in self.rows.items():
                marks = ",".join("?" * len(rows[0]))
                conn.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
            for table in drop + (LEGACY_GONE if legacy else ()):
                conn.execute(f"DROP TABLE {table}")
            if legacy:
                conn.execute("ALTER TABLE META_DATA_EXPORT RENAME TO EXPORT_META_DATA")
                conn.execute("ALTER TABLE NVTX_EVENTS DROP COLUMN jsonText")
            conn.commit()
        finally:
            conn.close()
        return path


def training_job(*, ranks: int = 2, steps: int = 3, step_ns: int = 10_000_000, nccl: bool = True,
                 step_names: str = "ProfilerStep#{}") -> ExportBuilder:
    """``ranks`` processes (pid 100 + rank) on one GPU each, ``steps`` NVTX steps each: a GEMM, an elementwise
    kernel, a copy and a memset per step, and (with ``nccl``) an NCCL all-reduce of 4 MiB launched inside NCCL's
    ``ncclAllReduce`` range, ranks from NCCL's communicator."""
    b = ExportBuilder()
    for r in range(ranks):
        b.gpu(r, cuda=r, pids=tuple(100 + p for p in range(ranks)))
    for r in range(ranks):
        pid = 100 + r
        b.process(pid)
        if nccl:
            b.domain(pid, 1, "NCCL")
            b.nvtx(pid, 500_000, 600_000, "ncclCommInitRankConfig", domain=1,
                   payload={"NCCL communicator ID": 77, "No. of ranks": ranks, "Rank": r, "CUDA device": r})
        for s in range(steps):
            t0 = 1_000_000 + s * step_ns
            b.nvtx(pid, t0, t0 + step_ns - 1_000, step_names.format(s))
            b.launch(pid, r, t0 + 100_000, 2_000_000, "ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_tn")
            b.launch(pid, r, t0 + 2_200_000, 300_000,
                     "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int)")
            b.memcpy(pid, r, t0 + 2_600_000, 400_000, 8 << 20)
            b.memset(pid, r, t0 + 3_100_000, 50_000, 4096)
            if nccl:
                at = t0 + 3_500_000
                b.nvtx(pid, at, at + 40_000, "ncclAllReduce", domain=1,
                       payload={"NCCL communicator ID": 77, "Message size [bytes]": 4 << 20,
                                "Reduction operation": "Sum"})
                b.launch(pid, r, at + 50_000, 3_000_000 + 500_000 * r,
                         "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                         launch_at=at + 10_000, stream=20)
            b.sync(pid, r, t0 + 7_000_000, 100_000)
    return b
