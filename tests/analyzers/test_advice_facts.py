"""Advice that checks the facts beside it, each kind decided once: a cheaper GPU only where it supports what the trace
uses and below every measured stall, a larger batch only while every rank's memory is known to have room, the
vendor's words on ROCm, all-reduce savings from the exposed steady step, PCIe cards never read as NVLink.

Traces are built by hand (tests/builders.py), so each expected value is known by construction: which kernels run
in which type, which GPUs a made-up price offers, how much all-reduce no compute hides."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuscope.analyzers.advice.batch import BATCH_HEADROOM
from gpuscope.analyzers.diagnosis.verdict import ordered
from gpuscope.analyzers.report import AnalysisOptions, build_report
from gpuscope.api.analysis import trace_run_meta
from gpuscope.api.capabilities import gpu_capabilities
from gpuscope.model.cost import GpuOffer, Price
from gpuscope.model.diagnosis import Recommendation
from gpuscope.model.report import Report
from gpuscope.model.run import Run
from gpuscope.traces import load
from tests import builders as b

H100 = "NVIDIA H100 80GB HBM3"
GB = 10**9
# What a made-up price offers below 10 USD/GPU-h: the V100 (Volta: fp16 only), the A10G (Ampere: bf16, TF32,
# FlashAttention 2, no fp8) and the L4 (Ada: fp8 too), dearest first. Each supports what NVIDIA's datasheets say.
OFFERS = (GpuOffer("V100 32GB", 3.9, 32 * GB, "test"), GpuOffer("A10G", 1.0, 24 * GB, "test"),
          GpuOffer("L4", 0.8, 24 * GB, "test"))


def price(offers: tuple[GpuOffer, ...] = OFFERS, usd: float = 10.0) -> Price:
    return Price(usd_per_gpu_hour=usd, source="test", gpu_model=H100, catalog_model="H100 SXM 80GB", offers=offers)


def loop(kernel: str = "volta_sgemm_128x64_nn", *, steps: int = 4, loader_us: float = 300.0,
         op_types: list[str] | None = None, memory: int | None = 2**30) -> list[b.Event]:
    """A training step of 1 ms (its backward named by autograd): a DataLoader wait, then one 400 µs kernel (busy
    40%); the peak memory given."""
    events: list[b.Event] = []
    for i in range(steps):
        t0 = i * 1000.0
        events.append(b.step(i, t0, 1000))
        events.append(b.cpu_op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t0, loader_us))
        op = b.cpu_op("aten::mm", t0 + loader_us, 50, ext=5000 + i)
        if op_types is not None:
            op["args"]["Input type"] = op_types
        events += [op, b.cpu_op("MmBackward0", t0 + loader_us + 60, 10),
                   b.launch(t0 + loader_us + 10, 20, 1000 + i, ext=5000 + i),
                   b.kernel(kernel, t0 + loader_us + 40, 400, 1000 + i, ext=5000 + i)]
    if memory is not None:
        events.append(b.memory(10, memory, memory))
    return events


def analyse(tmp_path: Path, events: list[b.Event], *, device: str | None = H100, offers: Price | None = None,
            name: str = "t.json", **doc: object) -> Report:
    trace = b.trace(events, device_memory=80 * GB if device is not None else None, **doc)
    if device is not None:
        trace["deviceProperties"][0]["name"] = device
    loaded = load(b.write(tmp_path / name, trace))
    options = AnalysisOptions(price=offers or price(), capabilities=gpu_capabilities(tmp_path))
    return build_report(Run(meta=trace_run_meta(loaded.traces, name="t"), traces=loaded.traces), options)


def swap(r: Report) -> str | None:
    found = [x.title for x in r.recommendations if x.code == "right_size"]
    return found[0].split(": ")[1].split(" at ")[0] if found else None


@pytest.mark.parametrize(("kernel", "op_types", "offered"), [
    ("volta_sgemm_128x64_nn", None, "V100 32GB"),  # fp32 alone: the dearest cheaper GPU
    ("ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_nn", None, "A10G"),  # bf16: not the V100
    ("gemm_kernel_generic", ["c10::BFloat16", "c10::BFloat16"], "A10G"),  # bf16 by the op's input types alone
    ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 64, 4, false, false, cutlass::half_t>>",
     None, "A10G"),  # FlashAttention 2 in fp16: Ampere or newer
    ("sm90_xmma_gemm_e4m3e4m3_e4m3f32_f32_tn_n_tilesize128x128x64", None, "L4"),  # fp8: Ada, not Ampere
    ("void cutlass::device_kernel<flash::FlashAttnFwdSm90<flash::CollectiveMainloopFwd<cutlass::bfloat16_t>>>",
     None, None),  # FlashAttention 3: Hopper only, and no cheaper Hopper is offered
])
def test_a_cheaper_gpu_supports_what_the_trace_uses(tmp_path: Path, kernel: str, op_types: list[str] | None,
                                                    offered: str | None) -> None:
    assert swap(analyse(tmp_path, loop(kernel, op_types=op_types))) == offered


def test_no_gpu_without_bf16_is_offered_to_a_bf16_model_even_when_it_is_the_only_one(tmp_path: Path) -> None:
    bf16 = loop("ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_nn")
    volta = price((GpuOffer("V100 32GB", 3.9, 32 * GB, "test"), GpuOffer("T4", 0.5, 16 * GB, "test")))
    r = analyse(tmp_path, bf16, offers=volta)
    assert r.ranks[0].profile is not None and "bf16" in (r.ranks[0].profile.setup.gpu_needs or ())
    assert swap(r) is None
    assert swap(analyse(tmp_path, loop(), offers=volta, name="fp32.json")) == "V100 32GB"  # the contrast


def test_an_unknown_gpu_is_offered_to_fp32_work_alone(tmp_path: Path) -> None:
    unknown = price((GpuOffer("Z9 Accelerator", 2.0, 48 * GB, "test"),))
    assert swap(analyse(tmp_path, loop(), offers=unknown)) is None  # not a vendor's name: never offered
    nvidia = price((GpuOffer("NVIDIA Z9", 2.0, 48 * GB, "test"),))
    assert swap(analyse(tmp_path, loop(), offers=nvidia, name="fp32.json")) == "NVIDIA Z9"
    assert swap(analyse(tmp_path, loop("bf16_gemm"), offers=nvidia, name="bf16.json")) is None


def test_a_measured_stall_ranks_above_a_gpu_swap_whatever_the_dollars(tmp_path: Path) -> None:
    # The DataLoader holds 51% of each 1 ms step; the GPU runs 40% of it, so a V100 at 3.9 instead of 10 USD/GPU-h
    # would save 61% of the dollars: more than the stall's step saving can be.
    r = analyse(tmp_path, loop(loader_us=510.0))
    assert r.verdict.primary == "data_loading"
    recs = [x.code for x in r.recommendations]
    assert "dataloader_num_workers" in recs and "right_size" in recs
    workers = next(x for x in r.recommendations if x.code == "dataloader_num_workers")
    assert workers.est_step_saving is not None and workers.est_step_saving < (10.0 - 3.9) / 10.0
    stepped = [i for i, x in enumerate(r.recommendations) if x.est_step_saving is not None]
    assert max(stepped) < recs.index("right_size")
    assert "fix the stalls above first" in r.recommendations[recs.index("right_size")].detail


def test_ordering_puts_dollar_only_changes_after_every_step_saving() -> None:
    def rec(code: str, step: float | None, usd: float | None) -> Recommendation:
        return Recommendation(code, code, "", step, "", est_saving_usd=usd)
    recs = [rec("swap", None, 90.0), rec("small", 0.01, 1.0), rec("room", None, None), rec("big", 0.3, 30.0),
            rec("slice", None, 40.0)]
    assert [r.code for r in ordered(recs, base_usd=100.0)] == ["big", "small", "swap", "slice", "room"]


@pytest.mark.parametrize(("memory", "lower_bound", "batch"), [
    (2**30, False, True),  # 1 GiB of 80 GB, every rank known: room for a doubled batch
    (int(0.6 * 80 * GB), False, False),  # over the line
    (2**30, True, False),  # an old trace without "Total Allocated": only a lower bound
    (None, False, False),  # no memory events: unknown
])
def test_a_larger_batch_only_when_every_peak_is_known_and_under_the_line(
        tmp_path: Path, memory: int | None, lower_bound: bool, batch: bool) -> None:
    events = loop(memory=memory)
    if lower_bound:
        for e in events:
            e.get("args", {}).pop("Total Allocated", None)
    r = analyse(tmp_path, events)
    assert r.facts is not None and r.facts.peak_memory_lower_bound is lower_bound
    assert ("larger_batch" in {x.code for x in r.recommendations}) is batch
    assert memory is None or batch is (memory / (80 * GB) < BATCH_HEADROOM and not lower_bound)


def test_no_larger_batch_while_one_rank_of_two_has_no_memory_events(tmp_path: Path) -> None:
    def ranks(memory_on_rank1: bool) -> Report:
        folder = tmp_path / f"run{int(memory_on_rank1)}"
        folder.mkdir()
        for rank in (0, 1):
            events = loop(memory=2**30 if rank == 0 or memory_on_rank1 else None)
            b.write(folder / f"rank{rank}.json", b.trace(events, rank=rank, device_memory=80 * GB))
        loaded = load(folder)
        options = AnalysisOptions(price=price(), capabilities=gpu_capabilities(tmp_path))
        return build_report(Run(meta=trace_run_meta(loaded.traces, name="t"), traces=loaded.traces), options)

    both, one = ranks(True), ranks(False)
    assert both.facts is not None and both.facts.peak_memory_all_known
    assert one.facts is not None and not one.facts.peak_memory_all_known
    assert "larger_batch" in {x.code for x in both.recommendations}
    assert "larger_batch" not in {x.code for x in one.recommendations}
    assert swap(one) is None  # nor a cheaper GPU: the unknown rank may be the full one


def _texts(r: Report) -> list[str]:
    return ([r.verdict.summary] + [f.title for f in r.findings]
            + [t for x in r.recommendations for t in (x.title, x.detail, x.reasoning)])


def test_a_rocm_trace_is_told_of_rccl_and_hip_never_of_nccl(tmp_path: Path) -> None:
    """Two MI300X ranks on the gloo backend, their collectives in RCCL's kernels, exposed 30% of the step."""
    folder = tmp_path / "rocm"
    folder.mkdir()
    for rank in (0, 1):
        events: list[b.Event] = []
        for i in range(4):
            t0 = i * 1000.0
            events += [b.step(i, t0, 1000), b.cpu_op("aten::mm", t0, 50, ext=10 + i),
                       b.cpu_op("MmBackward0", t0 + 60, 5),
                       b.launch(t0 + 10, 10, 100 + i, name="hipLaunchKernel", ext=10 + i),
                       b.kernel("Cijk_Alik_Bljk_SB_MT64x64x16_MI16x16x4", t0 + 20, 400, 100 + i, ext=10 + i),
                       b.launch(t0 + 30, 10, 200 + i, name="hipExtModuleLaunchKernel", ext=20 + i),
                       b.kernel("ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)", t0 + 500, 300,
                                200 + i, stream=9, ext=20 + i)]
        doc = b.trace(events, rank=rank, device_memory=192 * GB)
        doc["deviceProperties"][0]["name"] = "AMD Instinct MI300X"
        doc["distributedInfo"]["backend"] = "gloo"
        b.write(folder / f"rank{rank}.json", doc)
    loaded = load(folder)
    r = build_report(Run(meta=trace_run_meta(loaded.traces, name="rocm"), traces=loaded.traces))
    assert {rk.profile.setup.vendor for rk in r.ranks if rk.profile} == {"amd"}
    texts = _texts(r)
    assert not [t for t in texts if "NCCL" in t or "CUDA graphs" in t or "cudaMemcpy" in t]
    assert any("RCCL" in t for t in texts)
    backend = next(x for x in r.recommendations if x.code == "nccl_backend")
    assert backend.title == "Use the RCCL backend for GPU collectives"


def test_the_mi210_sample_mentions_no_nccl_and_gets_hip_graphs() -> None:
    from rich.console import Console

    from gpuscope.reports.terminal import render
    from tests.analyzers.bundled import bundled_report

    r = bundled_report("dev/mi210_gpu_only.json.gz")
    console = Console(record=True, width=200)
    render(r, console)
    shown = "\n".join(_texts(r)) + console.export_text()
    assert "nccl" not in shown.lower()
    graphs = next(x for x in r.recommendations if x.code == "cuda_graphs")
    assert "HIP graphs" in graphs.title


@pytest.mark.parametrize(("device", "launch", "vendor"), [
    (None, "hipLaunchKernel", "amd"),  # no deviceProperties: the runtime calls tell
    (None, "cudaLaunchKernel", "nvidia"),
    ("AMD Instinct MI300X VF", "cudaLaunchKernel", "amd"),  # the device name first
])
def test_the_vendor_is_decided_once_per_trace(tmp_path: Path, device: str | None, launch: str, vendor: str) -> None:
    events = [b.step(0, 0, 1000), b.cpu_op("aten::mm", 0, 50, ext=7), b.launch(10, 10, 1, name=launch, ext=7),
              b.kernel("some_kernel", 30, 100, 1, ext=7)]
    r = analyse(tmp_path, events, device=device)
    assert r.ranks[0].profile is not None and r.ranks[0].profile.setup.vendor == vendor


def _comm_step(t0: float, i: int, *, hidden: str, exposed: str) -> list[b.Event]:
    """A 1 ms step: a 600 µs compute kernel, one collective under it (hidden) and one after it (exposed, 200 µs)."""
    return [b.step(i, t0, 1000), b.cpu_op("aten::mm", t0, 20, ext=30 + i), b.cpu_op("MmBackward0", t0 + 30, 5),
            b.launch(t0 + 2, 2, 300 + i, ext=30 + i), b.kernel("sm90_xmma_gemm_f32f32", t0 + 5, 600, 300 + i,
                                                              ext=30 + i),
            b.launch(t0 + 6, 2, 400 + i, ext=40 + i), b.kernel(hidden, t0 + 100, 300, 400 + i, stream=9, ext=40 + i),
            b.launch(t0 + 8, 2, 500 + i, ext=50 + i), b.kernel(exposed, t0 + 700, 200, 500 + i, stream=9,
                                                              ext=50 + i)]


ALLREDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
ALLTOALL = "ncclDevKernel_SendRecv"


@pytest.mark.parametrize(("hidden", "exposed", "allreduce_share"), [
    (ALLREDUCE, ALLTOALL, 0.0),  # the all-reduce runs under compute: accumulating gradients saves no step time
    (ALLTOALL, ALLREDUCE, 0.2),  # all of the exposed 200 µs a step is all-reduce
])
def test_all_reduce_savings_come_from_the_exposed_steady_step(tmp_path: Path, hidden: str, exposed: str,
                                                              allreduce_share: float) -> None:
    events = [e for i in range(4) for e in _comm_step(i * 1000.0, i, hidden=hidden, exposed=exposed)]
    r = analyse(tmp_path, events)
    (comm,) = [f for f in r.findings if f.code == "comm_exposed_high"]
    assert comm.evidence["communication_share"] == pytest.approx(0.2, abs=0.01)
    assert comm.evidence["allreduce_share"] == pytest.approx(allreduce_share, abs=0.01)
    codes = {x.code for x in r.recommendations}
    assert ("grad_accumulation" in codes) is (allreduce_share > 0)


def test_a_pcie_card_is_judged_against_pcie_not_nvlink(tmp_path: Path) -> None:
    """Two GPUs all-reduce 100 MB in 4 ms: bus bandwidth 100 MB x 2(2-1)/2 / 4 ms = 25 GB/s, 78% of PCIe 4.0 x16's
    32 GB/s (the link is the limit) and 8% of the A100 SXM module's NVLink 3 (it is not)."""
    from tests.analyzers.test_collectives import comms_op

    def report(device: str, name: str) -> Report:
        events: list[b.Event] = [b.step(0, 0, 12_000),
                                 comms_op("record_param_comms", 100, 1000, collective="allreduce", dtype="Float",
                                          in_n=25_000_000, out_n=25_000_000, group=2),
                                 b.launch(102, 2, 1000, ext=1000), b.kernel(ALLREDUCE, 105, 4_000, 1000, ext=1000)]
        return analyse(tmp_path, events, device=device, name=name)

    pcie = report("NVIDIA A100 80GB PCIe", "pcie.json")
    (bound,) = [f for f in pcie.findings if f.code == "comm_link_bound"]
    assert bound.evidence["link"] == "PCIe 4.0 x16" and bound.evidence["busbw_gbps"] == pytest.approx(25.0)
    sxm = report("NVIDIA A100-SXM4-80GB", "sxm.json")
    assert "comm_link_bound" not in {f.code for f in sxm.findings}


def test_every_priced_gpu_names_its_spec_and_supports_what_its_datasheet_says(tmp_path: Path) -> None:
    from gpuscope.pricing import load_catalog
    from gpuscope.specs import shipped_specs

    models = {s.model for s in shipped_specs().gpus}
    assert all(e.spec in models for e in load_catalog().gpus), [e.model for e in load_catalog().gpus]
    every = {"bf16", "fp16", "fp8", "tf32", "flash_attention_2", "flash_attention_3"}
    ampere = {"bf16", "fp16", "tf32", "flash_attention_2"}
    # Volta and Turing: fp16 tensor cores only. Ampere: bf16, TF32, FlashAttention 2. Ada: fp8 too. Hopper: every
    # one, FlashAttention 3 included. Blackwell and the MI300X: fp8, no FlashAttention 3 (a Hopper library).
    expected = {"V100 32GB": {"fp16"}, "Tesla T4": {"fp16"}, "A10G": ampere, "A100 80GB": ampere,
                "NVIDIA A100 80GB PCIe": ampere, "L4": ampere | {"fp8"}, "L40S": ampere | {"fp8"},
                "H100 SXM 80GB": every, "NVIDIA H100 NVL": every, "NVIDIA H200 NVL": every,
                "B200": every - {"flash_attention_3"}, "AMD Instinct MI300X VF": every - {"flash_attention_3"}}
    capabilities = gpu_capabilities(tmp_path)
    assert {name: capabilities(name) for name in expected} == expected
    assert capabilities("NVIDIA RTX 9999") is None


def test_the_bundled_h100_bf16_trace_is_offered_an_ampere_card_not_the_dearer_v100(tmp_path: Path) -> None:
    """docs/cost.md's example: the V100 32GB (3.9015 USD/GPU-h, 32 GB) is the dearest catalog GPU under the H100's
    6.88 that holds its peak, but has no bf16; the A100 80GB PCIe (3.67) is the next step down."""
    from tests.analyzers.bundled import bundled_report

    r = bundled_report("dev/h100_timesformer_inference.json.gz")
    (rank,) = r.ranks
    assert rank.profile is not None and "bf16" in (rank.profile.setup.gpu_needs or ())
    assert r.facts is not None and r.facts.peak_memory_bytes is not None
    assert r.facts.peak_memory_bytes * 1.25 < 32 * GB and round(r.facts.gpu_busy or 0, 2) == 0.41
    (right,) = [x for x in r.recommendations if x.code == "right_size"]
    assert right.title == "Try a cheaper GPU: A100 80GB PCIe at $3.67/GPU-h" and "(bf16)" in right.detail


def test_each_vendor_has_its_own_words() -> None:
    from gpuscope.analyzers.advice.vendor import words

    nvidia, amd = words("nvidia"), words("amd")
    assert words(None) == nvidia  # most traces without a device name come from CUDA builds
    assert (amd.collectives, amd.graphs, amd.sync_copies, amd.device_sync, amd.visible_devices) == (
        "RCCL", "HIP graphs", "hipMemcpy/hipMemset", "hipDeviceSynchronize", "HIP_VISIBLE_DEVICES")
    assert (nvidia.collectives, nvidia.graphs, nvidia.sync_copies, nvidia.device_sync, nvidia.visible_devices) == (
        "NCCL", "CUDA graphs", "cudaMemcpy/cudaMemset", "cudaDeviceSynchronize", "CUDA_VISIBLE_DEVICES")
    assert "amd-smi" in amd.smi and "rocm-smi" in amd.smi and nvidia.smi == "nvidia-smi"
    assert not [v for v in vars(amd).values() if isinstance(v, str) and ("NCCL" in v or "CUDA" in v or "nvidia" in v)]
