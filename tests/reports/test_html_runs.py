"""The runs the report tests render: a one-rank trace, the 8-rank sample and a live run replayed into the store.

Each is put in the store the way a user would: traces through `gpuscope report PATH` (analysed and
saved first), the live run through the sampling loop fed by a replay of recorded samples and stacks.
"""

from __future__ import annotations

import html as htmlmod
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from gpuscope.cli.main import app as cli
from gpuscope.collectors.replay import ReplaySampler
from gpuscope.collectors.sampler import SamplingLoop
from gpuscope.model import schema
from gpuscope.model.gpu import GpuInfo
from gpuscope.model.run import RunMeta
from gpuscope.store import Store
from tests.conftest import SAMPLES
from tests.fakes import FakeClock
from tests.figures.fixtures import STACKS, T0_NS, sample_rows, samples_frame, stack_rows

LIVE_ID = "20261202-100000-11aa22"
LIVE_NAME = '<img src=x onerror="alert(1)"> train & eval'
H100 = "NVIDIA H100 80GB HBM3"


@dataclass(frozen=True)
class Runs:
    home: Path
    trace_id: str
    ranks8_id: str
    live_id: str

    def ids(self) -> dict[str, str]:
        return {"trace": self.trace_id, "8 ranks": self.ranks8_id, "live": self.live_id}


def invoke(home: Path, *args: str) -> Any:
    result = CliRunner().invoke(cli, list(args), env={"GPUSCOPE_HOME": str(home)})
    assert result.exit_code == 0, result.output
    return result


def report_json(home: Path, run_id: str) -> dict[str, Any]:
    """What `gpuscope show RUN --json` prints: the numbers every view must agree with."""
    doc: dict[str, Any] = json.loads(invoke(home, "show", run_id, "--json").stdout)
    return doc


def build_runs(home: Path, out: Path) -> Runs:
    """The three runs, each also written once as HTML by the CLI (the trace runs are analysed by it)."""
    before = set()
    ids = []
    for trace, extra in ((SAMPLES / "resnet50_dataloader_bound", ()), (SAMPLES / "dlrm_8rank", ("--job-hours", "24"))):
        invoke(home, "report", str(trace), "-o", str(out / f"{trace.name}.html"), *extra)
        with Store(home) as store:
            now = {m.id for m in store.list_runs()}
        (new,) = now - before
        before, ids = now, [*ids, new]
    replay_live_run(home)
    return Runs(home=home, trace_id=ids[0], ranks8_id=ids[1], live_id=LIVE_ID)


def replay_live_run(home: Path) -> None:
    """Two GPUs and a host tree, 90 s recorded at 1 Hz, replayed through the sampling loop; py-spy stacks too. NVML
    gives each GPU's total memory beside its use, as it does on a real GPU."""
    rows = sample_rows(gpus=2, seconds=90)
    rows += [(ts, schema.NVML, gpu, schema.NO_PID, schema.GPU_MEMORY_TOTAL_BYTES, float(80 * 2**30))
             for ts, _, gpu, _, metric, _ in rows if metric == schema.GPU_MEMORY_USED_BYTES]
    replay = ReplaySampler.from_frame(samples_frame(rows))
    gpus = tuple(GpuInfo(index=i, name=H100, memory_bytes=80 * 2**30) for i in range(2))
    with Store(home) as store:
        store.create_run(RunMeta(id=LIVE_ID, name=LIVE_NAME, kind="attach", status="running", started_ns=T0_NS,
                                 pid=4242, command=("python", "train.py"), gpus=gpus))
        SamplingLoop(store, LIVE_ID, [replay], interval_s=1.0, duration_s=95.0, clock=FakeClock(T0_NS),
                     ).run()
        store.add_stacks(LIVE_ID, stack_rows(), dict(STACKS))


FIGURE = re.compile(r'<script type="application/json" id="(fig-\d+)">(.*?)</script>', re.S)


def chart_titles(page: str) -> list[str]:
    """The title of every chart the HTML draws, as printed (plotly's label escapes undone)."""
    return [htmlmod.unescape(json.loads(body)["layout"]["title"]["text"]) for _, body in FIGURE.findall(page)]


def test_trace_paths_are_analysed_and_saved_once(tmp_path: Path) -> None:
    runs = build_runs(tmp_path / "home", tmp_path)
    with Store(runs.home) as store:
        metas = {m.id: m for m in store.list_runs()}
    assert set(metas) == set(runs.ids().values())
    assert metas[runs.trace_id].kind == metas[runs.ranks8_id].kind == "trace"
    assert metas[runs.live_id].status == "complete", "the loop closed the replayed run"
    ranks8 = report_json(runs.home, runs.ranks8_id)
    assert len(ranks8["ranks"]) == 8 and ranks8["cost"]["projection_basis"] == "job_hours"
    live = report_json(runs.home, runs.live_id)
    assert live["ranks"] == [] and [g["gpu"] for g in live["live"]["gpus"]] == [0, 1]
    page = (tmp_path / "dlrm_8rank.html").read_text()
    assert ranks8["verdict"]["summary"] and htmlmod.escape(ranks8["verdict"]["summary"]) in page
    assert "Top kernels (all 8 ranks)" in chart_titles(page)
