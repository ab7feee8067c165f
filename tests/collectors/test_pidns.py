"""NVML's host pids read in gpuscope's own PID namespace: through a /proc of the host (NSpid), never by number alone."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from gpuscope.collectors.pidns import HOST_PROC_ENV, PidNamespace, nspids, start_ticks

ROOT = Path(__file__).resolve().parents[2]


def proc_entry(root: Path, pid: int, chain: list[int], start: int, comm: str = "python") -> None:
    folder = root / str(pid)
    folder.mkdir(parents=True)
    (folder / "status").write_text(f"Name:\t{comm}\nNSpid:\t" + "\t".join(map(str, chain)) + "\nVmRSS:\t1 kB\n")
    # /proc/PID/stat: pid (comm) state ... field 22 is the start time; a name with ") (" must not shift it.
    fields = ["S"] + ["0"] * 18 + [str(start)] + ["0"] * 10
    (folder / "stat").write_text(f"{pid} ({comm}) x) " + " ".join(fields) + "\n")


def test_a_host_pid_is_matched_by_its_nspid_chain_and_start_time(tmp_path: Path) -> None:
    host, here = tmp_path / "host", tmp_path / "here"
    proc_entry(host, 51234, [51234, 7], start=9001)  # our target, pid 7 in this namespace
    proc_entry(here, 7, [7], start=9001)
    proc_entry(host, 51300, [51300, 8], start=9100)  # a sibling container's pid 8: a namesake here
    proc_entry(here, 8, [8], start=4242)
    proc_entry(host, 1200, [1200], start=10)  # a process of the host itself
    view = PidNamespace(proc=here, host_proc=host, depth=1)
    assert [view.local(p) for p in (51234, 51300, 1200, 99999)] == [7, None, None, None]
    assert nspids(host / "51234" / "status") == [51234, 7] and start_ticks(host / "51234" / "stat") == 9001
    assert PidNamespace(proc=here).local(51234) == 51234, "in the host's namespace NVML's pid is ours"
    assert PidNamespace(proc=here, problem="x").local(51234) is None


def test_detect_in_a_container_with_and_without_the_hosts_proc(tmp_path: Path) -> None:
    here, host, flat = tmp_path / "here", tmp_path / "host", tmp_path / "flat"
    proc_entry(here, 7, [7], start=5)
    proc_entry(host, 51234, [51234, 7], start=5)
    (host / "self").symlink_to(host / "51234")  # /proc/self in the host's /proc: this process, two levels deep
    proc_entry(flat, 7, [7], start=5)
    (flat / "self").symlink_to(flat / "7")
    assert PidNamespace.detect(proc=here, on_host=True) == PidNamespace(proc=here)
    found = PidNamespace.detect(proc=here, env={HOST_PROC_ENV: str(host)}, on_host=False)
    assert (found.host_proc, found.depth, found.problem) == (host, 1, None)
    refused = PidNamespace.detect(proc=here, env={HOST_PROC_ENV: str(flat)}, on_host=False)
    assert refused.problem is not None and refused.problem.startswith(f"{HOST_PROC_ENV}={flat} is not the host's")
    blind = PidNamespace.detect(proc=here, env={}, on_host=False)
    assert blind.problem is not None and "docker --pid=host" in blind.problem and HOST_PROC_ENV in blind.problem


INNER = r'''
import json, subprocess, sys
import pytest
from gpuscope.collectors.nvml import NvmlSampler
from gpuscope.collectors.pidns import HOST_PROC_ENV
from tests.collectors.nvml_fake import FakeGpu, FakeNvml

target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
print(json.dumps({"target": target.pid}), flush=True)
host_target, neighbour = (int(x) for x in sys.stdin.readline().split())
out = {}
for label, host_proc in (("host_proc", sys.argv[1]), ("none", "")):
    mp = pytest.MonkeyPatch()
    mp.setenv(HOST_PROC_ENV, host_proc) if host_proc else mp.delenv(HOST_PROC_ENV, raising=False)
    FakeNvml([FakeGpu(processes=[(host_target, 3 * 2**30), (neighbour, 2**30)],
                      proc_sm_pct={host_target: [40], neighbour: [50]})], mp, host_pids=True)
    sampler = NvmlSampler.open(pids=lambda: {target.pid})
    rows = [list(r[2:]) for r in sampler.sample(1_800_000_000_000_000_000)
            if r[3] != -1 or r[4].startswith("gpu.other")]
    out[label] = {"rows": rows, "problem": sampler.pid_problem, "gpus": sorted(sampler.target_gpus())}
    mp.undo()
target.kill()
print(json.dumps(out), flush=True)
'''
NEST = 'mount --bind /proc "$0" && exec unshare --pid --fork --mount-proc -- "$1" -c "$2" "$0"'


def _namespaces_refused() -> str | None:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return "needs root and unshare(1) to make a PID namespace"
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                            'mount --bind /proc /mnt && exec unshare --pid --fork --mount-proc -- true'],
                           capture_output=True, text=True, timeout=30)
    return None if probe.returncode == 0 else f"this machine refuses PID namespaces: {probe.stderr.strip()}"


@pytest.mark.skipif(bool(_namespaces_refused()), reason=_namespaces_refused() or "")
def test_in_a_pid_namespace_nvml_pids_are_read_through_the_hosts_proc(tmp_path: Path) -> None:
    """gpuscope and its target in a PID namespace of their own (as in a container), the host's /proc bound in:
    NVML's host pid of the target becomes the target's pid there; without the host's /proc, no per-process row."""
    host_proc = tmp_path / "host-proc"
    host_proc.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    nest = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", NEST,
                             str(host_proc), sys.executable, INNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, cwd=ROOT, env=env)
    try:
        assert nest.stdin is not None and nest.stdout is not None
        inside = json.loads(nest.stdout.readline())["target"]
        # The host's view, from the process tree alone: unshare -> the namespace's first process -> the target.
        (first,) = psutil.Process(nest.pid).children()
        (target,) = first.children()
        assert target.pid != inside
        nest.stdin.write(f"{target.pid} {os.getpid()}\n")
        nest.stdin.flush()
        out = json.loads(nest.stdout.readline())
    finally:
        nest.kill()
        nest.wait(timeout=30)
    seen = out["host_proc"]
    assert seen["problem"] is None and seen["gpus"] == [0]
    by = {(pid, metric): value for _gpu, pid, metric, value in seen["rows"]}
    assert by == {(inside, "proc.gpu_memory_bytes"): 3 * 2**30, (inside, "proc.gpu_sm_util"): 0.4,
                  (inside, "proc.gpu_mem_util"): 0.0, (-1, "gpu.other_processes"): 1.0,
                  (-1, "gpu.others_sm_util"): 0.5}
    blind = out["none"]
    assert blind["rows"] == [] and blind["gpus"] == []
    assert blind["problem"] is not None and HOST_PROC_ENV in blind["problem"]
