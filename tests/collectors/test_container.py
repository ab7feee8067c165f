"""The container and pod a target runs in, from its cgroup path: each runtime's layout, and a real cgroup."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuscope.cli.main import app
from gpuscope.collectors.container import Container, container_of, from_cgroup
from tests.cli.live_targets import SPIN

CID = "3f2a1b4c5d6e" + "7" * 52
UID = "7f5c1b7e-3a4e-4b1f-9c1a-2b3c4d5e6f70"
SLICE_UID = UID.replace("-", "_")


@pytest.mark.parametrize(("cgroup", "expected"), [
    (f"12:pids:/docker/{CID}\n0::/", Container(id=CID, runtime="docker")),
    (f"0::/system.slice/docker-{CID}.scope", Container(id=CID, runtime="docker")),
    (f"0::/default/{CID}", Container(id=CID, runtime="containerd")),
    (f"0::/system.slice/nerdctl-{CID}.scope", Container(id=CID, runtime="containerd")),
    (f"0::/machine.slice/libpod-{CID}.scope/container", Container(id=CID, runtime="podman")),
    (f"0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{CID}.scope",
     Container(id=CID, runtime="podman")),
    (f"4:memory:/libpod_parent/libpod-{CID}", Container(id=CID, runtime="podman")),
    (f"11:memory:/kubepods/burstable/pod{UID}/{CID}", Container(id=CID, pod_uid=UID)),
    (f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{SLICE_UID}.slice/cri-containerd-{CID}.scope",
     Container(id=CID, runtime="containerd", pod_uid=UID)),
    (f"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{SLICE_UID}.slice/crio-{CID}.scope",
     Container(id=CID, runtime="cri-o", pod_uid=UID)),
    (f"0::/machine.slice/libpod-conmon-{CID}.scope", None),  # podman's monitor, not the container
    ("0::/user.slice/user-0.slice/session-3.scope", None),
    ("0::/", None),  # a cgroup namespace: gpuscope runs in the target's container and sees nothing above it
    ("", None),
])
def test_each_runtime_layout(cgroup: str, expected: Container | None) -> None:
    assert from_cgroup(cgroup) == expected


def test_tags_name_the_pod_and_a_short_id() -> None:
    found = Container(id=CID, runtime="containerd", pod_uid=UID, pod="train-llama-0", namespace="ml")
    assert found.tags() == {"container.id": "3f2a1b4c5d6e", "container.runtime": "containerd", "pod.uid": UID,
                            "pod.name": "train-llama-0", "pod.namespace": "ml"}
    assert Container(id=CID).tags() == {"container.id": "3f2a1b4c5d6e"}


def test_the_pod_namespace_from_the_service_account_file(tmp_path: Path) -> None:
    pid = 2**22 + 17  # no such process here: the environment cannot be read, the files can
    folder = tmp_path / str(pid)
    secret = folder / "root" / "var/run/secrets/kubernetes.io/serviceaccount"
    secret.mkdir(parents=True)
    (folder / "cgroup").write_text(f"11:memory:/kubepods/pod{UID}/{CID}\n")
    (secret / "namespace").write_text("inference")
    assert container_of(pid, proc=tmp_path) == Container(id=CID, pod_uid=UID, namespace="inference")
    assert container_of(pid + 1, proc=tmp_path) is None


PIDS_ROOT = Path("/sys/fs/cgroup/pids")


@pytest.fixture
def kubepods_cgroup() -> Iterator[Path]:
    """A real cgroup (v1 pids hierarchy) laid out as the kubelet's systemd driver and containerd lay out a pod's."""
    if os.geteuid() != 0 or not PIDS_ROOT.is_dir():
        pytest.skip("needs root and the cgroup v1 pids hierarchy at /sys/fs/cgroup/pids")
    top = PIDS_ROOT / f"gpuscope-test-{uuid.uuid4().hex[:8]}.slice"
    leaf = top / f"kubepods-burstable-pod{SLICE_UID}.slice" / f"cri-containerd-{CID}.scope"
    try:
        leaf.mkdir(parents=True)
    except OSError as exc:
        pytest.skip(f"cannot make a cgroup here: {exc}")
    try:
        yield leaf
    finally:
        for folder in (leaf, leaf.parent, top):
            try:
                folder.rmdir()
            except OSError:
                pass


def test_attach_names_the_pod_and_container_of_a_process_in_a_real_cgroup(
        kubepods_cgroup: Path, gpuscope_home: Path) -> None:
    env = {**os.environ, "HOSTNAME": "train-llama-0", "POD_NAMESPACE": "ml"}  # as the kubelet sets them
    target = subprocess.Popen([sys.executable, str(SPIN), "30"], stdout=subprocess.DEVNULL, env=env)
    try:
        (kubepods_cgroup / "cgroup.procs").write_text(str(target.pid))
        result = CliRunner().invoke(app, ["attach", str(target.pid), "--duration", "0.5", "--interval", "0.1",
                                          "--no-stacks", "--json"])
        shown = CliRunner().invoke(app, ["show", json.loads(result.stdout)["run"]["id"]])
    finally:
        target.kill()
        target.wait()
    assert result.exit_code == 0, result.output
    tags = json.loads(result.stdout)["run"]["tags"]
    assert tags == {"container.id": CID[:12], "container.runtime": "containerd", "pod.uid": UID,
                    "pod.name": "train-llama-0", "pod.namespace": "ml"}
    text = " ".join(shown.stdout.split())  # as printed, whatever the terminal's width wrapped
    assert f"pod ml/train-llama-0 (uid {UID}) · containerd container {CID[:12]}" in text
