"""Replayed dcgm-exporter endpoints: real HTTP servers on 127.0.0.1 serving a recorded scrape, relabelled per GPU.

The recorded scrape is DataDog's real Tesla T4 one (sample_traces/dcgm). Each GPU gets its own index, UUID,
host name and Kubernetes pod labels, and a utilisation that changes from one scrape to the next; every value
served is logged with its time, so tests check gpuscope against exactly what Prometheus scraped.
"""

from __future__ import annotations

import math
import re
import threading
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces" / "dcgm" / "third_party_samples"
SCRAPE = SAMPLES / "datadog_integrations-core_dcgm_tests_docker_serve_metrics.prom"
ISSUES = SAMPLES / "github_issue_excerpts.prom"
FIELDS = SAMPLES / "datadog_integrations-core_dcgm_tests_fixtures_metrics.prom"
PROF_FIELDS = frozenset(re.findall(r"^(DCGM_FI_PROF_\w+)", FIELDS.read_text(), flags=re.M))
"""The DCGM profiling fields the recorded fixture scrape carries: the names a GPU's ``prof`` may serve."""
MIG_SOURCE = "dcgm-exporter/issues/512"
"""The real H100 MIG scrape (GPU_I_PROFILE, GPU_I_ID, pci_bus_id, pod labels on some instances only)."""
_LINE = re.compile(r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)$")
_POD_LABELS = re.compile(r',(container|namespace|pod)="[^"]*"')


def issue_block(source: str) -> list[str]:
    """The sample lines of one ``# SOURCE`` block of the issue excerpts (they are not one scrape)."""
    blocks = ISSUES.read_text().split("# SOURCE ")
    (block,) = [b for b in blocks if source in b.splitlines()[0]]
    return [line for line in block.splitlines()[1:] if line.strip() and not line.startswith("#")]


@dataclass
class ReplayedGpu:
    """One GPU an endpoint serves: its labels, the utilisation (%) it cycles through, and when it is present."""

    index: int
    pod: str = ""
    namespace: str = ""
    util_pct: Sequence[float] = (0.0,)
    fb_used_mib: float = 1024.0
    present_from_s: float = -math.inf
    """Seconds into the test window when this GPU appears (a series that starts late)."""
    present_until_s: float = math.inf
    """Seconds into the test window when it vanishes."""
    served: list[tuple[float, float]] = field(default_factory=list)
    """(unix time s, utilisation %) of every scrape that included it."""
    energy_mj: float = 128996013.0
    """The energy counter (mJ since boot, as recorded), grown by each scrape's power over one second."""
    model: str | None = None
    """The modelName to serve instead of the recording's."""
    mig: tuple[str, int] | None = None
    """(GPU_I_PROFILE, GPU_I_ID): a MIG instance, served as the real H100 MIG scrape serves one (GR engine active
    with its profile and id; no DEV utilisation or framebuffer fields)."""
    pod_sm_pct: Sequence[float] | None = None
    """A per-pod SM utilisation (%) to serve as ``dcgm_fi_dev_sm_util_per_pod``, cycling like ``util_pct``."""
    served_pod_sm: list[tuple[float, float]] = field(default_factory=list)
    prof: dict[str, float] = field(default_factory=dict)
    """DCGM profiling fields (names from ``PROF_FIELDS``) served with this GPU's labels, each at a constant value."""

    def __post_init__(self) -> None:
        assert set(self.prof) <= PROF_FIELDS, set(self.prof) - PROF_FIELDS

    def uuid(self, host: str) -> str:
        return f"GPU-{zlib.crc32(f'{host}/{self.index}'.encode()):08x}-0da5-6d26-a36a-e7af1ce2586e"

    def power_w(self, util_pct: float) -> float:
        return 9 + 0.61 * util_pct  # a T4 idles near 9 W and tops out at 70 W


class Exporter:
    """A dcgm-exporter stand-in for one host, serving /metrics on a free loopback port."""

    def __init__(self, host: str, gpus: Sequence[ReplayedGpu]) -> None:
        self.host = host
        self.gpus = list(gpus)
        self.template = [line for line in SCRAPE.read_text().splitlines() if line.strip()]
        self.mig_template = issue_block(MIG_SOURCE)[0]
        self.window_start_s: float | None = None
        """Set by the test once it knows its window; until then a GPU is present unless it starts late."""
        self._lock = threading.Lock()
        self._scrapes = 0
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's spelling
                body = exporter.scrape().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # Prometheus stopped mid-scrape (the end of the tests)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def scrape(self) -> str:
        with self._lock:
            now = time.time()
            n = self._scrapes
            self._scrapes += 1
            into = -math.inf if self.window_start_s is None else now - self.window_start_s
            present = [g for g in self.gpus if g.present_from_s <= into < g.present_until_s]
            for gpu in present:
                util = gpu.util_pct[n % len(gpu.util_pct)]
                gpu.served.append((now, util))
                gpu.energy_mj += 1000 * gpu.power_w(util)
                if gpu.pod_sm_pct is not None:
                    gpu.served_pod_sm.append((now, gpu.pod_sm_pct[n % len(gpu.pod_sm_pct)]))
            whole = [g for g in present if g.mig is None]
            out = []
            for line in self.template:
                if line.startswith("#"):
                    out.append(line)
                    continue
                match = _LINE.match(line)
                if match is None:
                    continue
                out.extend(self._line(match, gpu) for gpu in whole)
            out.extend(self._mig_line(gpu) for gpu in present if gpu.mig is not None)
            out.extend(self._pod_sm_line(gpu) for gpu in present if gpu.pod_sm_pct is not None)
            out.extend(line for gpu in whole for line in self._prof_lines(gpu))
            return "\n".join(out) + "\n"

    def _mig_line(self, gpu: ReplayedGpu) -> str:
        """The real MIG line, relabelled: this GPU's index, UUID, host, profile, instance id and pod."""
        match = _LINE.match(self.mig_template)
        assert match is not None and gpu.mig is not None
        labels = _POD_LABELS.sub("", match["labels"])
        labels = re.sub(r'gpu="\d+"', f'gpu="{gpu.index}"', labels)
        labels = re.sub(r'UUID="[^"]*"', f'UUID="{gpu.uuid(self.host)}"', labels)
        labels = re.sub(r'device="nvidia\d+"', f'device="nvidia{gpu.index}"', labels)
        labels = re.sub(r'Hostname="[^"]*"', f'Hostname="{self.host}"', labels)
        labels = re.sub(r'GPU_I_PROFILE="[^"]*"', f'GPU_I_PROFILE="{gpu.mig[0]}"', labels)
        labels = re.sub(r'GPU_I_ID="\d+"', f'GPU_I_ID="{gpu.mig[1]}"', labels)
        if gpu.pod:
            labels += f',container="main",namespace="{gpu.namespace}",pod="{gpu.pod}"'
        return f"{match['name']}{{{labels}}} {gpu.served[-1][1] / 100:.6f}"

    def _pod_sm_line(self, gpu: ReplayedGpu) -> str:
        """A per-pod SM share as the per-pod collector proposed for dcgm-exporter writes it (no host label)."""
        return (f'dcgm_fi_dev_sm_util_per_pod{{gpu="{gpu.index}",uuid="{gpu.uuid(self.host)}",pod="{gpu.pod}",'
                f'namespace="{gpu.namespace}",container="main"}} {gpu.served_pod_sm[-1][1]:g}')

    def _prof_lines(self, gpu: ReplayedGpu) -> list[str]:
        """The GPU's profiling fields, in the labels its own utilisation line is served with."""
        util = next(m for m in map(_LINE.match, self.template) if m is not None and m["name"] == "DCGM_FI_DEV_GPU_UTIL")
        line = self._line(util, gpu)
        labels = line[line.index("{"):line.rindex("}") + 1]
        return [f"{name}{labels} {value:g}" for name, value in gpu.prof.items()]

    def _line(self, match: re.Match[str], gpu: ReplayedGpu) -> str:
        name, labels, value = match["name"], match["labels"], match["value"]
        labels = re.sub(r'gpu="\d+"', f'gpu="{gpu.index}"', labels)
        labels = re.sub(r'UUID="[^"]*"', f'UUID="{gpu.uuid(self.host)}"', labels)
        labels = re.sub(r'device="nvidia\d+"', f'device="nvidia{gpu.index}"', labels)
        labels = re.sub(r'Hostname="[^"]*"', f'Hostname="{self.host}"', labels)
        if gpu.model is not None:
            labels = re.sub(r'modelName="[^"]*"', f'modelName="{gpu.model}"', labels)
        labels += f',container="{"main" if gpu.pod else ""}",namespace="{gpu.namespace}",pod="{gpu.pod}"'
        util = gpu.served[-1][1]
        if name == "DCGM_FI_DEV_GPU_UTIL":
            value = f"{util:g}"
        elif name == "DCGM_FI_DEV_POWER_USAGE":
            value = f"{gpu.power_w(util):.3f}"
        elif name == "DCGM_FI_DEV_FB_USED":
            value = f"{gpu.fb_used_mib:g}"
        elif name == "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION":
            value = f"{gpu.energy_mj:.0f}"
        return f"{name}{{{labels}}} {value}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
