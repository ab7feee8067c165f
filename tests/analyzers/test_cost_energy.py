"""Energy and CO2 from power samples, and right-sizing to a cheaper catalog GPU."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from gpuscope.analyzers.advice.gpu_swap import Capabilities
from gpuscope.analyzers.cost import assess
from gpuscope.analyzers.diagnosis.verdict import Diagnosis
from gpuscope.analyzers.energy import run_energy_j
from gpuscope.analyzers.live import summarize
from gpuscope.api.capabilities import gpu_capabilities
from gpuscope.model import schema
from gpuscope.model.cost import JobSpec, Price
from gpuscope.model.diagnosis import Recommendation, Verdict
from gpuscope.model.gpu import GpuInfo
from gpuscope.model.live import GpuLive, LiveSummary
from gpuscope.model.profile import NameTable, RankProfile, RankSetup
from gpuscope.model.rank import RankReport
from gpuscope.model.run import Run, RunMeta
from gpuscope.pricing import resolve_price
from tests.analyzers.test_cost import HOUR_NS, NO_DIAGNOSIS, rank, trace_run

S = 1_000_000_000


def samples(rows: list[tuple[float, str, int, str, float]]) -> pd.DataFrame:
    """Rows of (t_s, source, gpu, metric, value) in the store's long format."""
    return pd.DataFrame({"ts_ns": [int(t * S) for t, *_ in rows], "source": [r[1] for r in rows],
                         "gpu": [r[2] for r in rows], "pid": [schema.NO_PID] * len(rows),
                         "metric": [r[3] for r in rows], "value": [r[4] for r in rows]})


def live_run(frame: pd.DataFrame | None, gpus: int = 1) -> Run:
    meta = RunMeta(id="l", name="l", kind="run", status="complete", started_ns=0, ended_ns=HOUR_NS,
                   gpus=tuple(GpuInfo(index=i, name="NVIDIA A10G") for i in range(gpus)))
    return Run(meta=meta, samples=frame)


def test_energy_counter_is_differenced_per_gpu_and_preferred_over_power() -> None:
    frame = samples([(0, "nvml", 0, schema.GPU_ENERGY_J, 1_000_000.0), (60, "nvml", 0, schema.GPU_ENERGY_J,
                                                                         1_360_000.0),
                     (0, "nvml", 0, schema.GPU_POWER_W, 9999.0), (60, "nvml", 0, schema.GPU_POWER_W, 9999.0),
                     (0, "nvml", 1, schema.GPU_ENERGY_J, 5.0), (30, "nvml", 1, schema.GPU_ENERGY_J, 180_005.0),
                     (60, "nvml", 1, schema.GPU_ENERGY_J, 360_005.0),
                     (0, "host", schema.NO_GPU, schema.HOST_CPU, 0.5)])
    joules, kind = run_energy_j(frame)
    assert joules == pytest.approx(720_000.0) and kind == "energy_counter"
    report, _ = assess(live_run(frame, 2), [], None, NO_DIAGNOSIS, None,
                       JobSpec(grid_kg_co2_per_kwh=0.5, grid_source="a test grid"))
    assert report is not None and report.energy_kwh == pytest.approx(0.2) and report.co2_kg == pytest.approx(0.1)
    assert report.grid_kg_co2_per_kwh == 0.5 and report.grid_source == "a test grid"
    assert report.energy_source == "energy_counter"


def test_only_the_runs_gpus_draw_energy() -> None:
    # Eight GPUs at 300 W for an hour, the job on GPU 3 alone: 0.3 kWh, not 2.4.
    frame = samples([(t, "nvml", gpu, schema.GPU_POWER_W, 300.0) for gpu in range(8) for t in (0, 3600)])
    assert run_energy_j(frame) == (pytest.approx(8 * 300 * 3600), "power_integral")
    assert run_energy_j(frame, [3]) == (pytest.approx(300 * 3600), "power_integral")
    meta = replace(live_run(frame).meta, gpus=(GpuInfo(index=3, name="NVIDIA A10G"),))
    report, _ = assess(Run(meta=meta, samples=frame), [], None, NO_DIAGNOSIS, None,
                       JobSpec(grid_kg_co2_per_kwh=0.5, grid_source="a test grid"))
    assert report is not None and report.energy_kwh == pytest.approx(0.3) and report.co2_kg == pytest.approx(0.15)


def test_the_live_summary_and_the_cost_agree_on_energy() -> None:
    frame = samples([(0, "nvml", 0, schema.GPU_ENERGY_J, 100.0), (10, "nvml", 0, schema.GPU_ENERGY_J, 2100.0),
                     (0, "dcgm", 0, schema.GPU_ENERGY_J, 5.0), (10, "dcgm", 0, schema.GPU_ENERGY_J, 9.0),
                     (0, "nvml", 1, schema.GPU_POWER_W, 50.0), (10, "nvml", 1, schema.GPU_POWER_W, 50.0)])
    run = live_run(frame, 2)
    live = summarize(run)
    assert live is not None and [g.energy_j for g in live.gpus] == [pytest.approx(2000.0), pytest.approx(500.0)]
    assert run_energy_j(frame, [0, 1]) == (pytest.approx(2500.0), "energy_counter+power_integral")


def test_a_counter_restart_is_covered_by_power_when_the_gpu_reported_it() -> None:
    frame = samples([(0, "nvml", 0, schema.GPU_ENERGY_J, 9000.0), (1, "nvml", 0, schema.GPU_ENERGY_J, 10.0),
                     (0, "nvml", 0, schema.GPU_POWER_W, 100.0), (2, "nvml", 0, schema.GPU_POWER_W, 300.0)])
    assert run_energy_j(frame) == (pytest.approx(400.0), "power_integral")


def test_a_counter_restart_loses_that_interval_instead_of_going_negative() -> None:
    frame = samples([(0, "nvml", 0, schema.GPU_ENERGY_J, 1000.0), (1, "nvml", 0, schema.GPU_ENERGY_J, 1500.0),
                     (2, "nvml", 0, schema.GPU_ENERGY_J, 100.0), (3, "nvml", 0, schema.GPU_ENERGY_J, 400.0)])
    assert run_energy_j(frame) == (pytest.approx(800.0), "energy_counter")


def test_power_is_integrated_over_time_when_there_is_no_counter() -> None:
    frame = samples([(0, "nvml", 0, schema.GPU_POWER_W, 100.0), (10, "nvml", 0, schema.GPU_POWER_W, 300.0),
                     (20, "nvml", 0, schema.GPU_POWER_W, 300.0),
                     # DCGM reports the same GPU less often: the better-sampled source is used, not both.
                     (0, "dcgm", 0, schema.GPU_POWER_W, 5000.0), (20, "dcgm", 0, schema.GPU_POWER_W, 5000.0)])
    assert run_energy_j(frame) == (pytest.approx(2000.0 + 3000.0), "power_integral")


def test_no_power_data_means_unknown_energy() -> None:
    assert run_energy_j(None) == (None, None)
    only_util = samples([(0, "nvml", 0, schema.GPU_UTIL, 0.5), (1, "nvml", 0, schema.GPU_UTIL, 0.5)])
    assert run_energy_j(only_util) == (None, None)
    one_gpu_silent = samples([(0, "nvml", 0, schema.GPU_POWER_W, 100.0), (1, "nvml", 0, schema.GPU_POWER_W, 100.0),
                              (0, "nvml", 1, schema.GPU_UTIL, 0.5)])
    assert run_energy_j(one_gpu_silent) == (None, None)
    report, _ = assess(live_run(only_util), [], None, NO_DIAGNOSIS, None, JobSpec(grid_kg_co2_per_kwh=0.4))
    assert report is not None and report.energy_kwh is None and report.co2_kg is None
    no_grid, _ = assess(live_run(samples([(0, "nvml", 0, schema.GPU_POWER_W, 100.0),
                                          (36, "nvml", 0, schema.GPU_POWER_W, 100.0)])),
                        [], None, NO_DIAGNOSIS, None, JobSpec())
    assert no_grid is not None and no_grid.energy_kwh == pytest.approx(0.001) and no_grid.co2_kg is None


@pytest.fixture
def v100(tmp_path: Path) -> Price:
    """A V100 32GB at its catalog price, with the real catalog's offers."""
    return resolve_price("Tesla V100-SXM2-32GB", home=tmp_path, env={})


@pytest.fixture
def shipped(tmp_path: Path) -> Capabilities:
    """What each GPU supports, from the shipped GPU spec table alone."""
    return gpu_capabilities(tmp_path)


def needing(r: RankReport, *needs: str) -> RankReport:
    """The rank with what its trace says its work needs of a GPU (nothing beyond fp32 when none given)."""
    setup = RankSetup(dtypes=("float32",), vendor="nvidia", gpu_needs=needs)
    return replace(r, profile=RankProfile(steps=r.steps, window_us=r.window_us, kernels=NameTable(),
                                          operators=NameTable(), setup=setup))


def right_sizes(price: Price, ranks: list[RankReport], capabilities: Capabilities,
                diagnosis: Diagnosis = NO_DIAGNOSIS, job: JobSpec | None = None) -> list[Recommendation]:
    _, recs = assess(trace_run(), ranks, None, diagnosis, price, job or JobSpec(), capabilities=capabilities)
    return [r for r in recs if r.code == "right_size"]


def test_a_mostly_idle_run_that_fits_a_cheaper_gpu_is_told_which(v100: Price, shipped: Capabilities) -> None:
    (right,) = right_sizes(v100, [needing(rank(busy=0.3, peak_bytes=2 * 2**30))], shipped)
    # The dearest cheaper GPU that fits: the smallest step down from 3.9015 USD/GPU-h, 3.67 (A100 40GB and the
    # A100 80GB PCIe card; the larger memory of equal prices).
    assert "A100 80GB PCIe" in right.title and "$3.67" in right.title
    assert right.est_saving_usd == pytest.approx((3.9015 - 3.67) * 1.0)
    assert right.est_step_saving is None
    assert "throughput differs" in right.detail and "fp32 alone" in right.detail


def test_right_sizing_needs_room_and_slack(v100: Price, shipped: Capabilities) -> None:
    def codes(**kw: object) -> list[str]:
        diagnosis = kw.pop("diagnosis", NO_DIAGNOSIS)
        return [r.code for r in right_sizes(v100, [needing(rank(**kw))], shipped, diagnosis)]  # type: ignore[arg-type]

    assert codes(busy=0.8, peak_bytes=2 * 2**30) == []
    assert codes(busy=0.3, peak_bytes=None) == []
    assert codes(busy=None, peak_bytes=2 * 2**30) == []
    comm = Diagnosis(verdict=Verdict(primary="communication", resource="nccl"))
    assert codes(busy=0.3, peak_bytes=2 * 2**30, diagnosis=comm) == []
    # 30 GiB needs 40 GB x 1.25 headroom: of the GPUs under 3.9015 USD/GPU-h only the two A100 80GB are big enough,
    # the PCIe card at 3.67 and the SXM module at 3.43: the dearer one.
    recs = right_sizes(v100, [needing(rank(busy=0.3, peak_bytes=30 * 2**30))], shipped)
    assert [r.title for r in recs] == ["Try a cheaper GPU: A100 80GB PCIe at $3.67/GPU-h"]
    assert codes(busy=0.3, peak_bytes=200 * 2**30) == []


def test_right_sizing_projects_onto_the_whole_job(v100: Price, shipped: Capabilities) -> None:
    recs = right_sizes(v100, [needing(rank(busy=0.3))], shipped, job=JobSpec(job_hours=100.0))
    assert recs[-1].est_saving_usd == pytest.approx((3.9015 - 3.67) * 100.0)


def test_right_sizing_a_live_run_uses_its_memory_and_utilization(tmp_path: Path, shipped: Capabilities) -> None:
    a100 = resolve_price("NVIDIA A100-SXM4-80GB", home=tmp_path, env={})
    live = LiveSummary(duration_s=3600.0, gpus=(GpuLive(gpu=0, samples=5, util_mean=0.2,
                                                        memory_used_peak_bytes=10 * 10**9),))
    _, recs = assess(live_run(None), [], live, NO_DIAGNOSIS, a100, JobSpec(), capabilities=shipped)
    by_code = {r.code: r for r in recs}
    # No trace says what the job uses: it is held to what an A100 supports (bf16, fp16, FlashAttention 2; TF32 only
    # changes speed). Of the GPUs under 3.43 USD/GPU-h with 12.5 GB, the V100 16GB (3.06) has no bf16: the L40S
    # (1.861) is the dearest that has them all.
    assert set(by_code) == {"right_size", "mig_slice"} and "L40S" in by_code["right_size"].title
    assert "held to everything today's GPU supports (bf16, fp16, FlashAttention 2)" in by_code["right_size"].detail
    # 20% of an A100's SMs needs 3 of its 7 slices to stay under 60% busy (2 would be 70%), and 10 GB x 1.25 fits
    # the 3g.40gb's 40 GB: it costs 3/7 of the GPU, so 4/7 of 3.43 USD is saved each hour.
    assert by_code["mig_slice"].title == "Fits on a MIG 3g.40gb slice (or MPS)"
    assert by_code["mig_slice"].est_saving_usd == pytest.approx(3.43 * 4 / 7)
