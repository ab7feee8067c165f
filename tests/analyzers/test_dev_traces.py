"""The diagnosis on real traces from other projects (sample_traces/dev): each reads, and each verdict holds.

What each case asserts is what the trace itself shows (its runtime calls, kernel names, optimizer), not a
label gpuscope wrote: a CUDA-graph capture is start-up, bf16 tensor-core GEMMs need no AMP advice, Shampoo
has no fused version, a graph-launched job needs no CUDA-graph advice.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

from gpuscope.analyzers.report import build_report
from gpuscope.api.analysis import trace_run_meta
from gpuscope.model.report import Report
from gpuscope.model.run import Run
from gpuscope.traces import load
from tests import reference
from tests.cli.helpers import gpuscope, one_clean_error_line
from tests.conftest import SAMPLES

DEV = SAMPLES / "dev"
FILES = sorted(p.name for p in DEV.glob("*.json.gz"))
PRECISION_ADVICE = {"amp", "tf32"}


@cache
def report(name: str) -> Report:
    loaded = load(DEV / name)
    return build_report(Run(meta=trace_run_meta(loaded.traces, name=name), traces=loaded.traces),
                        warnings=loaded.warnings)


def codes(r: Report) -> set[str]:
    return {x.code for x in r.recommendations} | {f.code for f in r.findings}


def test_every_dev_trace_analyses_from_the_command_line(tmp_path: Path) -> None:
    for name in FILES:
        result = gpuscope("analyze", str(DEV / name), "--json", "--no-save", home=tmp_path)
        assert result.returncode == 0, (name, result.stderr)
        assert "Traceback" not in result.stderr
        assert json.loads(result.stdout)["schema"] == "gpuscope.report/1"


@pytest.mark.parametrize("name", ["sglang_decode_cudagraph_bs32.json.gz", "vllm_decode_graph_capture.json.gz"])
def test_a_cuda_graph_capture_is_start_up_not_a_host_bound_job(name: str) -> None:
    r = report(name)
    assert r.verdict.primary is None and r.verdict.resource == "unknown"
    # Both ran on an MI300X (ROCm): the capture is told in HIP's words, its key stays the same.
    assert "start-up only" in r.verdict.summary and "HIP-graph capture" in r.verdict.summary
    (startup,) = [f for f in r.findings if f.code == "startup_in_trace"]
    assert startup.evidence["startup_share"] is not None and float(startup.evidence["startup_share"]) > 0.9
    assert [x.code for x in r.recommendations] == ["profiler_schedule"]
    rank = r.ranks[0]
    assert rank.startup is not None and not rank.startup.steady
    assert set(rank.startup.parts_us) == {"CUDA-graph capture"}


def test_the_vllm_trace_with_string_byte_counts_is_read_and_says_so() -> None:
    r = report("vllm_decode_graph_capture.json.gz")
    assert any("args.bytes" in w for w in r.warnings)
    assert r.ranks[0].steps == 0 and r.ranks[0].step_time_us is None  # no ProfilerStep: no step invented


def test_matrix_core_and_flash_attention_kernels_of_a_compiled_rocm_region_need_no_precision_advice() -> None:
    r = report("torch_compile_triton.json.gz")
    assert r.verdict.primary == "gpu_compute"
    assert not codes(r) & (PRECISION_ADVICE | {"tensor_cores_unused"})
    gemm = next(k for k in r.ranks[0].top_kernels if k.name.startswith("Cijk_"))
    assert gemm.tensor_core is True  # hipBLASLt MFMA (..._MI16x16x1_...)


def test_hopper_bf16_inference_is_on_tensor_cores_and_gets_no_amp_or_tf32() -> None:
    r = report("h100_timesformer_inference.json.gz")
    kernels = {k.name: k.tensor_core for k in r.ranks[0].top_kernels}
    assert any(v for n, v in kernels.items() if n.startswith("sm90_xmma_gemm_bf16"))
    assert any(v for n, v in kernels.items() if "tensorop_bf16" in n)
    assert not codes(r) & PRECISION_ADVICE
    # The GPU idles while the host process runs: busy as the trace's own GPU intervals say (reference.py).
    assert r.verdict.primary == "host_overhead"
    expected = reference.gpu_busy_over_steps(DEV / "h100_timesformer_inference.json.gz")
    assert r.ranks[0].gpu_busy == pytest.approx(expected, abs=0.002)


@pytest.mark.parametrize("name", ["sampled_rank-0.json.gz", "sampled_rank-1.json.gz"])
def test_shampoo_is_not_told_to_use_fused_true(name: str) -> None:
    r = report(name)
    assert not codes(r) & {"fused_optimizer", "foreach_optimizer"}
    # HTA's sample keeps a subset of the job's events: kernels wait tens of ms after their launch while the GPU shows
    # nothing, behind work the file does not hold. That is the GPU-side wait, not the host's.
    assert r.ranks[0].steps == 2 and r.verdict.primary == "idle" and "GPU-side wait" in r.verdict.summary


def test_a_mostly_empty_profiler_step_is_idle_only_where_the_host_ran_nothing_either() -> None:
    r = report("triton_example.json.gz")
    assert r.verdict.primary == "idle"
    assert r.stage_shares["idle"] == pytest.approx(1.0, abs=0.001)


def test_a_gpu_only_rocm_trace_without_steps() -> None:
    r = report("mi210_gpu_only.json.gz")
    rank = r.ranks[0]
    assert rank.steps == 0 and rank.step_time_us is None and r.cost is not None and r.cost.per_step_usd is None
    assert [d.device for d in rank.devices] == [1] and r.cost.gpu_count == 1
    assert r.verdict.primary == "gpu_compute"


def test_every_dev_trace_gets_an_operator_table_and_the_gpu_only_one_has_no_operator(tmp_path: Path) -> None:
    for name in FILES:
        result = gpuscope("ops", str(DEV / name), home=tmp_path)
        assert result.returncode == 0 and "Traceback" not in result.stderr, (name, result.stderr)
    gpu_only = gpuscope("ops", str(DEV / "mi210_gpu_only.json.gz"), home=tmp_path)
    assert "0 operators, no profiler steps" in " ".join(gpu_only.stdout.split())


def test_a_kernel_that_starts_before_its_launch_returns_has_no_negative_delay() -> None:
    raw = reference.events(DEV / "triton_example.json.gz")
    launch = next(e for e in raw if e["name"] == "cuLaunchKernel")
    kernel = next(e for e in raw if e.get("cat") == "kernel")
    assert kernel["ts"] < launch["ts"] + launch["dur"]  # the trace's one kernel starts 2.3 µs before the call ends
    launch_stats = report("triton_example.json.gz").ranks[0].launch
    assert launch_stats is not None and launch_stats.launch_delay_median_us == 0.0


def test_a_rocm_62_trace_reads_hex_streams_and_its_blocking_copies_are_syncs() -> None:
    name = "mi250_minitoy_train_rocm62.json.gz"
    raw = reference.events(DEV / name)
    copies = sum(e["name"] == "hipMemcpyWithStream" for e in raw)
    assert copies and {e["args"].get("stream") for e in raw if e.get("cat") == "cuda_runtime"} == {"0x0", None}
    r = report(name)
    (sync,) = [f for f in r.findings if f.code == "sync_calls"]
    assert f"hipMemcpyWithStream x{copies}" in sync.title
    assert not [w for w in r.warnings if "left out" in w]  # "0x0" is stream 0, used
    assert r.run.gpus[0].model == "AMD Radeon Graphics"  # gfx90a, 104 CUs, 64 GB: an MI210 or an MI250 die
    assert not [t for x in r.recommendations for t in (x.title, x.detail) if "NCCL" in t or "CUDA graph" in t]


def test_cuptis_no_stream_on_sync_events_is_read_without_a_warning() -> None:
    raw = reference.events(DEV / "alexnet_a100.json.gz")
    assert {e["args"]["stream"] for e in raw if e["name"] == "Context Sync"} == {4294967295}
    assert report("alexnet_a100.json.gz").warnings == ()


def test_job_steps_is_refused_in_one_line_without_profiler_steps(tmp_path: Path) -> None:
    result = gpuscope("analyze", str(DEV / "mi210_gpu_only.json.gz"), "--job-steps", "1000", home=tmp_path)
    assert result.returncode == 2
    line = one_clean_error_line(result)
    assert "--job-steps needs steps (ProfilerStep#N" in line and "--job-hours" in line
    assert "mi210" not in gpuscope("runs", home=tmp_path).stdout  # nothing half-saved


def test_a_first_call_of_torch_compile_is_start_up_only() -> None:
    loaded = load(SAMPLES / "torch_compile_cpu" / "first_call.json.gz")
    r = build_report(Run(meta=trace_run_meta(loaded.traces, name="compile"), traces=loaded.traces))
    rank = r.ranks[0]
    assert rank.steps == 0 and rank.step_time_us is None
    assert rank.startup is not None and not rank.startup.steady
    assert rank.startup.parts_us["torch.compile compilation"] > 0.9 * rank.window_us


def test_every_code_the_analysis_gives_is_named_in_one_place() -> None:
    from gpuscope.analyzers.diagnosis import codes
    from tests.analyzers.test_verdict_cases import CASES

    seen_findings: set[str] = set()
    seen_recs: set[str] = set()
    reports = [report(name) for name in FILES]
    for r in reports:
        seen_findings |= {f.code for f in r.findings}
        seen_recs |= {x.code for x in r.recommendations} | {c for f in r.findings for c in f.recommendations}
    for case in CASES:
        d = case.diagnosis()
        seen_findings |= {f.code for f in d.findings}
        seen_recs |= {x.code for x in d.recommendations}
    assert seen_findings <= codes.FINDINGS and seen_recs <= codes.RECOMMENDATIONS
