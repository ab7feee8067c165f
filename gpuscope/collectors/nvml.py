"""GPU and per-process counters from NVML, through nvidia-ml-py (module ``pynvml``).

This is the only module that imports the binding, and it does so on ``NvmlSampler.open``, so gpuscope
installs and runs without it. Every metric names the ``nvidia-smi`` field that shows the same number,
so a user can check one against the other.

Support differs per GPU and driver: a call that raises NotSupported / FunctionNotFound / NoPermission
(or that the installed binding lacks) is marked unsupported for that GPU once and never called again;
its metric is then a missing row, never a 0. Mid-run, per error: NotSupported from a counter that answered
before stops it from then on; GpuIsLost stops every counter of that GPU (no call reaches it again); any other
error (Unknown, Timeout, ...) is a gap in that counter, asked again next tick, until ``MAX_FAILED_READS`` reads
in a row failed, which stops it. Each stop is one ``stopped.<counter>`` row at the tick it happened (see
``schema.STOP_REASONS``), so the report can say which counter stopped and when.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Literal

from gpuscope.collectors import nvml_mig
from gpuscope.collectors.nvml_calls import DEVICE_CALLS, KIB
from gpuscope.collectors.nvml_describe import describe, peers
from gpuscope.collectors.nvml_procs import process_rows, tenants, utilization_rows
from gpuscope.collectors.pidns import PidNamespace
from gpuscope.model.gpu import GpuInfo
from gpuscope.model.schema import (
    GPU_NVLINK_RX_BYTES_PER_S,
    GPU_NVLINK_TX_BYTES_PER_S,
    NO_PID,
    NVML,
    STOP_FAILING,
    STOP_GPU_LOST,
    STOP_NOT_SUPPORTED,
    STOPPED_PREFIX,
    SampleRow,
)

_FALLBACK = "collecting host and stack samples only"
NO_DRIVER = f"no NVIDIA driver found: {_FALLBACK}"

# NVLink throughput field values: scopeId UINT_MAX sums every link (nvml.h); the counters are cumulative KiB.
_ALL_LINKS = 0xFFFFFFFF
# On the first tick there is no previous tick to ask process utilization "since": look back one second.
_FIRST_LOOKBACK_US = 1_000_000
MAX_FAILED_READS = 5
"""A counter whose reads fail this many ticks in a row (Unknown, Timeout) is stopped: a gap of a few seconds is
recorded as one, a driver that stays broken is not asked forever."""


class NvmlUnavailable(Exception):
    """NVML cannot be used here (binding missing, no driver, no permission). The message is one line for the user."""

    @property
    def reason(self) -> str:
        """Why, without what a recording does instead (for a command that needs the GPU itself)."""
        return str(self).removesuffix(f": {_FALLBACK}")


class _GpuLost(Exception):
    """The GPU fell off the bus (or the driver lost it): skip it for the rest of this tick."""


@dataclass
class _Gpu:
    index: int
    handle: Any
    kind: Literal["gpu", "mig_parent", "mig"] = "gpu"
    """A whole GPU, a GPU in MIG mode (its processes are asked of its instances), or a MIG instance."""
    nvlink_last: tuple[int, float, float] | None = None
    """(timestamp µs, TX KiB, RX KiB) of the previous NVLink reading."""
    util_since_us: int | None = None
    """lastSeenTimeStamp for the next process-utilization query (the previous tick)."""


class NvmlSampler:
    """Per-GPU and per-process counters from NVML; one ``sample`` per tick of the sampler loop.

    ``gpu`` in its rows is NVML's index (the order ``nvidia-smi`` shows, not CUDA_VISIBLE_DEVICES order).
    Per-process rows are emitted only for the pids that ``pids()`` returns (the target's process tree);
    without ``pids`` no per-process call is made. NVML reports the host's pids: ``namespace`` reads them in
    gpuscope's own PID namespace (``collectors.pidns``). A MIG instance is a GPU of its own
    (``schema.mig_gpu``), found through its parent's MIG device handles (``collectors.nvml_mig``).
    """

    name = NVML

    def __init__(self, nvml: Any, gpus: list[_Gpu], pids: Callable[[], set[int]] | None,
                 namespace: PidNamespace | None = None) -> None:
        """Use ``NvmlSampler.open``; this takes an initialised binding."""
        self._nvml = nvml
        self._gpus = gpus
        self._pids = pids
        self._namespace = namespace or PidNamespace()
        self._unsupported: set[tuple[int, str]] = set()
        self._missing: set[tuple[int, str]] = set()  # (gpu, binding function) the driver lacks
        self._target_gpus: set[int] = set()
        self._info: tuple[GpuInfo, ...] = ()
        self._answered: set[tuple[int, str]] = set()  # (gpu, call key) that answered at least once
        self._failed_reads: dict[tuple[int, str], int] = {}  # failures in a row, reset by an answer
        self._stopped: set[tuple[int, str]] = set()  # (gpu, key) stopped mid-run; key "gpu": the whole GPU
        self._stop_rows: list[SampleRow] = []
        self._now_ns = 0
        self.errors = 0
        """Calls that failed for a tick (GPU lost, unknown error): their rows are missing for that tick."""
        self.last_error: str | None = None
        """The most recent such failure, one line; kept after the GPU recovers."""

    @classmethod
    def open(cls, *, pids: Callable[[], set[int]] | None = None,
             namespace: PidNamespace | None = None) -> NvmlSampler:
        """Initialise NVML and find the GPUs (and MIG instances); raises ``NvmlUnavailable`` (one-line message)
        when it cannot. ``namespace``: how NVML's pids read here (detected when left out)."""
        try:
            import pynvml  # the only import of the binding in gpuscope
        except ImportError:
            raise NvmlUnavailable(f"nvidia-ml-py is not installed (pip install nvidia-ml-py): {_FALLBACK}") from None
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            raise NvmlUnavailable(_init_message(pynvml, exc)) from None
        try:
            count = pynvml.nvmlDeviceGetCount()
        except pynvml.NVMLError as exc:
            pynvml.nvmlShutdown()
            raise NvmlUnavailable(f"NVML could not list the GPUs ({exc}): {_FALLBACK}") from None
        gpus, skipped = _handles(pynvml, count)
        if not gpus:
            pynvml.nvmlShutdown()
            raise NvmlUnavailable(f"no NVIDIA GPU found{f' ({skipped})' if skipped else ''}: {_FALLBACK}")
        if pids is not None and namespace is None:
            namespace = PidNamespace.detect()
        sampler = cls(pynvml, gpus, pids, namespace)
        sampler.last_error = skipped
        sampler._info = tuple(describe(pynvml, gpu.handle, gpu.index) for gpu in gpus)
        links = [sampler._probe_nvlink(gpu) for gpu in gpus]
        handles = [(g.index, g.handle) for g in gpus]
        sampler._info = tuple(replace(info, nvlink_links=n, nvlink_version=v, peers=peers(pynvml, gpu.handle, [
            h for h in handles if h[0] != gpu.index])) for info, gpu, (n, v) in zip(sampler._info, gpus, links))
        sampler._add_mig_instances()
        return sampler

    def gpus(self) -> tuple[GpuInfo, ...]:
        """The GPUs NVML sees, as found at open; a field NVML could not tell is None."""
        return self._info

    def target_gpus(self) -> set[int]:
        """GPU indices on which any of the target's processes has held a context (and memory) so far."""
        return set(self._target_gpus)

    @property
    def pid_problem(self) -> str | None:
        """One line when NVML's (host) pids cannot be matched to the target's here: no per-process rows then."""
        return self._namespace.problem if self._pids is not None else None

    @property
    def unsupported(self) -> frozenset[tuple[int, str]]:
        """(gpu index, call key) pairs marked unsupported; their metrics are never recorded."""
        return frozenset(self._unsupported)

    @property
    def stopped(self) -> frozenset[tuple[int, str]]:
        """(gpu index, call key) pairs stopped mid-run (key "gpu": the GPU was lost); never asked again."""
        return frozenset(self._stopped)

    def sample(self, now_ns: int) -> list[SampleRow]:
        """Every supported counter of every GPU now, plus the target's per-process rows."""
        targets = self._targets()
        self._now_ns = now_ns
        rows: list[SampleRow] = []
        for gpu in self._gpus:
            if (gpu.index, "gpu") in self._stopped:
                continue
            try:
                rows.extend(self._device_rows(gpu, now_ns))
                if targets is not None:
                    rows.extend(self._process_rows(gpu, now_ns, targets))
            except _GpuLost:
                continue
        rows.extend(self._stop_rows)
        self._stop_rows = []
        return rows

    def close(self) -> None:
        """Shut NVML down (nvmlShutdown); a failure there is of no consequence to the run."""
        try:
            self._nvml.nvmlShutdown()
        except self._nvml.NVMLError:
            pass

    def _targets(self) -> set[int] | None:
        """The target's pids now; None (no per-process rows this tick) when there is no target or it cannot be read."""
        if self._pids is None or self._namespace.problem is not None:
            return None
        try:
            return set(self._pids())
        except Exception as exc:  # noqa: BLE001 - the process tree changing under us must not cost the device rows
            self.errors += 1
            self.last_error = f"target pids: {type(exc).__name__}: {exc}"
            return None

    # -- one GPU, one tick ---------------------------------------------------------------------

    def _device_rows(self, gpu: _Gpu, now_ns: int) -> list[SampleRow]:
        rows: list[SampleRow] = []
        for call in DEVICE_CALLS:
            if gpu.kind == "mig" and call.key not in nvml_mig.INSTANCE_CALLS:
                continue
            args = tuple(getattr(self._nvml, name) for name in call.args)
            value = self._call(gpu, call.key, call.functions, *args)
            if value is not None:
                rows.extend((now_ns, NVML, gpu.index, NO_PID, metric, v) for metric, v in call.read(value))
        rows.extend(self._nvlink_rows(gpu, now_ns))
        return rows

    def _nvlink_rows(self, gpu: _Gpu, now_ns: int) -> list[SampleRow]:
        """NVLink data throughput summed over links (``nvidia-smi nvlink -gt d``), from two cumulative readings."""
        nvml = self._nvml
        fields = [(nvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, _ALL_LINKS),
                  (nvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, _ALL_LINKS)]
        values = self._call(gpu, "nvlink", ("nvmlDeviceGetFieldValues",), fields)
        if values is None:
            return []
        if any(v.nvmlReturn == nvml.NVML_ERROR_NOT_SUPPORTED for v in values):
            self._not_supported(gpu, "nvlink")
            return []
        if any(v.nvmlReturn != nvml.NVML_SUCCESS for v in values):
            self._failed(gpu, "nvlink", "field value error")
            return []
        stamp_us = max(int(v.timestamp) for v in values) or now_ns // 1000
        tx_kib, rx_kib = (float(v.value.ullVal) for v in values)
        last, gpu.nvlink_last = gpu.nvlink_last, (stamp_us, tx_kib, rx_kib)
        if last is None or stamp_us <= last[0] or tx_kib < last[1] or rx_kib < last[2]:
            return []  # first reading, or the counters were reset
        seconds = (stamp_us - last[0]) / 1e6
        return [(now_ns, NVML, gpu.index, NO_PID, GPU_NVLINK_TX_BYTES_PER_S, (tx_kib - last[1]) * KIB / seconds),
                (now_ns, NVML, gpu.index, NO_PID, GPU_NVLINK_RX_BYTES_PER_S, (rx_kib - last[2]) * KIB / seconds)]

    def _process_rows(self, gpu: _Gpu, now_ns: int, targets: set[int]) -> list[SampleRow]:
        """The target's GPU memory (``nvidia-smi --query-compute-apps=pid,used_memory``), its SM and memory
        shares, and its neighbours on the GPU (``collectors.nvml_procs``)."""
        if gpu.kind == "mig_parent":
            return []  # its processes are asked of its instances
        procs = self._call(gpu, "processes", ("nvmlDeviceGetComputeRunningProcesses",
                                              "nvmlDeviceGetComputeRunningProcesses_v2"))
        view = tenants(procs, targets, self._namespace.local) if procs is not None else None
        if view is not None and view.holders:
            self._target_gpus.add(gpu.index)
        rows = process_rows(view, gpu.index, now_ns) if view is not None else []
        if view is None or view.holders:  # a process with no context on this GPU cannot have used its SMs
            rows.extend(self._process_util_rows(gpu, now_ns, targets, view))
        return rows

    def _process_util_rows(self, gpu: _Gpu, now_ns: int, targets: set[int], view: Any) -> list[SampleRow]:
        """Per-process utilization since the previous tick (``nvidia-smi pmon -s u``)."""
        since_us = gpu.util_since_us if gpu.util_since_us is not None else now_ns // 1000 - _FIRST_LOOKBACK_US
        gpu.util_since_us = now_ns // 1000
        samples = self._call(gpu, "process_utilization", ("nvmlDeviceGetProcessUtilization",), since_us,
                             nothing_new_ok=True)
        return utilization_rows(samples, since_us=since_us, targets=targets, view=view,
                                local=self._namespace.local, gpu=gpu.index, now_ns=now_ns)

    def _add_mig_instances(self) -> None:
        """Each MIG instance of a GPU in MIG mode becomes a GPU of its own, described like one."""
        found: list[_Gpu] = []
        for gpu in list(self._gpus):
            if gpu.kind != "gpu" or not nvml_mig.mig_enabled(self._nvml, gpu.handle):
                continue
            gpu.kind = "mig_parent"
            found += [_Gpu(index, handle, kind="mig") for index, handle in
                      nvml_mig.instances(self._nvml, gpu.index, gpu.handle)]
        for mig in found:
            self._unsupported.add((mig.index, "nvlink"))  # links belong to the parent
        self._gpus.extend(found)
        self._info = self._info + tuple(describe(self._nvml, mig.handle, mig.index, mig=True) for mig in found)

    # -- calling the binding -------------------------------------------------------------------

    def _call(self, gpu: _Gpu, key: str, functions: Iterable[str], *args: Any, nothing_new_ok: bool = False) -> Any:
        """The result of the first of ``functions`` the binding and driver have, or None.

        None when the call is unsupported (marked once, never retried), or failed this tick
        (counted in ``errors``), or, with ``nothing_new_ok``, when NVML has nothing new (NOT_FOUND).
        """
        if (gpu.index, key) in self._unsupported or (gpu.index, key) in self._stopped:
            return None
        nvml = self._nvml
        # The binding raises this (not an NVMLError) when its unversioned wrapper needs a newer driver symbol.
        mismatch = getattr(nvml, "NVMLLibraryMismatchError", nvml.NVMLError_FunctionNotFound)
        for name in functions:
            fn = getattr(nvml, name, None)
            if fn is None or (gpu.index, name) in self._missing:  # an older binding or driver without it
                continue
            try:
                value = fn(gpu.handle, *args)
            except (nvml.NVMLError_FunctionNotFound, mismatch):
                self._missing.add((gpu.index, name))  # the driver lacks this symbol: the older spelling from now on
                continue
            except (nvml.NVMLError_NotSupported, nvml.NVMLError_NoPermission):
                break
            except nvml.NVMLError_NotFound:
                if not nothing_new_ok:
                    self._failed(gpu, key, "not found")
                return None
            except nvml.NVMLError_GpuIsLost:
                self._fault(gpu, key, "GPU is lost")
                self._stop(gpu, "gpu", STOP_GPU_LOST)
                raise _GpuLost from None
            except nvml.NVMLError as exc:
                self._failed(gpu, key, str(exc))
                return None
            self._answered.add((gpu.index, key))
            self._failed_reads.pop((gpu.index, key), None)
            return value
        self._not_supported(gpu, key)
        return None

    def _not_supported(self, gpu: _Gpu, key: str) -> None:
        """Unsupported from now on; a stop when it answered before (a driver may drop a counter mid-run)."""
        self._unsupported.add((gpu.index, key))
        if (gpu.index, key) in self._answered:
            self._stop(gpu, key, STOP_NOT_SUPPORTED)

    def _failed(self, gpu: _Gpu, key: str, what: str) -> None:
        """One failed read: a gap this tick, and a stop once ``MAX_FAILED_READS`` failed in a row."""
        self._fault(gpu, key, what)
        failures = self._failed_reads.get((gpu.index, key), 0) + 1
        self._failed_reads[(gpu.index, key)] = failures
        if failures >= MAX_FAILED_READS:
            self._stop(gpu, key, STOP_FAILING)

    def _stop(self, gpu: _Gpu, key: str, reason: int) -> None:
        self._stopped.add((gpu.index, key))
        self._stop_rows.append((self._now_ns, NVML, gpu.index, NO_PID, STOPPED_PREFIX + key, float(reason)))

    def _fault(self, gpu: _Gpu, key: str, what: str) -> None:
        self.errors += 1
        self.last_error = f"GPU {gpu.index}: {key}: {what}"

    def _probe_nvlink(self, gpu: _Gpu) -> tuple[int | None, int | None]:
        """Count the GPU's active NVLink links and read their version; mark NVLink unsupported on a GPU with no
        active link, so PCIe-only GPUs never get 0 B/s NVLink rows."""
        nvml = self._nvml
        state = getattr(nvml, "nvmlDeviceGetNvLinkState", None)
        if state is None:
            self._unsupported.add((gpu.index, "nvlink"))
            return None, None
        active, first = 0, None
        for link in range(int(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 0))):
            try:
                if state(gpu.handle, link) == nvml.NVML_FEATURE_ENABLED:
                    active += 1
                    first = link if first is None else first
            except nvml.NVMLError:
                break  # NotSupported on link 0 (no NVLink), InvalidArgument past the last link
        if not active:
            self._unsupported.add((gpu.index, "nvlink"))
            return 0, None
        version = getattr(nvml, "nvmlDeviceGetNvLinkVersion", None)
        try:
            return active, int(version(gpu.handle, first)) if version is not None else None
        except nvml.NVMLError:
            return active, None


def _handles(nvml: Any, count: int) -> tuple[list[_Gpu], str | None]:
    """A handle per GPU; one NVML will not open (lost, or not this container's) is left out and named."""
    gpus: list[_Gpu] = []
    problems: list[str] = []
    for index in range(count):
        try:
            gpus.append(_Gpu(index, nvml.nvmlDeviceGetHandleByIndex(index)))
        except nvml.NVMLError as exc:
            problems.append(f"GPU {index}: {exc}")
    return gpus, "; ".join(problems) or None


def _init_message(nvml: Any, exc: Exception) -> str:
    """One line saying why NVML is unusable and what gpuscope does instead."""
    if isinstance(exc, (nvml.NVMLError_LibraryNotFound, nvml.NVMLError_DriverNotLoaded)):
        return NO_DRIVER
    if isinstance(exc, nvml.NVMLError_NoPermission):
        return f"no permission to use the NVIDIA driver (check /dev/nvidia* access): {_FALLBACK}"
    return f"NVML failed to start ({exc}): {_FALLBACK}"
