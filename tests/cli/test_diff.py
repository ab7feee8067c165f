"""`gpuscope diff` end to end, as a user runs it: traces, saved reports and saved runs in; JSON or a terminal view
out; one clear line for what it cannot read."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests import builders as b
from tests.cli.helpers import gpuscope, one_clean_error_line
from tests.conftest import SAMPLES
from tests.gate import edits

BEFORE, AFTER = str(SAMPLES / "resnet50_workers4"), str(SAMPLES / "resnet50_dataloader_bound")


def diff_json(*args: str, home: Path) -> dict[str, object]:
    result = gpuscope("diff", *args, "--json", home=home)
    assert result.returncode == 0, result.stderr
    doc: dict[str, object] = json.loads(result.stdout)
    return doc


def test_the_json_explains_and_prices_the_change(tmp_path: Path) -> None:
    doc = diff_json(BEFORE, AFTER, home=tmp_path)
    assert doc["schema"] == "gpuscope.diff/1"
    steps = doc["step_time_us"]
    assert isinstance(steps, dict) and set(steps) == {"baseline", "candidate"}
    change = steps["candidate"] - steps["baseline"]
    parts = doc["parts"]
    assert isinstance(parts, list) and parts
    assert all({"stage", "change_us", "share_of_change", "significant"} <= p.keys() for p in parts)
    assert sum(p["change_us"] for p in parts) == pytest.approx(change, rel=0.05)
    data = sum(p["change_us"] for p in parts if p["stage"] == "data_loading")
    assert data >= 0.7 * change
    assert isinstance(doc["kernels"], list) and doc["kernels"]
    assert doc["setup_changes"] == [{"key": "dataloader", "label": "DataLoader",
                                     "baseline": "worker processes (num_workers>0)",
                                     "candidate": "in-process (num_workers=0)", "changed": True}]
    assert isinstance(doc["usd_per_month"], float) and doc["usd_per_month"] > 0
    assert not list(tmp_path.glob("home/runs/*"))  # a diff of traces saves nothing


def test_a_saved_report_and_a_saved_run_give_the_same_answer(tmp_path: Path) -> None:
    saved = gpuscope("analyze", BEFORE, "--json", "--no-save", home=tmp_path)
    assert saved.returncode == 0, saved.stderr
    baseline_file = tmp_path / "baseline.json"
    baseline_file.write_text(saved.stdout)
    ran = gpuscope("analyze", AFTER, "--name", "nightly", home=tmp_path)
    assert ran.returncode == 0, ran.stderr
    by_traces = diff_json(BEFORE, AFTER, home=tmp_path)
    by_saved = diff_json(str(baseline_file), "nightly", home=tmp_path)
    for key in ("step_time_us", "parts", "kernels", "operators", "setup_changes", "usd_per_month"):
        assert by_saved[key] == by_traces[key], key


def test_the_terminal_view_leads_with_the_explanation(tmp_path: Path) -> None:
    result = gpuscope("diff", BEFORE, AFTER, "--job-steps", "100000", home=tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    # The step time of each: the mean of its six steady steps (the TensorBoard plugin's means).
    assert ("the step got 36.5 ms slower (141.1 ms -> 177.6 ms, beyond noise): +58.1 ms data wait, -19.7 ms host "
            "/ launch; +$737 a month") in " ".join(out.split())
    for words in ("data wait", "Price of the change", "per job (100,000 steps)", "730 hours", "DataLoader"):
        assert words in out, words


def test_a_run_without_a_price_says_so_and_the_json_has_null(tmp_path: Path) -> None:
    # a GPU the traces do not name has no catalog price; a CPU job has no GPU time to price at all
    a, c = (str(b.write(tmp_path / f"{name}.json", {**b.trace(b.simple_training(5, loader_us=loader)),
                                                    "deviceProperties": [{"id": 0, "name": ""}]}))
            for name, loader in (("a", 300.0), ("c", 500.0)))
    doc = diff_json(a, c, home=tmp_path)
    assert doc["usd_per_month"] is None
    priced = diff_json(a, c, "--usd-per-gpu-hour", "2", home=tmp_path)
    assert isinstance(priced["usd_per_month"], float)
    cpu = (str(SAMPLES / "cpu_mlp_aa" / "run_a"), str(SAMPLES / "cpu_mlp_aa" / "run_b"))
    assert diff_json(*cpu, "--usd-per-gpu-hour", "2", home=tmp_path)["usd_per_month"] is None


@pytest.mark.parametrize("bad", ["no/such/trace", "corrupt", "corrupt gzip"])
def test_a_bad_input_is_one_line_and_exit_2(tmp_path: Path, bad: str) -> None:
    target = bad
    if bad == "corrupt":
        target = str(b.write(tmp_path / "broken.json", "{not json"))
    if bad == "corrupt gzip":  # its head is read to tell a saved report from a trace: damage there was a traceback
        packed = bytearray(gzip.compress(b'{"traceEvents": [' + b'{"ph": "X", "ts": 1, "dur": 2},' * 200 + b"{}]}",
                                         mtime=0))
        packed[12] = 0  # the first block's code lengths: zlib.error at the first read
        (tmp_path / "broken.json.gz").write_bytes(bytes(packed))
        target = str(tmp_path / "broken.json.gz")
    result = gpuscope("diff", BEFORE, target, home=tmp_path)
    assert result.returncode == 2
    line = one_clean_error_line(result)
    assert line.startswith("gpuscope: error:") and (bad in line or "broken.json" in line)


def test_a_bad_gate_config_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "gate.toml"
    config.write_text("alpha = 7\n")
    result = gpuscope("diff", BEFORE, AFTER, "--config", str(config), home=tmp_path)
    assert result.returncode == 2 and "alpha" in one_clean_error_line(result)


DLRM = "dlrm_8rank"


def _dlrm_with_rank_7_corrupt(tmp_path: Path) -> str:
    folder = edits.copy(DLRM, tmp_path / "candidate")
    edits.rank_file(folder, 7).write_bytes(b"garbage")
    return str(folder)


def test_a_corrupt_candidate_rank_is_named_on_stderr_and_fails(tmp_path: Path) -> None:
    cand = _dlrm_with_rank_7_corrupt(tmp_path)
    result = gpuscope("diff", str(SAMPLES / DLRM), cand, home=tmp_path)
    assert result.returncode == 1 and result.stdout == ""
    line = one_clean_error_line(result)
    assert "worker7_" in line and "7 of its 8 ranks read" in line and "--allow-partial" in line


def test_allow_partial_prices_only_the_ranks_both_runs_have(tmp_path: Path) -> None:
    """Ranks 0-6 are the same files on both sides: nothing changed, and the lost GPU of rank 7 is no saving."""
    cand = _dlrm_with_rank_7_corrupt(tmp_path)
    result = gpuscope("diff", str(SAMPLES / DLRM), cand, "--allow-partial", "--json", home=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "worker7_" in result.stderr and "compared on rank(s) 0, 1, 2, 3, 4, 5, 6 only" in result.stderr
    doc = json.loads(result.stdout)
    assert doc["ranks"] == [0, 1, 2, 3, 4, 5, 6] and len(doc["missing_ranks"]) == 1
    base, cand_side = doc["baseline"], doc["candidate"]
    assert base["gpu_count"] == cand_side["gpu_count"] == 7
    assert base["step_time_us"] == cand_side["step_time_us"]
    # One step on 7 GPUs at the run's price per GPU-hour.
    assert base["usd_per_step"] == pytest.approx(base["step_time_us"] * 7 / 3.6e9 * base["usd_per_gpu_hour"])
    assert doc["usd_per_month"] == 0.0 and doc["price"]["usd_per_step"] == 0.0
    assert all(p["change_us"] == 0.0 for p in doc["parts"])


def test_another_gpu_model_leads_the_output_and_strict_refuses_in_one_line(tmp_path: Path) -> None:
    h200 = str(SAMPLES / "h200" / "resnet50_workers12")
    result = gpuscope("diff", BEFORE, h200, home=tmp_path, COLUMNS="200")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("gpuscope diff:") and lines[1].startswith("caveat: the baseline ran on Tesla V100")
    assert "NVIDIA H200" in lines[1] and "another GPU model" in lines[1]
    strict = gpuscope("diff", BEFORE, h200, "--strict", home=tmp_path)
    assert strict.returncode == 1 and strict.stdout == ""
    assert "another GPU model" in one_clean_error_line(strict) and "--strict" in one_clean_error_line(strict)


def test_another_world_size_is_a_caveat(tmp_path: Path) -> None:
    four = edits.copy(DLRM, tmp_path / "four")
    edits.set_world_size(four, 4)
    doc = diff_json(str(SAMPLES / DLRM), str(four), home=tmp_path)
    assert doc["missing_ranks"] == [] and any("another GPU count" in c for c in doc["caveats"])
    assert doc["baseline"]["gpu_count"] == 8 and doc["candidate"]["gpu_count"] == 4
