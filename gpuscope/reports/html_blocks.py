"""The building blocks of every HTML page gpuscope writes (the report, the diff, the timeline, the notebook view):
how HTML is written, escaped by default (``html()``, ``join()``, ``table()``); and what makes a page one offline
file: plotly.js (gzipped, see ``plotly_bundle``), the styles and the chart loader inline (``Charts``, ``CSS``).
It imports none of the pages built from it.

No font is fetched (the system's sans-serif is used), no script or style comes from a host, and a
Content-Security-Policy forbids the page any request at all, so it reads the same on a laptop on a
plane as on the machine that wrote it.

HTML is built with markupsafe: a fragment is ``Markup``, made by ``html()`` from a template written here, and
anything else that goes into one (a run, GPU, kernel or frame name, a recommendation, a number) is text,
escaped on the way in after ``format.printable``. Forgetting to escape a string cannot make it markup.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import plotly.graph_objects as go
import plotly.io as pio
from markupsafe import Markup, escape

from gpuscope.figures import Absent, ChartResult
from gpuscope.format import printable
from gpuscope.reports.plotly_bundle import plotly_js_gz

CSP = ("default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; "
       "img-src data: blob:; font-src data:")
"""Inline scripts and styles only; plotly.js builds some functions at run time, hence 'unsafe-eval'."""

CSS = """
:root { --ink: #1d2330; --dim: #5b6270; --line: #d9dde3; --accent: #6f42c1; --good: #1e7d32; --bad: #b3261e; }
* { box-sizing: border-box; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: var(--ink);
       margin: 0 auto; max-width: 1100px; padding: 24px; font-size: 14px; line-height: 1.45;
       font-variant-ligatures: none; }
h1 { font-size: 24px; margin: 0 0 4px; } h2 { font-size: 19px; margin: 22px 0 8px; border-bottom: 2px solid var(--line);
  padding-bottom: 3px; } h3 { font-size: 15px; margin: 16px 0 6px; }
p { margin: 4px 0 8px; } .meta, .dim, figcaption { color: var(--dim); } .meta { font-size: 12.5px; }
.headline { font-size: 15px; } .verdict { font-size: 17px; font-weight: 500; }
.kpis { display: grid; grid-template-columns: repeat(auto-fit, minmax(150px, 1fr)); gap: 10px; margin: 12px 0; }
.kpi { border: 1px solid var(--line); border-radius: 6px; padding: 8px 10px; break-inside: avoid; }
.kpi .label { color: var(--dim); font-size: 12px; } .kpi .value { font-size: 20px; font-weight: 600; }
.kpi .sub { color: var(--dim); font-size: 12px; }
table.grid { border-collapse: collapse; width: 100%; margin: 6px 0 12px; font-size: 13px; }
table.grid th, table.grid td { border-bottom: 1px solid var(--line); padding: 3px 6px; text-align: left;
  vertical-align: top; }
table.grid th { background: #f4f5f7; } table.grid td.num, table.grid th.num { text-align: right;
  font-variant-numeric: tabular-nums; white-space: nowrap; }
td.name { word-break: break-all; } .better { color: var(--good); } .worse { color: var(--bad); }
.sev-critical { color: var(--bad); font-weight: 600; } .sev-warning { color: #9a6700; font-weight: 600; }
ol.recs > li { margin-bottom: 8px; } .saving { color: var(--good); font-weight: 600; }
figure.chart-box { margin: 10px 0 16px; break-inside: avoid; } .chart { width: 100%; }
.absent { color: var(--dim); font-style: italic; } .warning { color: #9a6700; }
dl.methods dt { font-weight: 600; margin-top: 6px; } dl.methods dd { margin: 0 0 4px 16px; color: var(--dim); }
code { font-size: 12px; }
@page { margin: 14mm 12mm 16mm; }
@media print {
  body { max-width: none; padding: 0; font-size: 11.5px; }
  .page-break { break-before: page; } h2, h3 { break-after: avoid; } tr, .kpi, li { break-inside: avoid; }
  .modebar-container, .modebar { display: none !important; }
  a { color: inherit; text-decoration: none; }
}
"""

LOADER_JS = """
(function () {
  var root = document.documentElement;
  var boxes = Array.prototype.slice.call(document.querySelectorAll("div.chart[data-figure]"));
  function fail(err) { root.dataset.charts = "error: " + err; }
  function draw() {
    var config = {displaylogo: false, responsive: true};
    var drawn = [];
    try {
      boxes.forEach(function (div) {
        var fig = JSON.parse(document.getElementById(div.dataset.figure).textContent);
        drawn.push(Plotly.newPlot(div, fig.data, fig.layout, config));
      });
    } catch (err) { fail(err); return; }
    Promise.all(drawn).then(function () { root.dataset.charts = "ready"; }, fail);
    window.addEventListener("beforeprint", function () { boxes.forEach(function (d) { Plotly.Plots.resize(d); }); });
  }
  var packed = document.getElementById("plotly-js-gz");
  if (!packed) { draw(); return; }
  try {
    var bytes = Uint8Array.from(atob(packed.textContent), function (c) { return c.charCodeAt(0); });
    var text = new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"))).text();
  } catch (err) { fail(err); return; }
  // Run at global scope (indirect eval), as a <script> of it would: it defines window.Plotly.
  text.then(function (source) { (0, eval)(source); draw(); }).catch(fail);
})();
"""


def esc(value: object) -> Markup:
    """``value`` as HTML: a Markup fragment as it is, anything else as its printable text, escaped."""
    return value if isinstance(value, Markup) else escape(printable(value))


def html(template: str, *args: object, **kwargs: object) -> Markup:
    """``template``, HTML written in this package, with ``{}`` fields filled by ``esc`` of each argument."""
    return Markup(template).format(*map(esc, args), **{key: esc(value) for key, value in kwargs.items()})


def join(parts: Iterable[object], separator: str = "") -> Markup:
    """Fragments and text one after another, each text escaped."""
    return Markup(separator).join(map(esc, parts))


def _figure_json(fig: go.Figure) -> Markup:
    # Raw inside <script type="application/json">, where HTML escapes would not be undone. "<" only occurs
    # inside JSON strings, where \u003c reads the same, so no "</script>" can end the block early.
    return Markup(str(pio.to_json(fig, validate=False)).replace("<", "\\u003c"))


LEGEND_ROOM_PX = 50


def _title_clear_of_legend(fig: go.Figure) -> go.Figure:
    """A legend laid across the top shares its line with the title at a printed page's width; give the
    legend rows of their own between the title and the plot (the chart itself is unchanged)."""
    if fig.layout.legend.orientation == "h":
        top = (fig.layout.margin.t or 50) + LEGEND_ROOM_PX
        fig.update_layout(margin={"t": top}, height=(fig.layout.height or 400) + LEGEND_ROOM_PX,
                          title={"y": 1.0, "yanchor": "top", "yref": "container", "pad": {"t": 12}})
    return fig


@dataclass
class Charts:
    """Collects a document's charts: each drawn one as a placeholder plus its figure JSON, each absent one
    as its reason (listed at the end under "Not shown")."""

    drawn: list[tuple[str, go.Figure]] = field(default_factory=list)
    absent: list[tuple[str, str]] = field(default_factory=list)

    def block(self, label: str, result: ChartResult, caption: str = "") -> Markup:
        """The chart's place in the page; empty when the run has no data for it."""
        if isinstance(result, Absent):
            self.absent.append((label, result.reason))
            return Markup()
        key = f"fig-{len(self.drawn)}"
        self.drawn.append((key, _title_clear_of_legend(result)))
        cap = html("<figcaption>{}</figcaption>", caption) if caption else ""
        return html('<figure class="chart-box" data-chart="{}"><div class="chart" data-figure="{}"></div>{}</figure>',
                    label, key, cap)

    def trace_types(self) -> set[str]:
        """The plotly trace types the drawn charts use."""
        return {str(trace.type or "scatter") for _, fig in self.drawn for trace in fig.data}

    def scripts(self) -> Markup:
        """The figure JSON blocks and the loader that draws them once plotly.js is in."""
        blocks = join(html('<script type="application/json" id="{}">{}</script>', key, _figure_json(fig))
                      for key, fig in self.drawn)
        library = html('<script type="application/gzip;base64" id="plotly-js-gz">{}</script>',
                       base64.b64encode(plotly_js_gz(self.trace_types())).decode("ascii")) if self.drawn else ""
        return blocks + library + Markup("<script>{}</script>").format(Markup(LOADER_JS))


Cell = str | Markup
"""A table cell: text (escaped when written) or a Markup fragment."""


def table(head: Sequence[Cell], rows: Sequence[Sequence[Cell]], *, numeric: set[int] | None = None,
          table_id: str = "") -> Markup:
    """A grid table; ``numeric`` column indices align right. A cell that is not Markup is text."""
    numeric = numeric or set()

    def cells(values: Sequence[Cell], tag: str) -> Markup:
        return join(html('<{tag} class="num">{}</{tag}>' if i in numeric else "<{tag}>{}</{tag}>", v,
                         tag=Markup(tag)) for i, v in enumerate(values))

    body = join(html("<tr>{}</tr>", cells(r, "td")) for r in rows)
    ident = html(' id="{}"', table_id) if table_id else ""
    return html('<table class="grid"{}><thead><tr>{}</tr></thead><tbody>{}</tbody></table>', ident,
                cells(head, "th"), body)
