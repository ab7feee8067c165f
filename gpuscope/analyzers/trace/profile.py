"""A rank's kernels and operators over its steady steps, name by name, and the set-up its trace records.

An event counts towards the steady steps when it starts inside one of them (warm-up steps left out); without
profiler steps, inside the steady window. Each table keeps the ``TABLE_ROWS`` names with the most time (cut at
``NAME_CHARS``) and sums the rest, so a report of a thousand ranks stays small.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from gpuscope.analyzers.trace import classify
from gpuscope.analyzers.trace.families import kernel_family, operator_family
from gpuscope.analyzers.trace.needs import gpu_needs
from gpuscope.analyzers.trace.steps import Steps
from gpuscope.analyzers.trace.vendor import trace_vendor
from gpuscope.model.profile import PROFILER_ATTR, ModelInput, NameTable, NameTime, RankProfile, RankSetup
from gpuscope.model.trace import GPU_KINDS, Kind, Precision, RankTrace

TABLE_ROWS = 30
NAME_CHARS = 160
"""Kernel names past this are template arguments: cut, so a report of a thousand ranks stays a few MB."""
_NCCL_ALGO = re.compile(r"(?:nccl(?:Dev)?Kernel_)(\w+?)_(?:\w*?_)?(RING|TREE|COLLNET_DIRECT|COLLNET_CHAIN|NVLS_TREE|"
                        r"NVLS|PAT)_(LL128|LL|SIMPLE)")
_COMPILED = re.compile(r"^Torch-Compiled Region|^CompiledFunction|CompiledFxGraph|^TorchDynamo")
_Family = Callable[[int, str], str]
"""A name's family, from its interned id and its text."""
_DTYPE_NAMES = {Precision.FP32: "float32", Precision.HALF: "float16/bfloat16", Precision.FP16: "float16",
                Precision.BF16: "bfloat16", Precision.FP8: "float8", Precision.FP64: "float64"}


def rank_profile(trace: RankTrace, steady: Steps, comm_kernels: npt.NDArray[np.bool_]) -> RankProfile:
    """The rank's profile over ``steady`` (its steady profiler steps, or one span for the steady window)."""
    inside = _inside(trace, steady)
    ev = trace.events
    gpu = inside & ev.mask(*GPU_KINDS)
    host = inside & ev.mask(Kind.CPU_OP, Kind.USER_ANNOTATION)
    memory = ev.mask(Kind.MEMCPY, Kind.MEMSET)
    comm_ids = set(np.unique(ev.name_id[comm_kernels & gpu]).tolist())
    mem_ids = set(np.unique(ev.name_id[memory & gpu]).tolist())
    kernels = _table(trace, gpu, lambda i, name: kernel_family(name, communication=i in comm_ids,
                                                                 memory=i in mem_ids))
    operators = _table(trace, host, lambda _, name: operator_family(name), keep=classify.is_dataloader_op)
    steps = len(steady) if steady.from_profiler else 0
    window_ns = int((steady.ends_ns - steady.starts_ns).sum()) if len(steady) else 0
    return RankProfile(steps=steps, window_us=window_ns / 1000, kernels=kernels, operators=operators,
                       setup=rank_setup(trace, host, comm_kernels))


def _inside(trace: RankTrace, steps: Steps) -> npt.NDArray[np.bool_]:
    """Events starting inside one of the steps."""
    ts = trace.events.ts_ns
    if not len(steps):
        return np.zeros(len(ts), dtype=bool)
    index = np.searchsorted(steps.starts_ns, ts, side="right") - 1
    ok = index >= 0
    ok[ok] = ts[ok] < steps.ends_ns[index[ok]]
    return ok


def _table(trace: RankTrace, selected: npt.NDArray[np.bool_], family_of: _Family,
           keep: Callable[[str], bool] = lambda _: False) -> NameTable:
    """Top names by time, and every name ``keep`` asks for (the DataLoader's next batch: a diff matches it by
    family however short it became). Names are cut at ``NAME_CHARS``: kernels are C++ templates of up to kilobytes,
    and names that differ only past that are one row."""
    ev = trace.events
    ids = ev.name_id[selected]
    if not ids.size:
        return NameTable()
    total = np.bincount(ids, weights=ev.dur_ns[selected].astype(np.float64), minlength=len(trace.names))
    count = np.bincount(ids, minlength=len(trace.names))
    groups: dict[str, list[int]] = defaultdict(list)
    for i in np.flatnonzero(count).tolist():
        groups[trace.names[i][:NAME_CHARS]].append(i)
    rows = sorted((NameTime(name=name, family=family_of(members[0], trace.names[members[0]]),
                            count=int(count[members].sum()), total_us=float(total[members].sum()) / 1000)
                   for name, members in groups.items()), key=lambda r: -r.total_us)
    listed = [r for k, r in enumerate(rows) if k < TABLE_ROWS or keep(r.name)]
    rest = [r for k, r in enumerate(rows) if not (k < TABLE_ROWS or keep(r.name))]
    by_family: dict[str, float] = defaultdict(float)
    for r in rest:
        by_family[r.family] += r.total_us
    return NameTable(rows=tuple(listed), rest_names=len(rest), rest_count=sum(r.count for r in rest),
                     rest_us=sum(r.total_us for r in rest), rest_max_us=max((r.total_us for r in rest), default=0.0),
                     rest_families_us=tuple(sorted(by_family.items(), key=lambda kv: -kv[1])))


def rank_setup(trace: RankTrace, host: npt.NDArray[np.bool_], comm_kernels: npt.NDArray[np.bool_]) -> RankSetup:
    """What the trace says of the set-up: CUDA versions, the DataLoader's workers, NCCL's algorithms,
    torch.compile, the model's first layer input and the floating-point types of the operators' inputs."""
    ev = trace.events
    host_names = {trace.names[i] for i in ev.name_ids(Kind.CPU_OP, Kind.USER_ANNOTATION).tolist()}
    kernel_names = {trace.names[i] for i in ev.name_ids(Kind.KERNEL).tolist()}
    return RankSetup(
        cuda_runtime=_cuda(trace.attrs.get("cuda_runtime_version")),
        cuda_driver=_cuda(trace.attrs.get("cuda_driver_version")),
        dataloader=_dataloader(host_names),
        nccl_algorithms=tuple(sorted({algo for name in (trace.names[i] for i in np.unique(ev.name_id[comm_kernels]))
                                      if (algo := _nccl(name)) is not None})),
        torch_compile=_compiled(host_names, kernel_names),
        model_input=_model_input(trace.attrs.get("model_input")),
        dtypes=_dtypes(ev.precision[host]),
        vendor=trace_vendor(trace),
        gpu_needs=gpu_needs(trace),
        profiler="nsys" if trace.attrs.get(PROFILER_ATTR) == "nsys" else "kineto",
    )


def _cuda(value: str | None) -> str | None:
    """12010 -> "12.1" (CUDA's encoding: 1000 x major + 10 x minor); a string as written."""
    if value is None:
        return None
    if value.isdigit() and int(value) >= 1000:
        number = int(value)
        return f"{number // 1000}.{number % 1000 // 10}"
    return value


def _dataloader(host_names: set[str]) -> str | None:
    if any(n.startswith("enumerate(DataLoader)#_MultiProcessingDataLoaderIter") for n in host_names):
        return "worker processes (num_workers>0)"
    if any(n.startswith("enumerate(DataLoader)#_SingleProcessDataLoaderIter") for n in host_names):
        return "in-process (num_workers=0)"
    return None


def _nccl(name: str) -> str | None:
    match = _NCCL_ALGO.search(name)
    if match is None:
        return None
    op = match.group(1).split("_", 1)[0]
    return f"{op} {match.group(2)} {match.group(3)}"


def _compiled(host_names: set[str], kernel_names: set[str]) -> bool | None:
    if any(_COMPILED.search(n) for n in host_names) or any(n.startswith("triton_") for n in kernel_names):
        return True
    return False if host_names else None


def _model_input(text: str | None) -> ModelInput | None:
    if not text:
        return None
    try:
        data = json.loads(text)
        return ModelInput(op=str(data["op"]), shapes=str(data["shapes"]),
                          types=tuple(str(t) for t in data.get("types", ())))
    except (ValueError, KeyError, TypeError):
        return None


def _dtypes(precision: npt.NDArray[np.uint8]) -> tuple[str, ...]:
    found = {Precision(int(p)) for p in np.unique(precision)}
    return tuple(name for p, name in _DTYPE_NAMES.items() if p in found)
