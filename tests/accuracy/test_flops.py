"""FLOPs a step and per operator, held against an independent count from the raw JSON (``flops_reference``) on every
bundled trace with recorded shapes: `gpuscope analyze`'s per-step model and re-run FLOPs and the run's FLOPs per
step, and `gpuscope ops`'s FLOPs of each operator over all its calls.

By hand over other traces (TraceLens's and HTA's test traces, not in the repository):
``python -m tests.accuracy.test_flops DIR...`` prints each trace's largest difference.
"""

from __future__ import annotations

import sys
from functools import cache
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from gpuscope.analyzers.efficiency.flops import op_cost  # noqa: E402
from gpuscope.analyzers.efficiency.inputs import parse  # noqa: E402
from gpuscope.analyzers.efficiency.opwork import op_work  # noqa: E402
from gpuscope.analyzers.efficiency.schemas import SCHEMAS, bind  # noqa: E402
from gpuscope.analyzers.trace.optree import call_tree  # noqa: E402
from gpuscope.api.analysis import analyze_path  # noqa: E402
from gpuscope.model.report import Report  # noqa: E402
from gpuscope.model.trace import RankTrace  # noqa: E402
from gpuscope.specs import spec_for  # noqa: E402
from gpuscope.traces import load  # noqa: E402
from tests.accuracy import flops_reference as ref  # noqa: E402
from tests.analyzers.bundled import ALL, bundled_report  # noqa: E402
from tests.conftest import SAMPLES  # noqa: E402

REL = 1e-6
ACT_CHECKPOINT = "dev/mi300x_resnet_act_checkpoint.json.gz"
CASES = ALL + tuple(f"serving/{p.name}" for p in sorted((SAMPLES / "serving").glob("*.json.gz")))
"""Every bundled trace (the serving engines' too): those without recorded shapes are skipped."""


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= REL * max(abs(a), abs(b)) + 1.0


def step_differences(report: Report) -> list[tuple[str, str, float, float]]:
    """(file, step, gpuscope's, the reference's) of every steady step of every rank, model FLOPs and re-run
    FLOPs, where they differ."""
    out = []
    for rank in report.ranks:
        eff = rank.efficiency
        if eff is None or not eff.shapes_recorded or not eff.step_flops or rank.source is None:
            continue
        count = ref.count(Path(rank.source))
        name = Path(rank.source).name
        for (step, model), (_, rerun) in zip(eff.step_flops, eff.step_recomputed_flops):
            if not _close(model, count.model.get(step, 0.0)):
                out.append((name, f"{step} model", model, count.model.get(step, 0.0)))
            if not _close(rerun, count.rerun.get(step, 0.0)):
                out.append((name, f"{step} re-run", rerun, count.rerun.get(step, 0.0)))
    return out


@cache
def traces(path: Path) -> tuple[RankTrace, ...]:
    return tuple(load(path).traces)


def unbound_calls(path: Path) -> list[tuple[str, str, tuple[str, ...]]]:
    """(file, op, recorded types) of each distinct call of an op read by name that fits none of its schemas, but
    those that recorded more inputs than any schema of the op has (HTA's torchrec trace has ``aten::matmul`` with
    four tensors: not the op's arguments, and never counted)."""
    out = []
    for trace in traces(path):
        ev = trace.events
        for sid in np.unique(ev.shape_id[ev.shape_id >= 0]).tolist():
            for name_id in np.unique(ev.name_id[ev.shape_id == sid]).tolist():
                name, shape = trace.names[name_id], trace.shapes[sid]
                inputs = parse(shape)
                if name not in SCHEMAS or inputs is None:
                    continue
                if len(shape.types) > max(len(s.names) for s in SCHEMAS[name]):
                    assert op_cost(name, inputs) is None
                elif bind(name, inputs) is None:
                    out.append((Path(trace.source).name, name, shape.types))
    return out


def op_differences(path: Path) -> list[tuple[str, str, float, float]]:
    """(file, operator, `ops`'s FLOPs over all its calls, the reference's) for every operator whose every call the
    reference counts, where they differ; an operator only one of them counts is a difference too (the other's 0).
    (`ops` gives a call whose own inputs do not say the FLOPs counted inside it, elementwise ones too: not a count
    of its own to hold against this one.)"""
    out = []
    for trace in traces(path):
        if not trace.shapes:
            continue
        name = Path(trace.source).name
        count = ref.count(Path(trace.source))
        work = op_work(trace, call_tree(trace), spec_for(trace.gpus[0].name) if trace.gpus else None)
        for op in sorted(ref.COUNTED - set(count.uncounted)):
            mine = work[op].flops if op in work else 0.0
            theirs = count.by_op.get(op, 0.0)
            if not _close(mine, theirs):
                out.append((name, op, mine, theirs))
    return out


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUSCOPE_HOME", str(tmp_path / "home"))


@pytest.mark.parametrize("name", CASES)
def test_flops_a_step_and_per_operator_are_the_independent_counts(name: str) -> None:
    report = bundled_report(name)
    if not any(r.efficiency is not None and r.efficiency.shapes_recorded for r in report.ranks):
        pytest.skip("no recorded shapes")
    assert step_differences(report) == []
    assert op_differences(SAMPLES / name) == []
    assert unbound_calls(SAMPLES / name) == []
    eff = report.efficiency
    assert eff is not None and eff.model_flops_per_step is not None and eff.hardware_flops_per_step is not None
    counted = [r.efficiency for r in report.ranks if r.efficiency is not None]
    # the job's FLOPs a step: each rank's mean over all its steady steps (the steps checked one by one above), as
    # the step time MFU divides by is the mean of every steady step
    model = sum(_mean(c.step_flops, c.model_flops) for c in counted)
    assert eff.model_flops_per_step + eff.left_out_flops_per_step == pytest.approx(model, rel=REL)
    rerun = sum(_mean(c.step_recomputed_flops, c.recomputed_flops) for c in counted)
    assert eff.hardware_flops_per_step - eff.model_flops_per_step == pytest.approx(rerun, rel=REL, abs=1.0)


def _mean(per_step: tuple[tuple[str, float], ...], without_steps: float) -> float:
    return sum(f for _, f in per_step) / len(per_step) if per_step else without_steps


def test_the_act_checkpoint_resnet_counts_the_re_run_as_hardware_flops_only() -> None:
    """TraceLens's MI300X ResNet with activation checkpointing: 20 forward conv2d, 19 re-run in backward, 20
    convolution_backward and a linear a step; model FLOPs the same in each step, `analyze` and `ops` agreeing."""
    report, _ = analyze_path(SAMPLES / ACT_CHECKPOINT, save=False)  # with its GPU's peak, for MFU and HFU
    eff, rank = report.efficiency, report.ranks[0].efficiency
    assert eff is not None and rank is not None and eff.model_flops_per_step and eff.hardware_flops_per_step
    assert eff.model_flops_per_step == pytest.approx(106.5e9, rel=0.03)
    assert eff.hardware_flops_per_step == pytest.approx(140.4e9, rel=0.001)
    assert [f for _, f in rank.step_flops] == pytest.approx([eff.model_flops_per_step] * 3, rel=1e-9)
    assert eff.mfu is not None and eff.hfu == pytest.approx(eff.mfu * eff.hardware_flops_per_step
                                                            / eff.model_flops_per_step, rel=1e-9)
    trace = traces(SAMPLES / ACT_CHECKPOINT)[0]
    work = op_work(trace, call_tree(trace), None)
    conv = work["aten::conv2d"]
    assert conv.calls == 3 * 39 and conv.recomputed_flops == pytest.approx(
        3 * (eff.hardware_flops_per_step - eff.model_flops_per_step), rel=1e-9)


def main(folders: list[str]) -> None:
    """The sweep over traces outside the repository: each trace's largest relative difference (per step from
    `analyze`, per operator from `ops`)."""
    worst = 0.0
    for folder in folders:
        for path in sorted(p for p in Path(folder).rglob("*.json*") if p.name.endswith((".json", ".json.gz"))):
            try:
                report, _ = analyze_path(path, save=False)
                rows = step_differences(report) + op_differences(path)
                rows += [(f, op, 0.0, 1.0) for f, op, _ in unbound_calls(path)]
            except Exception as exc:  # noqa: BLE001 - a file that is not a Kineto trace: said, and the sweep goes on
                print(f"{path}: not read ({type(exc).__name__}: {exc})")
                continue
            if not any(r.efficiency is not None and r.efficiency.shapes_recorded for r in report.ranks):
                continue
            largest = max((abs(a - b) / max(abs(a), abs(b), 1.0) for _, _, a, b in rows), default=0.0)
            worst = max(worst, largest)
            print(f"{path}: {len(rows)} differences, largest {largest:.2e}")
            for row in rows[:5]:
                print("   ", row)
    print(f"largest difference over all: {worst:.2e}")


if __name__ == "__main__":
    main(sys.argv[1:])
