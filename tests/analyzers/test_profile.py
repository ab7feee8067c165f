"""A rank's kernels and operators by name over its steady steps, and the set-up its trace records, counted by hand
on traces built in code and read off the names and metadata of real ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuscope.analyzers.trace import profile
from gpuscope.analyzers.trace.families import kernel_family, operator_family
from gpuscope.analyzers.trace.rank import analyze_rank
from gpuscope.model.profile import RankProfile
from gpuscope.traces import read_trace
from tests import builders as b
from tests.analyzers.bundled import bundled_report
from tests.changes.loops import loop


def profile_of(tmp_path: Path, doc: dict[str, object]) -> RankProfile:
    trace = read_trace(b.write(tmp_path / "rank0.json", doc))
    result = analyze_rank(trace).profile
    assert result is not None
    return result


def test_kernels_and_operators_of_the_steps_by_hand(tmp_path: Path) -> None:
    doc = loop(steps=4, extra=(("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 100.0),))
    # A kernel before the first step is no step's: it is left out.
    doc["traceEvents"] += [b.launch(-500, 5, 99), b.kernel("volta_sgemm_128x64_nn", -480, 50, 99)]  # type: ignore
    p = profile_of(tmp_path, doc)
    assert p.steps == 4 and p.window_us == pytest.approx(4000.0)
    kernels = {r.name: r for r in p.kernels.rows}
    assert set(kernels) == {"volta_sgemm_128x64_nn", "ncclDevKernel_AllReduce_Sum_f32_RING_LL"}
    assert (kernels["volta_sgemm_128x64_nn"].count, kernels["volta_sgemm_128x64_nn"].total_us) == (4, 1600.0)
    assert kernels["volta_sgemm_128x64_nn"].family == "gemm"
    assert kernels["ncclDevKernel_AllReduce_Sum_f32_RING_LL"].family == "communication"
    operators = {r.name: r for r in p.operators.rows}
    assert operators["aten::conv2d"].total_us == pytest.approx(200.0) and operators["aten::conv2d"].count == 4
    loader = operators["enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"]
    assert loader.total_us == pytest.approx(1200.0) and loader.family == "enumerate(DataLoader) next batch"
    assert "ProfilerStep#0" not in operators and p.kernels.rest_names == 0 and p.kernels.rest_max_us == 0.0


def test_a_long_table_keeps_its_top_names_and_sums_the_rest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(profile, "TABLE_ROWS", 1)
    p = profile_of(tmp_path, loop(steps=2, extra=(("void reduce_kernel<512>", 30.0), ("void relu_kernel", 20.0))))
    assert [r.name for r in p.kernels.rows] == ["volta_sgemm_128x64_nn"]
    assert (p.kernels.rest_names, p.kernels.rest_count, p.kernels.rest_us, p.kernels.rest_max_us) == (2, 4, 100.0,
                                                                                                        60.0)
    assert dict(p.kernels.rest_families_us) == {"reduction": 60.0, "elementwise": 40.0}
    assert p.kernels.total_us == pytest.approx(2 * (400 + 30 + 20))
    # The DataLoader's next batch is listed however small: a diff matches it across iterator classes.
    monkeypatch.setattr(profile, "TABLE_ROWS", 0)
    kept = profile_of(tmp_path, loop(steps=2)).operators
    assert [r.name for r in kept.rows] == ["enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"]
    assert kept.rest_names == 1 and kept.rest_us == pytest.approx(100.0)  # aten::conv2d, 50 µs a step


def test_setup_from_metadata_shapes_and_names(tmp_path: Path) -> None:
    doc = loop(steps=2, workers=True, shapes=[[16, 3, 32, 32], [8, 3, 3, 3], []],
               types=("c10::BFloat16", "c10::BFloat16", ""), annotations=("Torch-Compiled Region: 0/0",),
               extra=(("ncclKernel_AllReduce_RING_LL128_Sum_float(ncclDevComm*)", 10.0),),
               cuda_runtime_version=12040, cuda_driver_version="12.6")
    s = profile_of(tmp_path, doc).setup
    assert (s.cuda_runtime, s.cuda_driver) == ("12.4", "12.6")
    assert s.dataloader == "worker processes (num_workers>0)" and s.torch_compile is True
    assert s.nccl_algorithms == ("AllReduce RING LL128",)
    assert s.model_input is not None and s.model_input.op == "aten::conv2d"
    assert s.model_input.batch == "[16, 3, 32, 32]" and s.model_input.types[0] == "c10::BFloat16"
    assert s.dtypes == ("bfloat16",)


def test_a_trace_without_shapes_or_versions_says_nothing_of_them(tmp_path: Path) -> None:
    doc = loop(steps=2)
    for event in doc["traceEvents"]:  # type: ignore[attr-defined]
        event.get("args", {}).pop("Input Dims", None)
        event.get("args", {}).pop("Input type", None)
    s = profile_of(tmp_path, doc).setup
    assert s.model_input is None and s.dtypes == () and s.cuda_runtime is None and s.nccl_algorithms == ()
    assert s.torch_compile is False and s.dataloader == "in-process (num_workers=0)"


def test_real_traces_name_their_collectives_and_inputs() -> None:
    dlrm = bundled_report("dlrm_8rank")
    algos = {a for r in dlrm.ranks if r.profile is not None for a in r.profile.setup.nccl_algorithms}
    # The kernels are ncclKernel_AllReduce_RING_LL_Sum_float and ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t.
    assert algos == {"AllReduce RING LL", "SendRecv RING SIMPLE"}
    old = bundled_report("resnet50_old_schema").ranks[0].profile
    assert old is not None and old.setup.model_input is not None
    assert old.setup.model_input.batch == "[32, 3, 224, 224]"  # "Input dims" of the 2021 schema
    compiled = bundled_report("dev/torch_compile_triton.json.gz").ranks[0].profile
    assert compiled is not None and compiled.setup.torch_compile is True


@pytest.mark.parametrize(("name", "family"), [
    ("sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc", "convolution"),
    ("void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 512, true, 1>", "normalization"),
    ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT", "gemm"),
    ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128>>", "attention"),
    ("void at::native::vectorized_elementwise_kernel<8, at::native::BinaryFunctor<c10::BFloat16, lambda>>",
     "elementwise"),
    ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<TensorListMetadata<4>>", "optimizer"),
    ("triton_poi_fused__unsafe_view_add_3", "triton (torch.compile)"),
    ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "communication"),
])
def test_kernel_families(name: str, family: str) -> None:
    assert kernel_family(name) == family


def test_operator_families() -> None:
    assert operator_family("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__") == \
        operator_family("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__")
    assert operator_family("Optimizer.step#AdamW.step") == operator_family("Optimizer.step#SGD.step")
    assert operator_family("## forward ##") == "## forward ##" and operator_family("aten::add") == "aten::add"


def test_long_template_names_are_cut_and_what_differs_only_past_the_cut_is_one_row(tmp_path: Path) -> None:
    stem = "void at::native::elementwise_kernel<" + "x" * 200
    p = profile_of(tmp_path, loop(steps=2, extra=((stem + "A>", 10.0), (stem + "B>", 20.0))))
    (row,) = [r for r in p.kernels.rows if r.name.startswith("void at::native::elementwise_kernel<")]
    assert row.name == stem[:profile.NAME_CHARS] and (row.count, row.total_us) == (4, 60.0)
