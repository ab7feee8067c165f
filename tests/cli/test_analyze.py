"""`gpuscope analyze`, `runs` and `show` end to end, as a user runs them."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests import builders as b
from tests.cli.helpers import gpuscope, one_clean_error_line
from tests.conftest import SAMPLES

RANK_KEYS = {"rank", "window_us", "steps", "step_time_us", "gpu_busy", "step_breakdown_us", "temporal",
             "idle_breakdown_us", "communication", "memory"}


def test_analyze_json_report_is_saved_and_shown_again_identically(tmp_path: Path) -> None:
    result = gpuscope("analyze", str(SAMPLES / "resnet50_dataloader_bound"), "--json", home=tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["schema"] == "gpuscope.report/1"
    assert {"run", "ranks", "verdict", "findings", "recommendations", "cost"} <= report.keys()
    rank = report["ranks"][0]
    assert RANK_KEYS <= rank.keys()
    assert set(rank["step_breakdown_us"]) == {"kernel", "memcpy", "memset", "communication", "runtime",
                                              "dataloader", "cpu_exec", "other"}
    assert rank["steps"] == 6 and 0.5 < rank["gpu_busy"] < 0.6
    assert report["run"]["gpus"][0]["model"] == "Tesla V100-DGXS-32GB"

    runs = json.loads(gpuscope("runs", "--json", home=tmp_path).stdout)
    assert len(runs) == 1 and runs[0]["kind"] == "trace" and runs[0]["status"] == "complete"
    assert runs[0]["verdict"] == report["verdict"]["primary"] == "data_loading"
    assert runs[0]["gpu_busy"] == report["ranks"][0]["gpu_busy"]
    assert runs[0]["total_usd"] == report["cost"]["total_usd"] and runs[0]["wasted_usd"] == report["cost"]["wasted_usd"]
    listing = gpuscope("runs", home=tmp_path).stdout
    assert "data loading" in listing and "GPU busy" in listing
    priced = json.loads(gpuscope("prices", runs[0]["id"], "--json", home=tmp_path).stdout)
    assert priced["resolved"]["gpu"] == "Tesla V100-DGXS-32GB"
    shown = gpuscope("show", runs[0]["id"][:18], "--json", home=tmp_path)
    assert shown.returncode == 0 and json.loads(shown.stdout) == report


def test_analyze_terminal_summary_reads_well(tmp_path: Path) -> None:
    result = gpuscope("analyze", str(SAMPLES / "resnet50_dataloader_bound"), home=tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for words in ("GPU busy", "DataLoader", "33.4%", "Tesla V100-DGXS-32GB"):
        assert words in out
    assert "saved as run" in result.stderr


def test_multi_rank_directory(tmp_path: Path) -> None:
    result = gpuscope("analyze", str(SAMPLES / "dlrm_8rank"), "--json", "--no-save", home=tmp_path)
    assert result.returncode == 0, result.stderr
    ranks = json.loads(result.stdout)["ranks"]
    assert [r["rank"] for r in ranks] == list(range(8))
    assert all(r["communication"]["total_us"] > 0 for r in ranks)
    assert json.loads(gpuscope("runs", "--json", home=tmp_path).stdout) == []


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"", "empty"),
        (b"not json at all", "not valid JSON"),
        (b'{"schemaVersion": 1}', "traceEvents"),
        (b'{"traceEvents": [{"ph": "X", "ts": [1], "dur": 2}]}', "wrong type"),
        (gzip.compress(b'{"traceEvents": []}' * 500, mtime=0)[:40], "gzip"),
    ],
)
def test_bad_trace_is_one_line_and_exit_2(tmp_path: Path, content: bytes, words: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    result = gpuscope("analyze", str(path), home=tmp_path / "home")
    assert result.returncode == 2
    line = one_clean_error_line(result)
    assert str(path) in line and words in line


def test_missing_path(tmp_path: Path) -> None:
    result = gpuscope("analyze", str(tmp_path / "missing.json"), home=tmp_path)
    assert result.returncode == 2 and "no such file or directory" in one_clean_error_line(result)


def test_one_bad_rank_is_named_and_the_rest_analysed_unless_strict(tmp_path: Path) -> None:
    d = tmp_path / "job"
    d.mkdir()
    for r in (0, 1):
        b.write(d / f"rank{r}.json", b.trace(b.simple_training(), rank=r))
    (d / "rank2.json").write_text('{"traceEvents": [')
    result = gpuscope("analyze", str(d), "--json", home=tmp_path / "home")
    assert result.returncode == 0
    assert "rank2.json" in result.stderr and "Traceback" not in result.stderr
    report = json.loads(result.stdout)
    assert [r["rank"] for r in report["ranks"]] == [0, 1] and "rank2.json" in report["warnings"][0]
    strict = gpuscope("analyze", str(d), "--strict", home=tmp_path / "home2")
    assert strict.returncode == 2 and "Traceback" not in strict.stderr and "--strict" in strict.stderr


def test_show_unknown_run(tmp_path: Path) -> None:
    result = gpuscope("show", "nope", home=tmp_path)
    assert result.returncode == 2 and "no run with id 'nope'" in one_clean_error_line(result)


def test_unwritable_store_is_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.write_text("a file where the store folder should be")
    result = gpuscope("analyze", str(SAMPLES / "dlrm_8rank"), home=home)
    assert result.returncode == 2 and str(home) in one_clean_error_line(result)
