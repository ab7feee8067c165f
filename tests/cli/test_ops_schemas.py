"""`gpuscope ops` on traces of other eras and shapes: the 2021 Kineto schema (capitalised categories, runtime calls
naming their op by a lower-case "external id"), and a trace of GPU work and runtime calls alone (no host op);
checked against what the raw JSON says, joined here by hand. Warnings about dropped events are the same lines
`gpuscope analyze` prints."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from tests import builders as b
from tests.cli.helpers import gpuscope
from tests.conftest import SAMPLES
from tests.reference import GPU_CATEGORIES, events

OLD_SCHEMA = next((SAMPLES / "resnet50_old_schema").glob("*.json.gz"))
GPU_ONLY = SAMPLES / "dev" / "mi210_gpu_only.json.gz"


def gpu_self_by_operator(path: Path) -> tuple[dict[str, float], float]:
    """Per operator name, the GPU work its own runtime calls launched (kernel -> runtime call by correlation ->
    operator by the call's external id), and the GPU work no operator launched."""
    evs = events(path)
    ops = {e["args"]["External id"]: e["name"] for e in evs if e.get("cat") == "Operator"}
    calls = {e["args"]["correlation"]: e for e in evs if e.get("cat") == "Runtime"}
    mine: dict[str, float] = defaultdict(float)
    none = 0.0
    for gpu in (e for e in evs if e.get("cat") in GPU_CATEGORIES):
        call = calls.get(gpu["args"].get("correlation"))
        name = ops.get(call["args"].get("external id")) if call is not None else None
        if name is None:
            none += gpu["dur"]
        else:
            mine[name] += gpu["dur"]
    return dict(mine), none


def test_ops_reads_the_old_schema_and_joins_its_kernels_to_their_operators(tmp_path: Path) -> None:
    result = gpuscope("ops", str(OLD_SCHEMA.parent), "--json", home=tmp_path)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    (rank,) = json.loads(result.stdout)["ranks"]
    expected, outside = gpu_self_by_operator(OLD_SCHEMA)
    got = {o["name"]: o["gpu_self_us"] for o in rank["ops"] if o["gpu_self_us"]}
    assert got == expected and len(got) > 10
    assert rank["no_operator_gpu_us"] == outside
    assert rank["gpu_us"] == sum(e["dur"] for e in events(OLD_SCHEMA) if e.get("cat") in GPU_CATEGORIES)
    assert gpuscope("timeline", str(OLD_SCHEMA.parent), "-o", str(tmp_path / "steps"), home=tmp_path).returncode == 0


def test_ops_of_gpu_work_alone_is_a_table_without_operators(tmp_path: Path) -> None:
    result = gpuscope("ops", str(GPU_ONLY), "--json", home=tmp_path)
    assert result.returncode == 0, result.stderr
    (rank,) = json.loads(result.stdout)["ranks"]
    gpu_us = sum(e["dur"] for e in events(GPU_ONLY) if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
    assert rank["ops"] == [] and gpu_us > 0
    assert rank["gpu_us"] == rank["no_operator_gpu_us"] == pytest.approx(gpu_us, abs=1e-6)  # fractional µs


def test_ops_and_timeline_warn_about_dropped_events_as_analyze_does(tmp_path: Path) -> None:
    trace = b.trace([b.step(1, 0, 1000), b.cpu_op("aten::mm", 10, 300), b.launch(20, 10, 7),
                     b.kernel("gemm", 100, 150, 7), b.step(2, 1000, 1000), b.cpu_op("aten::mm", 1010, 300)])
    trace["traceEvents"][2]["dur"] = -5  # out of range: the launch is dropped
    trace["traceEvents"][3]["args"]["stream"] = "seven"  # a string no number can be read from
    path = b.write(tmp_path / "t.json", trace)
    said = gpuscope("analyze", str(path), "--no-save", home=tmp_path).stderr.splitlines()
    assert len(said) == 1 and said[0].startswith(f"gpuscope: warning: {path}: ") and "`dur` in 1" in said[0]
    assert gpuscope("ops", str(path), home=tmp_path).stderr.splitlines() == said
    steps = gpuscope("timeline", str(path), "-o", str(tmp_path / "steps"), home=tmp_path).stderr.splitlines()
    assert steps[0] == said[0]
    assert gpuscope("analyze", str(path), home=tmp_path).returncode == 0
    run_id = json.loads(gpuscope("runs", "--json", home=tmp_path).stdout)[0]["id"]
    assert gpuscope("ops", run_id, home=tmp_path).stderr.splitlines() == said  # the saved run says it again
