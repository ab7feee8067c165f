"""`gpuscope ops` with the useful work: each operator's FLOPs and roofline, each rank's kernel families, and the
run's MFU, the same figure `gpuscope analyze` gives; a GPU not in the spec table is MFU n/a with the reason."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from tests.cli.helpers import gpuscope
from tests.conftest import SAMPLES

RESNET = SAMPLES / "resnet50_dataloader_bound"
DLRM_RANK0 = next((SAMPLES / "dlrm_8rank").glob("worker0_*.json.gz"))


def renamed(tmp_path: Path, name: str) -> Path:
    """The DLRM rank-0 trace (recorded shapes) with its GPUs named ``name``."""
    doc = json.loads(gzip.decompress(DLRM_RANK0.read_bytes()))
    for device in doc.get("deviceProperties", []):
        device["name"] = name
    out = tmp_path / "renamed.json"
    out.write_text(json.dumps(doc))
    return out


def test_ops_gives_the_mfu_analyze_gives_and_each_operators_work(tmp_path: Path) -> None:
    ops = json.loads(gpuscope("ops", str(RESNET), "--json", home=tmp_path).stdout)
    report = json.loads(gpuscope("analyze", str(RESNET), "--json", "--no-save", home=tmp_path).stdout)
    assert ops["efficiency"]["mfu"] == report["efficiency"]["mfu"] == report["facts"]["mfu"]
    assert ops["efficiency"]["peak_flops"] == 15.7e12 and "volta-v100-datasheet" in ops["efficiency"]["peak_source"]
    (rank,) = ops["ranks"]
    conv = next(o for o in rank["ops"] if o["name"] == "aten::conv2d")
    work = conv["efficiency"]
    assert work["calls"] == conv["calls"] and work["gpu_us"] == conv["gpu_total_us"] and work["dtype"] == "fp32"
    assert work["achieved_tflops"] == work["flops"] / work["gpu_us"] / 1e6
    assert next(o for o in rank["ops"] if o["name"] == "aten::empty")["efficiency"] is None  # no work of its own
    assert [f["family"] for f in rank["families"]] == [f["family"] for f in report["efficiency"]["families"]]
    text = gpuscope("ops", str(RESNET), "--top", "5", home=tmp_path).stdout
    assert "MFU 28.2%" in text and "FLOPs of each operator" in text and "kernel families" in text


def test_a_gpu_not_in_the_table_is_mfu_na_with_the_reason(tmp_path: Path) -> None:
    path = renamed(tmp_path, "Mystery GPU 9000 [bold]<b>x</b>")
    text = gpuscope("ops", str(path), "--top", "3", home=tmp_path)
    assert text.returncode == 0, text.stderr
    assert "MFU n/a: 'Mystery GPU 9000 [bold]<b>x</b>' is not in the GPU spec table" in text.stdout
    doc = json.loads(gpuscope("ops", str(path), "--json", home=tmp_path).stdout)
    eff = doc["efficiency"]
    assert eff["mfu"] is None and eff["peak_flops"] is None and "not in the GPU spec table" in eff["mfu_note"]
    mm = next(o for o in doc["ranks"][0]["ops"] if o["name"] == "aten::mm")["efficiency"]
    assert mm["flops"] > 0 and mm["achieved_tflops"] is not None and mm["roofline_share"] is None
    assert all(f["roofline_share"] is None and f["achieved_tflops"] is not None for f in doc["ranks"][0]["families"])
