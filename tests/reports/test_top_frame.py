"""`gpuscope top`'s frame drawn from a snapshot built here: n/a for what the driver did not give, the container
or pod beside the command, names as text."""

from __future__ import annotations

from rich.console import Console

from gpuscope.analyzers.node_cost import accumulate
from gpuscope.model.node import GpuNow, NodeSnapshot, ProcessNow
from gpuscope.reports.top import frame


def draw(snapshot: NodeSnapshot) -> str:
    console = Console(width=200, record=True, force_terminal=False)
    cost = accumulate(accumulate(None, snapshot), snapshot)
    console.print(frame(snapshot, cost))
    return console.export_text()


def test_unknowns_are_na_and_the_pod_is_named() -> None:
    proc = ProcessNow(gpu=0, pid=42, user="[bold]mallory[/bold]", command=("python", "train.py", "--data", "s3://key:secret@bucket/x"),
                      container={"pod.name": "train-0", "pod.namespace": "ml", "container.id": "3f2a1b4c5d6e",
                                 "container.runtime": "containerd"})
    snapshot = NodeSnapshot(ts_ns=10**18, host="gpu-node-7", gpus=(GpuNow(index=0, name=None),), processes=(proc,))
    text = draw(snapshot)
    assert "unknown GPU" in text and text.count("n/a") >= 6  # util, memory, power, price, cost, SM, memory
    assert "pod ml/train-0 · containerd container 3f2a1b4c5d6e" in text
    assert "[bold]mallory[/bold]" in text  # markup from a user name is shown, not applied
    assert "s3://***@bucket/x" in text and "secret" not in text


def test_no_processes_says_so() -> None:
    snapshot = NodeSnapshot(ts_ns=10**18, host="h", gpus=(GpuNow(index=0, name="NVIDIA L4", usd_per_hour=0.8),),
                            processes=(), problem="per-process GPU memory and SM shares are n/a")
    text = draw(snapshot)
    assert "No GPU processes running." in text and "$0.80" in text and "SM shares are n/a" in text
