"""Prefill and decode told apart in real serving traces (SGLang's step ranges, vLLM's execute ranges), each phase's
share, steps, step time and GPU busy checked against the same figures taken straight from the trace's JSON
(tests/reference.py's way, nothing of gpuscope's reader); and the fallback on attention kernels, in traces built in
code where the answer is known by construction."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from gpuscope.api.analysis import analyze_path
from gpuscope.model.report import Report
from tests.builders import cpu_op, kernel, launch, step, trace, write
from tests.reference import GPU_CATEGORIES, events, union_us

SERVING = Path(__file__).resolve().parents[2] / "sample_traces" / "serving"
SGLANG = SERVING / "sglang_qwen3_8b_extend_decode.json.gz"
VLLM_MIXED = SERVING / "vllm_mixed_piecewise_graphs.json.gz"


def analysed(path: Path, **kwargs: Any) -> Report:
    report, _ = analyze_path(path, save=False, jobs=1, **kwargs)
    return report


def reference_steps(path: Path, pattern: str) -> list[tuple[str, float, float, float]]:
    """(range name, start, end, GPU busy µs) of each step range matching ``pattern`` (innermost where nested): from
    its start (or the previous step's end) to the end of the GPU work launched from inside it."""
    evs = events(path)
    ranges = sorted((e for e in evs if e.get("cat") == "user_annotation" and re.match(pattern, e["name"])),
                    key=lambda e: e["ts"])
    ranges = [r for r in ranges if not any(o is not r and o["ts"] >= r["ts"]
                                           and o["ts"] + o["dur"] <= r["ts"] + r["dur"] for o in ranges)]
    runtime = {e["args"]["correlation"]: e for e in evs
               if e.get("cat") == "cuda_runtime" and "correlation" in e["args"]}
    gpu = [e for e in evs if e.get("cat") in GPU_CATEGORIES]
    out, previous_end = [], float("-inf")
    for r in ranges:
        launched = [g for g in gpu if (rt := runtime.get(g["args"].get("correlation"))) is not None
                    and r["ts"] <= rt["ts"] <= r["ts"] + r["dur"]]
        start = max(r["ts"], previous_end)
        end = max([r["ts"] + r["dur"]] + [g["ts"] + g["dur"] for g in launched])
        busy = union_us([(max(g["ts"], start), min(g["ts"] + g["dur"], end)) for g in gpu
                         if g["ts"] < end and g["ts"] + g["dur"] > start])
        out.append((r["name"], start, end, busy))
        previous_end = end
    return out


def test_a_real_sglang_trace_that_prefills_and_decodes_has_both_phases_with_their_shares() -> None:
    serving = analysed(SGLANG).serving
    assert serving is not None and serving.phase_source == "engine_ranges"
    (extend, e0, e1, e_busy), (decode, d0, d1, d_busy) = reference_steps(SGLANG, r"step\[")
    assert extend.startswith("step[EXTEND bs=15 toks=15360") and decode.startswith("step[DECODE bs=32")
    prefill, dec = serving.phases["prefill"], serving.phases["decode"]
    total = (e1 - e0) + (d1 - d0)
    assert prefill.share == pytest.approx((e1 - e0) / total) and dec.share == pytest.approx((d1 - d0) / total)
    assert prefill.share + dec.share == pytest.approx(1.0)
    assert (prefill.steps, dec.steps) == (1, 1)
    assert prefill.step_time_us == pytest.approx(e1 - e0, rel=1e-6) and dec.step_time_us == pytest.approx(d1 - d0,
                                                                                                          rel=1e-6)
    assert prefill.gpu_busy == pytest.approx(e_busy / (e1 - e0), rel=1e-4)
    assert dec.gpu_busy == pytest.approx(d_busy / (d1 - d0), rel=1e-4)
    assert (prefill.tokens_per_step, dec.tokens_per_step) == (15360, 32)
    assert set(serving.phases) == {"prefill", "decode"}


def test_a_vllm_step_with_prompts_and_generation_is_mixed() -> None:
    serving = analysed(VLLM_MIXED).serving
    assert serving is not None
    ((name, start, end, busy),) = reference_steps(VLLM_MIXED, r"execute_")
    # execute_8192_context_9(sq8155...)_generation_37(sq37...): 9 requests reading prompts beside 37 generating
    assert "_context_9(" in name and "_generation_37(" in name
    (only,) = serving.phases.items()
    assert only[0] == "mixed" and only[1].share == 1.0 and only[1].tokens_per_step == 8155 + 37
    assert only[1].step_time_us == pytest.approx(end - start, rel=1e-6)
    assert only[1].gpu_busy == pytest.approx(busy / (end - start), rel=1e-4)


def _step_events(n: int, t0: float, kernels: list[str], corr0: int) -> list[dict[str, Any]]:
    out = [step(n, t0, 1000), cpu_op("aten::linear", t0 + 10, 900)]
    for i, name in enumerate(kernels):
        out += [launch(t0 + 20 + 10 * i, 5, corr0 + i), kernel(name, t0 + 100 + 200 * i, 150, corr0 + i)]
    return out


def test_without_engine_ranges_steps_are_told_apart_by_their_attention_kernels(tmp_path: Path) -> None:
    prefill = ["flash_fwd_kernel<bf16>", "reshape_and_cache_flash_kernel", "ampere_bf16_gemm"]
    decode = ["paged_attention_v2_kernel<bf16>", "ampere_bf16_gemm"]
    both = ["flash_fwd_kernel<bf16>", "reshape_and_cache_flash_kernel", "paged_attention_v2_kernel<bf16>"]
    events_ = (_step_events(1, 0, prefill, 100) + _step_events(2, 2000, decode, 200)
               + _step_events(3, 4000, decode, 300) + _step_events(4, 6000, both, 400))
    serving = analysed(write(tmp_path / "served.json", trace(events_))).serving
    assert serving is not None and serving.phase_source == "attention_kernels"
    assert {k: p.steps for k, p in serving.phases.items()} == {"prefill": 1, "decode": 2, "mixed": 1}


def test_an_encoder_without_a_kv_cache_has_no_serving_phases(tmp_path: Path) -> None:
    events_ = _step_events(1, 0, ["flash_fwd_kernel<bf16>", "ampere_bf16_gemm"], 100) \
        + _step_events(2, 2000, ["flash_fwd_kernel<bf16>", "ampere_bf16_gemm"], 200)
    report = analysed(write(tmp_path / "encoder.json", trace(events_)))
    assert report.serving is None, "attention alone is any transformer's forward, not a prefill"


def _decode_steps(graphs: bool) -> list[dict[str, Any]]:
    """Ten SGLang decode steps of 40 kernels of 5 µs each: launched one by one every 20 µs (the GPU waits on the
    launches: busy a quarter of each step), or replayed from one graph launch whose kernels run back to back."""
    out: list[dict[str, Any]] = [cpu_op("sglang::scheduler.run_batch", 0, 10 * 1000)]
    for s in range(10):
        t0 = s * 1000.0
        out.append(cpu_op("step[DECODE bs=4]", t0, 850, cat="user_annotation"))
        if graphs:
            corr = 10_000 + s
            out.append(launch(t0 + 5, 10, corr, name="cudaGraphLaunch"))
            out += [kernel(f"decode_kernel_{k}", t0 + 20 + 5 * k, 5, corr) for k in range(40)]
            continue
        for k in range(40):
            corr = 10_000 + 100 * s + k
            out += [launch(t0 + 20 * k, 15, corr), kernel(f"decode_kernel_{k}", t0 + 20 * k + 16, 5, corr)]
    return out


def test_launch_bound_decode_steps_without_graphs_are_told_to_use_cuda_graphs(tmp_path: Path) -> None:
    report = analysed(write(tmp_path / "eager.json", trace(_decode_steps(graphs=False))))
    assert report.serving is not None
    decode = report.serving.phases["decode"]
    # each step is its 850 µs range (its last kernel ends at 39 x 20 + 16 + 5 = 801 µs, inside it)
    assert decode.steps == 10 and decode.gpu_busy == pytest.approx(40 * 5 / 850, rel=1e-6)
    assert decode.bottleneck == "host"
    (rec,) = [r for r in report.recommendations if r.code == "decode_cuda_graphs"]
    assert "serving.phases.decode.gpu_busy" in rec.detail and "--disable-cuda-graph" in rec.detail
    assert "cuda_graphs" not in {r.code for r in report.recommendations}, "the decode advice says it once"
    replayed = analysed(write(tmp_path / "graphs.json", trace(_decode_steps(graphs=True))))
    assert "decode_cuda_graphs" not in {r.code for r in replayed.recommendations}
    assert replayed.serving is not None and replayed.serving.graphs[0].replays == 10
