"""Data loading: the DataLoader's share of the step, what is behind it (I/O or CPU) and what to change.

Covers the TensorBoard plugin's rule "DataLoader > 5% of the step -> num_workers", and goes on with
pin_memory (see rules/memory.py), prefetch_factor, persistent_workers, GPU decode and storage formats.
"""

from __future__ import annotations

import statistics

from gpuscope.analyzers.diagnosis import codes, savings
from gpuscope.analyzers.diagnosis.context import Context, RuleOutput, finding, severity
from gpuscope.model.diagnosis import Recommendation, Resource
from gpuscope.model.gpu import Vendor

DATALOADER_MIN = 0.05
"""The TensorBoard plugin's threshold: DataLoader over 5% of the step is worth a recommendation."""
IOWAIT_MIN = 0.2
WORKERS_IO_MIN = 0.3
WORKERS_CPU_MIN = 0.5
LEFT = "The DataLoader wait left after workers"
CORES_SATURATED = 0.9
"""Machine-wide CPU busy (psutil, guest time excluded) at or above this: more loader workers would find no free
core, so no worker advice is given to a loader that computes (decoding off the CPU is); a loader that waits on
reads needs no core to wait, and more workers still overlap its reads."""


def loader_resource(ctx: Context) -> tuple[Resource, str]:
    """io, cpu or unknown behind data loading, with the evidence in words. A trace alone cannot tell."""
    live = ctx.live
    if live is None:
        return "unknown", "a trace alone cannot tell whether reading (I/O) or decoding (CPU) is the slow part"
    s, h = live.stacks, live.host
    io_stacks = s is not None and (s.workers_io or 0) >= max(WORKERS_IO_MIN, s.workers_on_cpu or 0)
    io_host = h is not None and ((h.iowait_mean or 0) >= IOWAIT_MIN or (h.disk_wait_threads_mean or 0) >= 1.0)
    if io_stacks or io_host:
        return "io", "the loader mostly waits on reads (I/O)"
    if s is not None and (s.workers_on_cpu or 0) >= WORKERS_CPU_MIN:
        return "cpu", "the loader's workers are busy on the CPU (decoding, augmentation)"
    if h is not None and h.workers_cpu_mean is not None and h.workers > 0:
        live_workers = h.workers_per_tick_mean or h.workers
        if h.workers_cpu_mean >= 0.8 * live_workers or (h.cpu_count and h.workers_cpu_mean >= 0.8 * h.cpu_count):
            return "cpu", "the loader's workers keep their CPU cores busy (decoding, augmentation)"
    if h is not None and h.workers == 0 and (h.main_cpu_mean or 0) >= 0.9:
        return "cpu", "loading runs in the training process, which keeps a CPU core busy"
    return "unknown", "live samples do not show whether reading or decoding is the slow part"


def apply(ctx: Context) -> RuleOutput:
    share = ctx.shares.shares.get("data_loading")
    if share is None or share < DATALOADER_MIN:
        return RuleOutput()
    resource, why = loader_resource(ctx)
    recs = _recommendations(ctx, share, resource)
    evidence: dict[str, float | int | str | None] = {
        "dataloader_share": share,
        # The share in time: of the typical step, as the share is (one definition).
        "data_wait_per_step_us": share * ctx.typical_step_us if ctx.typical_step_us is not None else None,
        "step_time_us": ctx.step_time_us,
        "dataloader_mode": _mode(ctx),
        "resource": resource,
    }
    evidence.update(_live_evidence(ctx))
    title = f"{share:.1%} of the step is spent in the DataLoader ({why})"
    out = RuleOutput((finding(codes.DATALOADER_SHARE_HIGH, severity(share, warning=0.10, critical=0.25), title,
                              evidence, share=share, recs=recs, stage="data_loading"),), tuple(recs))
    if resource != "unknown":
        code = codes.LOADER_IO_WAIT if resource == "io" else codes.LOADER_CPU_BOUND
        out += RuleOutput((finding(code, "warning", f"Data loading is {resource}-bound: {why}", _live_evidence(ctx),
                                   share=share, stage="data_loading"),))
    return out


def _mode(ctx: Context) -> str | None:
    modes = {e.dataloader_mode for e in ctx.evidence if e.dataloader_mode}
    if "single" in modes:
        return "single"
    if "multi" in modes:
        return "multi"
    if ctx.live is not None and ctx.live.host is not None:
        return "single" if ctx.live.host.workers == 0 else "multi"
    return None


def cores_saturated(ctx: Context) -> bool:
    """The host's cores are all busy (live runs only): a worker more would only take time from another."""
    host = ctx.live.host if ctx.live is not None else None
    return host is not None and host.host_cpu_mean is not None and host.host_cpu_mean >= CORES_SATURATED


def _recommendations(ctx: Context, share: float, resource: Resource) -> list[Recommendation]:
    gpu = ctx.facts.gpu_busy or ctx.shares.get("gpu_compute")
    recs: list[Recommendation] = []
    if cores_saturated(ctx) and resource != "io":
        return [_faster_loading(share, "cpu", ctx.vendor)]
    if _mode(ctx) != "multi":
        seen = ("The trace shows _SingleProcessDataLoaderIter" if ctx.evidence
                else "Live sampling saw no DataLoader worker processes")
        s = savings.more_workers(share, gpu)
        runner = "the training step" if ctx.no_gpu else "the GPU"
        recs.append(Recommendation(
            codes.DATALOADER_NUM_WORKERS, "Load batches in DataLoader worker processes",
            "Construct the DataLoader with num_workers=4 or more (up to the CPU cores per GPU, less one for the "
            f"training process) so the next batches load while {runner} runs this step. "
            f"{seen}: loading runs inside the training process and {runner} waits for it.",
            s.fraction, s.reasoning, stage="data_loading"))
    else:
        s = savings.share_of(share, 0.5, "The DataLoader wait", "doubling num_workers halves the time a batch is "
                             "late when workers cannot keep up")
        recs.append(Recommendation(
            codes.DATALOADER_NUM_WORKERS, "Add DataLoader workers",
            "The DataLoader already uses worker processes but the training process still waits for batches: "
            "raise num_workers (while CPU cores are free) and watch the DataLoader share fall.",
            s.fraction, s.reasoning, stage="data_loading"))
        s = savings.share_of(share, 0.25, "The DataLoader wait", "a deeper queue absorbs slow batches but adds "
                             "no loading capacity")
        recs.append(Recommendation(
            codes.DATALOADER_PREFETCH, "Queue more batches ahead",
            "Set prefetch_factor=4 (default 2) on the DataLoader so each worker keeps more batches ready.",
            s.fraction, s.reasoning, stage="data_loading"))
        if _first_step_spike(ctx):
            s = savings.share_of(share, 0.25, "The DataLoader wait", "worker start-up recurs once per epoch")
            recs.append(Recommendation(
                codes.PERSISTENT_WORKERS, "Keep DataLoader workers alive between epochs",
                "Set persistent_workers=True so workers are not started again at every epoch (one step's "
                "DataLoader wait is several times the others').", s.fraction, s.reasoning, stage="data_loading"))
    if share >= 0.10:
        left = share - (recs[0].est_step_saving or 0.0)
        recs.append(_faster_loading(left, resource, ctx.vendor))
    return recs


def _faster_loading(share: float, resource: Resource, vendor: Vendor | None) -> Recommendation:
    """After workers: decode off the CPU, or read faster; which one depends on the resource.

    ``share`` is the DataLoader wait the workers leave, so this one and the workers' saving together
    stay within the DataLoader share."""
    decode = ("move JPEG decoding and augmentation onto the GPU (" + (
        "rocJPEG/rocDecode and rocAL, ROCm's decoding and augmentation libraries" if vendor == "amd" else
        "NVIDIA DALI, torchvision.io.decode_jpeg(device='cuda')") + ", torchvision.transforms.v2 on GPU tensors)")
    reads = ("pack samples into sequential shards (WebDataset tar shards, FFCV, TFRecord or Parquet) staged on "
             "local NVMe instead of many small files on network storage")
    if resource == "cpu":
        s = savings.share_of(share, 0.5, LEFT, "GPU decoding takes most decode and augmentation "
                             "work off the CPU, but reading and collation stay")
        return Recommendation(codes.GPU_DECODE, "Decode and augment on the GPU", f"The loader is CPU-bound: {decode}.",
                              s.fraction, s.reasoning, stage="data_loading")
    if resource == "io":
        s = savings.share_of(share, 0.5, LEFT, "sequential reads of large shards remove most "
                             "per-file latency")
        return Recommendation(codes.STORAGE_FORMAT, "Read fewer, larger files from faster storage",
                              f"The loader waits on reads: {reads}.", s.fraction, s.reasoning, stage="data_loading")
    s = savings.share_of(share, 0.5, LEFT, "either change removes the larger part of loading "
                         "cost, not all of it")
    return Recommendation(
        codes.FASTER_LOADING, "Find out whether reading or decoding is slow, then fix that one",
        "A trace cannot tell I/O from CPU behind the loader; record the job live (gpuscope run -- <cmd>) to see "
        f"whether the loader waits on reads or burns CPU. If decoding: {decode}. If reads: {reads}.",
        s.fraction, s.reasoning, stage="data_loading")


def _first_step_spike(ctx: Context) -> bool:
    for r in ctx.ranks:
        dl = [p.breakdown_us.dataloader for p in r.per_step]
        if len(dl) >= 3 and dl[0] > 3 * max(statistics.median(dl[1:]), 1.0):
            return True
    return False


def _live_evidence(ctx: Context) -> dict[str, float | int | str | None]:
    live = ctx.live
    if live is None:
        return {}
    out: dict[str, float | int | str | None] = {}
    if live.host is not None:
        h = live.host
        out.update({"loader_workers": h.workers, "workers_cpu_cores": h.workers_cpu_mean,
                    "main_cpu_cores": h.main_cpu_mean, "iowait_share": h.iowait_mean,
                    "read_bytes_per_s": h.read_bytes_per_s})
    if live.stacks is not None:
        s = live.stacks
        out.update({"main_dataloader_wait_share": s.main_dataloader_wait, "workers_on_cpu_share": s.workers_on_cpu,
                    "workers_io_share": s.workers_io})
    return out
