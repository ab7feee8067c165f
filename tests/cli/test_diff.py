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
    assert ("the step got 36.5 ms slower (141.1 ms -> 177.6 ms, beyond noise): +58.1 ms data wait, -19.7 ms host / "
            "launch; +$737 a month") in " ".join(out.split())
    for words in ("data wait", "Price of the change", "per job (100,000 steps)", "730 hours", "DataLoader"):
        assert words in out, words


def test_a_run_without_a_price_says_so_and_the_json_has_null(tmp_path: Path) -> None:
    a, c = str(SAMPLES / "cpu_mlp_aa" / "run_a"), str(SAMPLES / "cpu_mlp_aa" / "run_b")
    doc = diff_json(a, c, home=tmp_path)
    assert doc["usd_per_month"] is None
    priced = diff_json(a, c, "--usd-per-gpu-hour", "2", home=tmp_path)
    assert isinstance(priced["usd_per_month"], float)


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
