"""CUDA/HIP graph replays in real vLLM and SGLang traces: their GPU time is their kernels' (checked against the
kernels the trace gives the launch's correlation id), never idle; where the profiler lost the replayed kernels (the
same real traces with those kernels taken out, as some profiler set-ups record them) the replay is one graph whose
estimated time stays GPU time and comes close to what the lost kernels held; a capture trace gives the replays' GPU
time to the operators that captured their kernels."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from gpuscope.api.analysis import analyze_path
from gpuscope.model.report import Report
from tests.reference import GPU_CATEGORIES, events, union_us

ROOT = Path(__file__).resolve().parents[2] / "sample_traces"
VLLM = ROOT / "serving" / "vllm_decode_graph_replay.json.gz"
SGLANG = ROOT / "serving" / "sglang_qwen3_8b_extend_decode.json.gz"
SGLANG_CAPTURE = ROOT / "dev" / "sglang_decode_cudagraph_bs32.json.gz"
VLLM_CAPTURE = ROOT / "dev" / "vllm_decode_graph_capture.json.gz"


def analysed(path: Path, **kwargs: Any) -> Report:
    report, _ = analyze_path(path, save=False, jobs=1, **kwargs)
    return report


def graph_kernels(path: Path) -> list[dict[str, Any]]:
    """The GPU events sharing a graph launch's correlation id: the replayed kernels."""
    evs = events(path)
    launches = {e["args"]["correlation"] for e in evs if e.get("cat") == "cuda_runtime" and "GraphLaunch" in e["name"]}
    return [e for e in evs if e.get("cat") in GPU_CATEGORIES and e["args"].get("correlation") in launches]


def without_graph_kernels(path: Path, out: Path) -> Path:
    """The same trace, its replayed kernels taken out (a profiler that recorded the launch alone)."""
    doc = json.loads(gzip.decompress(path.read_bytes()))
    drop = {(e["ts"], e["name"]) for e in graph_kernels(path)}
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not (e.get("cat") in GPU_CATEGORIES and e.get("ph") == "X"
                                                               and (e.get("ts"), e.get("name")) in drop)]
    out.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return out


@pytest.mark.parametrize("path, kernels", [(VLLM, 421), (SGLANG, 544)])
def test_a_replays_gpu_time_is_its_kernels(path: Path, kernels: int) -> None:
    report = analysed(path)
    assert report.serving is not None
    (graph,) = report.serving.graphs
    replayed = graph_kernels(path)
    assert graph.recorded and graph.replays == 1 and graph.kernels_per_replay == len(replayed) == kernels
    assert graph.gpu_time_us == pytest.approx(union_us([(e["ts"], e["ts"] + e["dur"]) for e in replayed]), rel=1e-6)
    by_name = Counter(e["name"] for e in replayed)
    assert {k.name: k.calls for k in graph.kernels} == dict(by_name)


@pytest.mark.parametrize("path", [VLLM, SGLANG])
def test_a_replay_whose_kernels_were_not_recorded_is_gpu_time_not_idle(path: Path, tmp_path: Path) -> None:
    whole = analysed(path)
    lost = analysed(without_graph_kernels(path, tmp_path / path.name))
    assert lost.serving is not None
    (graph,) = lost.serving.graphs
    replayed = graph_kernels(path)
    truth_us = union_us([(e["ts"], e["ts"] + e["dur"]) for e in replayed])
    assert not graph.recorded and graph.replays == 1 and graph.kernels_per_replay is None
    assert graph.gpu_time_us is not None and graph.gpu_time_us == pytest.approx(truth_us, rel=0.05)
    (a,), (b,) = whole.ranks, lost.ranks
    assert b.gpu_busy == pytest.approx(a.gpu_busy, rel=0.05), "the graph's time is GPU time, not idle"
    assert b.step_breakdown_us.kernel == pytest.approx(a.step_breakdown_us.kernel, rel=0.05)
    assert b.temporal is not None and a.temporal is not None
    assert b.temporal.idle_us == pytest.approx(a.temporal.idle_us, rel=0.05, abs=300)


def capture_operators(capture: Path) -> dict[str, Counter[str]]:
    """Kernel name -> the innermost operator around each of its launches between Begin and EndCapture (a plain scan
    of the capture trace's JSON)."""
    evs = events(capture)
    begin = next(e["ts"] for e in evs if "BeginCapture" in e["name"])
    end = next(e["ts"] for e in evs if "EndCapture" in e["name"])
    ops = [e for e in evs if e.get("cat") == "cpu_op"]
    out: dict[str, Counter[str]] = {}
    for e in evs:
        if e.get("cat") == "cuda_runtime" and begin <= e["ts"] <= end and e.get("args", {}).get("kernel"):
            around = [o for o in ops if o["tid"] == e["tid"] and o["ts"] <= e["ts"] <= o["ts"] + o["dur"]]
            inner = max(around, key=lambda o: o["ts"])["name"] if around else "(no operator)"
            out.setdefault(e["args"]["kernel"], Counter())[inner] += 1
    return out


@pytest.mark.parametrize("path, capture, name", [(SGLANG, SGLANG_CAPTURE, "capture_32_DECODE"),
                                                 (VLLM, VLLM_CAPTURE, "capture_32_FULL")])
def test_a_capture_trace_gives_the_replays_gpu_time_to_its_operators(path: Path, capture: Path, name: str) -> None:
    report = analysed(path, capture_traces=[capture])
    assert report.serving is not None
    (graph,) = report.serving.graphs
    assert graph.name.endswith(f"({name})")
    owners = capture_operators(capture)
    expected: dict[str, float] = {}
    for e in graph_kernels(path):
        launched = owners[e["name"]]
        for op, n in launched.items():
            expected[op] = expected.get(op, 0.0) + e["dur"] * n / sum(launched.values())
    got = {o.name: o.total_us for o in graph.operators}
    assert got.keys() == expected.keys()
    for op, us in expected.items():
        assert got[op] == pytest.approx(us, rel=1e-6), op
    assert graph.operators[0].name == max(expected, key=lambda op: expected[op])
    if path == SGLANG:  # docs/serving.md's figures
        share = {op: us / sum(expected.values()) for op, us in expected.items()}
        assert (round(share["aten::mm"], 2), round(share["sglang_profiler::attention_paged_attention_ragged_100"], 2)) \
            == (0.60, 0.22)


def test_with_its_capture_an_unrecorded_replay_names_the_kernels_and_operators_it_ran(tmp_path: Path) -> None:
    report = analysed(without_graph_kernels(VLLM, tmp_path / "lost.json.gz"), capture_traces=[VLLM_CAPTURE])
    assert report.serving is not None
    (graph,) = report.serving.graphs
    owners = capture_operators(VLLM_CAPTURE)
    assert not graph.recorded and graph.name.endswith("(capture_32_FULL)")
    assert graph.kernels_per_replay == sum(sum(c.values()) for c in owners.values()) == 421
    assert {k.name: k.calls for k in graph.kernels} == {k: sum(c.values()) for k, c in owners.items()}
    by_operator: Counter[str] = Counter()
    for launched in owners.values():
        by_operator.update(launched)
    assert {o.name: o.calls for o in graph.operators} == dict(by_operator)
    assert all(o.total_us is None for o in graph.operators), "their time is the graph's, not known per operator"


def test_a_capture_trace_that_cannot_be_read_is_one_error(tmp_path: Path) -> None:
    from gpuscope.api.errors import GpuscopeError

    with pytest.raises(GpuscopeError, match="holds no CUDA/HIP graph capture"):
        analysed(VLLM, capture_traces=[ROOT / "serving" / "vllm_mixed_piecewise_graphs.json.gz"])


def test_a_capture_trace_by_url_is_read_within_the_commands_timeout(tmp_path: Path) -> None:
    """A capture trace served over HTTP is read like a trace URL: its graph is named from it, and a server that
    never answers ends the command in one line naming the --timeout, never a hang or a traceback."""
    from tests import hostile as H
    from tests.cli.helpers import gpuscope, one_clean_error_line

    server = H.Hostile()
    try:
        server.behave = lambda request: H.answer(200, VLLM_CAPTURE.read_bytes())
        good = gpuscope("analyze", str(VLLM), "--json", "--capture-trace", f"{server.url}/c.json.gz?token=tok-5e1f",
                        home=tmp_path / "home")
        assert good.returncode == 0, good.stderr
        (graph,) = json.loads(good.stdout)["serving"]["graphs"]
        assert graph["name"].endswith("(capture_32_FULL)")
        server.behave = lambda request: H.hang
        hung = gpuscope("analyze", str(VLLM), "--capture-trace", f"{server.url}/c.json.gz?token=tok-5e1f",
                        "--timeout", "2", home=tmp_path / "home")
    finally:
        server.close()
    assert hung.returncode == 2
    line = one_clean_error_line(hung)
    assert "within 2 s" in line and "(--timeout)" in line and "tok-5e1f" not in line
