"""`gpuscope ops` end to end: the DLRM sample's ranks with their kernels, a saved run, names kept as text."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from gpuscope.model.run import RunMeta
from gpuscope.store import Store
from tests import builders as b
from tests.cli.helpers import gpuscope, one_clean_error_line
from tests.conftest import SAMPLES

DLRM = SAMPLES / "dlrm_8rank"


def nccl_kernel_us(path: Path) -> float:
    """A reference from the raw JSON: the time of every NCCL kernel in one rank's file."""
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    return float(sum(e["dur"] for e in events if e.get("cat") == "kernel" and e["name"].startswith("ncclKernel")))


def test_dlrm_lists_every_rank_with_operators_and_their_kernels(tmp_path: Path) -> None:
    result = gpuscope("ops", str(DLRM), "--top", "3", home=tmp_path)
    assert result.returncode == 0, result.stderr
    for rank in range(8):
        assert f"Rank {rank}: " in result.stdout
    assert result.stdout.count("record_param_comms") == 8
    assert "└ ncclKernel_SendRecv" in result.stdout and "└ volta_sgemm" in result.stdout


def test_dlrm_json_puts_each_ranks_nccl_kernels_under_record_param_comms(tmp_path: Path) -> None:
    doc = json.loads(gpuscope("ops", str(DLRM), "--json", home=tmp_path).stdout)
    assert doc["schema"] == "gpuscope.ops/1" and [r["rank"] for r in doc["ranks"]] == list(range(8))
    files = sorted(DLRM.glob("*.json.gz"), key=lambda p: int(p.name.removeprefix("worker").split("_")[0]))
    for rank, path in zip(doc["ranks"], files):
        comms = next(o for o in rank["ops"] if o["name"] == "record_param_comms")
        assert sum(k["total_us"] for k in comms["kernels"]) == nccl_kernel_us(path)
        assert all(k["name"].startswith("ncclKernel") for k in comms["kernels"])
        assert len(rank["ops"]) > 100  # --json lists all unless --top says otherwise
        assert all(0 <= o["gpu_share"] for o in rank["ops"])


def test_a_saved_run_gives_the_same_table(tmp_path: Path) -> None:
    sample = SAMPLES / "resnet50_workers4"
    assert gpuscope("analyze", str(sample), home=tmp_path).returncode == 0
    run_id = json.loads(gpuscope("runs", "--json", home=tmp_path).stdout)[0]["id"]
    options = ("--json", "--sort", "cpu_total", "--top", "5")
    saved = json.loads(gpuscope("ops", run_id[:17], *options, home=tmp_path).stdout)
    fresh = json.loads(gpuscope("ops", str(sample), *options, home=tmp_path).stdout)
    assert saved["source"] == run_id and saved["ranks"] == fresh["ranks"]
    totals = [o["cpu_total_us"] for o in saved["ranks"][0]["ops"]]
    assert len(totals) == 5 and totals == sorted(totals, reverse=True)


def test_user_mistakes_get_one_line(tmp_path: Path) -> None:
    for args, words in ((("no-such-thing",), "no such trace file or folder"),
                        ((str(DLRM), "--rank", "8"), "has no rank 8"),
                        ((str(DLRM), "--sort", "speed"), "--sort speed")):
        result = gpuscope("ops", *args, home=tmp_path)
        assert result.returncode == 2 and words in one_clean_error_line(result)
    with Store(tmp_path) as store:
        store.create_run(RunMeta(id="20261202-101010-abcdef", name="live", kind="attach", status="complete",
                                 started_ns=1))
    result = gpuscope("ops", "20261202-101010-abcdef", home=tmp_path)
    assert result.returncode == 2 and "has no profiler trace" in one_clean_error_line(result)


def test_names_from_the_trace_reach_the_terminal_as_text(tmp_path: Path) -> None:
    evil_op = "aten::evil\x1b[2J\x1b]0;owned\x07[bold red]x[/bold red]"
    evil_kernel = "kernel\r\nfake line"
    events = [b.step(1, 0, 100), b.cpu_op(evil_op, 10, 50), b.launch(20, 5, 1),
              b.kernel(evil_kernel, 30, 20, 1)]
    path = b.write(tmp_path / "evil.json", b.trace(events))
    out = gpuscope("ops", str(path), home=tmp_path).stdout
    assert "\x1b" not in out and "\x07" not in out and "\r" not in out
    assert "aten::evil\\x1b[2J\\x1b]0;owned\\x07[bold red]x[/bold red]" in out
    assert "kernel\\x0d\\x0afake line" in out
