"""What changed in the set-up, as far as the two runs say: GPUs, ranks, batch shapes, dtypes, the DataLoader's
workers, NCCL's algorithms, CUDA versions and torch.compile. An aspect one run does not state is unknown
(``changed`` None), never "unchanged"."""

from __future__ import annotations

from collections.abc import Callable

from gpuscope.model.diff import SetupItem
from gpuscope.model.profile import PROFILER_NAMES, RankSetup
from gpuscope.model.report import Report

NOT_IN_TRACES = "PyTorch version"
"""Kineto traces do not record it: always unknown from a trace."""


def _setups(report: Report) -> list[RankSetup]:
    return [r.profile.setup for r in report.ranks if r.profile is not None]


def gpu_model(report: Report) -> str | None:
    models = sorted({g.model for g in report.run.gpus if g.model} | {r.device for r in report.ranks if r.device})
    return ", ".join(models) or None


def gpu_count(report: Report) -> str | None:
    if report.cost is not None and report.cost.gpu_count:
        return str(report.cost.gpu_count)
    gpus = sum(r.gpu_count for r in report.ranks if r.gpu_busy is not None) or len(report.run.gpus)
    return str(gpus) if gpus else None


def ranks(report: Report) -> str | None:
    """The ranks traced, and the job's world size when the traces state a larger one."""
    if not report.ranks:
        return None
    worlds = [r.world_size for r in report.ranks if r.world_size]
    n = len(report.ranks)
    return f"{n} of {max(worlds)}" if worlds and max(worlds) != n else str(n)


def batch_shape(report: Report) -> str | None:
    found = next((s.model_input for s in _setups(report) if s.model_input is not None), None)
    return None if found is None else f"{found.batch} into {found.op}"


def dtypes(report: Report) -> str | None:
    names = sorted({d for s in _setups(report) for d in s.dtypes})
    return ", ".join(names) or None


def dataloader(report: Report) -> str | None:
    found = next((s.dataloader for s in _setups(report) if s.dataloader is not None), None)
    if found is None and report.live is not None and report.live.host is not None and report.live.host.trainers:
        workers = report.live.host.workers
        return f"{workers} worker process{'es' * (workers != 1)}" if workers else "in-process (no worker processes)"
    return found


def nccl(report: Report) -> str | None:
    setups = _setups(report)
    if not setups:
        return None
    algos = sorted({a for s in setups for a in s.nccl_algorithms})
    return ", ".join(algos) or "no NCCL kernels"


def _one(attr: str) -> Callable[[Report], str | None]:
    def read(report: Report) -> str | None:
        values = sorted({str(v) for s in _setups(report) if (v := getattr(s, attr)) is not None})
        return ", ".join(values) or None
    return read


def torch_compile(report: Report) -> str | None:
    flags = {s.torch_compile for s in _setups(report) if s.torch_compile is not None}
    return None if not flags else "yes" if True in flags else "no"


def profiler(report: Report) -> str | None:
    """What recorded the run's traces, in the user's words ("Nsight Systems", "PyTorch profiler")."""
    kinds = sorted({PROFILER_NAMES[s.profiler] for s in _setups(report) if s.profiler is not None})
    return ", ".join(kinds) or None


def workload(report: Report) -> str | None:
    kinds = sorted({r.workload for r in report.ranks if r.workload is not None})
    return ", ".join(kinds) or None


ASPECTS: tuple[tuple[str, str, Callable[[Report], str | None]], ...] = (
    ("gpu_model", "GPU model", gpu_model),
    ("gpu_count", "GPUs", gpu_count),
    ("ranks", "Ranks", ranks),
    ("batch_shape", "Batch shape", batch_shape),
    ("dtypes", "Dtypes", dtypes),
    ("dataloader", "DataLoader", dataloader),
    ("nccl", "NCCL algorithms", nccl),
    ("pytorch", NOT_IN_TRACES, lambda _: None),
    ("cuda_runtime", "CUDA runtime", _one("cuda_runtime")),
    ("cuda_driver", "CUDA driver", _one("cuda_driver")),
    ("torch_compile", "torch.compile", torch_compile),
    ("workload", "Workload", workload),
    ("profiler", "Profiler", profiler),
)


def setup_items(baseline: Report, candidate: Report) -> tuple[SetupItem, ...]:
    items = []
    for key, label, read in ASPECTS:
        b, c = read(baseline), read(candidate)
        items.append(SetupItem(key=key, label=label, baseline=b, candidate=c,
                               changed=None if b is None or c is None else b != c))
    return tuple(items)
