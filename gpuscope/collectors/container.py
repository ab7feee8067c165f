"""The container, and the Kubernetes pod, a process runs in: from its cgroup path (``/proc/PID/cgroup``).

Each runtime leaves its mark in the path (cgroup v1 and v2, the cgroupfs and the systemd drivers):

- Docker: ``/docker/<id>``, or ``/system.slice/docker-<id>.scope``;
- containerd: ``/<namespace>/<id>`` (cgroupfs), ``cri-containerd-<id>.scope``, nerdctl's ``nerdctl-<id>.scope``;
- CRI-O: ``crio-<id>.scope``; Podman: ``libpod-<id>.scope`` (rootless: under ``user@UID.service``, sometimes with a
  ``/container`` leaf), ``/libpod_parent/libpod-<id>`` (cgroupfs); their ``*-conmon-*`` monitors are not containers;
- Kubernetes: ``/kubepods/<qos>/pod<uid>/<id>``, or
  ``kubepods-<qos>-pod<uid_with_underscores>.slice/<runtime>-<id>.scope``.

The path names the container by its id and the pod by its uid. The pod's name and namespace come from the
process's environment where Kubernetes puts them (``POD_NAME``/``POD_NAMESPACE`` from the downward API, else
``HOSTNAME``, which the kubelet sets to the pod's name) and from the pod's service-account namespace file. Every one
of these strings is the user's, not gpuscope's: views escape them. A process gpuscope cannot read, or one in the same
cgroup namespace as gpuscope (``0::/``), tells nothing: no tags.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import psutil

_ID = r"[0-9a-f]{64}"
_SCOPE = re.compile(rf"^(docker|cri-containerd|crio|libpod|nerdctl)-({_ID})\.scope$")
_BARE = re.compile(rf"^{_ID}$")
_POD = re.compile(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})(?:\.slice)?$")
_RUNTIMES = {"docker": "docker", "cri-containerd": "containerd", "crio": "cri-o", "libpod": "podman",
             "nerdctl": "containerd"}
_SERVICE_ACCOUNT_NAMESPACE = "var/run/secrets/kubernetes.io/serviceaccount/namespace"
MAX_LABEL = 253
"""Kubernetes names are at most 253 characters; anything longer in an environment is not one."""


@dataclass(frozen=True)
class Container:
    """Where a process runs; a field the cgroup path and environment do not tell is None."""

    id: str
    """The runtime's container id (64 hex digits)."""
    runtime: str | None = None
    """"docker", "containerd", "cri-o" or "podman"; None where the path does not say (Kubernetes with cgroupfs)."""
    pod_uid: str | None = None
    pod: str | None = None
    namespace: str | None = None

    def tags(self) -> dict[str, str]:
        """As a run's tags: ``container.id`` (12 digits, as ``docker ps`` shows it), ``container.runtime``,
        ``pod.uid``, ``pod.name``, ``pod.namespace``."""
        values = {"container.id": self.id[:12], "container.runtime": self.runtime, "pod.uid": self.pod_uid,
                  "pod.name": self.pod, "pod.namespace": self.namespace}
        return {k: v for k, v in values.items() if v}


def from_cgroup(text: str) -> Container | None:
    """The container a ``/proc/PID/cgroup`` text places its process in; None outside any (or when it cannot tell)."""
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            found = _from_path(parts[2])
            if found is not None:
                return found
    return None


def _from_path(path: str) -> Container | None:
    segments = [s for s in path.split("/") if s]
    pod_uid = next((m.group(1).replace("_", "-") for s in segments if (m := _POD.search(s))), None)
    for i in range(len(segments) - 1, -1, -1):
        segment = segments[i]
        scoped = _SCOPE.match(segment)
        if scoped is not None:
            return Container(id=scoped.group(2), runtime=_RUNTIMES[scoped.group(1)], pod_uid=pod_uid)
        if _BARE.match(segment):
            parent = segments[i - 1] if i > 0 else ""
            if pod_uid is not None:
                return Container(id=segment, pod_uid=pod_uid)  # kubelet's cgroupfs driver: the runtime is not named
            runtime = "docker" if parent == "docker" else "containerd"  # /<containerd namespace>/<id>
            return Container(id=segment, runtime=runtime)
        if segment.startswith("libpod-") and not segment.startswith("libpod-conmon-"):
            bare = segment.removeprefix("libpod-")
            if _BARE.match(bare):  # podman's cgroupfs layout: /libpod_parent/libpod-<id>
                return Container(id=bare, runtime="podman")
    return None


def container_of(pid: int, *, proc: Path = Path("/proc")) -> Container | None:
    """The container of process ``pid`` with its pod's name and namespace where they can be read."""
    try:
        found = from_cgroup((proc / str(pid) / "cgroup").read_text())
    except OSError:
        return None
    if found is None or found.pod_uid is None:
        return found
    env = _environ(pid)
    name = env.get("POD_NAME") or env.get("HOSTNAME")
    namespace = env.get("POD_NAMESPACE") or _read(proc / str(pid) / "root" / _SERVICE_ACCOUNT_NAMESPACE)
    return Container(id=found.id, runtime=found.runtime, pod_uid=found.pod_uid, pod=_label(name),
                     namespace=_label(namespace))


def _environ(pid: int) -> dict[str, str]:
    try:
        return dict(psutil.Process(pid).environ())
    except (psutil.Error, OSError):
        return {}


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _label(value: str | None) -> str | None:
    value = (value or "").strip()
    return value if value and len(value) <= MAX_LABEL and value.isprintable() else None
