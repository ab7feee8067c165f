"""A rank's compute kernels in its steady steps, each joined to the op that launched it, its counted op and its
kernel family, with what its name says of how it ran (TF32 tensor cores; Winograd, FFT, sparse); and which step each
host op belongs to (the ProfilerStep span it started in, on any thread).

A host op belongs to the step whose own ProfilerStep span (on the host) holds its start, not to the step's window
stretched to the GPU work it launched: where the GPU runs behind the host, the next step's window starts at the
previous step's last kernel, well after its own ops began (the backward thread's ops of a step run inside its
ProfilerStep span while the main thread waits for them).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpuscope.analyzers.efficiency.nodes import NodeCosts
from gpuscope.analyzers.trace import classify
from gpuscope.analyzers.trace.families import kernel_family
from gpuscope.analyzers.trace.steps import Steps
from gpuscope.model.efficiency import Algorithm
from gpuscope.model.trace import Kind, RankTrace

F64 = npt.NDArray[np.float64]
IntP = npt.NDArray[np.intp]
I64 = npt.NDArray[np.int64]
TF32_KERNEL = ("tf32", "s1688", "tensorop_s", "xmma_gemm_f32f32")
"""Parts of the names of the kernels cuBLAS and cuDNN run fp32 GEMMs and convolutions on tensor cores with."""
ALGORITHMS: tuple[tuple[Algorithm, tuple[str, ...]], ...] = (
    ("winograd", ("winograd",)), ("fft", ("fft",)), ("sparse", ("sparse", "spmma")))
"""Parts of kernel names that say the kernel did fewer multiplications than the direct product: cuDNN's and MIOpen's
Winograd and FFT convolutions, cuSPARSELt / CUTLASS 2:4 sparse GEMMs."""
ALGORITHM_CODES: tuple[Algorithm, ...] = ("direct", "winograd", "fft", "sparse")


@dataclass(frozen=True)
class Kernels:
    """A rank's compute kernels in its steady steps (collectives left out), each with what it belongs to."""

    event: IntP
    node: IntP
    """The node that launched it (-1: none)."""
    top: IntP
    """Its counted op (-1: none: unmodelled)."""
    us: F64
    family: IntP
    """Index into ``families``."""
    families: tuple[str, ...]
    tf32: npt.NDArray[np.bool_]
    """Its name is a tensor-core fp32 (TF32) kernel's."""
    algorithm: IntP
    """Index into ``ALGORITHM_CODES``: what its name says of how it did its work (0: the direct product)."""


def in_windows(ts: I64, starts: I64, ends: I64) -> npt.NDArray[np.bool_]:
    """Which of ``ts`` fall in one of the sorted windows [start, end)."""
    return step_of(ts, starts, ends) >= 0


def step_of(ts: I64, starts: I64, ends: I64) -> IntP:
    """The sorted window [start, end) each of ``ts`` falls in; -1: none."""
    if not starts.size:
        return np.full(ts.shape[0], -1, dtype=np.intp)
    i = np.searchsorted(starts, ts, side="right") - 1
    return np.where((i >= 0) & (ts < ends[np.maximum(i, 0)]), i, -1).astype(np.intp)


def host_spans(trace: RankTrace, steps: Steps) -> tuple[I64, I64]:
    """The host spans of ``steps``: each profiler step's own ProfilerStep event (the first of its name), in the
    order of ``steps``; without profiler steps, the steps as they are (the steady span)."""
    if not steps.from_profiler or not len(steps):
        return steps.starts_ns, steps.ends_ns
    ev = trace.events
    marks = np.flatnonzero(ev.kind == Kind.STEP)
    first: dict[str, int] = {}
    for i in marks.tolist():
        first.setdefault(trace.names[int(ev.name_id[i])].removeprefix("ProfilerStep#"), i)
    at = np.array([first.get(name, -1) for name in steps.names], dtype=np.intp)
    starts = np.where(at >= 0, ev.ts_ns[np.maximum(at, 0)], steps.starts_ns)
    ends = np.where(at >= 0, ev.end_ns[np.maximum(at, 0)], steps.ends_ns)
    ends = np.minimum(ends, np.concatenate((starts[1:], [ends[-1]])))  # overlapping by rounding: the next wins
    return starts.astype(np.int64), np.maximum(ends, starts).astype(np.int64)


def step_kernels(trace: RankTrace, nodes: NodeCosts, node_in_steps: npt.NDArray[np.bool_],
                 starts: I64, ends: I64) -> Kernels:
    """The compute kernels whose launching op (or, launched by none, whose own start) is in the steps."""
    ev, tree = trace.events, nodes.tree
    comm = trace.name_mask(classify.is_comm_kernel, Kind.KERNEL)
    k = np.flatnonzero(ev.mask(Kind.KERNEL) & ~comm).astype(np.intp)
    node_of = np.full(len(ev), -1, dtype=np.intp)
    node_of[tree.gpu] = tree.gpu_node
    node = node_of[k]
    keep = np.where(node >= 0, node_in_steps[np.maximum(node, 0)], in_windows(ev.ts_ns[k], starts, ends))
    k, node = k[keep], node[keep]
    names, name_index = np.unique(ev.name_id[k], return_inverse=True)
    texts = [trace.names[i] for i in names.tolist()]
    family_of = [kernel_family(t, communication=False) for t in texts]
    families = tuple(dict.fromkeys(family_of))
    fam = np.array([families.index(f) for f in family_of], dtype=np.intp)
    tf32 = np.array([any(p in t.lower() for p in TF32_KERNEL) for t in texts], dtype=bool)
    algorithm = np.array([algorithm_of(t) for t in texts], dtype=np.intp)
    empty = np.zeros(0, dtype=np.intp)
    return Kernels(event=k, node=node, top=np.where(node >= 0, nodes.owner[np.maximum(node, 0)], -1),
                   us=ev.dur_ns[k].astype(np.float64) / 1000.0, family=fam[name_index].astype(np.intp),
                   families=families, tf32=tf32[name_index] if names.size else np.zeros(0, dtype=bool),
                   algorithm=algorithm[name_index].astype(np.intp) if names.size else empty)


def algorithm_of(kernel_name: str) -> int:
    """The index in ``ALGORITHM_CODES`` of what a kernel's name says of how it did its work (0: nothing)."""
    low = kernel_name.lower()
    for code, parts in ALGORITHMS:
        if any(p in low for p in parts):
            return ALGORITHM_CODES.index(code)
    return 0


def node_algorithm(kernels: Kernels, n: int) -> IntP:
    """Per node of the tree (``n`` of them): the algorithm its counted op's kernels used (the highest code among
    them; 0 where none says)."""
    out = np.zeros(n, dtype=np.intp)
    mine = kernels.top >= 0
    np.maximum.at(out, kernels.top[mine], kernels.algorithm[mine])
    return out
