"""docs/notebooks/quickstart.ipynb in a real Jupyter kernel: it analyses the bundled sample and shows the report."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

import gpuscope
from tests.conftest import ROOT, SAMPLES

NOTEBOOK = ROOT / "docs" / "notebooks" / "quickstart.ipynb"


def _outputs(cell: Any, mime: str) -> list[str]:
    return [o["data"][mime] for o in cell.get("outputs", ())
            if o["output_type"] in ("execute_result", "display_data") and mime in o.get("data", {})]


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The notebook run once in one kernel (started in the notebook's folder, with a store of its own)."""
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    assert not any(c.get("outputs") for c in notebook.cells if c.cell_type == "code")  # kept without outputs
    with pytest.MonkeyPatch.context() as env:
        env.setenv("GPUSCOPE_HOME", str(tmp_path_factory.mktemp("notebook-home")))
        NotebookClient(notebook, timeout=120, kernel_name="python3",
                       resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    return notebook


def test_the_notebook_shows_the_report_with_its_verdict(executed: Any, gpuscope_home: Path) -> None:
    expected = gpuscope.analyze(SAMPLES / "resnet50_dataloader_bound")
    code = [c for c in executed.cells if c.cell_type == "code"]
    shown = _outputs(code[0], "text/html")
    assert len(shown) == 1
    page = shown[0]
    assert html.escape(expected.verdict.summary, quote=True) in page
    assert 'class="gpuscope-report"' in page and 'class="bar"' in page and "<script" not in page
    printed = "".join(o.get("text", "") for o in code[1].outputs if o["output_type"] == "stream")
    assert expected.verdict.summary in printed
    assert expected.cost is not None and f"total ${expected.cost.total_usd:.4f}" in printed


def test_the_notebook_shows_the_steps_as_a_dataframe(executed: Any) -> None:
    code = [c for c in executed.cells if c.cell_type == "code"]
    frames = [h for c in code for h in _outputs(c, "text/html") if 'class="dataframe' in h]
    assert len(frames) >= 2  # the steps and the kernels
    assert "dataloader_us" in frames[0] and "warmup" in frames[0]
    assert all(o["output_type"] != "error" for c in code for o in c.get("outputs", ()))
