"""The HTML report's serving section: a real serving trace's phases and graph replays, and a server's metrics, as
the same rows and lines the terminal shows; names from the trace are text."""

from __future__ import annotations

from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

from gpuscope.api.analysis import analyze_path
from gpuscope.format import pct
from gpuscope.model.serving import GraphReplay, Latency, ServingMetrics, ServingReport
from gpuscope.reports.html import ReportDocument, render_html

SERVING = Path(__file__).resolve().parents[2] / "sample_traces" / "serving"


class _Tables(HTMLParser):
    """Each table's rows of cell texts, by table id."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self._id: str | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self._id = dict(attrs).get("id") or ""
            self.tables[self._id] = []
        elif tag == "tr" and self._id is not None:
            self.tables[self._id].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._id is not None:
            self.tables[self._id][-1].append("".join(self._cell))
            self._cell = None
        elif tag == "table":
            self._id = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _tables(page: str) -> dict[str, list[list[str]]]:
    parser = _Tables()
    parser.feed(page)
    return parser.tables


def test_a_serving_traces_phases_and_graph_replays_are_in_the_html_report() -> None:
    report, _ = analyze_path(SERVING / "vllm_mixed_piecewise_graphs.json.gz", save=False, jobs=1)
    serving = report.serving
    assert serving is not None and serving.phases and serving.graphs
    tables = _tables(render_html(ReportDocument(report=report)))
    phases = {row[0]: row for row in tables["serving-phases"][1:]}
    assert set(phases) == set(serving.phases)
    for name, phase in serving.phases.items():
        assert phases[name][1:3] == [pct(phase.share), str(phase.steps)]
    graphs = tables["serving-graphs"][1:]
    assert [(row[0], int(row[1])) for row in graphs] == [(g.name, g.replays) for g in serving.graphs[:len(graphs)]]


def test_a_servers_metrics_are_one_paragraph_and_hostile_names_are_text() -> None:
    report, _ = analyze_path(SERVING / "vllm_mixed_piecewise_graphs.json.gz", save=False, jobs=1)
    ttft = Latency(p50_s=0.05, p90_s=0.08, p99_s=0.12, mean_s=0.06, observations=100)
    metrics = ServingMetrics(engine="vllm", window_s=60.0, output_tokens_per_s=1000.0, prompt_tokens_per_s=250.0,
                             usd_per_million_output_tokens=0.999, ttft=ttft)
    hostile = GraphReplay(name="<script>alert(1)</script>", replays=3, kernels_per_replay=4.0, gpu_time_us=120.0,
                          recorded=True)
    serving = ServingReport(metrics=metrics, source="http://127.0.0.1:8000/metrics", graphs=(hostile,))
    page = render_html(ReportDocument(report=replace(report, serving=serving)))
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert _tables(page)["serving-graphs"][1][0] == "<script>alert(1)</script>"  # shown as the text it is
    assert "vllm server  http://127.0.0.1:8000/metrics" in page
    assert "output 1,000 tok/s" in page and "output $0.999" in page and "TTFT p50 50.0 ms" in page


def test_a_run_that_is_no_server_has_no_serving_section() -> None:
    report, _ = analyze_path(Path(__file__).resolve().parents[2] / "sample_traces" / "resnet50_workers4",
                             save=False, jobs=1)
    assert report.serving is None or not (report.serving.phases or report.serving.graphs)
    assert 'id="serving"' not in render_html(ReportDocument(report=report))
