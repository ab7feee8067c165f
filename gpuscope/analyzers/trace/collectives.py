"""Collective bandwidth per op and message size, as nccl-tests defines it, from the trace's own fields.

For each host collective op that recorded its message (PyTorch 2.x ``record_param_comms`` args: collective
name, dtype, in/out element counts, group size), the NCCL kernel it launched (joined on External id) gives the
time on the GPU. Then, with S the message size in bytes, t the kernel's time and n the group size
(nccl-tests, doc/PERFORMANCE.md):

- algorithm bandwidth ``algbw = S / t``;
- bus bandwidth ``busbw = algbw x factor``, the rate each rank's link had to carry: all-reduce ``2(n-1)/n``;
  all-gather, reduce-scatter and all-to-all ``(n-1)/n``; broadcast, reduce, send/recv ``1``.

S is the all-reduce's buffer, the all-gather's gathered output, the reduce-scatter's full input and the
all-to-all's whole send buffer, as nccl-tests counts them. GB/s are 1e9 bytes per second.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import numpy.typing as npt

from gpuscope.model.rank import CollectiveStat
from gpuscope.model.trace import Kind, RankTrace

# c10::ScalarType names as the profiler writes them in "dtype", and their sizes in bytes.
DTYPE_BYTES = {"Float": 4, "Double": 8, "Half": 2, "BFloat16": 2, "Long": 8, "Int": 4, "Short": 2, "Char": 1,
               "Byte": 1, "Bool": 1, "Float8_e4m3fn": 1, "Float8_e5m2": 1, "Float8_e4m3fnuz": 1,
               "Float8_e5m2fnuz": 1, "ComplexFloat": 8, "ComplexDouble": 16, "UInt32": 4, "UInt64": 8}
BUCKETS = ((64 * 2**10, "< 64 KiB"), (2**20, "64 KiB - 1 MiB"), (16 * 2**20, "1 - 16 MiB"),
           (256 * 2**20, "16 - 256 MiB"), (float("inf"), ">= 256 MiB"))


def op_kind(name: str) -> str | None:
    """all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce, send, recv; None for others."""
    flat = name.lower().replace("_", "").replace("nccl:", "")
    for key, kind in (("allreduce", "all_reduce"), ("allgather", "all_gather"), ("reducescatter", "reduce_scatter"),
                      ("alltoall", "all_to_all"), ("broadcast", "broadcast"), ("reduce", "reduce"),
                      ("send", "send"), ("recv", "recv")):
        if key in flat:
            return kind
    return None


def bus_factor(kind: str, n: int) -> float:
    if n <= 1:
        return 1.0 if kind in ("broadcast", "reduce", "send", "recv") else 0.0
    if kind == "all_reduce":
        return 2 * (n - 1) / n
    if kind in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0


def message_bytes(kind: str, in_nelems: int, out_nelems: int, dtype: str) -> int | None:
    size = DTYPE_BYTES.get(dtype)
    if size is None:
        return None
    nelems = out_nelems if kind == "all_gather" else (in_nelems if in_nelems >= 0 else out_nelems)
    return nelems * size if nelems >= 0 else None


def collective_stats(trace: RankTrace, comm_kernel_mask: npt.NDArray[np.bool_], start_ns: int,
                     end_ns: int) -> tuple[CollectiveStat, ...]:
    """Per (op, size bucket): count, bytes, kernel time, and algorithm and bus bandwidth, over the window."""
    ops = trace.collectives
    if not len(ops):
        return ()
    ev = trace.events
    kernels = np.flatnonzero(comm_kernel_mask & (ev.kind == Kind.KERNEL) & (ev.external_id >= 0))
    by_ext: dict[int, int] = defaultdict(int)
    for ext, dur in zip(ev.external_id[kernels].tolist(), ev.dur_ns[kernels].tolist()):
        by_ext[ext] += dur
    groups: dict[tuple[str, str, int], list[float]] = {}
    for i in range(len(ops)):
        ts = int(ops.ts_ns[i])
        kind = op_kind(ops.op[i])
        dur_ns = by_ext.get(int(ops.external_id[i]))
        if kind is None or not dur_ns or not start_ns <= ts < end_ns:
            continue
        nbytes = message_bytes(kind, int(ops.in_nelems[i]), int(ops.out_nelems[i]), ops.dtype[i])
        if nbytes is None:
            continue
        n = int(ops.group_size[i])
        bucket = next(label for limit, label in BUCKETS if nbytes < limit)
        acc = groups.setdefault((kind, bucket, n), [0, 0.0, 0.0])
        acc[0] += 1
        acc[1] += nbytes
        acc[2] += dur_ns
    out = []
    for (kind, bucket, n), (count, total_bytes, time_ns) in sorted(groups.items(), key=lambda kv: -kv[1][2]):
        algbw = total_bytes / time_ns  # bytes per ns = GB/s
        out.append(CollectiveStat(op=kind, size_bucket=bucket, group_size=n if n > 0 else None, count=int(count),
                                  bytes=int(total_bytes), time_us=time_ns / 1000, algbw_gbps=algbw,
                                  busbw_gbps=algbw * bus_factor(kind, n) if n > 0 else None))
    return tuple(out)
